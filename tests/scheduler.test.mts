// Concurrent requests on one LocalLLM with several sequences (run by scripts/checks/js-test.sh):
// independent `chat.completions.create` calls and streams are scheduled onto free sequences and
// advance together; each answer equals the same request answered by a one-sequence instance
// (greedy); beyond `maxSequences` they wait and start in order; an abandoned or aborted request
// frees its sequence without disturbing the others; dispose settles every running request with
// NOT_INITIALIZED. Every wait is bounded, so a hang fails the test. Prints the throughput of 4
// concurrent requests against the same 4 one after the other.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import * as native from './generated/napi/local_llm_ffi.ts';
import {
  setBindings,
  LocalLLM,
  LocalLLMErrorCode,
  type ChatCompletionChunk,
  type ChatCompletionRequest,
  type ChatCompletionResponse,
} from '../src/api/index.ts';
import { QUESTIONS, WEATHER_TOOLS, blankCallIds, code, defaultModel, within } from './helpers.mts';

native.default.initialize();
setBindings(native as any);

const MODEL = defaultModel();

function request(content: string, maxTokens: number): ChatCompletionRequest & { stream?: false } {
  return { messages: [{ role: 'user', content }], max_tokens: maxTokens, temperature: 0 };
}

/** Text of a streamed completion, read to the end. */
async function collect(stream: AsyncIterable<ChatCompletionChunk>): Promise<string> {
  let text = '';
  for await (const chunk of stream) {
    text += chunk.choices[0].delta.content ?? '';
  }
  return text;
}

const isAbort = (e: unknown) => (e as Error).name === 'AbortError';

let one: LocalLLM; // one sequence: every request runs alone (the reference)
let four: LocalLLM;

before(async () => {
  one = await LocalLLM.create({ model: MODEL, contextSize: 512, threads: 2 });
  four = await LocalLLM.create({ model: MODEL, contextSize: 512, threads: 2, maxSequences: 4 });
});

after(() => {
  one?.dispose();
  four?.dispose();
});

test('4 concurrent creates equal their solo answers and really overlap (prints their throughput against 4 sequential ones)', async () => {
  const requests = QUESTIONS.map((q) => request(q, 64));
  let start = performance.now();
  const solo: ChatCompletionResponse[] = [];
  for (const r of requests) {
    solo.push(await within(one.chat.completions.create(r), 60_000, 'a solo completion'));
  }
  const sequentialMs = performance.now() - start;
  start = performance.now();
  const together = await within(
    Promise.all(requests.map((r) => four.chat.completions.create(r))),
    60_000,
    '4 concurrent completions',
  );
  const concurrentMs = performance.now() - start;
  together.forEach((c, i) => {
    assert.equal(c.choices[0].message.content, solo[i].choices[0].message.content, `request ${i}`);
    assert.equal(c.choices[0].finish_reason, solo[i].choices[0].finish_reason, `request ${i}`);
    assert.deepEqual(c.usage, solo[i].usage, `request ${i}`);
  });
  assert.equal(new Set(together.map((c) => c.choices[0].message.content)).size, 4);
  // Each request's own clock runs from its prompt to its end. Run one after the other, these
  // spans cannot add up to more than the wall time; run together they overlap.
  const spans = together.reduce((sum, c) => sum + c._timing!.promptEvalMs + c._timing!.generationMs, 0);
  assert.ok(
    spans > 1.5 * concurrentMs,
    `request spans ${spans.toFixed(0)} ms within ${concurrentMs.toFixed(0)} ms of wall time`,
  );
  const tokens = together.reduce((sum, c) => sum + c.usage.completion_tokens, 0);
  console.log(
    `# 4 requests, ${tokens} tokens: sequential ${sequentialMs.toFixed(0)} ms (${((tokens * 1000) / sequentialMs).toFixed(1)} tok/s), ` +
      `concurrent ${concurrentMs.toFixed(0)} ms (${((tokens * 1000) / concurrentMs).toFixed(1)} tok/s), ` +
      `${(sequentialMs / concurrentMs).toFixed(2)}x`,
  );
});

test('concurrent streams: a second stream read inside the first one, both equal their solo answers', async () => {
  const [a, b] = [request(QUESTIONS[1], 40), request(QUESTIONS[3], 40)];
  const soloA = (await within(one.chat.completions.create(a), 60_000, 'solo')).choices[0].message.content;
  const soloB = (await within(one.chat.completions.create(b), 60_000, 'solo')).choices[0].message.content;
  const run = async () => {
    let textA = '';
    let textB: string | null = null;
    for await (const chunk of await four.chat.completions.create({ ...a, stream: true })) {
      textA += chunk.choices[0].delta.content ?? '';
      // Serialized, this would wait for stream A (or cancel it).
      textB ??= await collect(await four.chat.completions.create({ ...b, stream: true }));
    }
    return [textA, textB];
  };
  const [textA, textB] = await within(run(), 60_000, 'nested streams');
  assert.equal(textA, soloA);
  assert.equal(textB, soloB);
});

