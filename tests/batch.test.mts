// Batched generation on the real engine with the default model (run by scripts/checks/js-test.sh):
// `chat.completions.createBatch` and `InferenceContext.generateBatch` in local-llm-js-core's
// shapes, each answer equal to the same request answered alone, queueing beyond
// `maxSequences`, aborts and bad input. Every wait is bounded, so a hang fails the test.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import * as native from './generated/napi/local_llm_ffi.ts';
import {
  setBindings,
  LocalLLM,
  Model,
  LocalLLMError,
  LocalLLMErrorCode,
  type ChatCompletionRequest,
  type ChatCompletionResponse,
} from '../src/api/index.ts';
import { QUESTIONS, WEATHER_TOOLS, blankCallIds, code, defaultModel, within } from './helpers.mts';

native.default.initialize();
setBindings(native as any);

const MODEL = defaultModel();

function request(content: string, maxTokens = 24): ChatCompletionRequest & { stream?: false } {
  return { messages: [{ role: 'user', content }], max_tokens: maxTokens, temperature: 0 };
}

let ai: LocalLLM;

before(async () => {
  ai = await LocalLLM.create({ model: MODEL, contextSize: 512, threads: 2, maxSequences: 4 });
});

after(() => {
  ai?.dispose();
});

test('createBatch of 4 equals each request answered alone', async () => {
  const requests = QUESTIONS.map((q, i) => request(q, 16 + 4 * i));
  const solo: ChatCompletionResponse[] = [];
  for (const r of requests) {
    solo.push(await within(ai.chat.completions.create(r), 60_000, 'a solo completion'));
  }
  const batch = await within(ai.chat.completions.createBatch(requests), 60_000, 'createBatch');
  assert.equal(batch.length, 4);
  batch.forEach((b, i) => {
    assert.equal(b.object, 'chat.completion');
    assert.equal(b.choices[0].message.content, solo[i].choices[0].message.content, `request ${i}`);
    assert.equal(b.choices[0].finish_reason, solo[i].choices[0].finish_reason, `request ${i}`);
    assert.deepEqual(b.usage, solo[i].usage, `request ${i}`);
  });
  // Different questions, different answers: a mix-up of sequences would show.
  assert.equal(new Set(batch.map((b) => b.choices[0].message.content)).size, 4);
});

test('createBatch with tools, a JSON schema and log-probabilities equals each request answered alone', async () => {
  const tools = WEATHER_TOOLS;
  const schema = { type: 'object', properties: { colour: { type: 'string' } }, required: ['colour'] };
  const requests: (ChatCompletionRequest & { stream?: false })[] = [
    { ...request('What is the weather in Paris?', 48), tools, tool_choice: 'required' },
    {
      ...request('Name a colour as JSON.', 32),
      response_format: { type: 'json_schema', json_schema: { name: 'c', schema } },
    },
    { ...request(QUESTIONS[1], 16), logprobs: true, top_logprobs: 2 },
    { ...request('What is the weather in Rome?', 48), tools },
  ];
  const solo: ChatCompletionResponse[] = [];
  for (const r of requests) {
    solo.push(await within(ai.chat.completions.create(r), 60_000, 'a solo completion'));
  }
  assert.equal(solo[0].choices[0].finish_reason, 'tool_calls');
  assert.ok('colour' in JSON.parse(solo[1].choices[0].message.content ?? ''));
  assert.equal(solo[2].choices[0].logprobs?.content?.length, solo[2].usage.completion_tokens);
  const batch = await within(ai.chat.completions.createBatch(requests), 60_000, 'createBatch');
  batch.forEach((b, i) => {
    assert.deepEqual(blankCallIds(b.choices[0].message), blankCallIds(solo[i].choices[0].message), `request ${i}`);
    assert.deepEqual(b.choices[0].logprobs, solo[i].choices[0].logprobs, `request ${i}`);
    assert.equal(b.choices[0].finish_reason, solo[i].choices[0].finish_reason, `request ${i}`);
  });
});

