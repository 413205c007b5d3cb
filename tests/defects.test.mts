// Regression tests of the TypeScript/FFI defects of issue 14 and the option validation of
// issue 16, on the real engine with the default model (run by scripts/checks/js-test.sh). Every wait is
// bounded, so a regression fails instead of hanging.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { readFileSync } from 'node:fs';
import * as native from './generated/napi/local_llm_ffi.ts';
import {
  setBindings,
  LocalLLM,
  Model,
  LocalLLMError,
  LocalLLMErrorCode,
  setLogCallback,
  canRunModelFile,
  type ChatMessage,
} from '../src/api/index.ts';
import { code, within } from './helpers.mts';

native.default.initialize();
setBindings(native as any);

const MODEL = process.env.LOCAL_LLM_MODEL ?? '';
const CLI = process.env.LOCAL_LLM_CLI ?? '';
assert.ok(MODEL && CLI, 'LOCAL_LLM_MODEL and LOCAL_LLM_CLI must be set (run scripts/checks/js-test.sh)');

const STORY: ChatMessage[] = [{ role: 'user', content: 'Write a long story about a dragon.' }];
const LONG_TEXT = 'The quick brown fox jumps over the lazy dog near the river bank. '.repeat(10);

let ai: LocalLLM;

before(async () => {
  ai = await LocalLLM.create({ model: MODEL, contextSize: 1024, threads: 2 });
});

after(() => {
  ai?.dispose();
});

/** Pull `n` chunks of a stream and drop its iterator without `return()`. */
async function abandon<T>(stream: AsyncIterable<T>, n: number): Promise<void> {
  const it = stream[Symbol.asyncIterator]();
  for (let i = 0; i < n; i++) {
    await within(it.next(), 20_000, 'a stream chunk');
  }
}

function threadCount(): number {
  const status = readFileSync('/proc/self/status', 'utf8');
  return Number(/^Threads:\s+(\d+)/m.exec(status)?.[1]);
}

test('an abandoned stream does not block later requests on its context (14.1)', async () => {
  await abandon(
    await ai.chat.completions.create({ messages: STORY, max_tokens: 200, temperature: 0, stream: true }),
    3,
  );
  const res = await within(
    ai.chat.completions.create({ messages: STORY, max_tokens: 2, temperature: 0 }),
    20_000,
    'a completion after an abandoned stream',
  );
  assert.equal(res.usage.completion_tokens, 2);
  await abandon(ai.context.stream('Once upon a time', { maxTokens: 200, temperature: 0 }), 2);
  assert.ok(
    (await within(ai.context.generateResult('Hello', { maxTokens: 2, temperature: 0 }), 20_000, 'generate'))
      .completionTokens > 0,
  );
  await abandon(ai.context.stream('Once upon a time', { maxTokens: 200, temperature: 0 }), 2);
  await within(ai.context.clear(), 20_000, 'clear after an abandoned stream');
});

test('50 abandoned streams then dispose: bounded threads and memory (14.1)', async () => {
  const run = async (n: number) => {
    const local = await LocalLLM.create({ model: MODEL, contextSize: 256, threads: 2, warmup: false });
    for (let i = 0; i < n; i++) {
      await abandon(local.context.stream('Once upon a time', { maxTokens: 100, temperature: 0 }), 2);
    }
    local.dispose();
  };
  await run(5);
  (globalThis as any).gc?.();
  await new Promise((r) => setTimeout(r, 200));
  const rss0 = process.memoryUsage().rss;
  const threads0 = threadCount();
  await within(run(50), 120_000, '50 abandoned streams');
  (globalThis as any).gc?.();
  await new Promise((r) => setTimeout(r, 200));
  const rss = process.memoryUsage().rss - rss0;
  const threads = threadCount() - threads0;
  console.log(
    `50 abandoned streams: RSS ${(rss / 1048576).toFixed(1)} MB, threads ${threads0} -> ${threads0 + threads}`,
  );
  assert.ok(threads <= 2, `threads grew by ${threads}`);
  assert.ok(rss < 64 * 1048576, `RSS grew by ${(rss / 1048576).toFixed(1)} MB`);
});

test('disposing contexts with abandoned streams releases their workers without waiting for GC (14.1)', async () => {
  const model = await Model.load(MODEL);
  try {
    const cycle = async () => {
      const ctx = model.createContext({ contextSize: 128, threads: 2 });
      await abandon(ctx.stream('Once upon a time', { maxTokens: 100, temperature: 0 }), 2);
      ctx.dispose();
    };
    await cycle();
    await new Promise((r) => setTimeout(r, 100));
    const threads0 = threadCount();
    for (let i = 0; i < 12; i++) await cycle();
    // The runtime keeps idle worker threads for 0.5 s (calls that overlapped each had one);
    // a worker still held by an abandoned stream would never end.
    let threads = threadCount() - threads0;
    for (let waited = 0; threads > 2 && waited < 5_000; waited += 100) {
      await new Promise((r) => setTimeout(r, 100));
      threads = threadCount() - threads0;
    }
    assert.ok(threads <= 2, `threads grew by ${threads} over 12 disposed contexts with abandoned streams`);
  } finally {
    model.dispose();
  }
});

