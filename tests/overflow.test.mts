// Chats that outgrow the context (local-llm-js-core's `contextOverflow` strategies and
// `onOverflow`), the engine's context shift, and llama.rn's saveSession / loadSession, on the real
// engine with the default model (run by scripts/checks/js-test.sh).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import * as native from './generated/napi/local_llm_ffi.ts';
import {
  setBindings,
  LocalLLM,
  Model,
  LocalLLMError,
  LocalLLMErrorCode,
  type ChatMessage,
  type ChatCompletionResponse,
  type ContextOverflowEvent,
} from '../src/api/index.ts';
import { code } from './helpers.mts';

native.default.initialize();
setBindings(native as any);

const MODEL = process.env.LOCAL_LLM_MODEL ?? '';
assert.ok(MODEL, 'LOCAL_LLM_MODEL must be set (run scripts/checks/js-test.sh)');

const CONTEXT = 256;
// A request whose greedy answer counts on well past the context. Its top-2 log-probability gap
// is over 1.1 nats at every one of the first 300 tokens (SmolLM2), so rounding differences
// between kernels cannot change the answer ("List the numbers from 1 to 300, separated by
// commas." had a 0.02-0.1 nat tie at its second token between ", " and ". ").
const COUNT = 'Write the numbers from 1 to 300, separated by commas, like this: 1, 2, 3, 4';
const dir = mkdtempSync(join(tmpdir(), 'local-llm-overflow-'));
let model: Model;

before(async () => {
  model = await Model.load(MODEL);
});

after(() => {
  model?.dispose();
  rmSync(dir, { recursive: true, force: true });
});

/** A system message and `turns` user/assistant exchanges of about 40 tokens each, ending with a user turn. */
function longChat(turns: number): ChatMessage[] {
  const messages: ChatMessage[] = [{ role: 'system', content: 'You are a helpful assistant. Answer briefly.' }];
  for (let i = 0; i < turns; i++) {
    messages.push({
      role: 'user',
      content: `Question ${i}: tell me something about the number ${i} and why it is interesting to mathematicians.`,
    });
    messages.push({
      role: 'assistant',
      content: `The number ${i} is interesting because it appears in many places in arithmetic and geometry.`,
    });
  }
  messages.push({ role: 'user', content: 'What is the capital of France?' });
  return messages;
}

function promptTokens(messages: ChatMessage[]): number {
  return model.tokenize(model.applyChatTemplate(messages), { parseSpecial: true }).length;
}

async function instance(contextOverflow?: Parameters<typeof LocalLLM.create>[0]['contextOverflow']): Promise<LocalLLM> {
  return LocalLLM.create({ model: MODEL, contextSize: CONTEXT, threads: 2, warmup: false, contextOverflow });
}

test('the chat outgrows the context', () => {
  assert.ok(promptTokens(longChat(8)) > CONTEXT, `${promptTokens(longChat(8))} tokens`);
});

test("'error' rejects a chat that does not fit with CONTEXT_EXHAUSTED", async () => {
  {
    const ai = await instance('error');
    try {
      await assert.rejects(
        ai.chat.completions.create({ messages: longChat(8), max_tokens: 16, temperature: 0 }),
        code(LocalLLMErrorCode.CONTEXT_EXHAUSTED),
      );
      const stream = await ai.chat.completions.create({ messages: longChat(8), max_tokens: 16, stream: true });
      await assert.rejects(stream[Symbol.asyncIterator]().next(), code(LocalLLMErrorCode.CONTEXT_EXHAUSTED));
      // A per-request strategy overrides the instance's.
      const r = await ai.chat.completions.create({
        messages: longChat(8),
        max_tokens: 8,
        temperature: 0,
        context_overflow: 'truncate_oldest',
      });
      assert.equal(r._context?.strategyUsed, 'truncate_oldest');
    } finally {
      ai.dispose();
    }
  }
});

test("no strategy slides the window (local-llm-rn's default) and the answer may fill the room left", async () => {
  const ai = await instance(undefined);
  try {
    const r = await ai.chat.completions.create({ messages: longChat(8), temperature: 0 });
    assert.equal(r._context?.strategyUsed, 'sliding_window');
    assert.ok(r._context.keptMessageCount < longChat(8).length);
    // Without max_tokens: the room the prompt leaves less 64 tokens, at most 3/4 of the context.
    const room = Math.min(CONTEXT - r._context.promptTokens - 64, Math.floor(CONTEXT * 0.75));
    assert.ok(r.usage.completion_tokens <= room, `${r.usage.completion_tokens} tokens, room ${room}`);
    if (r.choices[0].finish_reason === 'length') {
      assert.equal(r.usage.completion_tokens, room);
    }
  } finally {
    ai.dispose();
  }
});

