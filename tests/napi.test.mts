// Integration tests: the package's TypeScript API (src/api) over the ubrn-generated bindings in
// their Node flavour (tests/generated/napi, @ubjs/node) calling the real Rust engine
// (liblocal_llm_ffi.so) with the real default model. Run by scripts/checks/js-test.sh, which builds
// everything and sets LOCAL_LLM_MODEL and LOCAL_LLM_CLI (the engine's own CLI, the reference for
// greedy text and token ids).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, writeFileSync, openSync, readSync, closeSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as native from './generated/napi/local_llm_ffi.ts';
import Ajv from 'ajv';
import {
  setBindings,
  LocalLLM,
  Model,
  LocalLLMError,
  LocalLLMErrorCode,
  getBackends,
  getDeviceCapabilities,
  canRunModel,
  canRunModelFile,
  optimalThreadCount,
  setLogCallback,
  type ChatMessage,
  type GenerationResult,
} from '../src/api/index.ts';

native.default.initialize();
setBindings(native as any);

const MODEL = process.env.LOCAL_LLM_MODEL ?? '';
const CLI = process.env.LOCAL_LLM_CLI ?? '';
assert.ok(MODEL && CLI, 'LOCAL_LLM_MODEL and LOCAL_LLM_CLI must be set (run scripts/checks/js-test.sh)');

const N = 24; // tokens for greedy comparisons
const QUESTION = 'What is the capital of France? Answer in one sentence.';
const MESSAGES: ChatMessage[] = [{ role: 'user', content: QUESTION }];
const GREEDY = { temperature: 0, max_tokens: N } as const;

let ai: LocalLLM;
let tmp: string;

function cli(args: string[]): string {
  return execFileSync(CLI, args, { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] });
}

function cliChat(prompt: string, n: number): string {
  return cli(['run', '--chat', '-m', MODEL, '-p', prompt, '--temp', '0', '-n', String(n), '-t', '2']);
}

function code(c: LocalLLMErrorCode) {
  return (e: unknown) => {
    assert.ok(e instanceof LocalLLMError, `expected LocalLLMError, got ${e}`);
    assert.equal(e.code, c, `code of: ${e.message}`);
    assert.ok(e.message.length > 0);
    return true;
  };
}

before(async () => {
  tmp = mkdtempSync(join(tmpdir(), 'local-llm-js-'));
  ai = await LocalLLM.create({ model: MODEL, contextSize: 1024, threads: 2 });
});

after(() => {
  ai?.dispose();
  rmSync(tmp, { recursive: true, force: true });
});

async function collect(stream: AsyncIterable<string>): Promise<string[]> {
  const pieces: string[] = [];
  for await (const p of stream) pieces.push(p);
  return pieces;
}

test('non-streaming chat completion: OpenAI shape, usage, same text as the CLI', async () => {
  const res = await ai.chat.completions.create({ messages: MESSAGES, ...GREEDY });
  assert.equal(res.object, 'chat.completion');
  assert.match(res.id, /^chatcmpl-/);
  assert.equal(res.choices.length, 1);
  const content = res.choices[0].message.content ?? '';
  assert.equal(res.choices[0].message.role, 'assistant');
  assert.ok(content.length > 0);
  assert.match(content, /Paris/, `a sensible answer: ${content}`);
  assert.ok(res.usage.prompt_tokens > 10);
  assert.ok(res.usage.completion_tokens > 0 && res.usage.completion_tokens <= N);
  assert.equal(res.usage.total_tokens, res.usage.prompt_tokens + res.usage.completion_tokens);
  assert.ok(['stop', 'length'].includes(res.choices[0].finish_reason));
  assert.ok(res._timing && res._timing.generatedTokens === res.usage.completion_tokens);
  assert.equal(content, cliChat(QUESTION, N).replace(/\n$/, ''));
});

