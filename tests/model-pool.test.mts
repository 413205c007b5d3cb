// ModelPool, LocalLLM.pool and switchModel on the real engine (run by scripts/checks/js-test.sh with
// LOCAL_LLM_MODEL = SmolLM2; Gemma 3 270M from the same folder when it is there): sharing by
// alias and holder counts, and the memory accounting that refuses, before loading, a model the
// pool's budget or the device's memory cannot hold.
import { test, after } from 'node:test';
import assert from 'node:assert/strict';
import { existsSync } from 'node:fs';
import { dirname, join } from 'node:path';
import * as native from './generated/napi/local_llm_ffi.ts';
import {
  setBindings,
  canRunModelFile,
  getDeviceCapabilities,
  LocalLLM,
  LocalLLMError,
  LocalLLMErrorCode,
  ModelPool,
} from '../src/api/index.ts';

native.default.initialize();
setBindings(native as any);

const MODEL = process.env.LOCAL_LLM_MODEL ?? '';
assert.ok(MODEL, 'LOCAL_LLM_MODEL must be set (run scripts/checks/js-test.sh)');
const GEMMA = join(dirname(MODEL), 'gemma-3-270m-q4_k_m.gguf');

const isCode = (code: LocalLLMErrorCode) => (e: unknown) => {
  assert.ok(e instanceof LocalLLMError, String(e));
  assert.equal(e.code, code, e.message);
  return true;
};
const pools: ModelPool[] = [];
function pool(options?: ConstructorParameters<typeof ModelPool>[0]): ModelPool {
  const p = new ModelPool(options);
  pools.push(p);
  return p;
}
after(() => {
  pools.forEach((p) => p.dispose());
  LocalLLM.pool.dispose();
});

/** What the engine says the model needs with a context of `contextSize` tokens. */
async function need(path: string, contextSize = 0): Promise<number> {
  return (await canRunModelFile(path, { contextSize })).estimate!.totalBytes;
}

test('one model per alias: loads share it, the last release disposes it', async () => {
  const p = pool();
  const [a, b] = await Promise.all([p.load('smol', MODEL), p.load('smol', MODEL)]);
  assert.equal(a, b, 'concurrent loads of one alias share one model');
  const c = await p.load('smol', '/ignored/when/loaded.gguf');
  assert.equal(c, a);
  assert.equal(p.get('smol'), a);
  const [info] = p.list();
  assert.equal(info.alias, 'smol');
  assert.equal(info.refCount, 3);
  assert.equal(info.sizeBytes, a.estimateMemory(0).totalBytes, 'counted as the engine estimates the loaded model');
  assert.ok(p.release('smol') && p.release('smol'));
  assert.equal(a.disposed, false);
  assert.equal(p.release('smol'), true);
  assert.equal(a.disposed, true);
  assert.equal(p.get('smol'), undefined);
  assert.equal(p.release('smol'), false);
  assert.deepEqual(p.list(), []);
});

test('the memory budget refuses a model before loading it, and admits it once room is made', async () => {
  const size = await need(MODEL);
  const p = pool({ maxMemoryBytes: Math.floor(size * 1.5) });
  const first = await p.load('first', MODEL);
  const started = Date.now();
  await assert.rejects(
    p.load('second', MODEL),
    (e) => isCode(LocalLLMErrorCode.INSUFFICIENT_MEMORY)(e) && /budget/.test((e as Error).message),
  );
  assert.ok(Date.now() - started < 2000, 'refused from the metadata, without loading');
  assert.deepEqual(
    p.list().map((i) => i.alias),
    ['first'],
  );
  assert.equal(p.totalMemory(), size);
  p.release('first');
  assert.equal(first.disposed, true);
  const second = await p.load('second', MODEL);
  assert.equal(second.disposed, false);

  // The KV cache of the context size counts too.
  const kv = pool({ maxMemoryBytes: size + 1024 * 1024 });
  await assert.rejects(kv.load('ctx', MODEL, { contextSize: 8192 }), isCode(LocalLLMErrorCode.INSUFFICIENT_MEMORY));
  assert.ok((await need(MODEL, 8192)) > size + 1024 * 1024, 'the rejected load did need more than the budget');
  await kv.load('ctx', MODEL, { contextSize: 16 });
});

test('a budget below one model, and maxModels, refuse too', async () => {
  const tiny = pool({ maxMemoryBytes: 1024 });
  await assert.rejects(tiny.load('smol', MODEL), isCode(LocalLLMErrorCode.INSUFFICIENT_MEMORY));
  assert.deepEqual(tiny.list(), []);
  const one = pool({ maxModels: 1 });
  await one.load('a', MODEL);
  await assert.rejects(
    one.load('b', MODEL),
    (e) => isCode(LocalLLMErrorCode.INSUFFICIENT_MEMORY)(e) && /maximum of 1/.test((e as Error).message),
  );
  one.unload('a');
  await one.load('b', MODEL);
});