test('6 requests on 2 sequences all settle, each once', async () => {
  const two = await LocalLLM.create({ model: MODEL, contextSize: 256, threads: 2, maxSequences: 2 });
  try {
    const order: number[] = [];
    const all = Array.from({ length: 6 }, (_, i) =>
      two.chat.completions.create(request(`Count from ${i + 1} to ${i + 40}, separated by commas.`, 8)).then((r) => {
        order.push(i);
        return r;
      }),
    );
    const results = await within(Promise.all(all), 60_000, '6 requests on 2 sequences');
    assert.ok(
      results.every((r) => r.choices[0].finish_reason === 'length'),
      'every answer runs to max_tokens',
    );
    // Every request settles exactly once (the order is asserted on one sequence, below: here two
    // answers finishing in the same step may settle in either order).
    assert.deepEqual([...order].sort(), [0, 1, 2, 3, 4, 5], `settle order ${order}`);
  } finally {
    two.dispose();
  }
});

test('requests are served in the order they were made, chat completions included', async () => {
  // One sequence: each request runs alone, so the order they settle in is the order the
  // scheduler admitted them. Chat completions first fit their messages (tokenizing on a worker
  // thread, which may finish in any order); before each generation kept its call's turn, CI saw
  // request 0 admitted last.
  const one = await LocalLLM.create({ model: MODEL, contextSize: 256, threads: 2 });
  try {
    const order: number[] = [];
    const all = Array.from({ length: 6 }, (_, i) => {
      const chat = request(`Count from ${i + 1} to ${i + 40}, separated by commas.`, 4);
      const made = [
        () => one.chat.completions.create(chat),
        () => one.context.generate(`Count from ${i + 1} to ${i + 40}:`, { maxTokens: 4 }),
        () => one.chat.completions.createBatch([chat]),
      ][i % 3]();
      return made.then(() => order.push(i));
    });
    await within(Promise.all(all), 60_000, '6 requests on 1 sequence');
    assert.deepEqual(order, [0, 1, 2, 3, 4, 5]);
  } finally {
    one.dispose();
  }
});

test('a stream left by return() or dropped frees its sequence', async () => {
  const two = await LocalLLM.create({ model: MODEL, contextSize: 256, threads: 2, maxSequences: 2 });
  try {
    const streamReq = { ...request(QUESTIONS[1], 200), stream: true as const };
    // Left with return(): both sequences free again.
    for (let i = 0; i < 2; i += 1) {
      const it = (await two.chat.completions.create(streamReq))[Symbol.asyncIterator]();
      await within(it.next(), 30_000, 'first chunk');
      await within(it.next(), 30_000, 'second chunk');
      await within(it.return!(undefined), 30_000, 'return()');
    }
    const both = await within(
      Promise.all([two.chat.completions.create(request('Hi', 4)), two.chat.completions.create(request('Hello', 4))]),
      30_000,
      'two requests after two returned streams',
    );
    assert.ok(both.every((r) => r.usage.completion_tokens === 4));
    // Dropped without return() while paused on both sequences: a new request still runs.
    for (let i = 0; i < 2; i += 1) {
      const it = (await two.chat.completions.create(streamReq))[Symbol.asyncIterator]();
      await within(it.next(), 30_000, 'first chunk');
      await within(it.next(), 30_000, 'second chunk');
    }
    const later = await within(
      two.chat.completions.create(request('Hi', 4)),
      30_000,
      'a request after two dropped streams',
    );
    assert.equal(later.usage.completion_tokens, 4);
  } finally {
    two.dispose();
  }
});

test('an abort ends one request and leaves the others as they were', async () => {
  const requests = QUESTIONS.slice(0, 3).map((q) => request(q, 32));
  const solo = await Promise.all(requests.map((r) => within(one.chat.completions.create(r), 60_000, 'solo')));
  const controller = new AbortController();
  const running = requests.map((r, i) =>
    four.chat.completions.create(i === 1 ? { ...r, max_tokens: 400, signal: controller.signal } : r),
  );
  setTimeout(() => controller.abort(), 200);
  const [first, aborted, third] = await within(Promise.allSettled(running), 60_000, 'requests with one aborted');
  assert.equal(aborted.status, 'rejected');
  assert.ok(isAbort((aborted as PromiseRejectedResult).reason), String((aborted as PromiseRejectedResult).reason));
  for (const [i, r] of [
    [0, first],
    [2, third],
  ] as const) {
    assert.equal(r.status, 'fulfilled', `request ${i}`);
    assert.equal(
      (r as PromiseFulfilledResult<ChatCompletionResponse>).value.choices[0].message.content,
      solo[i].choices[0].message.content,
    );
  }
  // A request aborted while it waits for a sequence rejects at once, too.
  const two = await LocalLLM.create({ model: MODEL, contextSize: 256, threads: 2, maxSequences: 2 });
  try {
    const busy = [
      two.chat.completions.create(request(QUESTIONS[1], 40)),
      two.chat.completions.create(request(QUESTIONS[3], 40)),
    ];
    const waiting = new AbortController();
    const queued = two.chat.completions.create({ ...request('Hi', 4), signal: waiting.signal });
    setTimeout(() => waiting.abort(), 50);
    let busyDone = false;
    const running2 = Promise.all(busy).then(() => (busyDone = true));
    await assert.rejects(within(queued, 30_000, 'an aborted waiting request'), isAbort);
    assert.equal(busyDone, false, 'the aborted request waited for the running ones to end');
    await within(running2, 60_000, 'the running requests');
  } finally {
    two.dispose();
  }
});