test('streaming chat: chunks join to the non-streamed text and the CLI text; last chunk has _timing', async () => {
  const reference = (await ai.chat.completions.create({ messages: MESSAGES, ...GREEDY })).choices[0].message.content;
  const stream = await ai.chat.completions.create({ messages: MESSAGES, ...GREEDY, stream: true });
  const chunks = [];
  for await (const c of stream) chunks.push(c);
  assert.ok(chunks.length >= 3);
  assert.deepEqual(chunks[0].choices[0].delta, { role: 'assistant' });
  const last = chunks[chunks.length - 1];
  assert.ok(last.choices[0].finish_reason !== null);
  assert.ok(last._timing && last._timing.generatedTokens > 0);
  assert.ok(last.usage && last.usage.completion_tokens === last._timing.generatedTokens);
  const text = chunks.map((c) => c.choices[0].delta.content ?? '').join('');
  assert.ok(
    chunks.slice(1, -1).every((c) => c.choices[0].finish_reason === null && c.object === 'chat.completion.chunk'),
  );
  assert.equal(text, reference);
  assert.equal(text, cliChat(QUESTION, N).replace(/\n$/, ''));
});

test('InferenceContext.generate / stream (raw text) agree; seeded sampling is reproducible', async () => {
  const ctx = ai.context;
  const prompt = 'The three primary colors are';
  const opts = { maxTokens: 16, temperature: 0.9, seed: 1234 };
  const a = await ctx.generate(prompt, opts);
  const b = (await collect(ctx.stream(prompt, opts))).join('');
  assert.equal(a, b);
  assert.ok(a.length > 0);
  const perf = ctx.getPerf();
  assert.ok(perf && perf.generatedTokens > 0 && perf.generatedTokensPerSec > 0);
});

test('typical_p: chat.completions.create and generate options sample exactly like the CLI --typical', async () => {
  const prompt = 'Write a short poem about the sea.';
  const messages: ChatMessage[] = [{ role: 'user', content: prompt }];
  // llama.cpp's (the CLI's) min-p and repeat penalty; the API's defaults are local-llm-rn's.
  const opts = { temperature: 1, seed: 42, max_tokens: 24, top_k: 0, top_p: 1, min_p: 0.05, repeat_penalty: 1 };
  const cliRun = (extra: string[]) =>
    cli([
      'run',
      '--chat',
      '-m',
      MODEL,
      '-p',
      prompt,
      '--temp',
      '1',
      '--seed',
      '42',
      '-n',
      '24',
      '--top-k',
      '0',
      '--top-p',
      '1',
      '-t',
      '2',
      ...extra,
    ]).replace(/\n$/, '');
  const typical = (await ai.chat.completions.create({ messages, ...opts, typical_p: 0.2 })).choices[0].message.content;
  const plain = (await ai.chat.completions.create({ messages, ...opts })).choices[0].message.content;
  assert.equal(typical, cliRun(['--typical', '0.2']));
  assert.equal(plain, cliRun([]));
  // The option has an effect: the same seed without it samples another text.
  assert.notEqual(typical, plain);
  const viaGenerate = await ai.context.generateResult(
    { messages },
    { temperature: 1, seed: 42, maxTokens: 24, topK: 0, topP: 1, minP: 0.05, repeatPenalty: 1, typicalP: 0.2 },
  );
  assert.equal(viaGenerate.text, typical);
  await assert.rejects(ai.chat.completions.create({ messages, typical_p: 2 }), code(LocalLLMErrorCode.INVALID_OPTION));
});

async function fullGreedy(maxTokens: number): Promise<GenerationResult> {
  return ai.context.generateResult(
    { messages: [{ role: 'user', content: 'Write a long story about a dragon.' }] },
    { temperature: 0, maxTokens },
  );
}

test('break out of for-await stops native decoding: no token generated after the stop', async () => {
  const full = await fullGreedy(40);
  assert.equal(full.finishReason, 'max_tokens');
  let result: GenerationResult | null = null;
  const received: string[] = [];
  const it = ai.context.streamPieces(
    { messages: [{ role: 'user', content: 'Write a long story about a dragon.' }] },
    { temperature: 0, maxTokens: 40 },
    (r) => (result = r),
  );
  for await (const piece of it) {
    received.push(piece);
    if (received.length === 5) break;
  }
  const r = result as GenerationResult | null;
  assert.ok(r, 'the result is reported after break');
  assert.equal(r.finishReason, 'cancelled');
  const text = received.join('');
  // Natively generated tokens are exactly the ones whose text was received.
  assert.equal(ai.model.detokenize(r.tokens), text);
  assert.equal(r.completionTokens, r.tokens.length);
  assert.ok(r.completionTokens <= received.length, `${r.completionTokens} tokens for ${received.length} pieces`);
  assert.ok(full.text.startsWith(text));
  assert.equal(ai.context.getPerf()?.generatedTokens, r.completionTokens);
});

