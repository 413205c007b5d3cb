// Our chat completions through the official `openai` client (issue 36): its requests reach
// `ai.chat.completions.create` through a custom fetch (JSON, or server-sent events for
// streams), and its own parsing (`create`, streams, `parse` with a zod schema) must accept our
// answers. The type checks below are compiled by `tsc` with the rest of the tests.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import OpenAI from 'openai';
import { zodFunction, zodResponseFormat } from 'openai/helpers/zod';
import type {
  ChatCompletion as OpenAIChatCompletion,
  ChatCompletionChunk as OpenAIChunk,
  ChatCompletionCreateParamsNonStreaming,
  ChatCompletionCreateParamsStreaming,
} from 'openai/resources/chat/completions';
import { z } from 'zod';
import * as native from './generated/napi/local_llm_ffi.ts';
import { setBindings, LocalLLM } from '../src/api/index.ts';
import type { ChatCompletionChunk, ChatCompletionRequest, ChatCompletionResponse } from '../src/api/index.ts';
import { defaultModel } from './helpers.mts';

native.default.initialize();
setBindings(native as any);

// Our results are OpenAI's types, and OpenAI's requests are ours (compile-time checks).
export const asOpenAI = (r: ChatCompletionResponse): OpenAIChatCompletion => r;
export const chunkAsOpenAI = (c: ChatCompletionChunk): OpenAIChunk => c;
export const fromOpenAI = (p: ChatCompletionCreateParamsNonStreaming): ChatCompletionRequest => p;
export const streamFromOpenAI = (p: ChatCompletionCreateParamsStreaming): ChatCompletionRequest => p;

let ai: LocalLLM;

before(async () => {
  ai = await LocalLLM.create({ model: defaultModel(), contextSize: 512, threads: 2 });
});

after(() => {
  ai?.dispose();
});

/** The client, talking to `ai` in-process (each request it sends is pushed to `sent`). */
function client(sent: ChatCompletionRequest[] = []): OpenAI {
  const fetch = async (_url: unknown, init?: { body?: unknown }): Promise<Response> => {
    const request = JSON.parse(String(init?.body)) as ChatCompletionRequest;
    sent.push(request);
    let result: Awaited<ReturnType<typeof ai.chat.completions.create>>;
    try {
      result = await ai.chat.completions.create(request);
    } catch (e) {
      // As a server would answer a bad request (the client does not retry a 400).
      const error = { message: (e as Error).message, code: (e as { code?: string }).code };
      return new Response(JSON.stringify({ error }), { status: 400, headers: { 'content-type': 'application/json' } });
    }
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

test("the openai client's runTools calls our tools and sends their results back", async () => {
  const sent: ChatCompletionRequest[] = [];
  const cities: string[] = [];
  const runner = client(sent).chat.completions.runTools(
    {
      model: 'local',
      messages: [{ role: 'user', content: 'What is the weather in Paris?' }],
      tools: [
        zodFunction({
          name: 'get_weather',
          description: 'The weather in a city',
          parameters: z.object({ city: z.string() }),
          function: ({ city }) => {
            cities.push(city);
            return { city, celsius: 21 };
          },
        }),
      ],
      // The 135M model calls tools reliably only when it must; two rounds, then the runner stops.
      tool_choice: 'required',
      temperature: 0,
      max_completion_tokens: 64,
    },
    { maxChatCompletions: 2 },
  );
  await runner.done();
  assert.equal(cities.length, 2, `the runner ran the tool once per round: ${JSON.stringify(cities)}`);
  assert.equal(sent.length, 2);
  // The second request carries the first call and its result, keyed by the call's id.
  const [call, result] = sent[1].messages.slice(-2);
  assert.equal(call.role, 'assistant');
  const first = call.tool_calls?.[0];
  assert.ok(first !== undefined && first.type === 'function', JSON.stringify(call));
  assert.equal(first.function.name, 'get_weather');
  assert.equal(result.role, 'tool');
  assert.equal(result.tool_call_id, first.id);
  assert.deepEqual(JSON.parse(String(result.content)), { city: cities[0], celsius: 21 });
  // Every call of the run has its own id.
  const ids = runner.messages.flatMap((m) => ('tool_calls' in m && m.tool_calls ? m.tool_calls.map((c) => c.id) : []));
  assert.equal(ids.length, 2);
  assert.equal(new Set(ids).size, 2, `ids repeat: ${ids.join(', ')}`);
});

test("OpenAI's allowed_tools choice offers only the listed tools", async () => {
  const tool = (name: string) => ({
    type: 'function' as const,
    function: { name, parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] } },
  });
  const res = await client().chat.completions.create({
    model: 'local',
    messages: [{ role: 'user', content: 'What is the weather in Paris?' }],
    tools: [tool('get_time'), tool('get_weather')],
    tool_choice: {
      type: 'allowed_tools',
      allowed_tools: { mode: 'required', tools: [{ type: 'function', function: { name: 'get_weather' } }] },
    },
    temperature: 0,
    max_completion_tokens: 64,
  });
  const calls = res.choices[0].message.tool_calls ?? [];
  assert.ok(calls.length > 0, JSON.stringify(res.choices[0].message));
  assert.ok(
    calls.every((c) => c.type === 'function' && c.function.name === 'get_weather'),
    JSON.stringify(calls),
  );
  await assert.rejects(
    client().chat.completions.create({
      model: 'local',
      messages: [{ role: 'user', content: 'Hi' }],
      tools: [tool('get_time')],
      tool_choice: {
        type: 'allowed_tools',
        allowed_tools: { mode: 'auto', tools: [{ type: 'function', function: { name: 'nope' } }] },
      },
    }),
    /does not define: nope/,
  );
});
