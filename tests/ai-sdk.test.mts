// The Vercel AI SDK provider (`ai.languageModel()`) driven by the real `ai` package on the real
// engine (run by scripts/checks/js-test.sh with LOCAL_LLM_MODEL = SmolLM2): generateText, streamText,
// generateObject with a zod schema, tool calls with a tool round trip, aborts and errors.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import type { EmbeddingModelV3, LanguageModelV3 } from '@ai-sdk/provider';
import { embed, embedMany, generateObject, generateText, jsonSchema, stepCountIs, streamText, tool } from 'ai';
import { z } from 'zod';
import * as native from './generated/napi/local_llm_ffi.ts';
import { setBindings, LocalLLM, LocalLLMError, LocalLLMErrorCode } from '../src/api/index.ts';

native.default.initialize();
setBindings(native as any);

const MODEL = process.env.LOCAL_LLM_MODEL ?? '';
assert.ok(MODEL, 'LOCAL_LLM_MODEL must be set (run scripts/checks/js-test.sh)');

let ai: LocalLLM;
before(async () => {
  ai = await LocalLLM.create({ model: MODEL, contextSize: 1024, threads: 2 });
});
after(() => ai?.dispose());

const PROMPT = 'Name three colours of the rainbow.';
const GREEDY = { temperature: 0, topK: 1 } as const;

test('the provider is a LanguageModelV3 to the type checker and to the SDK', () => {
  const model: LanguageModelV3 = ai.languageModel();
  assert.equal(model.specificationVersion, 'v3');
  assert.equal(model.provider, 'local-llm');
  assert.equal(model.modelId, 'SmolLM2-135M-Instruct.Q4_1');
  assert.equal(ai.languageModel('mine').modelId, 'mine');
});

test('generateText: the chat API answer, usage and finish reasons', async () => {
  const res = await generateText({ model: ai.languageModel(), prompt: PROMPT, maxOutputTokens: 24, ...GREEDY });
  const chat = await ai.chat.completions.create({
    messages: [{ role: 'user', content: PROMPT }],
    max_tokens: 24,
    temperature: 0,
    top_k: 1,
  });
  assert.ok(res.text.length > 0);
  assert.equal(res.text, chat.choices[0].message.content, 'same prompt, same greedy answer as chat.completions');
  assert.equal(res.usage.inputTokens, chat.usage.prompt_tokens);
  assert.equal(res.usage.outputTokens, chat.usage.completion_tokens);
  assert.equal(res.finishReason, chat.choices[0].finish_reason === 'length' ? 'length' : 'stop');
  assert.equal(res.response.modelId, 'SmolLM2-135M-Instruct.Q4_1');

  const short = await generateText({ model: ai.languageModel(), prompt: PROMPT, maxOutputTokens: 3, ...GREEDY });
  assert.equal(short.finishReason, 'length');
  assert.equal(short.usage.outputTokens, 3);
  assert.equal(short.rawFinishReason, 'max_tokens');
  assert.ok(res.text.startsWith(short.text), `${JSON.stringify(short.text)} starts ${JSON.stringify(res.text)}`);

  const stopped = await generateText({
    model: ai.languageModel(),
    prompt: PROMPT,
    maxOutputTokens: 24,
    stopSequences: [res.text.slice(4, 8)],
    ...GREEDY,
  });
  assert.equal(stopped.text, res.text.slice(0, 4));
  assert.equal(stopped.finishReason, 'stop');
});

test('generateText with a system prompt and a conversation', async () => {
  const res = await generateText({
    model: ai.languageModel(),
    system: 'You answer in one word.',
    messages: [
      { role: 'user', content: 'Capital of France?' },
      { role: 'assistant', content: 'Paris.' },
      { role: 'user', content: [{ type: 'text', text: 'Capital of Italy?' }] },
    ],
    maxOutputTokens: 8,
    ...GREEDY,
  });
  const chat = await ai.chat.completions.create({
    messages: [
      { role: 'system', content: 'You answer in one word.' },
      { role: 'user', content: 'Capital of France?' },
      { role: 'assistant', content: 'Paris.' },
      { role: 'user', content: 'Capital of Italy?' },
    ],
    max_tokens: 8,
    temperature: 0,
    top_k: 1,
  });
  assert.equal(res.text, chat.choices[0].message.content);
  assert.equal(res.usage.inputTokens, chat.usage.prompt_tokens);
});