test('AbortSignal mid-stream stops native decoding and rejects with AbortError', async () => {
  const ac = new AbortController();
  const received: string[] = [];
  let result: GenerationResult | null = null;
  const it = ai.context.streamPieces(
    { messages: [{ role: 'user', content: 'Write a long story about a dragon.' }] },
    { temperature: 0, maxTokens: 40, signal: ac.signal },
    (r) => (result = r),
  );
  await assert.rejects(
    (async () => {
      for await (const piece of it) {
        received.push(piece);
        if (received.length === 4) ac.abort();
      }
    })(),
    (e: any) => e.name === 'AbortError',
  );
  const r = result as GenerationResult | null;
  assert.ok(r);
  assert.equal(r.finishReason, 'cancelled');
  assert.equal(ai.model.detokenize(r.tokens), received.join(''));
  assert.ok(r.completionTokens <= 4);
});

test('AbortSignal on a chat stream and on a non-streamed completion', async () => {
  const ac = new AbortController();
  const stream = await ai.chat.completions.create({
    messages: [{ role: 'user', content: 'Write a long story about a dragon.' }],
    temperature: 0,
    max_tokens: 200,
    stream: true,
    signal: ac.signal,
  });
  let n = 0;
  await assert.rejects(
    (async () => {
      for await (const _ of stream) {
        if (++n === 3) ac.abort();
      }
    })(),
    (e: any) => e.name === 'AbortError',
  );
  assert.ok(ai.context.getPerf()!.generatedTokens <= 3);

  const ac2 = new AbortController();
  const started = Date.now();
  const pending = ai.chat.completions.create({
    messages: [{ role: 'user', content: 'Write a long story about a dragon.' }],
    temperature: 0,
    max_tokens: 2000,
    signal: ac2.signal,
  });
  setTimeout(() => ac2.abort(), 300);
  await assert.rejects(pending, (e: any) => e.name === 'AbortError');
  const gen = ai.context.lastGeneration!;
  assert.equal(gen.finishReason, 'cancelled');
  assert.ok(gen.completionTokens < 2000);
  assert.ok(Date.now() - started < 20000);
  const pre = new AbortController();
  pre.abort();
  await assert.rejects(
    ai.chat.completions.create({ messages: MESSAGES, signal: pre.signal }),
    (e: any) => e.name === 'AbortError',
  );
});

test('stop strings end the text before the stop, with no tokens after it', async () => {
  const full = await fullGreedy(40);
  const words = full.text.split(' ').filter((w) => /^[A-Za-z]{4,}$/.test(w));
  assert.ok(words.length > 2, full.text);
  const stop = ' ' + words[2];
  const cut = full.text.indexOf(stop);
  const res = await ai.chat.completions.create({
    messages: [{ role: 'user', content: 'Write a long story about a dragon.' }],
    temperature: 0,
    max_tokens: 40,
    stop: [stop],
  });
  assert.equal(res.choices[0].message.content, full.text.slice(0, cut));
  assert.equal(res.choices[0].finish_reason, 'stop');
  assert.ok(res.usage.completion_tokens < full.completionTokens);
  const gen = ai.context.lastGeneration!;
  assert.equal(gen.finishReason, 'stop_string');
  assert.ok(ai.model.detokenize(gen.tokens).startsWith(full.text.slice(0, cut)));
  assert.ok(ai.model.detokenize(gen.tokens).length <= cut + stop.length);
});