test('generateBatch: BatchResult shape, per-prompt options, more prompts than sequences', async () => {
  const prompts = [
    'Once upon a time',
    'The capital of France is',
    'One, two, three,',
    'Dear diary,',
    'In 1492,',
    'Roses are red,',
  ];
  const options = prompts.map((_, i) => ({ maxTokens: 4 + i, temperature: 0 }));
  const batch = await within(ai.context.generateBatch(prompts, options), 60_000, 'generateBatch');
  assert.equal(batch.length, prompts.length);
  for (const [i, r] of batch.entries()) {
    assert.equal(r.index, i);
    assert.equal(r.finishReason, 'length');
    const alone = await within(ai.context.generateResult(prompts[i], options[i]), 60_000, 'generate');
    assert.equal(r.text, alone.text, `prompt ${i}`);
    assert.equal(alone.completionTokens, 4 + i);
  }
  // One options object applies to every prompt.
  const shared = await within(
    ai.context.generateBatch(prompts.slice(0, 2), { maxTokens: 3, temperature: 0 }),
    60_000,
    'generateBatch',
  );
  // Greedy: 3 tokens are the start of the same prompt's longer answer.
  shared.forEach((r, i) => assert.ok(batch[i].text.startsWith(r.text), `prompt ${i}`));
  assert.ok(shared.every((r) => r.finishReason === 'length'));
});

test('an abort stops the whole batch; the context then serves requests again', async () => {
  const controller = new AbortController();
  // Raw story openings run on for hundreds of tokens (questions may end within the delay).
  const prompts = ['Once upon a time', 'Dear diary,', 'Chapter 1.', 'It was a dark and stormy night'];
  const requests = prompts.map(() => ({ maxTokens: 400, temperature: 0, signal: controller.signal }));
  const running = ai.context.generateBatch(prompts, requests);
  setTimeout(() => controller.abort(), 100);
  await assert.rejects(within(running, 60_000, 'an aborted batch'), (e: unknown) => (e as Error).name === 'AbortError');
  const after = await within(
    ai.chat.completions.createBatch([request('Hi', 3), request('Hello', 3)]),
    60_000,
    'createBatch after an abort',
  );
  assert.ok(after.every((r) => r.usage.completion_tokens === 3));
});

test('bad batches are INVALID_OPTION; a context of one sequence still batches (one at a time)', async () => {
  await assert.rejects(
    ai.context.generateBatch(['a', 'b'], [{ maxTokens: 2 }]),
    code(LocalLLMErrorCode.INVALID_OPTION),
  );
  await assert.rejects(
    ai.chat.completions.createBatch([{ ...request('a'), stream: true }]),
    code(LocalLLMErrorCode.INVALID_OPTION),
  );
  await assert.rejects(
    ai.chat.completions.createBatch([request('a'), { ...request('b'), max_tokens: -1 }]),
    code(LocalLLMErrorCode.INVALID_OPTION),
  );
  await assert.rejects(ai.chat.completions.createBatch('x' as any), code(LocalLLMErrorCode.INVALID_OPTION));
  assert.deepEqual(await ai.chat.completions.createBatch([]), []);
  const model = await Model.load(MODEL);
  try {
    assert.throws(() => model.createContext({ maxSequences: 0 }), code(LocalLLMErrorCode.INVALID_OPTION));
    assert.throws(() => model.createContext({ contextSize: 64, maxSequences: 1000 }), LocalLLMError);
    const one = model.createContext({ contextSize: 256, threads: 2 });
    try {
      const r = await within(
        one.generateBatch(['Once upon a time', 'Dear diary,'], { maxTokens: 5, temperature: 0 }),
        60_000,
        'batch on one sequence',
      );
      assert.equal(r.length, 2);
      assert.equal(r[0].text, await one.generate('Once upon a time', { maxTokens: 5, temperature: 0 }));
    } finally {
      one.dispose();
    }
  } finally {
    model.dispose();
  }
});