test('streamText: several deltas that add up to the generateText answer', async () => {
  const whole = await generateText({ model: ai.languageModel(), prompt: PROMPT, maxOutputTokens: 20, ...GREEDY });
  const res = streamText({ model: ai.languageModel(), prompt: PROMPT, maxOutputTokens: 20, ...GREEDY });
  const deltas: string[] = [];
  for await (const delta of res.textStream) {
    deltas.push(delta);
  }
  assert.ok(deltas.length > 3, `${deltas.length} deltas`);
  assert.equal(deltas.join(''), whole.text);
  assert.equal(await res.finishReason, whole.finishReason);
  const u = await res.usage;
  assert.equal(u.inputTokens, whole.usage.inputTokens);
  assert.equal(u.outputTokens, whole.usage.outputTokens);
  const meta = await res.providerMetadata;
  assert.ok(meta?.['local-llm'], 'engine timings in providerMetadata');
});

test('streamText: an abort mid-stream ends the stream at once and frees the context', async () => {
  const controller = new AbortController();
  const errors: unknown[] = [];
  let aborted = 0;
  const res = streamText({
    model: ai.languageModel(),
    prompt: 'Write a long story about a dragon.',
    maxOutputTokens: 200,
    abortSignal: controller.signal,
    onError: ({ error }) => {
      errors.push(error);
    },
    onAbort: () => {
      aborted++;
    },
    ...GREEDY,
  });
  let n = 0;
  // The SDK reports an abort through onAbort and ends the text stream.
  for await (const _ of res.textStream) {
    if (++n === 3) controller.abort();
  }
  assert.ok(n >= 3 && n < 10, `${n} deltas before the abort took effect`);
  assert.equal(aborted, 1);
  assert.deepEqual(errors, []);
  // The context serves the next request at once.
  const next = await generateText({ model: ai.languageModel(), prompt: 'Hi', maxOutputTokens: 2, ...GREEDY });
  assert.equal(next.usage.outputTokens, 2);
});

test('generateObject: a zod schema becomes a grammar; the object validates', async () => {
  const schema = z.object({
    city: z.enum(['Paris', 'London', 'Rome']),
    sunny: z.boolean(),
    temperature: z.number().int(),
    tags: z.array(z.enum(['warm', 'cold', 'windy'])).max(3),
  });
  const res = await generateObject({
    model: ai.languageModel(),
    schema,
    prompt: 'Describe the weather in Paris today as JSON.',
    maxOutputTokens: 80,
    ...GREEDY,
  });
  assert.deepEqual(schema.parse(res.object), res.object);
  assert.equal(res.finishReason, 'stop');

  // A plain JSON schema too, through `jsonSchema`.
  const res2 = await generateObject({
    model: ai.languageModel(),
    schema: jsonSchema<{ answer: number }>({
      type: 'object',
      properties: { answer: { type: 'integer', minimum: 0, maximum: 100 } },
      required: ['answer'],
      additionalProperties: false,
    }),
    prompt: 'What is 2 + 3? Reply in JSON.',
    maxOutputTokens: 40,
    ...GREEDY,
  });
  assert.equal(typeof res2.object.answer, 'number');
  assert.ok(Number.isInteger(res2.object.answer) && res2.object.answer >= 0 && res2.object.answer <= 100);
});

test('tool calls: a required tool is called with valid input, its result fed back', async () => {
  const calls: unknown[] = [];
  const res = await generateText({
    model: ai.languageModel(),
    prompt: 'What is the weather in Paris?',
    tools: {
      get_weather: tool({
        description: 'Current weather in a city',
        inputSchema: z.object({ city: z.string() }),
        execute: async (input) => {
          calls.push(input);
          return { city: input.city, forecast: 'sunny', celsius: 21 };
        },
      }),
    },
    toolChoice: 'required',
    stopWhen: stepCountIs(2),
    maxOutputTokens: 60,
    ...GREEDY,
  });
  assert.equal(calls.length >= 1, true, 'execute ran');
  assert.equal(typeof (calls[0] as { city: unknown }).city, 'string');
  const first = res.steps[0];
  assert.equal(first.finishReason, 'tool-calls');
  assert.equal(first.toolCalls[0].toolName, 'get_weather');
  assert.deepEqual(first.toolResults[0].output, { ...(calls[0] as object), forecast: 'sunny', celsius: 21 });
  // The second step saw the tool result in its prompt: more input tokens than the first.
  assert.equal(res.steps.length, 2);
  assert.ok(res.steps[1].usage.inputTokens! > first.usage.inputTokens!);
});

