// The one numeric rule of issue 38 item 7, on the real engine with the default model (run by
// scripts/checks/js-test.sh): every number the API takes (options, token ids, `canRunModel`'s
// size) is a finite JS number within its option's range, an integer where the option counts
// something; anything else (NaN, Infinity, a fraction, an out-of-range integer, a BigInt, a
// numeric string, null) is a LocalLLMError with code INVALID_OPTION naming the option, never an
// untyped TypeError, a wrapping INFERENCE_FAILED or a silent coercion. Before: `seed: 1n` threw
// "Do not know how to serialize a BigInt", token ids NaN/null/"3000"/3000.7/2^32+3000 were
// coerced to 0 or 3000, `canRunModel(NaN)` said canRun true, `gpuLayers: NaN` was accepted.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import * as native from './generated/napi/local_llm_ffi.ts';
import {
  setBindings,
  LocalLLM,
  Model,
  ModelPool,
  LocalLLMError,
  LocalLLMErrorCode,
  canRunModel,
  canRunModelFile,
  quantize,
} from '../src/api/index.ts';
import { defaultModel, within } from './helpers.mts';

native.default.initialize();
setBindings(native as any);

const MODEL = defaultModel();
const ORIGINAL = "I'm a helpful assistant.";

let ai: LocalLLM;

before(async () => {
  ai = await LocalLLM.create({ model: MODEL, contextSize: 256, threads: 2 });
});

after(() => {
  ai?.dispose();
});

/** An assert check: INVALID_OPTION whose message names `name` (and shows `shown`, if given). */
function invalid(name: string, shown?: string | RegExp) {
  return (e: unknown) => {
    assert.ok(e instanceof LocalLLMError, `expected a LocalLLMError, got ${String(e)}`);
    assert.equal(e.code, LocalLLMErrorCode.INVALID_OPTION, e.message);
    assert.ok(e.message.includes(name), `'${name}' not named in: ${e.message}`);
    if (shown !== undefined) {
      const found = typeof shown === 'string' ? e.message.includes(shown) : shown.test(e.message);
      assert.ok(found, `'${shown}' not shown in: ${e.message}`);
    }
    return true;
  };
}

/** `call` throws or rejects with {@link invalid}(`name`, `shown`) within 10 s. */
async function rejectsInvalid(what: string, call: () => unknown, name: string, shown?: string | RegExp): Promise<void> {
  await assert.rejects(within(Promise.resolve().then(call), 10_000, what), invalid(name, shown), what);
}

/** Read a stream to its end. */
async function drain(stream: AsyncIterable<unknown>): Promise<void> {
  for await (const _ of stream);
}

test('BigInt options are INVALID_OPTION naming the option, on every path', async () => {
  const ctx = () => ai.context;
  const cases: Array<[string, () => unknown, string]> = [
    ['generate seed', () => ctx().generate('Hi', { seed: 1n as any, maxTokens: 1 }), 'seed'],
    ['stream seed', () => drain(ctx().stream('Hi', { seed: 1n as any, maxTokens: 1 })), 'seed'],
    ['generate maxTokens', () => ctx().generate('Hi', { maxTokens: 1n as any }), 'maxTokens'],
    ['generate temperature', () => ctx().generate('Hi', { temperature: 1n as any }), 'temperature'],
    ['generate nProbs', () => ctx().generateResult('Hi', { nProbs: 2n as any }), 'nProbs'],
    ['batch seed', () => ctx().generateBatch(['Hi', 'Yo'], { seed: 1n as any }), 'seed'],
    [
      'chat seed',
      () => ai.chat.completions.create({ messages: [{ role: 'user', content: 'Hi' }], seed: 1n as any }),
      'seed',
    ],
    [
      'chat stream max_tokens',
      async () =>
        drain(
          await ai.chat.completions.create({
            messages: [{ role: 'user', content: 'Hi' }],
            max_tokens: 1n as any,
            stream: true,
          }),
        ),
      'max_tokens',
    ],
    ['stop holding a BigInt', () => ctx().generate('Hi', { stop: [1n] as any, maxTokens: 1 }), 'stop'],
    ['createContext contextSize', () => ai.model.createContext({ contextSize: 64n as any }), 'contextSize'],
    ['benchmark iterations', () => ai.benchmark({ iterations: 1n as any }), 'iterations'],
    ['estimateMemory', () => ai.model.estimateMemory(64n as any), 'contextSize'],
    ['canRunModel size', () => canRunModel(1000n as any), 'modelSizeBytes'],
    ['canRunModelFile contextSize', () => canRunModelFile(MODEL, { contextSize: 64n as any }), 'contextSize'],
    ['ModelPool maxModels', () => new ModelPool({ maxModels: 1n as any }), 'maxModels'],
    ['Model.load gpuLayers', () => Model.load(MODEL, { gpuLayers: 1n as any }), 'gpuLayers'],
    [
      'quantize threads',
      () => quantize(MODEL, '/nonexistent/out.gguf', { type: 'Q8_0', threads: 1n as any }),
      'threads',
    ],
    ['token prompt', () => ctx().generate({ tokens: [1n] } as any), 'tokens[0]'],
    ['detokenize', () => ai.model.detokenize([1n] as any), 'tokens[0]'],
  ];
  for (const [what, call, name] of cases) {
    await rejectsInvalid(what, call, name, /\b\d+n\b/);
  }
  // Any value can be shown in a message, cycles included.
  const cyclic: Record<string, unknown> = {};
  cyclic.self = cyclic;
  await rejectsInvalid('a cyclic seed', () => ctx().generate('Hi', { seed: cyclic as any }), 'seed');
  await rejectsInvalid('a symbol seed', () => ctx().generate('Hi', { seed: Symbol('s') as any }), 'seed');
});

