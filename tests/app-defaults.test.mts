// The TypeScript API's defaults and abort semantics are local-llm-rn 1.0.3's (issue 36;
// rust/ffi/src/profile.rs): sampling, context size, raw generation length, and `generate` /
// `stream` ending with the text so far when their signal aborts. The engine and the CLI keep
// llama.cpp's defaults, so the CLI given local-llm-rn's values as flags is the reference.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync } from 'node:child_process';
import * as native from './generated/napi/local_llm_ffi.ts';
import { setBindings, LocalLLM } from '../src/api/index.ts';
import { defaultModel } from './helpers.mts';

native.default.initialize();
setBindings(native as any);

const CLI = process.env.LOCAL_LLM_CLI ?? '';
let ai: LocalLLM;

before(async () => {
  assert.ok(CLI, 'LOCAL_LLM_CLI must be set (run scripts/checks/js-test.sh)');
  ai = await LocalLLM.create({ model: defaultModel(), threads: 2 });
});

after(() => {
  ai?.dispose();
});

test("a context without options has local-llm-rn's 512 tokens", () => {
  assert.equal(ai.context.contextSize, 512);
});

test("generation without sampling options samples as the CLI with local-llm-rn's values", async () => {
  const prompt = 'Once upon a time';
  const ours = await ai.context.generate(prompt, { seed: 7, maxTokens: 24 });
  const cli = execFileSync(
    CLI,
    // local-llm-rn's hilum defaults: temp 0.7, top-p 0.9, top-k 40, min-p off, repeat penalty
    // 1.1 over the last 64 tokens (llama.cpp's: 0.8, 0.95, 40, 0.05, 1.0).
    ['run', '-m', defaultModel(), '-p', prompt, '-n', '24', '--seed', '7', '-t', '2', '-c', '512']
      .concat(['--temp', '0.7', '--top-p', '0.9', '--top-k', '40', '--min-p', '0'])
      .concat(['--repeat-penalty', '1.1', '--repeat-last-n', '64']),
    { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] },
  ).replace(/\n$/, '');
  assert.equal(ours, cli);
  // And not as the CLI's own defaults (so the comparison can tell them apart).
  const llamaDefaults = execFileSync(
    CLI,
    ['run', '-m', defaultModel(), '-p', prompt, '-n', '24', '--seed', '7', '-t', '2', '-c', '512'],
    { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] },
  ).replace(/\n$/, '');
  assert.notEqual(ours, llamaDefaults);
});

test('a raw generation stops after 512 tokens by default', async () => {
  const ctx = ai.model.createContext({ contextSize: 2048, threads: 2 });
  try {
    const r = await ctx.generateResult('1, 2, 3, 4, 5,', { temperature: 0, repeatPenalty: 1, ignoreEos: true });
    assert.equal(r.timing.generatedTokens, 512, JSON.stringify(r.timing));
  } finally {
    ctx.dispose();
  }
});

test('generate and stream end with the text so far when their signal aborts (local-llm-rn)', async () => {
  const prompt = 'Once upon a time there was a dragon who';
  const opts = { temperature: 0, maxTokens: 200 };
  const full = await ai.context.generate(prompt, opts);
  const stop = new AbortController();
  let pieces = 0;
  let streamed = '';
  for await (const piece of ai.context.stream(prompt, { ...opts, signal: stop.signal })) {
    streamed += piece;
    if (++pieces === 5) {
      stop.abort();
    }
  }
  assert.ok(streamed.length > 0 && full.startsWith(streamed) && streamed.length < full.length, `${streamed} / ${full}`);

  const late = new AbortController();
  const pending = ai.context.generate(prompt, { ...opts, signal: late.signal });
  setTimeout(() => late.abort(), 300);
  const partial = await pending;
  assert.ok(full.startsWith(partial) && partial.length < full.length, `partial: ${partial}`);
  // The addition generateResult rejects instead, as chat completions do.
  const again = new AbortController();
  const result = ai.context.generateResult(prompt, { ...opts, signal: again.signal });
  setTimeout(() => again.abort(), 300);
  await assert.rejects(result, (e: Error) => e.name === 'AbortError');
  // A signal aborted before the call rejects.
  await assert.rejects(
    ai.context.generate(prompt, { signal: AbortSignal.abort() }),
    (e: Error) => e.name === 'AbortError',
  );
  const early = ai.context.stream(prompt, { signal: AbortSignal.abort() });
  await assert.rejects(early.next(), (e: Error) => e.name === 'AbortError');
});

test('onPromptProgress reports each prompt batch, and false stops the generation (local-llm-rn)', async () => {
  const ctx = ai.model.createContext({ contextSize: 1024, batchSize: 16, threads: 2 });
  try {
    const prompt = 'The history of the printing press begins in the fifteenth century, when '.repeat(6);
    const total = ai.model.tokenize(prompt).length;
    const seen: Array<[number, number]> = [];
    const text = await ctx.generate(prompt, {
      temperature: 0,
      maxTokens: 4,
      onPromptProgress: (processed, all) => {
        seen.push([processed, all]);
        return true;
      },
    });
    assert.ok(text.length > 0);
    // One report per batch of 16, rising to the whole prompt.
    assert.equal(seen.length, Math.ceil(total / 16), JSON.stringify(seen));
    assert.deepEqual(seen.at(-1), [total, total]);
    assert.ok(seen.every(([p, t], i) => t === total && (i === 0 || p > seen[i - 1][0])));
    // The same prompt again: its tokens come from the cache, only the last is evaluated.
    const again: number[] = [];
    await ctx.generate(prompt, { temperature: 0, maxTokens: 1, onPromptProgress: (_p, t) => void again.push(t) });
    assert.ok(again.length <= 1 && (again[0] ?? 0) < total, JSON.stringify(again));
    // false after the first batch: generate ends with no text, having evaluated one batch.
    await ctx.clear();
    let calls = 0;
    const stopped = await ctx.generate(prompt, { maxTokens: 8, onPromptProgress: () => ++calls < 1 });
    assert.equal(stopped, '');
    assert.equal(calls, 1);
    assert.equal(ctx.getPerf()?.promptTokens, 16);
    assert.equal(ctx.getPerf()?.generatedTokens, 0);
    // generateResult rejects as for an abort; a stream ends; bad values are INVALID_OPTION.
    await ctx.clear();
    await assert.rejects(
      ctx.generateResult(prompt, { maxTokens: 8, onPromptProgress: () => false }),
      (e: Error) => e.name === 'AbortError',
    );
    await ctx.clear();
    const pieces: string[] = [];
    for await (const piece of ctx.stream(prompt, { maxTokens: 8, onPromptProgress: () => false })) {
      pieces.push(piece);
    }
    assert.deepEqual(pieces, []);
    await assert.rejects(
      ctx.generate(prompt, { onPromptProgress: 5 as never }),
      (e: Error) => (e as { code?: string }).code === 'INVALID_OPTION',
    );
  } finally {
    ctx.dispose();
  }
});