test('tools and a JSON schema mixed with plain requests in the same steps: all answer as alone', async () => {
  const tools = WEATHER_TOOLS;
  const withTools = { ...request('What is the weather in Paris?', 48), tools, tool_choice: 'required' as const };
  const schema = { type: 'object', properties: { colour: { type: 'string' } }, required: ['colour'] };
  const json = {
    ...request('Name a colour as JSON.', 32),
    response_format: { type: 'json_schema' as const, json_schema: { name: 'c', schema } },
  };
  const list = [request(QUESTIONS[0], 32), withTools, json, request(QUESTIONS[2], 32)];
  const solo: ChatCompletionResponse[] = [];
  for (const r of list) {
    solo.push(await within(one.chat.completions.create(r), 60_000, 'solo'));
  }
  const together = await within(
    Promise.all(list.map((r) => four.chat.completions.create(r))),
    60_000,
    'mixed requests',
  );
  together.forEach((c, i) => {
    assert.deepEqual(blankCallIds(c.choices[0].message), blankCallIds(solo[i].choices[0].message), `request ${i}`);
    assert.equal(c.choices[0].finish_reason, solo[i].choices[0].finish_reason, `request ${i}`);
  });
  assert.equal(together[1].choices[0].finish_reason, 'tool_calls');
  assert.ok('colour' in JSON.parse(together[2].choices[0].message.content ?? ''));
});

test('dispose during 3 running requests settles each with NOT_INITIALIZED', async () => {
  const local = await LocalLLM.create({ model: MODEL, contextSize: 512, threads: 2, maxSequences: 4 });
  try {
    // Stories run long; the context is disposed as soon as the stream has its first chunk,
    // when every request is running (a fixed delay let fast machines finish them first).
    const story = (what: string) => request(`Write a long story about ${what}.`, 300);
    const creates = ['a dragon', 'a lighthouse'].map((w) => local.chat.completions.create(story(w)));
    let started!: () => void;
    const running = new Promise<void>((resolve) => (started = resolve));
    const stream = (async () => {
      const s = await local.chat.completions.create({ ...story('a sailor'), stream: true });
      let text = '';
      for await (const chunk of s) {
        text += chunk.choices[0].delta.content ?? '';
        started();
      }
      return text;
    })();
    const all = [...creates, stream];
    void running.then(() => local.context.dispose());
    stream.catch(() => started());
    const settled = await within(Promise.allSettled(all), 30_000, 'requests on a disposed context');
    for (const [i, s] of settled.entries()) {
      assert.equal(s.status, 'rejected', `request ${i} must not end as if it had finished`);
      code(LocalLLMErrorCode.NOT_INITIALIZED)((s as PromiseRejectedResult).reason);
    }
  } finally {
    local.dispose();
  }
});

test('work on the whole context (clear) is not starved by new requests arriving all the time', async () => {
  const two = await LocalLLM.create({ model: MODEL, contextSize: 256, threads: 2, maxSequences: 2 });
  let stop = false;
  const log: { issued: number; done: number }[] = [];
  // Three lanes on two sequences, each making a new request as soon as its last one ends: a
  // request always waits for a sequence, so the scheduler's loop never runs out of work.
  const lane = async (id: number) => {
    for (let n = 0; !stop; n += 1) {
      const issued = performance.now();
      await two.chat.completions.create(request(`Count from ${id * 100 + n} upwards, separated by commas.`, 12));
      log.push({ issued, done: performance.now() });
    }
  };
  const lanes = [0, 1, 2].map(lane);
  try {
    await new Promise((r) => setTimeout(r, 300));
    const issued = performance.now();
    await within(two.context.clear(), 20_000, 'clear while requests keep arriving');
    const done = performance.now();
    stop = true;
    await within(Promise.all(lanes), 30_000, 'the other requests');
    // Requests made after it (with a margin for the time the calls take to reach the engine)
    // wait until it has run.
    const later = log.filter((r) => r.issued > issued + 50);
    assert.ok(later.length > 0, 'requests kept arriving');
    const overtook = later.filter((r) => r.done < done);
    assert.equal(overtook.length, 0, `${overtook.length} of ${later.length} later requests finished before it`);
  } finally {
    stop = true;
    await Promise.allSettled(lanes);
    two.dispose();
  }
});