test("'truncate_oldest' drops the oldest non-system messages and tells onOverflow", async () => {
  const events: ContextOverflowEvent[] = [];
  const ai = await instance({ strategy: 'truncate_oldest', onOverflow: (e) => void events.push(e) });
  try {
    const messages = longChat(8);
    const r = await ai.chat.completions.create({ messages, max_tokens: 16, temperature: 0 });
    assert.equal(events.length, 1);
    const e = events[0];
    assert.equal(e.strategy, 'truncate_oldest');
    assert.equal(e.originalMessageCount, messages.length);
    assert.equal(e.contextSize, CONTEXT);
    assert.equal(e.reservedForGeneration, 16);
    assert.equal(e.availableTokens, CONTEXT - 16);
    assert.equal(e.promptTokens, promptTokens(messages));
    assert.ok(e.promptTokens > e.availableTokens);
    const meta = r._context!;
    assert.equal(meta.overflowTriggered, true);
    assert.equal(meta.strategyUsed, 'truncate_oldest');
    assert.ok(meta.keptMessageCount < messages.length);
    // What was kept: the system message and the newest messages, the longest such run that fits.
    const kept = [messages[0], ...messages.slice(messages.length - (meta.keptMessageCount - 1))];
    assert.equal(meta.promptTokens, promptTokens(kept));
    assert.ok(meta.promptTokens <= e.availableTokens);
    const oneMore = [messages[0], ...messages.slice(messages.length - meta.keptMessageCount)];
    assert.ok(promptTokens(oneMore) > e.availableTokens, 'dropped more than needed');
    assert.equal(r.usage.prompt_tokens, meta.promptTokens);
    assert.match(r.choices[0].message.content ?? '', /paris/i);
  } finally {
    ai.dispose();
  }
});

test("'truncate_oldest' on 10,002 messages answers in seconds without blocking the event loop", async () => {
  // Before: the oldest message was dropped and the chat re-rendered and re-tokenized on the JS
  // thread, one message at a time: 2,002 messages took 17.6 s (the event loop frozen for 15.2 s)
  // and 10,000 got no answer in 120 s. Now a native binary search runs off the JS thread.
  const ai = await instance('truncate_oldest');
  try {
    const messages = longChat(5000);
    let last = performance.now();
    let maxGap = 0;
    const timer = setInterval(() => {
      const now = performance.now();
      maxGap = Math.max(maxGap, now - last);
      last = now;
    }, 5);
    const start = performance.now();
    const r = await ai.chat.completions.create({ messages, max_tokens: 8, temperature: 0 });
    const elapsed = performance.now() - start;
    clearInterval(timer);
    const meta = r._context!;
    assert.equal(meta.strategyUsed, 'truncate_oldest');
    assert.equal(meta.originalMessageCount, 10_002);
    assert.ok(meta.keptMessageCount > 1 && meta.keptMessageCount < 20, `${meta.keptMessageCount} kept`);
    assert.equal(r.usage.prompt_tokens, meta.promptTokens);
    console.log(`10,002 messages: ${elapsed.toFixed(0)} ms, longest event-loop gap ${maxGap.toFixed(0)} ms`);
    assert.ok(elapsed < 20_000, `${elapsed} ms`);
    assert.ok(maxGap < 1_000, `the event loop was blocked for ${maxGap} ms`);
  } finally {
    ai.dispose();
  }
});

test('onOverflow may replace the messages; it sees every content as text', async () => {
  const seen: unknown[] = [];
  const ai = await instance({
    strategy: 'error',
    onOverflow: async (e) => {
      seen.push(...e.messages.map((m) => m.content));
      return [e.messages[0], e.messages[e.messages.length - 1]];
    },
  });
  try {
    // An assistant turn that only calls a tool has null content; onOverflow sees '' (local-llm-js-core's OverflowMessage).
    const call = { id: 'call_1', type: 'function' as const, function: { name: 'noop', arguments: '{}' } };
    const messages = [
      ...longChat(8).slice(0, -1),
      { role: 'assistant', content: null, tool_calls: [call] },
      { role: 'tool', tool_call_id: 'call_1', content: 'done' },
      ...longChat(8).slice(-1),
    ];
    const r = await ai.chat.completions.create({ messages, max_tokens: 16, temperature: 0 });
    assert.ok(seen.length > 0 && seen.every((c) => typeof c === 'string'), `contents seen: ${JSON.stringify(seen)}`);
    assert.ok(seen.includes(''));
    assert.equal(r._context?.keptMessageCount, 2);
    assert.match(r.choices[0].message.content ?? '', /paris/i);
  } finally {
    ai.dispose();
  }
});

