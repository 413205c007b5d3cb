// Our chat completions through the official `openai` client (issue 36): its requests reach
// `ai.chat.completions.create` through a custom fetch (JSON, or server-sent events for
// streams), and its own parsing (`create`, streams, `parse` with a zod schema) must accept our
// answers. The type checks below are compiled by `tsc` with the rest of the tests.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { zodResponseFormat } from 'openai/helpers/zod';
import type {
  ChatCompletion as OpenAIChatCompletion,
  ChatCompletionChunk as OpenAIChunk,
} from 'openai/resources/chat/completions';
import { z } from 'zod';
import * as native from './generated/napi/local_llm_ffi.ts';
import { setBindings, LocalLLM } from '../src/api/index.ts';
import type { ChatCompletionChunk, ChatCompletionRequest, ChatCompletionResponse } from '../src/api/index.ts';
import { defaultModel } from './helpers.mts';

native.default.initialize();
setBindings(native as any);

// Our results are OpenAI's types (a compile-time check).
export const asOpenAI = (r: ChatCompletionResponse): OpenAIChatCompletion => r;
export const chunkAsOpenAI = (c: ChatCompletionChunk): OpenAIChunk => c;

let ai: LocalLLM;

before(async () => {
  ai = await LocalLLM.create({ model: defaultModel(), contextSize: 512, threads: 2 });
});

after(() => {
  ai?.dispose();
});

/** The client, talking to `ai` in-process. */
function client(): OpenAI {
  const fetch = async (_url: unknown, init?: { body?: unknown }): Promise<Response> => {
    const request = JSON.parse(String(init?.body)) as ChatCompletionRequest;
    const result = await ai.chat.completions.create(request);
    if (Symbol.asyncIterator in result) {
      const encoder = new TextEncoder();
      const body = new ReadableStream({
        async start(controller) {
          for await (const chunk of result) {
            controller.enqueue(encoder.encode(`data: ${JSON.stringify(chunk)}\n\n`));
          }
          controller.enqueue(encoder.encode('data: [DONE]\n\n'));
          controller.close();
        },
      });
      return new Response(body, { headers: { 'content-type': 'text/event-stream' } });
    }
    return new Response(JSON.stringify(result), { headers: { 'content-type': 'application/json' } });
  };
  return new OpenAI({ apiKey: 'local', baseURL: 'http://local.invalid/v1', fetch: fetch as typeof globalThis.fetch });
}

const MESSAGES = [
  { role: 'developer' as const, content: 'You are terse.' },
  { role: 'user' as const, content: 'Name three colours.' },
];

test('the openai client creates completions and streams from our engine', async () => {
  const openai = client();
  const direct = await ai.chat.completions.create({ messages: MESSAGES, temperature: 0, max_tokens: 8 });
  const res = await openai.chat.completions.create({
    model: 'local',
    messages: MESSAGES,
    temperature: 0,
    max_completion_tokens: 8,
    logprobs: null,
  });
  assert.equal(res.choices[0].message.content, direct.choices[0].message.content);
  assert.equal(res.choices[0].message.refusal, null);
  assert.equal(res.usage?.completion_tokens, 8);
  const stream = await openai.chat.completions.create({
    model: 'local',
    messages: MESSAGES,
    temperature: 0,
    max_completion_tokens: 8,
    stream: true,
    stream_options: { include_usage: true },
  });
  let text = '';
  let usage: OpenAIChunk['usage'] = null;
  for await (const chunk of stream) {
    text += chunk.choices[0]?.delta.content ?? '';
    usage = chunk.usage ?? usage;
  }
  assert.equal(text, direct.choices[0].message.content);
  assert.deepEqual(usage, direct.usage);
});

test("the openai client's parse with a zod schema gets a parsed object", async () => {
  const Colour = z.object({ colour: z.string(), warm: z.boolean() });
  const res = await client().chat.completions.parse({
    model: 'local',
    messages: MESSAGES,
    temperature: 0,
    max_completion_tokens: 256,
    response_format: zodResponseFormat(Colour, 'colour'),
  });
  const parsed = res.choices[0].message.parsed;
  assert.ok(parsed !== null, JSON.stringify(res.choices[0].message));
  assert.equal(typeof parsed.colour, 'string');
  assert.equal(typeof parsed.warm, 'boolean');
});