test("more than the device's available memory is refused before loading", async (t) => {
  const available = getDeviceCapabilities().availableRAM;
  if (available === null) {
    t.skip('available memory unknown on this platform');
    return;
  }
  // A context whose KV cache alone exceeds the available memory.
  let contextSize = 1 << 16;
  while ((await need(MODEL, contextSize)) <= available && contextSize < 2 ** 31) contextSize *= 2;
  assert.ok((await need(MODEL, contextSize)) > available, 'found a context size too big for this machine');
  const p = pool();
  await assert.rejects(
    p.load('huge', MODEL, { contextSize }),
    (e) => isCode(LocalLLMErrorCode.INSUFFICIENT_MEMORY)(e) && /MB available/.test((e as Error).message),
  );
  assert.deepEqual(p.list(), []);
});

test('bad arguments are typed errors', async () => {
  assert.throws(() => new ModelPool({ maxModels: -1 }), isCode(LocalLLMErrorCode.INVALID_OPTION));
  assert.throws(() => new ModelPool({ maxMemoryBytes: 1.5 }), isCode(LocalLLMErrorCode.INVALID_OPTION));
  const p = pool();
  await assert.rejects(p.load('', MODEL), isCode(LocalLLMErrorCode.INVALID_OPTION));
  await assert.rejects(p.load('buf', new Uint8Array(16)), isCode(LocalLLMErrorCode.INVALID_PATH));
  await assert.rejects(p.load('missing', '/nonexistent/model.gguf'), isCode(LocalLLMErrorCode.INVALID_PATH));
  assert.deepEqual(p.list(), []);
});

test('unloading a model while it loads disposes it when it arrives', async () => {
  const p = pool();
  const loading = p.load('smol', MODEL);
  // The load waits for the memory check first; unload once the entry exists.
  while (p.list().length === 0) await new Promise((r) => setImmediate(r));
  p.unload('smol');
  await assert.rejects(loading, isCode(LocalLLMErrorCode.NOT_INITIALIZED));
  assert.deepEqual(p.list(), []);
});

test('switchModel moves a LocalLLM to a pooled model; the pool keeps ownership', async () => {
  const second = existsSync(GEMMA) ? GEMMA : MODEL;
  const ai = await LocalLLM.create({ model: MODEL, contextSize: 512, threads: 2, warmup: false });
  const own = ai.model;
  const pooled = await LocalLLM.pool.load('second', second);
  await assert.rejects(ai.switchModel('absent'), isCode(LocalLLMErrorCode.INVALID_OPTION));
  await ai.switchModel('second');
  assert.equal(ai.model, pooled);
  assert.equal(own.disposed, true, 'the model the instance loaded itself is released');
  const res = await ai.chat.completions.create({
    messages: [{ role: 'user', content: 'Hi' }],
    max_tokens: 4,
    temperature: 0,
  });
  assert.equal(res.model, 'second');
  assert.ok(res.usage.completion_tokens > 0);
  const direct = await pooled
    .createContext({ contextSize: 512, threads: 2 })
    .generateResult({ messages: [{ role: 'user', content: 'Hi' }] }, { maxTokens: 4, temperature: 0 });
  assert.equal(res.choices[0].message.content, direct.text, 'the answer comes from the pooled model');
  ai.dispose();
  assert.equal(pooled.disposed, false, 'disposing the instance leaves the pooled model to the pool');
  assert.ok(LocalLLM.pool.release('second'));
  assert.equal(pooled.disposed, true);
});

test('switchModel keeps speculative decoding; a draft of another vocabulary is refused and the old model stays', async (t) => {
  if (!existsSync(GEMMA)) {
    t.skip(`${GEMMA} is not there`);
    return;
  }
  // SmolLM2 drafting for itself (same vocabulary); Gemma 3's vocabulary differs.
  const ai = await LocalLLM.create({
    model: MODEL,
    contextSize: 256,
    threads: 2,
    warmup: false,
    draftModel: MODEL,
    draftNMax: 4,
  });
  const ask = { messages: [{ role: 'user' as const, content: 'Count from 1 to 10.' }], max_tokens: 12, temperature: 0 };
  try {
    const first = await ai.chat.completions.create(ask);
    assert.ok((first._timing?.draftTokens ?? 0) > 0, JSON.stringify(first._timing));
    await LocalLLM.pool.load('gemma-spec', GEMMA);
    await assert.rejects(ai.switchModel('gemma-spec'), isCode(LocalLLMErrorCode.INVALID_OPTION));
    const still = await ai.chat.completions.create(ask);
    assert.notEqual(still.model, 'gemma-spec');
    assert.equal(still.choices[0].message.content, first.choices[0].message.content, 'the old model still answers');
    await LocalLLM.pool.load('smol-spec', MODEL);
    await ai.switchModel('smol-spec');
    const switched = await ai.chat.completions.create(ask);
    assert.equal(switched.model, 'smol-spec');
    assert.ok(
      (switched._timing?.draftTokens ?? 0) > 0,
      `the draft model was dropped: ${JSON.stringify(switched._timing)}`,
    );
    assert.equal(switched.choices[0].message.content, first.choices[0].message.content);
  } finally {
    ai.dispose();
    LocalLLM.pool.release('gemma-spec');
    LocalLLM.pool.release('smol-spec');
  }
});
