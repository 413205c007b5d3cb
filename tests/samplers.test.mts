// The samplers beyond top-k/top-p/min-p/typical (issue 37), on the real engine with the default
// model (run by scripts/checks/js-test.sh): logit bias (llama.rn's pairs and OpenAI's object),
// ignoreEos, penaltyLastN, DRY, top-n-σ, XTC and Mirostat reach the engine from `generate` and
// from `chat.completions.create`, and bad values are INVALID_OPTION naming the option.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import * as native from './generated/napi/local_llm_ffi.ts';
import { setBindings, LocalLLM, LocalLLMError, LocalLLMErrorCode } from '../src/api/index.ts';
import type { GenerateOptions } from '../src/api/index.ts';
import { defaultModel } from './helpers.mts';

native.default.initialize();
setBindings(native as any);

let ai: LocalLLM;

before(async () => {
  ai = await LocalLLM.create({ model: defaultModel(), contextSize: 512, threads: 2 });
});

after(() => {
  ai?.dispose();
});

const PROMPT = 'The capital of France is';
// Pure greedy decoding: the API's default repeat penalty (1.1, local-llm-rn's) switched off.
const GREEDY: GenerateOptions = { temperature: 0, maxTokens: 12, repeatPenalty: 1 };

function invalid(name: string) {
  return (e: unknown) => {
    assert.ok(e instanceof LocalLLMError, `expected a LocalLLMError, got ${String(e)}`);
    assert.equal(e.code, LocalLLMErrorCode.INVALID_OPTION, e.message);
    assert.ok(e.message.includes(name), `'${name}' not named in: ${e.message}`);
    return true;
  };
}

test('logitBias bans a token in both shapes, on generate and on chat', async () => {
  const ctx = ai.context;
  const plain = await ctx.generateResult(PROMPT, GREEDY);
  const first = plain.tokens[0]!;
  for (const logitBias of [[[first, false]], { [first]: -Infinity }] as GenerateOptions['logitBias'][]) {
    const banned = await ctx.generateResult(PROMPT, { ...GREEDY, logitBias });
    assert.notEqual(banned.tokens[0], first, JSON.stringify(logitBias));
    assert.ok(!banned.tokens.includes(first), `${first} in ${banned.tokens}`);
  }
  // A large positive bias forces a token at every step.
  const forced = await ctx.generateResult(PROMPT, { ...GREEDY, maxTokens: 5, logitBias: [[first, 100]] });
  assert.deepEqual(forced.tokens, [first, first, first, first, first]);

  const messages = [{ role: 'user' as const, content: 'Name a colour.' }];
  const chat = await ai.chat.completions.create({ messages, temperature: 0, max_tokens: 8 });
  const answer = chat.choices[0]!.message.content ?? '';
  const answerFirst = ai.model.tokenize(answer, { addSpecial: false, parseSpecial: false })[0]!;
  const biased = await ai.chat.completions.create({
    messages,
    temperature: 0,
    max_tokens: 8,
    logit_bias: { [String(answerFirst)]: -100 },
  });
  assert.notEqual(biased.choices[0]!.message.content, answer);
});

test('ignoreEos generates up to maxTokens where the model would stop', async () => {
  const messages = [{ role: 'user' as const, content: 'Say only the word yes.' }];
  const short = await ai.context.generateResult({ messages }, { temperature: 0, maxTokens: 48 });
  assert.equal(short.finishReason, 'eog');
  assert.ok(short.completionTokens < 48);
  const long = await ai.context.generateResult({ messages }, { temperature: 0, maxTokens: 48, ignoreEos: true });
  assert.equal(long.completionTokens, 48);
  assert.equal(long.finishReason, 'max_tokens');
  const viaChat = await ai.chat.completions.create({ messages, temperature: 0, max_tokens: 48, ignore_eos: true });
  assert.equal(viaChat.usage.completion_tokens, 48);
});

