// Every architecture beyond the llama family loads and generates from TypeScript (issue 31):
// a random-weight model of each, written by tools/synth/make_model.py (the files
// rust/cli/tests/architectures.rs checks against llama.cpp), is described by Model.inspect as
// supported, loads, reports its architecture, and greedy text from TypeScript equals the CLI's.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as native from './generated/napi/local_llm_ffi.ts';
import { setBindings, LocalLLM, Model } from '../src/api/index.ts';

native.default.initialize();
setBindings(native as any);

const root = join(import.meta.dirname, '..');
const venv = join(root, '.cache/venv/bin/python3');
const python = existsSync(venv) ? venv : 'python3';
const dir = mkdtempSync(join(tmpdir(), 'local-llm-archs-'));
const cli = process.env.LOCAL_LLM_CLI ?? join(root, 'target/release/local-llm');
const PROMPT = 'The sea was calm';

/** Synthetic model kind and the architecture its file declares. */
const KINDS: [string, string][] = [
  ['gemma', 'gemma'],
  ['gemma2', 'gemma2'],
  ['gemma4', 'gemma4'],
  ['gemma4-moe', 'gemma4'],
  ['gemma3n', 'gemma3n'],
  ['lfm2', 'lfm2'],
  ['lfm2-swa', 'lfm2'],
  ['qwen35', 'qwen35'],
  ['phi3', 'phi3'],
  ['qwen3moe', 'qwen3moe'],
  ['smollm3', 'smollm3'],
  ['granite', 'granite'],
  ['granitemoe', 'granitemoe'],
  ['granitehybrid', 'granitehybrid'],
  ['olmo2', 'olmo2'],
  ['exaone4', 'exaone4'],
  ['ernie4_5', 'ernie4_5'],
  ['mistral3', 'mistral3'],
  ['stablelm', 'stablelm'],
  ['starcoder2', 'starcoder2'],
  ['hunyuan-dense', 'hunyuan-dense'],
];

for (const [kind, architecture] of KINDS) {
  test(`${architecture} loads and generates as the CLI does`, async () => {
    const path = join(dir, `${kind}.gguf`);
    execFileSync(python, [join(root, 'tools/synth/make_model.py'), kind, path]);
    const file = await Model.inspect(path);
    assert.equal(file.architecture, architecture);
    assert.equal(file.supported, true);
    const ai = await LocalLLM.create({ model: path, contextSize: 128, threads: 2 });
    try {
      assert.equal(ai.model.info.architecture, architecture);
      // Greedy and no repeat penalty (local-llm-rn's default is 1.1; the CLI's, llama.cpp's, 1).
      const text = await ai.context.generate(PROMPT, { temperature: 0, maxTokens: 8, repeatPenalty: 1 });
      assert.ok(text.length > 0, 'generated nothing');
      const viaCli = execFileSync(
        cli,
        ['run', '-m', path, '-p', PROMPT, '-n', '8', '--temp', '0', '-t', '2', '-c', '128'],
        { stdio: ['ignore', 'pipe', 'ignore'] },
      ).toString();
      assert.equal(viaCli.replace(/\n$/, ''), text);
    } finally {
      ai.dispose();
    }
  });
}
