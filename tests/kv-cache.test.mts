// KV cache types from TypeScript (issue 33; local-llm-rn's kvCacheTypeK / kvCacheTypeV), on the
// real engine with the default model. The numerics are checked against llama.cpp with the same
// cache types in rust/cli/tests/kv_cache.rs; here: the options reach the engine (a q4_0 cache
// gives the CLI's `-ctk q4_0 -ctv q4_0` text token for token, and not the f16 text), a session
// saved with one type loads only into a context of the same type, and an unknown type is
// INVALID_OPTION.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as native from './generated/napi/local_llm_ffi.ts';
import { setBindings, Model, LocalLLMErrorCode, canRunModel, canRunModelFile } from '../src/api/index.ts';
import { code, defaultModel } from './helpers.mts';

native.default.initialize();
setBindings(native as any);

const root = join(import.meta.dirname, '..');
const PROMPT = 'The capital of France is';
let model: Model;

before(async () => {
  model = await Model.load(defaultModel());
});

after(() => {
  model?.dispose();
});

const cli = (args: string[]) =>
  execFileSync(
    process.env.LOCAL_LLM_CLI ?? join(root, 'target/release/local-llm'),
    ['run', '-m', defaultModel(), '-p', PROMPT, '-n', '24', '--temp', '0', '-t', '2', '-c', '256', ...args],
    { stdio: ['ignore', 'pipe', 'ignore'] },
  )
    .toString()
    .replace(/\n$/, '');

test('kvCacheTypeK / kvCacheTypeV reach the engine as the CLI flags do', async () => {
  const q4 = model.createContext({ contextSize: 256, threads: 2, kvCacheTypeK: 'q4_0', kvCacheTypeV: 'q4_0' });
  const f16 = model.createContext({ contextSize: 256, threads: 2 });
  try {
    // Greedy without the API's default repeat penalty (the CLI has none).
    const a = await q4.generate(PROMPT, { temperature: 0, repeatPenalty: 1, maxTokens: 24 });
    const b = await f16.generate(PROMPT, { temperature: 0, repeatPenalty: 1, maxTokens: 24 });
    assert.equal(a, cli(['-ctk', 'q4_0', '-ctv', 'q4_0']));
    assert.equal(b, cli([]));
    // On this prompt the q4_0 cache changes the greedy text (so the option is not ignored;
    // q8_0's, with llama.cpp's Hadamard rotation, gives the f16 text here).
    assert.notEqual(a, b);
  } finally {
    q4.dispose();
    f16.dispose();
  }
});

test('a session loads only into a context with the same cache types', async () => {
  const dir = mkdtempSync(join(tmpdir(), 'local-llm-kv-'));
  const file = join(dir, 'q8.session');
  const q8 = model.createContext({ contextSize: 256, threads: 2, kvCacheTypeK: 'q8_0', kvCacheTypeV: 'q8_0' });
  const again = model.createContext({ contextSize: 256, threads: 2, kvCacheTypeK: 'q8_0', kvCacheTypeV: 'q8_0' });
  const f16 = model.createContext({ contextSize: 256, threads: 2 });
  try {
    await q8.generate(PROMPT, { temperature: 0, maxTokens: 4 });
    const saved = await q8.saveSession(file);
    assert.ok(saved > 4);
    assert.equal((await again.loadSession(file)).tokens_loaded, saved);
    await assert.rejects(f16.loadSession(file), (e: any) => {
      code(LocalLLMErrorCode.CACHE_CORRUPT)(e);
      assert.match(e.message, /caches keys as q8_0 .* this context as f16/);
      return true;
    });
  } finally {
    q8.dispose();
    again.dispose();
    f16.dispose();
  }
});

test('an unknown cache type is INVALID_OPTION', () => {
  assert.throws(
    () => model.createContext({ kvCacheTypeK: 'q3_k' as any }),
    (e: any) => code(LocalLLMErrorCode.INVALID_OPTION)(e) && /unsupported KV cache type 'q3_k'/.test(e.message),
  );
});

test('estimateMemory and canRunModelFile count the bytes of the cache types', async () => {
  const { nLayer, nHeadKv, nHead, embeddingLength } = model.info;
  const width = nLayer * nHeadKv * (embeddingLength / nHead); // K (or V) values per position
  // Bytes per 32 values: f16 64, q8_0 34 (f16 scale + 32 bytes), q4_0 18 (f16 scale + 16 bytes).
  const perPosition = (k: number, v: number) => (width / 32) * (k + v);
  const f16 = model.estimateMemory(512);
  assert.equal(f16.kvCacheBytes, 512 * perPosition(64, 64));
  const mixed = model.estimateMemory(512, { kvCacheTypeK: 'q8_0', kvCacheTypeV: 'q4_0' });
  assert.equal(mixed.kvCacheBytes, 512 * perPosition(34, 18));
  assert.equal(mixed.totalBytes, f16.weightsBytes + mixed.kvCacheBytes);
  assert.deepEqual(
    canRunModel(model, { contextSize: 512, kvCacheTypeK: 'q8_0', kvCacheTypeV: 'q4_0' }).estimate,
    mixed,
  );
  const file = await canRunModelFile(defaultModel(), { contextSize: 512, kvCacheTypeV: 'q4_0' });
  assert.equal(file.estimate?.kvCacheBytes, 512 * perPosition(64, 18));
  assert.throws(
    () => model.estimateMemory(512, { kvCacheTypeK: 'q3_k' as any }),
    (e: any) => code(LocalLLMErrorCode.INVALID_OPTION)(e) && /unsupported KV cache type 'q3_k'/.test(e.message),
  );
  await assert.rejects(
    canRunModelFile(defaultModel(), { kvCacheTypeV: 'q2_k' as any }),
    code(LocalLLMErrorCode.INVALID_OPTION),
  );
});

test('flashAttention and -fa are accepted with their values and change nothing', async () => {
  const texts: string[] = [];
  for (const flashAttention of ['auto', 'enabled', 'disabled'] as const) {
    const ctx = model.createContext({ contextSize: 256, threads: 2, flashAttention, kvCacheTypeV: 'q8_0' });
    try {
      texts.push(await ctx.generate(PROMPT, { temperature: 0, maxTokens: 12 }));
    } finally {
      ctx.dispose();
    }
  }
  assert.equal(new Set(texts).size, 1, `${texts}`);
  assert.ok(texts[0]!.length > 0);
  assert.equal(cli(['-fa', 'off']), cli(['-fa', 'on']));
  assert.throws(
    () => model.createContext({ flashAttention: 'sometimes' as any }),
    (e: any) => code(LocalLLMErrorCode.INVALID_OPTION)(e) && /flash attention mode 'sometimes'/.test(e.message),
  );
});

test('a cache type or flash attention mode that is not a string is INVALID_OPTION', async () => {
  const invalid = (name: string) => (e: any) =>
    code(LocalLLMErrorCode.INVALID_OPTION)(e) && e.message.startsWith(`${name} must be a string`);
  assert.throws(() => model.createContext({ kvCacheTypeK: 5 as any }), invalid('kvCacheTypeK'));
  assert.throws(() => model.createContext({ flashAttention: true as any }), invalid('flashAttention'));
  assert.throws(() => model.estimateMemory(64, { kvCacheTypeV: null as any }), invalid('kvCacheTypeV'));
  await assert.rejects(canRunModelFile(defaultModel(), { kvCacheTypeK: {} as any }), invalid('kvCacheTypeK'));
});
