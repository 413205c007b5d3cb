// LoRA adapters from TypeScript (issue 37; llama.rn's applyLoraAdapters / removeLoraAdapters /
// getLoadedLoraAdapters), on the real engine with the default model and a random adapter from
// tools/synth/make_lora.py. The adapter path is checked against llama.cpp (llama-perplexity
// --lora, mean KLD) in rust/cli/tests/perplexity.rs; here: TypeScript applies the same adapter
// as the CLI's --lora (equal greedy text), switches it off and on without reloading, and bad
// files are typed errors that keep the adapters in use.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { dirname, join } from 'node:path';
import * as native from './generated/napi/local_llm_ffi.ts';
import { setBindings, LocalLLM, LocalLLMErrorCode } from '../src/api/index.ts';
import { code, defaultModel } from './helpers.mts';

native.default.initialize();
setBindings(native as any);

const root = join(import.meta.dirname, '..');
const venv = join(root, '.cache/venv/bin/python3');
const python = existsSync(venv) ? venv : 'python3';
const adapter = join(mkdtempSync(join(tmpdir(), 'local-llm-lora-')), 'adapter.gguf');
const PROMPT = 'The capital of France is';

let ai: LocalLLM;

before(async () => {
  execFileSync(python, [join(root, 'tools/synth/make_lora.py'), defaultModel(), adapter]);
  ai = await LocalLLM.create({ model: defaultModel(), contextSize: 256, threads: 2 });
});

after(() => {
  ai?.dispose();
  rmSync(dirname(adapter), { recursive: true, force: true });
});

const greedy = () => ai.context.generate(PROMPT, { temperature: 0, maxTokens: 24 });

test('applyLoraAdapters applies the adapter as the CLI does, and can be switched off', async () => {
  const plain = await greedy();
  assert.deepEqual(ai.context.getLoadedLoraAdapters(), []);
  await ai.context.applyLoraAdapters([{ path: adapter }]);
  assert.deepEqual(ai.context.getLoadedLoraAdapters(), [{ path: adapter, scaled: 1 }]);
  const adapted = await greedy();
  assert.notEqual(adapted, plain);
  const cli = process.env.LOCAL_LLM_CLI ?? join(root, 'target/release/local-llm');
  const viaCli = execFileSync(
    cli,
    ['run', '-m', defaultModel(), '-p', PROMPT, '-n', '24', '--temp', '0', '-t', '2', '-c', '256', '--lora', adapter],
    { stdio: ['ignore', 'pipe', 'ignore'] },
  ).toString();
  assert.equal(viaCli.replace(/\n$/, ''), adapted);
  await ai.context.removeLoraAdapters();
  assert.equal(await greedy(), plain);
  // Scale 0 leaves the model as it is.
  await ai.context.applyLoraAdapters([{ path: adapter, scaled: 0 }]);
  assert.equal(await greedy(), plain);
  await ai.context.applyLoraAdapters([{ path: `file://${adapter}`, scaled: 1 }]);
  assert.equal(await greedy(), adapted);
  await ai.context.removeLoraAdapters();
});

test('bad adapters are typed errors and keep the adapters in use', async () => {
  await ai.context.applyLoraAdapters([{ path: adapter }]);
  await assert.rejects(
    ai.context.applyLoraAdapters([{ path: join(tmpdir(), 'no-such-adapter.gguf') }]),
    code(LocalLLMErrorCode.INVALID_PATH),
  );
  await assert.rejects(
    ai.context.applyLoraAdapters([{ path: defaultModel() }]),
    code(LocalLLMErrorCode.MODEL_LOAD_FAILED),
  );
  await assert.rejects(
    ai.context.applyLoraAdapters([{ path: adapter, scaled: NaN }]),
    code(LocalLLMErrorCode.INVALID_OPTION),
  );
  assert.deepEqual(ai.context.getLoadedLoraAdapters(), [{ path: adapter, scaled: 1 }]);
  await ai.context.removeLoraAdapters();
});

test("LocalLLM.create's lora option (node-llama-cpp's shape) applies adapters from the start", async () => {
  await ai.context.applyLoraAdapters([{ path: adapter, scaled: 0.5 }]);
  const half = await greedy();
  await ai.context.removeLoraAdapters();
  const options = { model: defaultModel(), contextSize: 256, threads: 2, warmup: false };
  const progress: number[] = [];
  const withOption = await LocalLLM.create({
    ...options,
    lora: { adapters: [{ filePath: adapter, scale: 0.5 }], onLoadProgress: (p) => progress.push(p) },
  });
  try {
    assert.deepEqual(progress, [1]);
    assert.deepEqual(withOption.context.getLoadedLoraAdapters(), [{ path: adapter, scaled: 0.5 }]);
    assert.equal(await withOption.context.generate(PROMPT, { temperature: 0, maxTokens: 24 }), half);
  } finally {
    withOption.dispose();
  }
  const byPath = await LocalLLM.create({ ...options, lora: adapter });
  try {
    assert.deepEqual(byPath.context.getLoadedLoraAdapters(), [{ path: adapter, scaled: 1 }]);
  } finally {
    byPath.dispose();
  }
  await assert.rejects(
    LocalLLM.create({ ...options, lora: join(tmpdir(), 'no-such-adapter.gguf') }),
    code(LocalLLMErrorCode.INVALID_PATH),
  );
  await assert.rejects(
    LocalLLM.create({ ...options, lora: { adapters: [{ path: adapter }] } as any }),
    code(LocalLLMErrorCode.INVALID_OPTION),
  );
});
