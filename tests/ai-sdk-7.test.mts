// The Vercel AI SDK provider with the `ai` package's current major (7, installed as `ai7`) next to
// tests/ai-sdk.test.mts's `ai` 6: the same provider type-checks with both and answers through
// v7's generateText, streamText, tools, embedMany and rerank on the real engine
// (LOCAL_LLM_MODEL = SmolLM2; a synthetic reranker from tools/synth/make_encoder.py).
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import { existsSync, mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { embedMany, generateText, rerank, stepCountIs, streamText, tool } from 'ai7';
import { z } from 'zod';
import * as native from './generated/napi/local_llm_ffi.ts';
import { setBindings, LocalLLM } from '../src/api/index.ts';
import { defaultModel } from './helpers.mts';

native.default.initialize();
setBindings(native as any);

let ai: LocalLLM;
before(async () => {
  ai = await LocalLLM.create({ model: defaultModel(), contextSize: 1024, threads: 2 });
});
after(() => ai?.dispose());

const PROMPT = 'Name three colours of the rainbow.';
const GREEDY = { temperature: 0, topK: 1 } as const;

test('ai 7: generateText and streamText give the chat API answer', async () => {
  const res = await generateText({ model: ai.languageModel(), prompt: PROMPT, maxOutputTokens: 16, ...GREEDY });
  const chat = await ai.chat.completions.create({
    messages: [{ role: 'user', content: PROMPT }],
    max_tokens: 16,
    temperature: 0,
    top_k: 1,
  });
  assert.equal(res.text, chat.choices[0].message.content);
  assert.equal(res.usage.outputTokens, chat.usage.completion_tokens);
  const streamed = streamText({ model: ai.languageModel(), prompt: PROMPT, maxOutputTokens: 16, ...GREEDY });
  let text = '';
  for await (const part of streamed.textStream) text += part;
  assert.equal(text, res.text);
});

test('ai 7: a forced tool call runs the tool and its id is unique', async () => {
  const calls: string[] = [];
  const res = await generateText({
    model: ai.languageModel(),
    prompt: 'What is the weather in Paris?',
    tools: {
      weather: tool({
        description: 'Current weather in a city',
        inputSchema: z.object({ city: z.string() }),
        execute: async ({ city }) => {
          calls.push(city);
          return `sunny in ${city}`;
        },
      }),
    },
    toolChoice: 'required',
    stopWhen: stepCountIs(1),
    maxOutputTokens: 48,
    ...GREEDY,
  });
  assert.equal(calls.length, 1);
  assert.equal(res.toolCalls.length, 1);
  assert.match(res.toolCalls[0].toolCallId, /^call_[0-9a-f]{24}$/);
});

test('ai 7: embedMany through ai.embeddingModel() gives the embeddings API vectors', async () => {
  const emb = await LocalLLM.create({ model: defaultModel(), contextSize: 512, threads: 2, embeddings: true });
  try {
    const texts = ['The cat sat on the mat.', 'Stock prices fell sharply today.'];
    const direct = await emb.embeddings.create({ input: texts });
    const many = await embedMany({ model: emb.embeddingModel(), values: texts });
    assert.deepEqual(
      many.embeddings,
      direct.data.map((d) => d.embedding),
    );
  } finally {
    emb.dispose();
  }
});

test('ai 7: rerank through ai.rerankingModel() gives the rerank API order and scores', async () => {
  const root = join(import.meta.dirname, '..');
  const venv = join(root, '.cache/venv/bin/python3');
  const path = join(mkdtempSync(join(tmpdir(), 'local-llm-rerank7-')), 'bert-rank.gguf');
  execFileSync(existsSync(venv) ? venv : 'python3', [join(root, 'tools/synth/make_encoder.py'), 'bert-rank', path]);
  const ranker = await LocalLLM.create({ model: path, threads: 2, embeddings: true });
  try {
    const query = 'what is the sea?';
    const documents = ['The sea was calm this morning.', 'A fisherman counted his nets.', 'Tell me a story.'];
    const direct = await ranker.rerank(query, documents);
    const res = await rerank({ model: ranker.rerankingModel(), query, documents, topN: 2 });
    assert.deepEqual(
      res.ranking.map((r) => [r.originalIndex, r.score, r.document]),
      direct.slice(0, 2).map((r) => [r.index, r.score, r.document]),
    );
  } finally {
    ranker.dispose();
  }
});