test('reading stream B inside stream A on one context: B works, A then rejects with STREAM_FAILED (14.9)', async () => {
  const ctx = ai.context;
  const opts = { maxTokens: 8, temperature: 0 };
  const solo = await ctx.generate('The sky is', opts);
  let inner = '';
  await assert.rejects(
    within(
      (async () => {
        for await (const _ of ctx.stream('Once upon a time', { maxTokens: 50, temperature: 0 })) {
          for await (const piece of ctx.stream('The sky is', opts)) inner += piece;
        }
      })(),
      20_000,
      'nested streams',
    ),
    code(LocalLLMErrorCode.STREAM_FAILED),
  );
  assert.equal(inner, solo);
});

test('create({stream: true}) errors reject the first next() (14.2)', async () => {
  const first = async (p: Promise<AsyncIterable<unknown>>) => (await p)[Symbol.asyncIterator]().next();
  await assert.rejects(
    within(first(ai.chat.completions.create({ messages: [], stream: true })), 10_000, 'empty'),
    code(LocalLLMErrorCode.INVALID_OPTION),
  );
  const small = await LocalLLM.create({ model: MODEL, contextSize: 32, threads: 2, warmup: false });
  try {
    const long = [{ role: 'user' as const, content: LONG_TEXT }];
    await assert.rejects(
      within(first(small.chat.completions.create({ messages: long, stream: true })), 10_000, 'exhausted'),
      code(LocalLLMErrorCode.CONTEXT_EXHAUSTED),
    );
    small.context.dispose();
    await assert.rejects(
      within(first(small.chat.completions.create({ messages: STORY, stream: true })), 10_000, 'disposed'),
      code(LocalLLMErrorCode.NOT_INITIALIZED),
    );
  } finally {
    small.dispose();
  }
});

test('disposing a context mid-stream rejects the stream with NOT_INITIALIZED (14.5)', async () => {
  const local = await LocalLLM.create({ model: MODEL, contextSize: 256, threads: 2, warmup: false });
  try {
    const stream = await local.chat.completions.create({
      messages: STORY,
      max_tokens: 100,
      temperature: 0,
      stream: true,
    });
    let n = 0;
    await assert.rejects(
      within(
        (async () => {
          for await (const _ of stream) {
            if (++n === 3) local.context.dispose();
          }
        })(),
        20_000,
        'the stream of a disposed context',
      ),
      code(LocalLLMErrorCode.NOT_INITIALIZED),
    );
  } finally {
    local.dispose();
  }
});

test('LocalLLM.create never resolves an instance disposed during it (14.6)', async () => {
  let resolvedDisposed = 0;
  for (let i = 0; i < 30; i++) {
    const x = new LocalLLM({ model: MODEL, contextSize: 128, threads: 2 });
    const timer = setTimeout(() => x.dispose(), Math.random() * 60);
    await x.init().then(
      () => {
        try {
          void x.model;
        } catch {
          resolvedDisposed++;
        }
      },
      (e) => assert.ok(e instanceof LocalLLMError || e?.name === 'AbortError', String(e)),
    );
    clearTimeout(timer);
    x.dispose();
  }
  assert.equal(resolvedDisposed, 0);
});

test('a failing native log queue does not become an unhandled rejection (14.6)', async () => {
  const unhandled: unknown[] = [];
  const onUnhandled = (e: unknown) => unhandled.push(e);
  process.on('unhandledRejection', onUnhandled);
  setBindings({ ...(native as any), nextLogRecords: () => Promise.reject(new Error('native log queue failed')) });
  try {
    setLogCallback(() => {}, 'debug');
    await new Promise((r) => setTimeout(r, 50));
    setLogCallback(null);
    await new Promise((r) => setTimeout(r, 50));
  } finally {
    setBindings(native as any);
    process.off('unhandledRejection', onUnhandled);
  }
  assert.deepEqual(unhandled, []);
});

