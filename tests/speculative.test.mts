// Speculative decoding through the JS API on the real engine (run by scripts/checks/js-test.sh):
// prompt lookup (`promptLookup`) and a draft model (`draftModel` / `draftNMax`, here the same
// SmolLM2 file) give the same greedy answer as plain decoding, `_timing` reports the drafted
// and accepted tokens, and a draft with another vocabulary (Gemma 3) is INVALID_OPTION.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import * as fs from 'node:fs';
import * as path from 'node:path';
import * as native from './generated/napi/local_llm_ffi.ts';
import {
  setBindings,
  LocalLLM,
  Model,
  LocalLLMErrorCode,
  type ChatCompletionRequest,
  type ChatCompletionResponse,
} from '../src/api/index.ts';
import { code, defaultModel, within } from './helpers.mts';

native.default.initialize();
setBindings(native as any);

const MODEL = defaultModel();
const GEMMA = path.join(path.dirname(MODEL), 'gemma-3-270m-q4_k_m.gguf');

const PARAGRAPH =
  'The old lighthouse stood at the edge of the cliff for more than a hundred years. Every night ' +
  'its keeper climbed the narrow stairs, cleaned the great lens and lit the lamp, so that the ' +
  'fishing boats could find their way home through the fog and the storms of the northern sea.';

const REWRITE: ChatCompletionRequest & { stream?: false } = {
  messages: [
    { role: 'user', content: `Fix the punctuation of this paragraph and write it out in full:\n\n${PARAGRAPH}` },
  ],
  max_tokens: 80,
  temperature: 0,
  // The draft model proposes its greedy tokens without the target's penalties: with the default
  // repeat penalty (1.1) fewer would be accepted; this file measures drafting, not penalties.
  repeat_penalty: 1,
};

let plain: LocalLLM;
let reference: ChatCompletionResponse;

before(async () => {
  plain = await LocalLLM.create({ model: MODEL, contextSize: 1024, threads: 2 });
  reference = await within(plain.chat.completions.create(REWRITE), 60_000, 'plain completion');
});

after(() => {
  plain?.dispose();
});

test('plain decoding reports no drafts', () => {
  assert.equal(reference._timing?.draftTokens, undefined);
});

test('promptLookup: the same answer, with accepted drafts in _timing', async () => {
  const ai = await LocalLLM.create({ model: MODEL, contextSize: 1024, threads: 2, promptLookup: 3 });
  try {
    const res = await within(ai.chat.completions.create(REWRITE), 60_000, 'lookup completion');
    assert.equal(res.choices[0].message.content, reference.choices[0].message.content);
    assert.deepEqual(res.usage, reference.usage);
    const t = res._timing!;
    assert.ok(t.draftTokens! > 0 && t.draftAcceptedTokens! > 0, JSON.stringify(t));
    assert.ok(t.draftAcceptedTokens! <= t.draftTokens!);
    assert.equal(t.draftAcceptanceRate, t.draftAcceptedTokens! / t.draftTokens!);
    // Streaming goes through the same engine path.
    let streamed = '';
    for await (const chunk of await ai.chat.completions.create({ ...REWRITE, stream: true })) {
      streamed += chunk.choices[0]?.delta?.content ?? '';
    }
    assert.equal(streamed, reference.choices[0].message.content);
  } finally {
    ai.dispose();
  }
});

test('draftModel and draftNMax: the same answer', async () => {
  const ai = await LocalLLM.create({ model: MODEL, contextSize: 1024, threads: 2, draftModel: MODEL, draftNMax: 4 });
  try {
    const res = await within(ai.chat.completions.create(REWRITE), 60_000, 'draft completion');
    assert.equal(res.choices[0].message.content, reference.choices[0].message.content);
    const t = res._timing!;
    // An identical draft model is (almost) always right.
    assert.ok(t.draftTokens! > 0 && t.draftAcceptanceRate! > 0.9, JSON.stringify(t));
  } finally {
    ai.dispose();
  }
});

test('a draft model with another vocabulary is INVALID_OPTION; bad draft options too', async (t) => {
  const model = await Model.load(MODEL);
  try {
    assert.throws(() => model.createContext({ promptLookup: 17 }), code(LocalLLMErrorCode.INVALID_OPTION));
    assert.throws(
      () => model.createContext({ promptLookup: 2, draftNMax: 65 }),
      code(LocalLLMErrorCode.INVALID_OPTION),
    );
    if (!fs.existsSync(GEMMA)) {
      t.skip(`${GEMMA} is missing (scripts/setup/fetch-models.sh gemma3)`);
      return;
    }
    const gemma = await Model.load(GEMMA);
    try {
      assert.throws(() => model.createContext({ draftModel: gemma }), code(LocalLLMErrorCode.INVALID_OPTION));
    } finally {
      gemma.dispose();
    }
  } finally {
    model.dispose();
  }
});