test('tokenize / detokenize: ids equal the CLI, round trip', () => {
  for (const text of ['Hello world! How are you?', 'naïve café — 東京 🎉', '<|im_start|>user\nhi<|im_end|>']) {
    const ids = ai.model.tokenize(text);
    assert.ok(ids instanceof Int32Array && ids.length > 0);
    const expected = JSON.parse(cli(['tokenize', '-m', MODEL, '-p', text]));
    assert.deepEqual(Array.from(ids), expected);
    const plain = ai.model.tokenize(text, { addSpecial: false, parseSpecial: false });
    assert.deepEqual(
      Array.from(plain),
      JSON.parse(cli(['tokenize', '-m', MODEL, '-p', text, '--no-special', '--no-parse-special'])),
    );
    assert.equal(ai.model.detokenize(plain), text);
  }
  assert.throws(() => ai.model.detokenize([10_000_000]), code(LocalLLMErrorCode.INFERENCE_FAILED));
  const rendered = ai.model.applyChatTemplate(MESSAGES);
  assert.ok(rendered.includes(QUESTION));
  assert.ok(rendered.includes('<|im_start|>assistant'));
});

test('model info, memory estimate from metadata, device capabilities, backends', () => {
  const info = ai.model.info;
  assert.equal(info.architecture, 'llama');
  assert.equal(info.metadata['general.architecture'], 'llama');
  assert.equal(info.contextLength, Number(info.metadata['llama.context_length']));
  assert.equal(info.nLayer, Number(info.metadata['llama.block_count']));
  assert.ok(info.hasChatTemplate);
  assert.ok(info.nParams > 100e6 && info.nParams < 200e6);
  assert.equal(ai.model.sizeBytes, 98_362_432);
  const est = ai.model.estimateMemory(1024);
  const headDim = info.embeddingLength / info.nHead;
  assert.equal(est.kvCacheBytes, info.nLayer * 1024 * info.nHeadKv * headDim * 2 * 2);
  assert.ok(est.weightsBytes > 0.9 * info.sizeBytes && est.weightsBytes < info.sizeBytes);
  assert.equal(est.totalBytes, est.weightsBytes + est.kvCacheBytes);
  const check = canRunModel(ai.model, { contextSize: 1024 });
  assert.equal(check.estimate?.totalBytes, est.totalBytes);
  const caps = getDeviceCapabilities();
  assert.ok(caps.totalRAM !== null && caps.totalRAM > 0);
  // One rule with context creation: the engine's usable share (80%) of the available memory.
  const mem = native.deviceMemory();
  const usable = Number(mem.usableBytes!);
  assert.ok(Math.abs(usable - Number(mem.availableBytes!) * 0.8) <= 1, `${usable} of ${mem.availableBytes}`);
  assert.equal(check.canRun, est.totalBytes <= usable);
  assert.equal(canRunModel(1e15).canRun, false);
  const backends = getBackends();
  const cpu = backends.find((b) => b.kind === 'cpu');
  assert.ok(cpu, JSON.stringify(backends));
  assert.equal(backends[backends.length - 1].kind, 'cpu');
  assert.ok(Array.isArray(cpu.features));
  assert.ok(optimalThreadCount() >= 1);
});

test('memory estimate of an unloaded file matches the loaded model', async () => {
  const fromFile = await canRunModelFile(MODEL, { contextSize: 512 });
  assert.deepEqual(fromFile.estimate, ai.model.estimateMemory(512));
});

test('errors: missing file, corrupt GGUF, truncated GGUF, URL', async () => {
  await assert.rejects(Model.load(join(tmp, 'nope.gguf')), code(LocalLLMErrorCode.INVALID_PATH));
  await assert.rejects(LocalLLM.create({ model: join(tmp, 'nope.gguf') }), code(LocalLLMErrorCode.INVALID_PATH));
  await assert.rejects(Model.load('https://example.com/x.gguf'), code(LocalLLMErrorCode.INVALID_PATH));
  const garbage = join(tmp, 'garbage.gguf');
  writeFileSync(garbage, Buffer.concat([Buffer.from('GGUF'), Buffer.alloc(4096, 0xab)]));
  await assert.rejects(Model.load(garbage), code(LocalLLMErrorCode.MODEL_LOAD_FAILED));
  const notGguf = join(tmp, 'text.gguf');
  writeFileSync(notGguf, 'this is not a model');
  await assert.rejects(Model.load(notGguf), code(LocalLLMErrorCode.MODEL_LOAD_FAILED));
  const truncated = join(tmp, 'truncated.gguf');
  const buf = Buffer.alloc(2 << 20);
  const fd = openSync(MODEL, 'r');
  readSync(fd, buf, 0, buf.length, 0);
  closeSync(fd);
  writeFileSync(truncated, buf);
  await assert.rejects(Model.load(truncated), code(LocalLLMErrorCode.MODEL_LOAD_FAILED));
  await assert.rejects(canRunModelFile(garbage), code(LocalLLMErrorCode.MODEL_LOAD_FAILED));
});