test('token ids are integers from 0 to 2^32-1, never coerced', async () => {
  const bad: Array<[unknown[], string, string]> = [
    [[1, NaN], 'tokens[1]', 'NaN'],
    [[Infinity], 'tokens[0]', 'Infinity'],
    [[-Infinity], 'tokens[0]', '-Infinity'],
    [[null], 'tokens[0]', 'null'],
    [[undefined], 'tokens[0]', 'undefined'],
    [['3000'], 'tokens[0]', '"3000"'],
    [[3000.7], 'tokens[0]', '3000.7'],
    [[2 ** 32 + 3000], 'tokens[0]', '4294970296'],
    [[-1], 'tokens[0]', '-1'],
    [[1, 2, 3000n], 'tokens[2]', '3000n'],
  ];
  // A hole in a sparse array is undefined, not token 0.
  bad.push([[1, , 3], 'tokens[1]', 'undefined']);
  for (const [tokens, name, shown] of bad) {
    const what = `${name} = ${shown}`;
    await rejectsInvalid(`generate ${what}`, () => ai.context.generate({ tokens } as any), name, shown);
    await rejectsInvalid(`stream ${what}`, () => drain(ai.context.streamPieces({ tokens } as any)), name, shown);
    await rejectsInvalid(`detokenize ${what}`, () => ai.model.detokenize(tokens as any), name, shown);
  }
  await rejectsInvalid('tokens not an array', () => ai.context.generate({ tokens: 5 } as any), 'tokens');
  await rejectsInvalid('detokenize of a string', () => ai.model.detokenize('3000' as any), 'tokens');
  await rejectsInvalid('a negative id in an Int32Array', () => ai.model.detokenize(Int32Array.of(1, -5)), 'tokens[1]');
  await rejectsInvalid('a null prompt', () => ai.context.generate(null as any), 'prompt');

  // Valid ids pass unchanged; ids outside the vocabulary are the engine's to refuse.
  const ids = ai.model.tokenize(ORIGINAL, { addSpecial: false });
  assert.equal(ai.model.detokenize(ids), ORIGINAL);
  assert.equal(ai.model.detokenize(Array.from(ids)), ORIGINAL);
  const r = await ai.context.generateResult({ tokens: ids }, { maxTokens: 2, temperature: 0 });
  assert.equal(r.promptTokens, ids.length);
  for (const id of [ai.model.info.nVocab, 2 ** 32 - 1]) {
    assert.throws(
      () => ai.model.detokenize([id]),
      (e: unknown) => e instanceof LocalLLMError && e.code !== LocalLLMErrorCode.INVALID_OPTION,
      `detokenize ${id}`,
    );
    await assert.rejects(
      ai.context.generate({ tokens: [id] } as any, { maxTokens: 1 }),
      (e: unknown) => e instanceof LocalLLMError,
      `generate ${id}`,
    );
  }
});

