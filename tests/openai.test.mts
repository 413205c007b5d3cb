// OpenAI's request and response conventions on the real engine (issue 36): `max_completion_tokens`,
// `null` meaning the default, `developer` messages, `n`, `refusal: null` and `logprobs: null` in
// responses, and `stream_options.include_usage`. (Unique tool-call ids: tests/tools.test.mts.)
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import * as native from './generated/napi/local_llm_ffi.ts';
import { setBindings, LocalLLM, LocalLLMErrorCode } from '../src/api/index.ts';
import type { ChatCompletionChunk, ChatMessage } from '../src/api/index.ts';
import { code, defaultModel } from './helpers.mts';

native.default.initialize();
setBindings(native as any);

let ai: LocalLLM;

before(async () => {
  ai = await LocalLLM.create({ model: defaultModel(), contextSize: 512, threads: 2 });
});

after(() => {
  ai?.dispose();
});

const ASK: ChatMessage[] = [{ role: 'user', content: 'Name three colours and describe each one.' }];
const text = (r: { choices: Array<{ message: { content: string | null } }> }) => r.choices[0].message.content;

test('max_completion_tokens limits the answer as max_tokens does', async () => {
  const res = await ai.chat.completions.create({ messages: ASK, max_completion_tokens: 5, temperature: 0 });
  assert.equal(res.usage.completion_tokens, 5);
  assert.equal(res.choices[0].finish_reason, 'length');
  const same = await ai.chat.completions.create({ messages: ASK, max_tokens: 5, temperature: 0 });
  assert.equal(text(same), text(res));
  await assert.rejects(
    ai.chat.completions.create({ messages: ASK, max_tokens: 4, max_completion_tokens: 5 }),
    code(LocalLLMErrorCode.INVALID_OPTION),
  );
  await assert.rejects(
    ai.chat.completions.create({ messages: ASK, max_completion_tokens: -1 }),
    (e: Error) => code(LocalLLMErrorCode.INVALID_OPTION)(e) && e.message.includes('max_completion_tokens'),
  );
});

test('null options mean the defaults', async () => {
  const plain = await ai.chat.completions.create({ messages: ASK, temperature: 0, max_tokens: 8 });
  const nulls = await ai.chat.completions.create({
    messages: ASK,
    temperature: 0,
    max_completion_tokens: 8,
    max_tokens: null,
    top_p: null,
    stop: null,
    seed: null,
    frequency_penalty: null,
    presence_penalty: null,
    logprobs: null,
    top_logprobs: null,
    logit_bias: null,
    n: null,
    stream: null,
    stream_options: null,
  });
  assert.equal(text(nulls), text(plain));
  assert.equal(nulls.usage.completion_tokens, 8);
});

test('a developer message is a system message', async () => {
  const instructed = (role: 'system' | 'developer') =>
    ai.chat.completions.create({
      messages: [{ role, content: 'Answer in French, in one short sentence.' }, ...ASK],
      temperature: 0,
      max_tokens: 12,
    });
  const [system, developer] = [await instructed('system'), await instructed('developer')];
  assert.equal(developer.usage.prompt_tokens, system.usage.prompt_tokens);
  assert.equal(text(developer), text(system));
  // The same through the context's own chat API.
  const viaContext = await ai.context.generateResult(
    { messages: [{ role: 'developer', content: 'Answer in French, in one short sentence.' }, ...ASK] },
    { temperature: 0, maxTokens: 12 },
  );
  assert.equal(viaContext.text, text(system));
});

test('responses carry refusal: null, and logprobs: null unless asked for', async () => {
  const res = await ai.chat.completions.create({ messages: ASK, temperature: 0, max_tokens: 2 });
  assert.ok('refusal' in res.choices[0].message);
  assert.equal(res.choices[0].message.refusal, null);
  assert.equal(res.choices[0].logprobs, null);
  const withLogprobs = await ai.chat.completions.create({
    messages: ASK,
    temperature: 0,
    max_tokens: 2,
    logprobs: true,
  });
  assert.equal(withLogprobs.choices[0].logprobs?.content?.length, 2);
});

test('n other than 1 is INVALID_OPTION', async () => {
  await assert.rejects(
    ai.chat.completions.create({ messages: ASK, n: 2 }),
    (e: Error) => code(LocalLLMErrorCode.INVALID_OPTION)(e) && e.message.includes('n must be 1'),
  );
  const one = await ai.chat.completions.create({ messages: ASK, n: 1, max_tokens: 1 });
  assert.equal(one.choices.length, 1);
});

test('stream_options.include_usage ends the stream with a usage chunk', async () => {
  const params = { messages: ASK, temperature: 0, max_tokens: 6 } as const;
  const collect = async (includeUsage: boolean) => {
    const chunks: ChatCompletionChunk[] = [];
    const stream = await ai.chat.completions.create({
      ...params,
      stream: true,
      stream_options: { include_usage: includeUsage },
    });
    for await (const c of stream) chunks.push(c);
    return chunks;
  };
  const whole = await ai.chat.completions.create(params);
  const chunks = await collect(true);
  const last = chunks[chunks.length - 1];
  assert.deepEqual(last.choices, []);
  assert.deepEqual(last.usage, whole.usage);
  assert.equal(chunks.filter((c) => c.choices.length === 0).length, 1);
  const streamed = chunks.map((c) => c.choices[0]?.delta.content ?? '').join('');
  assert.equal(streamed, text(whole));
  const without = await collect(false);
  assert.equal(without.filter((c) => c.choices.length === 0).length, 0);
});

test("content parts typed loosely (local-llm-js-core's messages) are checked when rendered", async () => {
  const loose = (part: { type: string; text?: string }): ChatMessage[] => [{ role: 'user', content: [part] }];
  const one = await ai.chat.completions.create({
    messages: loose({ type: 'text', text: 'Say hi.' }),
    max_tokens: 1,
  });
  assert.equal(one.choices.length, 1);
  await assert.rejects(
    ai.chat.completions.create({ messages: loose({ type: 'text' }), max_tokens: 1 }),
    (e: Error) => code(LocalLLMErrorCode.INVALID_OPTION)(e) && e.message.includes('needs its text'),
  );
  await assert.rejects(
    ai.chat.completions.create({ messages: loose({ type: 'input_audio' }), max_tokens: 1 }),
    (e: Error) => code(LocalLLMErrorCode.INVALID_OPTION)(e) && e.message.includes('"input_audio"'),
  );
  await assert.rejects(
    ai.chat.completions.create({ messages: loose({ type: 'image_url' }), max_tokens: 1 }),
    code(LocalLLMErrorCode.VISION_FAILED),
  );
});