test("'sliding_window' keeps the newest messages and the answer goes on past the context", async () => {
  const ai = await instance('sliding_window');
  try {
    // Message level: the system message and the newest messages that fit in the context minus
    // the reserve (at most a quarter of the context under 'sliding_window').
    const messages = longChat(8);
    const r = await ai.chat.completions.create({ messages, max_tokens: 300, temperature: 0 });
    const meta = r._context!;
    assert.equal(meta.strategyUsed, 'sliding_window');
    assert.equal(meta.reservedForGeneration, CONTEXT / 4);
    const kept = [messages[0], ...messages.slice(messages.length - (meta.keptMessageCount - 1))];
    assert.equal(meta.promptTokens, promptTokens(kept));
    assert.ok(meta.promptTokens <= CONTEXT - CONTEXT / 4);
    assert.ok(
      promptTokens([messages[0], ...messages.slice(messages.length - meta.keptMessageCount)]) > CONTEXT - CONTEXT / 4,
    );
    assert.match(r.choices[0].message.content ?? '', /paris/i);

    // Generation level: an answer longer than the context goes on (the engine shifts the context)
    // instead of stopping at 'length' when the context is full.
    const count: ChatMessage[] = [{ role: 'user', content: COUNT }];
    // (No repeat penalty: counting repeats digits, and the penalty would end the count early.)
    const long = await ai.chat.completions.create({
      messages: count,
      max_tokens: 300,
      temperature: 0,
      repeat_penalty: 1,
    });
    assert.equal(long.usage.completion_tokens, 300);
    assert.ok(long.usage.total_tokens > CONTEXT, `${long.usage.total_tokens} tokens`);
    assert.match(long.choices[0].message.content ?? '', /\b75, 76, 77\b/);
    const stream = await ai.chat.completions.create({
      messages: count,
      max_tokens: 300,
      temperature: 0,
      repeat_penalty: 1,
      stream: true,
    });
    let text = '';
    let last;
    for await (const chunk of stream) {
      text += chunk.choices[0].delta.content ?? '';
      last = chunk;
    }
    assert.equal(text, long.choices[0].message.content);
    assert.equal(last?._context?.strategyUsed, undefined);
    assert.equal(last?._context?.overflowTriggered, false);
  } finally {
    ai.dispose();
  }
  // Without the shift (a raw generation of the same chat) the same answer stops when the context is full.
  const plain = await instance('error');
  try {
    const r = await plain.context.generateResult(
      { messages: [{ role: 'user', content: COUNT }] },
      { maxTokens: 300, temperature: 0, repeatPenalty: 1 },
    );
    // The last sampled token is returned but never enters the cache.
    assert.ok(r.timing.promptTokens + r.timing.generatedTokens <= CONTEXT + 1, JSON.stringify(r.timing));
    assert.equal(r.finishReason, 'context_full');
  } finally {
    plain.dispose();
  }
});

test('createBatch fits each request by its strategy and shifts its own sequence, as create does alone', async () => {
  const events: ContextOverflowEvent[] = [];
  const ai = await LocalLLM.create({
    model: MODEL,
    contextSize: 96,
    threads: 2,
    warmup: false,
    maxSequences: 3,
    contextOverflow: { strategy: 'sliding_window', onOverflow: (e) => void events.push(e) },
  });
  try {
    const requests = [
      // Overflows: the newest messages that fit ('sliding_window'), then a short answer.
      { messages: longChat(8), max_tokens: 12, temperature: 0 },
      // Fits, but the answer outgrows the 96 positions: the sequence shifts and goes on.
      { messages: [{ role: 'user' as const, content: COUNT }], max_tokens: 80, temperature: 0 },
      // Overflows under a per-request strategy.
      { messages: longChat(8), max_tokens: 12, temperature: 0, context_overflow: 'truncate_oldest' as const },
    ];
    const alone: ChatCompletionResponse[] = [];
    for (const r of requests) {
      alone.push(await ai.chat.completions.create(r));
    }
    assert.equal(events.length, 2);
    assert.ok(alone[1].usage.total_tokens > 96, `${alone[1].usage.total_tokens} tokens`);
    assert.equal(alone[1].usage.completion_tokens, 80);
    const batch = await ai.chat.completions.createBatch(requests);
    assert.equal(events.length, 4);
    assert.deepEqual(events.slice(2), events.slice(0, 2));
    batch.forEach((b, i) => {
      assert.equal(b.choices[0].message.content, alone[i].choices[0].message.content, `request ${i}`);
      assert.equal(b.choices[0].finish_reason, alone[i].choices[0].finish_reason, `request ${i}`);
      assert.deepEqual(b.usage, alone[i].usage, `request ${i}`);
      assert.deepEqual(b._context, alone[i]._context, `request ${i}`);
    });
    assert.equal(batch[0]._context?.strategyUsed, 'sliding_window');
    assert.equal(batch[2]._context?.strategyUsed, 'truncate_oldest');
    // A request that cannot fit rejects the batch before anything runs.
    await assert.rejects(
      ai.chat.completions.createBatch([requests[1], { ...requests[2], context_overflow: 'error' }]),
      code(LocalLLMErrorCode.CONTEXT_EXHAUSTED),
    );
  } finally {
    ai.dispose();
  }
});