test('Model.load, embeddings and prompt evaluation honour their AbortSignal; perf reports the work done (14.3)', async () => {
  // Without mmap the load reads the whole file; an abort rejects at once (the native load is
  // skipped or its model released).
  let t = performance.now();
  (await Model.load(MODEL, { useMmap: false })).dispose();
  const load = performance.now() - t;
  const ac = new AbortController();
  t = performance.now();
  const pending = Model.load(MODEL, { signal: ac.signal, useMmap: false });
  setTimeout(() => ac.abort(), 0);
  await assert.rejects(within(pending, 10_000, 'aborted load'), (e: any) => e.name === 'AbortError');
  const aborted = performance.now() - t;
  assert.ok(aborted < load / 2, `an aborted load took ${aborted.toFixed(0)} ms, a load ${load.toFixed(0)} ms`);

  const emb = await LocalLLM.create({
    model: MODEL,
    contextSize: 512,
    batchSize: 8,
    threads: 2,
    embeddings: true,
    warmup: false,
  });
  try {
    t = performance.now();
    await emb.embeddings.create({ input: LONG_TEXT });
    const full = performance.now() - t;
    const abort = new AbortController();
    setTimeout(() => abort.abort(), full / 10);
    t = performance.now();
    await assert.rejects(
      emb.embeddings.create({ input: LONG_TEXT, signal: abort.signal }),
      (e: any) => e.name === 'AbortError',
    );
    const aborted = performance.now() - t;
    assert.ok(
      aborted < full / 2,
      `an abort after ${(full / 10).toFixed(0)} ms took ${aborted.toFixed(0)} ms (full ${full.toFixed(0)} ms)`,
    );

    const ctx = emb.context;
    const n = emb.model.tokenize(LONG_TEXT).length;
    t = performance.now();
    await ctx.generate(LONG_TEXT, { maxTokens: 1, temperature: 0 });
    const prompt = performance.now() - t;
    await ctx.clear();
    const stop = new AbortController();
    setTimeout(() => stop.abort(), prompt / 3);
    await assert.rejects(
      ctx.generateResult(LONG_TEXT, { maxTokens: 1, signal: stop.signal }),
      (e: any) => e.name === 'AbortError',
    );
    const perf = ctx.getPerf();
    assert.ok(
      perf && perf.promptTokens > 0 && perf.promptTokens < n,
      `prompt tokens evaluated: ${perf?.promptTokens} of ${n}`,
    );
    assert.ok(perf.promptEvalMs > 0 && perf.generatedTokens === 0);
  } finally {
    emb.dispose();
  }
});

test('seed -1 and 2^32-1 are random; seeds are the CLI seeds (14.7)', async () => {
  const opts = { maxTokens: 12, temperature: 1.5, topK: 0, topP: 1, minP: 0, repeatPenalty: 1 };
  const prompt = 'Once upon a time';
  const a = await ai.context.generate(prompt, { ...opts, seed: -1 });
  const b = await ai.context.generate(prompt, { ...opts, seed: -1 });
  const c = await ai.context.generate(prompt, { ...opts, seed: 2 ** 32 - 1 });
  const d = await ai.context.generate(prompt, { ...opts, seed: 2 ** 32 - 1 });
  assert.ok(a !== b && c !== d, `random seeds repeated: ${a} / ${b} / ${c} / ${d}`);
  const seeded = await ai.context.generate(prompt, { ...opts, seed: 4242 });
  const cli = execFileSync(
    CLI,
    [
      'run',
      '-m',
      MODEL,
      '-p',
      prompt,
      '-n',
      '12',
      '--temp',
      '1.5',
      '--top-k',
      '0',
      '--top-p',
      '1',
      '--min-p',
      '0',
      '--seed',
      '4242',
      '-t',
      '2',
    ],
    { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] },
  );
  assert.equal(seeded, cli.replace(/\n$/, ''));
});

test('two LocalLLM instances generating at once cost about twice one (14.4)', async () => {
  const second = await LocalLLM.create({ model: MODEL, contextSize: 1024, threads: 2 });
  try {
    const four = (x: LocalLLM) =>
      Promise.all(
        ['Name a fruit.', 'Name a color.', 'Name a city.', 'Name an animal.'].map((content) =>
          x.chat.completions.create({ messages: [{ role: 'user', content }], max_tokens: 8, temperature: 0 }),
        ),
      );
    await four(ai);
    let t = performance.now();
    await four(ai);
    const one = performance.now() - t;
    t = performance.now();
    await within(Promise.all([four(ai), four(second)]), 60_000, 'two instances');
    const two = performance.now() - t;
    console.log(`4 completions on one instance: ${one.toFixed(0)} ms; 4 on each of two at once: ${two.toFixed(0)} ms`);
    assert.ok(two < 4 * one + 1000, `two instances took ${two.toFixed(0)} ms, one ${one.toFixed(0)} ms`);
  } finally {
    second.dispose();
  }
});