test('context overflow: CONTEXT_EXHAUSTED', async () => {
  const ctx = ai.model.createContext({ contextSize: 32, threads: 2 });
  try {
    const long = 'one two three four five six seven eight nine ten '.repeat(10);
    await assert.rejects(ctx.generate(long, { maxTokens: 4 }), code(LocalLLMErrorCode.CONTEXT_EXHAUSTED));
    await assert.rejects(collect(ctx.stream(long, { maxTokens: 4 })), code(LocalLLMErrorCode.CONTEXT_EXHAUSTED));
    // A prompt that fits but leaves no room ends with finish reason "length".
    const r = await ctx.generateResult('one two three four five six seven eight nine ten', {
      maxTokens: 100,
      temperature: 0,
    });
    assert.equal(r.finishReason, 'context_full');
  } finally {
    ctx.dispose();
  }
  assert.throws(() => ai.model.createContext({ batchSize: 0 }), code(LocalLLMErrorCode.INVALID_OPTION));
  assert.throws(() => ai.model.createContext({ contextSize: 1 << 21 }), code(LocalLLMErrorCode.INVALID_OPTION));
});

test('two concurrent generations on one context are serialized, not corrupted', async () => {
  const ctx = ai.context;
  const p1 = { messages: [{ role: 'user' as const, content: 'Name three fruits.' }] };
  const p2 = { messages: [{ role: 'user' as const, content: 'What color is the sky?' }] };
  const opts = { temperature: 0, maxTokens: 16 };
  const solo1 = (await ctx.generateResult(p1, opts)).text;
  const solo2 = (await ctx.generateResult(p2, opts)).text;
  assert.notEqual(solo1, solo2);
  const [a, b] = await Promise.all([ctx.generateResult(p1, opts), ctx.generateResult(p2, opts)]);
  assert.equal(a.text, solo1);
  assert.equal(b.text, solo2);
  // Two streams read in parallel.
  const [s1, s2] = await Promise.all([collect(ctx.streamPieces(p1, opts)), collect(ctx.streamPieces(p2, opts))]);
  assert.equal(s1.join(''), solo1);
  assert.equal(s2.join(''), solo2);
  const [c1, c2] = await Promise.all([
    ai.chat.completions.create({ messages: p1.messages, temperature: 0, max_tokens: 16 }),
    ai.chat.completions.create({ messages: p2.messages, temperature: 0, max_tokens: 16 }),
  ]);
  assert.equal(c1.choices[0].message.content, solo1);
  assert.equal(c2.choices[0].message.content, solo2);
});

test('embeddings, benchmark, warmup, clear', async () => {
  const e = await ai.context.embed('The cat sat on the mat.');
  assert.equal(e.length, ai.model.embeddingDimension);
  assert.ok(Math.abs(Math.hypot(...e) - 1) < 1e-3);
  const bench = await ai.benchmark({ promptTokens: 16, generateTokens: 4, iterations: 2 });
  assert.equal(bench.iterations, 2);
  assert.equal(bench.individual.length, 2);
  assert.ok(bench.promptTokensPerSec > 0 && bench.generatedTokensPerSec > 0 && bench.ttftMs > 0);
  assert.equal(bench.individual[0].generatedTokens, 4);
  await ai.context.warmup();
  await ai.context.clear();
});