test('tool calls stream as tool-call parts', async () => {
  const res = streamText({
    model: ai.languageModel(),
    prompt: 'What is the weather in Rome?',
    tools: { get_weather: tool({ inputSchema: z.object({ city: z.string() }) }) },
    toolChoice: { type: 'tool', toolName: 'get_weather' },
    maxOutputTokens: 60,
    ...GREEDY,
  });
  const types: string[] = [];
  for await (const part of res.fullStream) {
    types.push(part.type);
  }
  assert.ok(types.includes('tool-call'), types.join(','));
  const [call] = await res.toolCalls;
  assert.equal(call.toolName, 'get_weather');
  assert.equal(typeof (call.input as { city: unknown }).city, 'string');
  assert.equal(await res.finishReason, 'tool-calls');
});

test('errors: files are VISION_FAILED, bad options INVALID_OPTION, a disposed model NOT_INITIALIZED', async () => {
  const isCode = (code: LocalLLMErrorCode) => (e: unknown) => e instanceof LocalLLMError && e.code === code;
  await assert.rejects(
    generateText({
      model: ai.languageModel(),
      messages: [
        { role: 'user', content: [{ type: 'file', data: new Uint8Array([1, 2, 3]), mediaType: 'image/png' }] },
      ],
      maxRetries: 0,
    }),
    isCode(LocalLLMErrorCode.VISION_FAILED),
  );
  await assert.rejects(
    generateText({ model: ai.languageModel(), prompt: 'Hi', topK: -3, maxRetries: 0 }),
    isCode(LocalLLMErrorCode.INVALID_OPTION),
  );
  const other = await LocalLLM.create({ model: MODEL, contextSize: 256, threads: 1, warmup: false });
  const model = other.languageModel();
  other.dispose();
  await assert.rejects(generateText({ model, prompt: 'Hi', maxRetries: 0 }), isCode(LocalLLMErrorCode.NOT_INITIALIZED));
  const streamed = streamText({ model, prompt: 'Hi', maxRetries: 0, onError: () => {} });
  await assert.rejects(
    (async () => {
      for await (const _ of streamed.textStream);
      await streamed.text;
    })(),
  );
});

test('embed and embedMany through ai.embeddingModel() give the embeddings API vectors', async () => {
  const emb = await LocalLLM.create({ model: MODEL, contextSize: 512, threads: 2, embeddings: true });
  try {
    const model: EmbeddingModelV3 = emb.embeddingModel();
    assert.equal(model.modelId, 'SmolLM2-135M-Instruct.Q4_1');
    const texts = ['The cat sat on the mat.', 'A kitten rested on a rug.', 'Stock prices fell sharply today.'];
    const direct = await emb.embeddings.create({ input: texts });
    const one = await embed({ model, value: texts[0] });
    assert.deepEqual(one.embedding, direct.data[0].embedding);
    assert.ok(one.embedding.length > 0);
    const many = await embedMany({ model, values: texts });
    assert.deepEqual(
      many.embeddings,
      direct.data.map((d) => d.embedding),
    );
    assert.equal(many.usage.tokens, direct.usage.prompt_tokens);
    // An aborted call rejects; an instance without embeddings is EMBEDDING_FAILED.
    await assert.rejects(
      embed({ model, value: texts[0], abortSignal: AbortSignal.abort(), maxRetries: 0 }),
      (e: Error) => e.name === 'AbortError',
    );
    await assert.rejects(
      embed({ model: ai.embeddingModel(), value: 'x', maxRetries: 0 }),
      (e: unknown) => e instanceof LocalLLMError && e.code === LocalLLMErrorCode.EMBEDDING_FAILED,
    );
  } finally {
    emb.dispose();
  }
});
