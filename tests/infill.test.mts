// Fill-in-the-middle from TypeScript (issue 37), on the real engine: a synthetic coder model with
// Qwen2.5-Coder's FIM tokens (tools/synth, kind qwen2-fim) infills greedily with the same tokens
// as llama.cpp through node-llama-cpp (tools/oracle `infill`), through both `context.infill` and
// a `{ prefix, suffix }` prompt; the default model has no FIM tokens and refuses with
// INVALID_OPTION. Needs python3 with the `gguf` package (scripts/setup/setup-test-deps.sh).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as native from './generated/napi/local_llm_ffi.ts';
import { setBindings, LocalLLM, LocalLLMErrorCode } from '../src/api/index.ts';
import { code, defaultModel } from './helpers.mts';

native.default.initialize();
setBindings(native as any);

const root = join(import.meta.dirname, '..');
const venv = join(root, '.cache/venv/bin/python3');
const python = existsSync(venv) ? venv : 'python3';
const fimModel = join(mkdtempSync(join(tmpdir(), 'local-llm-fim-')), 'qwen2-fim.gguf');
const PAIRS: Array<[string, string]> = [
  ['def add(a, b):\n    ', '\n    return c\n'],
  ['fn main() {', '}'],
];

let fim: LocalLLM;
let plain: LocalLLM;

before(async () => {
  execFileSync(python, [join(root, 'tools/synth/make_model.py'), 'qwen2-fim', fimModel]);
  fim = await LocalLLM.create({ model: fimModel, contextSize: 512, threads: 1 });
  plain = await LocalLLM.create({ model: defaultModel(), contextSize: 256, threads: 1 });
});

after(() => {
  fim?.dispose();
  plain?.dispose();
});

test('infill equals llama.cpp on a model with FIM tokens', async () => {
  assert.equal(fim.model.info.infillSupported, true);
  const request = {
    cmd: 'infill',
    model: fimModel,
    n_predict: 16,
    context_size: 512,
    infills: PAIRS.map(([prefix, suffix]) => ({ prefix, suffix })),
  };
  const oracle = JSON.parse(
    execFileSync('node', [join(root, 'tools/oracle/oracle.mjs')], { input: JSON.stringify(request) }).toString(),
  );
  for (const [i, [prefix, suffix]] of PAIRS.entries()) {
    const result = await fim.context.generateResult({ prefix, suffix }, { temperature: 0, maxTokens: 16 });
    const theirs: number[] = oracle.results[i].tokens;
    // node-llama-cpp reports tokens through onToken only once their text is whole UTF-8, and
    // does not count a generated control token against maxTokens: the shorter list must be the
    // start of the longer.
    const n = Math.min(result.tokens.length, theirs.length);
    assert.ok(n >= 8, `pair ${i}: ${n} tokens`);
    assert.deepEqual(result.tokens.slice(0, n), theirs.slice(0, n), `pair ${i}`);
    const text = await fim.context.infill(prefix, suffix, { temperature: 0, maxTokens: 16 });
    assert.equal(text, result.text);
  }
  // The SPM order and a prompt change the layout, so the output.
  const spm = await fim.context.generateResult(
    { prefix: 'x = 1', suffix: 'y = 2', spm: true },
    { temperature: 0, maxTokens: 8 },
  );
  const psm = await fim.context.generateResult({ prefix: 'x = 1', suffix: 'y = 2' }, { temperature: 0, maxTokens: 8 });
  assert.equal(spm.promptTokens, psm.promptTokens);
  assert.notDeepEqual(spm.tokens, psm.tokens);
});

test('a model without FIM tokens refuses to infill; bad fields are INVALID_OPTION', async () => {
  assert.equal(plain.model.info.infillSupported, false);
  await assert.rejects(plain.context.infill('a', 'b'), code(LocalLLMErrorCode.INVALID_OPTION));
  await assert.rejects(
    fim.context.generateResult({ prefix: 'a', suffix: 3 as any }),
    code(LocalLLMErrorCode.INVALID_OPTION),
  );
  await assert.rejects(
    fim.context.infill('a', 'b', { extra: [{ text: 5 as any }] }),
    code(LocalLLMErrorCode.INVALID_OPTION),
  );
});