test('embeddings.create: OpenAI shape, one vector per input, equal to context.embed, base64', async () => {
  assert.throws(() => ai.embeddings, code(LocalLLMErrorCode.EMBEDDING_FAILED));
  const emb = await LocalLLM.create({ model: MODEL, contextSize: 256, threads: 2, embeddings: true, warmup: false });
  try {
    const texts = ['The cat sat on the mat.', 'Paris is the capital of France.'];
    const res = await emb.embeddings.create({ input: texts });
    assert.equal(res.object, 'list');
    assert.equal(res.data.length, 2);
    const tokens = texts.reduce((n, t) => n + emb.model.tokenize(t).length, 0);
    assert.deepEqual(res.usage, { prompt_tokens: tokens, total_tokens: tokens });
    for (const [i, d] of res.data.entries()) {
      assert.equal(d.object, 'embedding');
      assert.equal(d.index, i);
      const v = d.embedding as number[];
      assert.equal(v.length, emb.model.embeddingDimension);
      // The same engine path as context.embed, on another context of another model instance.
      const direct = await ai.context.embed(texts[i]);
      assert.deepEqual(Array.from(Float32Array.from(v)), Array.from(Float32Array.from(direct)));
    }
    assert.notDeepEqual(res.data[0].embedding, res.data[1].embedding);
    const single = await emb.embeddings.create({ input: texts[1], encoding_format: 'base64', model: 'm' });
    assert.equal(single.model, 'm');
    const bytes = Buffer.from(single.data[0].embedding as string, 'base64');
    const decoded = Array.from(new Float32Array(bytes.buffer, bytes.byteOffset, bytes.length / 4));
    assert.deepEqual(decoded, Array.from(Float32Array.from(res.data[1].embedding as number[])));
    // Other poolings are options (CLS differs from the mean); unknown ones are rejected.
    const cls = emb.model.createEmbeddingContext({ threads: 2, poolingType: 'cls' });
    assert.notDeepEqual(Array.from(await cls.embed(texts[0])), res.data[0].embedding);
    cls.dispose();
    await assert.rejects(
      Promise.resolve().then(() => emb.model.createEmbeddingContext({ poolingType: 'max' as 'mean' })),
      code(LocalLLMErrorCode.INVALID_OPTION),
    );
  } finally {
    emb.dispose();
  }
  assert.throws(() => emb.embeddings, code(LocalLLMErrorCode.NOT_INITIALIZED));
});

test('log callback is pulled without blocking and can be switched off', async () => {
  const seen: string[] = [];
  setLogCallback((level, message) => seen.push(`${level}:${message}`), 'debug');
  // The engine logs little in normal operation: check that capture does not block generation
  // and that switching it off ends the pump (the test process must exit afterwards).
  await ai.context.generate('Hi', { maxTokens: 2, temperature: 0 });
  setLogCallback(null);
  assert.ok(Array.isArray(seen));
});

test('use after dispose: NOT_INITIALIZED', async () => {
  const local = await LocalLLM.create({ model: MODEL, contextSize: 256, threads: 2, warmup: false });
  const model = local.model;
  const ctx = local.context;
  const completions = local.chat.completions;
  local.dispose();
  assert.throws(() => local.chat, code(LocalLLMErrorCode.NOT_INITIALIZED));
  assert.throws(() => model.tokenize('hi'), code(LocalLLMErrorCode.NOT_INITIALIZED));
  assert.throws(() => model.createContext(), code(LocalLLMErrorCode.NOT_INITIALIZED));
  await assert.rejects(ctx.generate('hi'), code(LocalLLMErrorCode.NOT_INITIALIZED));
  await assert.rejects(completions.create({ messages: MESSAGES }), code(LocalLLMErrorCode.NOT_INITIALIZED));
  local.dispose(); // idempotent
  // Disposing the model keeps its contexts usable; a disposed native handle reports NOT_INITIALIZED.
  const m = await Model.load(MODEL);
  const c = m.createContext({ contextSize: 128, threads: 2 });
  m.dispose();
  assert.ok((await c.generate('Hello', { maxTokens: 2, temperature: 0 })).length >= 0);
  c.dispose();
  await assert.rejects(c.warmup(), code(LocalLLMErrorCode.NOT_INITIALIZED));
  const m2 = await Model.load(MODEL);
  (m2 as any)[Symbol.dispose]();
  assert.ok(m2.disposed);
});

test('dispose during a generation cancels it', async () => {
  const m = await Model.load(MODEL);
  const c = m.createContext({ contextSize: 512, threads: 2 });
  const pending = c.generateResult('Once upon a time', { maxTokens: 400, temperature: 0 });
  await new Promise((r) => setTimeout(r, 200));
  c.dispose();
  await assert.rejects(pending, (e: any) => e.name === 'AbortError' || e.code === LocalLLMErrorCode.NOT_INITIALIZED);
  m.dispose();
});