test('contextShift on a raw generation continues past the context; bad values are INVALID_OPTION', async () => {
  const ctx = model.createContext({ contextSize: 64, threads: 2 });
  try {
    const plain = await ctx.generateResult('1, 2, 3, 4, 5,', { maxTokens: 120, temperature: 0 });
    assert.equal(plain.finishReason, 'context_full');
    assert.ok(plain.completionTokens < 64);
    const shifted = await ctx.generateResult('1, 2, 3, 4, 5,', {
      maxTokens: 120,
      temperature: 0,
      contextShift: { nKeep: 4 },
    });
    assert.deepEqual(shifted.tokens.slice(0, plain.tokens.length), plain.tokens);
    assert.ok(shifted.completionTokens > plain.completionTokens, `${shifted.completionTokens} tokens`);
    for (const bad of [{ nKeep: -2 }, { nKeep: 1.5 }, 'yes']) {
      await assert.rejects(
        ctx.generateResult('x', { contextShift: bad as any }),
        code(LocalLLMErrorCode.INVALID_OPTION),
      );
    }
  } finally {
    ctx.dispose();
  }
  await assert.rejects(instance('bogus' as any), code(LocalLLMErrorCode.INVALID_OPTION));
});

test('saveSession / loadSession: the restored context generates the same tokens; bad files are CACHE_CORRUPT', async () => {
  const path = join(dir, 'session.bin');
  const a = model.createContext({ contextSize: CONTEXT, threads: 2 });
  const b = model.createContext({ contextSize: CONTEXT, threads: 2 });
  try {
    const first = await a.generateResult('The history of the bicycle begins', { maxTokens: 12, temperature: 0 });
    const saved = await a.saveSession(path);
    assert.equal(saved, first.promptTokens + first.completionTokens - 1);
    const follow = `The history of the bicycle begins${first.text} In`;
    const want = await a.generateResult(follow, { maxTokens: 16, temperature: 0.8, seed: 5 });

    const loaded = await b.loadSession(path);
    assert.equal(loaded.tokens_loaded, saved);
    assert.ok(loaded.prompt.includes('The history of the bicycle begins'), loaded.prompt);
    const got = await b.generateResult(follow, { maxTokens: 16, temperature: 0.8, seed: 5 });
    assert.deepEqual(got.tokens, want.tokens);

    const bytes = readFileSync(path);
    const flipped = Buffer.from(bytes);
    flipped[Math.floor(bytes.length / 2)] ^= 0x40;
    writeFileSync(join(dir, 'flipped.bin'), flipped);
    writeFileSync(join(dir, 'short.bin'), bytes.subarray(0, bytes.length - 10));
    writeFileSync(join(dir, 'garbage.bin'), Buffer.from('not a session file at all, just some text'));
    for (const name of ['flipped.bin', 'short.bin', 'garbage.bin']) {
      await assert.rejects(b.loadSession(join(dir, name)), code(LocalLLMErrorCode.CACHE_CORRUPT), name);
    }
    await assert.rejects(b.loadSession(join(dir, 'missing.bin')), code(LocalLLMErrorCode.INVALID_PATH));
    // A FIFO (or a directory) is refused at once, not read until a writer appears (it hung);
    // a failed save of it leaves it as it was.
    const fifo = join(dir, 'session.fifo');
    execFileSync('mkfifo', [fifo]);
    for (const bad of [fifo, dir]) {
      await assert.rejects(b.loadSession(bad), code(LocalLLMErrorCode.INVALID_PATH), bad);
      await assert.rejects(b.saveSession(bad), /not a regular file/, bad);
    }
    assert.ok(statSync(fifo).isFIFO());
    // Still usable, with the state it had.
    assert.deepEqual(
      (await b.generateResult(follow, { maxTokens: 16, temperature: 0.8, seed: 5 })).tokens,
      want.tokens,
    );
  } finally {
    a.dispose();
    b.dispose();
  }
  await assert.rejects(a.saveSession(path), code(LocalLLMErrorCode.NOT_INITIALIZED));
});