test('embeddings.create usage counts the tokens the engine embeds (14.8)', async () => {
  const emb = await LocalLLM.create({ model: MODEL, contextSize: 256, threads: 2, embeddings: true, warmup: false });
  try {
    const text = '<|im_start|>user hello<|im_end|>';
    const ids = JSON.parse(
      execFileSync(CLI, ['tokenize', '-m', MODEL, '-p', text, '--no-parse-special'], { encoding: 'utf8' }),
    );
    const res = await emb.embeddings.create({ input: text });
    assert.equal(res.usage.prompt_tokens, ids.length);
  } finally {
    emb.dispose();
  }
});

test('every bad numeric option is rejected with INVALID_OPTION naming it (16)', async () => {
  const bad: Array<[string, Record<string, unknown>]> = [
    ['contextSize', { contextSize: 1.5 }],
    ['contextSize', { contextSize: NaN }],
    ['contextSize', { contextSize: -1 }],
    ['threads', { threads: NaN }],
    ['threads', { threads: 1.5 }],
    ['threads', { threads: 2 ** 32 + 2 }],
    ['batchSize', { batchSize: 0 }],
    ['batchSize', { batchSize: 2.5 }],
  ];
  for (const [name, options] of bad) {
    assert.throws(
      () => ai.model.createContext(options),
      (e: any) => code(LocalLLMErrorCode.INVALID_OPTION)(e) && e.message.includes(name),
      `${name}: ${JSON.stringify(options)}`,
    );
  }
  const badChat: Array<[string, Record<string, unknown>]> = [
    ['max_tokens', { max_tokens: -5 }],
    ['max_tokens', { max_tokens: 1e12 }],
    ['max_tokens', { max_tokens: NaN }],
    ['max_tokens', { max_tokens: 2.5 }],
    ['top_k', { top_k: -1 }],
    ['top_k', { top_k: 1.5 }],
    ['seed', { seed: NaN }],
    ['seed', { seed: 2 ** 40 }],
    ['seed', { seed: 2 ** 32 + 7 }],
    ['seed', { seed: -2 }],
    ['seed', { seed: 0.5 }],
    ['temperature', { temperature: NaN }],
    ['temperature', { temperature: -1 }],
    ['top_p', { top_p: 1.5 }],
    ['typical_p', { typical_p: 2 }],
    ['frequency_penalty', { frequency_penalty: Infinity }],
    ['presence_penalty', { presence_penalty: NaN }],
    ['stop', { stop: [null] }],
    ['stop', { stop: 5 }],
    ['messages', { messages: [] }],
  ];
  for (const [name, options] of badChat) {
    const request = { messages: STORY, ...options } as any;
    for (const stream of [false, true]) {
      await assert.rejects(
        within(
          (async () => {
            const r = await ai.chat.completions.create({ ...request, stream });
            if (stream) await (r as AsyncIterable<unknown>)[Symbol.asyncIterator]().next();
          })(),
          10_000,
          name,
        ),
        (e: any) => code(LocalLLMErrorCode.INVALID_OPTION)(e) && e.message.includes(name),
        `${name}: ${JSON.stringify(options)} (stream ${stream})`,
      );
    }
  }
  // Ranges of real-valued options are checked by the engine, which names them as the CLI does.
  const badGenerate: Array<[string, Record<string, unknown>]> = [
    ['maxTokens', { maxTokens: -5 }],
    ['topK', { topK: -1 }],
    ['min_p', { minP: 2 }],
    ['repeatPenalty', { repeatPenalty: NaN }],
    ['seed', { seed: 2 ** 40 }],
  ];
  for (const [name, options] of badGenerate) {
    await assert.rejects(
      ai.context.generate('Hi', options),
      (e: any) => code(LocalLLMErrorCode.INVALID_OPTION)(e) && e.message.includes(name),
      name,
    );
    await assert.rejects(
      (async () => {
        for await (const _ of ai.context.stream('Hi', options));
      })(),
      (e: any) => code(LocalLLMErrorCode.INVALID_OPTION)(e) && e.message.includes(name),
      name,
    );
  }
  const others: Array<[string, () => Promise<unknown>]> = [
    ['contextSize', async () => ai.model.estimateMemory(-1)],
    ['contextSize', () => canRunModelFile(MODEL, { contextSize: 0.5 })],
    ['iterations', () => ai.benchmark({ iterations: 0 })],
    ['promptTokens', () => ai.benchmark({ promptTokens: NaN })],
    ['generateTokens', () => ai.benchmark({ generateTokens: -3 })],
  ];
  for (const [name, call] of others) {
    await assert.rejects(
      call(),
      (e: any) => code(LocalLLMErrorCode.INVALID_OPTION)(e) && e.message.includes(name),
      name,
    );
  }
  // Good edge values still work.
  const ok = await ai.chat.completions.create({ messages: STORY, max_tokens: 0, top_k: 0, seed: 0, temperature: 0 });
  assert.equal(ok.usage.completion_tokens, 0);
  ai.model.createContext({ contextSize: 64, threads: 1, batchSize: 1 }).dispose();
});