test('many create/dispose cycles do not grow memory', async () => {
  const cycle = async () => {
    const x = await LocalLLM.create({ model: MODEL, contextSize: 512, threads: 2 });
    await x.chat.completions.create({ messages: MESSAGES, temperature: 0, max_tokens: 2 });
    x.dispose();
  };
  for (let i = 0; i < 2; i++) await cycle();
  (globalThis as any).gc?.();
  const base = process.memoryUsage().rss;
  for (let i = 0; i < 8; i++) await cycle();
  (globalThis as any).gc?.();
  const grown = process.memoryUsage().rss - base;
  assert.ok(grown < 48 * 1024 * 1024, `RSS grew by ${(grown / 1048576).toFixed(1)} MB over 8 cycles`);
});

test('response_format json_schema / json_object: outputs parse and validate with ajv', async () => {
  const ajv = new Ajv({ strict: false });
  const schemas: Array<Record<string, unknown>> = [
    {
      type: 'object',
      properties: { name: { type: 'string', maxLength: 20 }, age: { type: 'integer', minimum: 0, maximum: 120 } },
      required: ['name', 'age'],
      additionalProperties: false,
    },
    { type: 'object', properties: { color: { enum: ['red', 'green', 'blue'] } }, required: ['color'] },
    { type: 'array', items: { type: 'string', maxLength: 10 }, minItems: 2, maxItems: 3 },
  ];
  for (const schema of schemas) {
    const r = await ai.chat.completions.create({
      messages: [{ role: 'user', content: 'Answer in JSON: describe something.' }],
      temperature: 0,
      max_tokens: 120,
      response_format: { type: 'json_schema', json_schema: { name: 'answer', schema, strict: true } },
    });
    const text = r.choices[0]!.message.content ?? '';
    const value = JSON.parse(text);
    assert.ok(ajv.validate(schema, value), `${text}: ${ajv.errorsText()}`);
  }
  const r = await ai.chat.completions.create({
    messages: [{ role: 'user', content: 'Describe a car in JSON.' }],
    temperature: 0,
    max_tokens: 200,
    response_format: { type: 'json_object' },
  });
  if (r.choices[0]!.finish_reason === 'stop') {
    const value = JSON.parse(r.choices[0]!.message.content ?? '');
    assert.ok(value !== null && typeof value === 'object' && !Array.isArray(value));
  }
});

test('grammar / grammarRoot constrain generate and stream; invalid grammars reject with typed errors', async () => {
  const ctx = ai.context;
  const gbnf = 'answer ::= ("yes" | "no") "!"';
  const r = await ctx.generateResult('Is water wet?', {
    grammar: gbnf,
    grammarRoot: 'answer',
    temperature: 0,
    maxTokens: 10,
  });
  assert.ok(r.text === 'yes!' || r.text === 'no!', r.text);
  assert.equal(r.finishReason, 'grammar_complete');
  assert.equal(r.openAiFinishReason, 'stop');
  const pieces = await collect(
    ctx.stream('Is water wet?', { grammar: gbnf, grammarRoot: 'answer', temperature: 0, maxTokens: 10 }),
  );
  assert.equal(pieces.join(''), r.text);

  const bad = (e: unknown) =>
    code(LocalLLMErrorCode.INVALID_OPTION)(e) && /invalid grammar: 1:\d+/.test((e as Error).message);
  await assert.rejects(ctx.generate('x', { grammar: 'root ::= ("a"' }), bad);
  await assert.rejects(
    ctx.generate('x', { grammar: 'root ::= "a"', grammarRoot: 'missing' }),
    code(LocalLLMErrorCode.INVALID_OPTION),
  );
  await assert.rejects(
    collect(ctx.stream('x', { grammar: 'root ::= root "a"' })),
    code(LocalLLMErrorCode.INVALID_OPTION),
  );
  await assert.rejects(
    ai.chat.completions.create({
      messages: MESSAGES,
      response_format: { type: 'json_schema', json_schema: { name: 'x', schema: { type: 'kaboom' } } },
    }),
    (e: unknown) => code(LocalLLMErrorCode.INVALID_OPTION)(e) && (e as Error).message.includes('#/type'),
  );
});