test('canRunModel takes a Model or a finite size >= 0 in bytes', async () => {
  const bad: Array<[unknown, string, string]> = [
    [NaN, 'modelSizeBytes', 'NaN'],
    [-1, 'modelSizeBytes', '-1'],
    [-Infinity, 'modelSizeBytes', '-Infinity'],
    [Infinity, 'modelSizeBytes', 'Infinity'],
    [1n, 'modelSizeBytes', '1n'],
    ['1000', 'model', '"1000"'],
    [null, 'model', 'null'],
    [undefined, 'model', 'undefined'],
    [{ sizeBytes: 5 }, 'model', '{"sizeBytes":5}'],
  ];
  for (const [size, name, shown] of bad) {
    assert.throws(() => canRunModel(size as any), invalid(name, shown), `canRunModel(${shown})`);
  }
  assert.throws(() => canRunModel(ai.model, { contextSize: NaN }), invalid('contextSize', 'NaN'));
  assert.throws(() => canRunModel(1000, { contextSize: -1 }), invalid('contextSize', '-1'));
  // local-llm-rn's contract for good sizes holds: a byte count (any finite number >= 0) is judged.
  assert.equal(canRunModel(0).canRun, true);
  assert.equal(canRunModel(1.5 * 1024 * 1024).canRun, true);
  assert.equal(canRunModel(1e15).canRun, false);
  assert.equal(canRunModel(ai.model, { contextSize: 256 }).canRun, true);
});

test('gpuLayers is an integer from -1 to 2^31-1 on Model.load, LocalLLM.create and ModelPool.load', async () => {
  for (const gpuLayers of [NaN, 1.5, -2, Infinity, 2 ** 31, '1', null]) {
    const shown = typeof gpuLayers === 'string' ? `"${gpuLayers}"` : String(gpuLayers);
    await rejectsInvalid(
      `Model.load ${shown}`,
      () => Model.load(MODEL, { gpuLayers: gpuLayers as any }),
      'gpuLayers',
      shown,
    );
    await rejectsInvalid(
      `LocalLLM.create ${shown}`,
      () => LocalLLM.create({ model: MODEL, gpuLayers: gpuLayers as any, warmup: false }),
      'gpuLayers',
      shown,
    );
  }
  const pool = new ModelPool();
  try {
    await rejectsInvalid('ModelPool.load NaN', () => pool.load('m', MODEL, { gpuLayers: NaN }), 'gpuLayers', 'NaN');
    assert.equal(pool.list().length, 0);
  } finally {
    pool.dispose();
  }
  for (const gpuLayers of [-1, 0, 99]) {
    (await Model.load(MODEL, { gpuLayers })).dispose();
  }
});

test('the rule is the same for every numeric option (bounds, reals, integers, names)', async () => {
  const ctx = ai.context;
  const cases: Array<[string, () => unknown, string]> = [
    ['seed -2', () => ctx.generate('Hi', { seed: -2 }), 'seed'],
    ['seed 2^32', () => ctx.generate('Hi', { seed: 2 ** 32 }), 'seed'],
    ['seed "7"', () => ctx.generate('Hi', { seed: '7' as any }), 'seed'],
    ['seed null', () => ctx.generate('Hi', { seed: null as any }), 'seed'],
    ['topP Infinity', () => ctx.generate('Hi', { topP: Infinity }), 'topP'],
    ['temperature "0"', () => ctx.generate('Hi', { temperature: '0' as any }), 'temperature'],
    ['threads 1.5', () => ai.model.createContext({ threads: 1.5 }), 'threads'],
    ['maxMemoryBytes -1', () => new ModelPool({ maxMemoryBytes: -1 }), 'maxMemoryBytes'],
    ['quantize threads 0', () => quantize(MODEL, '/nonexistent/out.gguf', { type: 'Q8_0', threads: 0 }), 'threads'],
  ];
  for (const [what, call, name] of cases) {
    await rejectsInvalid(what, call, name);
  }
  // The edges of the seed rule (llama.cpp's: -1 and 2^32-1 ask for a random seed).
  for (const seed of [-1, 0, 2 ** 32 - 2, 2 ** 32 - 1]) {
    await ctx.generate('Hi', { seed, maxTokens: 1 });
  }
});