test('DRY turns greedy decoding away from a repeating list', async () => {
  const prompt = 'apple, pear, plum, apple, pear, plum, apple, pear, plum, apple,';
  const plain = await ai.context.generate(prompt, { ...GREEDY, maxTokens: 10 });
  const dry = await ai.context.generate(prompt, { ...GREEDY, maxTokens: 10, dryMultiplier: 3, dryPenaltyLastN: -1 });
  assert.ok(plain.includes('pear'), plain);
  assert.notEqual(dry, plain);
  // The same through the OpenAI-style names, on an answer that copies the prompt.
  const messages = [{ role: 'user' as const, content: `Repeat exactly: ${prompt}` }];
  const a = await ai.chat.completions.create({ messages, temperature: 0, max_tokens: 10, repeat_penalty: 1 });
  const b = await ai.chat.completions.create({
    messages,
    temperature: 0,
    max_tokens: 10,
    repeat_penalty: 1,
    dry_multiplier: 3,
    dry_sequence_breakers: [],
    repeat_last_n: -1,
  });
  assert.notEqual(b.choices[0]!.message.content, a.choices[0]!.message.content);
});

test('Mirostat with a tiny target and top-n-σ with a tiny n decode greedily at temperature 1', async () => {
  const greedy = await ai.context.generate(PROMPT, { ...GREEDY, maxTokens: 16 });
  const hot: GenerateOptions = { temperature: 1, topK: 0, topP: 1, minP: 0, repeatPenalty: 1, maxTokens: 16 };
  for (const seed of [1, 2, 3]) {
    const miro = await ai.context.generate(PROMPT, { ...hot, seed, mirostat: 2, mirostatTau: 0.01 });
    assert.equal(miro, greedy, `mirostat 2, seed ${seed}`);
    const sigma = await ai.context.generate(PROMPT, { ...hot, seed, topNSigma: 1e-4 });
    assert.equal(sigma, greedy, `top-n-sigma, seed ${seed}`);
  }
  // Without them, temperature 1 leaves the greedy path for some seed.
  const free = await Promise.all([1, 2, 3].map((seed) => ai.context.generate(PROMPT, { ...hot, seed })));
  assert.ok(
    free.some((t) => t !== greedy),
    'temperature 1 alone decoded greedily for every seed',
  );
  // Seeded Mirostat 1, XTC and DRY are reproducible.
  const seeded: GenerateOptions = { ...hot, seed: 7, mirostat: 1, xtcProbability: 0.5, dryMultiplier: 0.8 };
  assert.equal(await ai.context.generate(PROMPT, seeded), await ai.context.generate(PROMPT, seeded));
});

test('bad sampler options are INVALID_OPTION naming the option', async () => {
  const ctx = ai.context;
  const cases: Array<[GenerateOptions, string]> = [
    [{ mirostat: 3 as any }, 'mirostat'],
    [{ mirostatTau: NaN }, 'mirostatTau'],
    [{ xtcProbability: 1.5 }, 'xtc_probability'],
    [{ dryMultiplier: -1 }, 'dry_multiplier'],
    [{ dryAllowedLength: -1 }, 'dryAllowedLength'],
    [{ dryPenaltyLastN: -2 }, 'dryPenaltyLastN'],
    [{ penaltyLastN: 1.5 }, 'penaltyLastN'],
    [{ drySequenceBreakers: 'x' as any }, 'drySequenceBreakers'],
    [{ logitBias: [[1, NaN]] }, 'logitBias'],
    [{ logitBias: [[-1, 1]] }, 'logitBias'],
    [{ logitBias: { abc: 1 } }, 'logitBias'],
    [{ logitBias: [[10_000_000, 1]] }, 'outside the vocabulary'],
    [{ ignoreEos: 'yes' as any }, 'ignoreEos'],
  ];
  for (const [options, name] of cases) {
    await assert.rejects(ctx.generate(PROMPT, { ...options, maxTokens: 1 }), invalid(name), JSON.stringify(options));
  }
  await assert.rejects(
    ai.chat.completions.create({
      messages: [{ role: 'user', content: 'Hi' }],
      max_tokens: 1,
      logit_bias: { '1': 'x' as any },
    }),
    invalid('logit_bias'),
  );
});
