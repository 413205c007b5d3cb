// quantize(input, output, { type }) through the N-API bindings on the real engine: an F16 copy
// of the default model (made by the engine's CLI) quantized to Q8_0 gives the same bytes as the
// CLI's `quantize`, loads and generates the CLI's greedy text; bad options and inputs reject with typed errors; an
// aborted call rejects with an AbortError and leaves no file. Run by scripts/checks/js-test.sh.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as native from './generated/napi/local_llm_ffi.ts';
import { setBindings, LocalLLM, LocalLLMError, LocalLLMErrorCode, quantize } from '../src/api/index.ts';

native.default.initialize();
setBindings(native as any);

const MODEL = process.env.LOCAL_LLM_MODEL ?? '';
const CLI = process.env.LOCAL_LLM_CLI ?? '';
assert.ok(MODEL && CLI, 'LOCAL_LLM_MODEL and LOCAL_LLM_CLI must be set (run scripts/checks/js-test.sh)');

let tmp: string;
let f16: string;

const code = (c: LocalLLMErrorCode) => (e: unknown) => e instanceof LocalLLMError && e.code === c;

before(() => {
  tmp = mkdtempSync(join(tmpdir(), 'local-llm-quantize-'));
  f16 = join(tmp, 'model-f16.gguf');
  execFileSync(CLI, ['quantize', MODEL, f16, 'F16', '2'], { stdio: 'ignore' });
});

after(() => rmSync(tmp, { recursive: true, force: true }));

test('quantize to Q8_0 equals the CLI, loads and generates what the CLI generates', async () => {
  const ours = join(tmp, 'q8-js.gguf');
  const reference = join(tmp, 'q8-cli.gguf');
  await quantize(f16, ours, { type: 'Q8_0', threads: 2 });
  execFileSync(CLI, ['quantize', f16, reference, 'Q8_0', '2'], { stdio: 'ignore' });
  assert.ok(readFileSync(ours).equals(readFileSync(reference)));
  const ai = await LocalLLM.create({ model: ours, contextSize: 512, threads: 2 });
  try {
    const question = 'What is the capital of France? Answer in one sentence.';
    const res = await ai.chat.completions.create({
      messages: [{ role: 'user', content: question }],
      temperature: 0,
      max_tokens: 16,
    });
    const expected = execFileSync(
      CLI,
      ['run', '--chat', '-m', ours, '-p', question, '--temp', '0', '-n', '16', '-t', '2'],
      {
        encoding: 'utf8',
        stdio: ['ignore', 'pipe', 'pipe'],
      },
    );
    assert.equal(res.choices[0].message.content, expected.replace(/\n$/, ''));
    assert.ok(expected.trim().length > 0);
  } finally {
    ai.dispose();
  }
});

test('bad options and inputs reject with typed errors', async () => {
  const out = join(tmp, 'bad.gguf');
  await assert.rejects(quantize(f16, out, { type: 'IQ2_XXS' }), code(LocalLLMErrorCode.INVALID_OPTION));
  await assert.rejects(quantize(f16, out, { type: 'Q4_0', threads: 0 }), code(LocalLLMErrorCode.INVALID_OPTION));
  await assert.rejects(quantize(f16, out, { type: 'Q4_0', dryRun: true }), code(LocalLLMErrorCode.INVALID_OPTION));
  await assert.rejects(
    quantize(join(tmp, 'missing.gguf'), out, { type: 'Q4_0' }),
    code(LocalLLMErrorCode.INVALID_PATH),
  );
  // The default model is already Q4_1: requantizing needs allowRequantize.
  await assert.rejects(quantize(MODEL, out, { type: 'Q4_0' }), code(LocalLLMErrorCode.QUANTIZE_FAILED));
  assert.ok(!existsSync(out));
});

test('an aborted quantize rejects with an AbortError and leaves no file', async () => {
  const out = join(tmp, 'aborted.gguf');
  const controller = new AbortController();
  const running = quantize(f16, out, { type: 'Q4_K_M', signal: controller.signal });
  controller.abort();
  await assert.rejects(running, (e: unknown) => (e as Error).name === 'AbortError');
  // The native work stops at its next slab of rows; it never renames a partial file into place.
  await new Promise((r) => setTimeout(r, 2000));
  assert.ok(!existsSync(out));
  assert.ok(!existsSync(`${out}.partial`));
});
