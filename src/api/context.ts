import type { CancelTokenLike, LlmContextLike as LlmContext } from '../generated/local_llm_ffi';
import { addDisposeSymbol, destroy, getBindings } from './bindings';
import { toLogprobs, toMetrics, toResult } from './convert';
import {
  LocalLLMError,
  LocalLLMErrorCode,
  abortError,
  disposedError,
  isAbortError,
  wrapAsync,
  wrapSync,
} from './errors';
import { benchmarkOptionRules, checkOptions, invalidOption, REAL_RULE, checkNumber } from './options';
import { batchOptions, toParams, withProgressStop } from './params';
import type { InfillPrompt, PromptSource } from './params';
import { PausedStreams } from './paused-streams';
import { Turns } from './turns';
import type { Turn } from './turns';
import { localPath } from './paths';
import type {
  BatchResult,
  BenchmarkOptions,
  BenchmarkResult,
  ChatCompletionTokenLogprob,
  EmbeddingNormalize,
  EmbeddingPoolingType,
  GenerateOptions,
  GenerationResult,
  InferenceMetrics,
  RerankOptions,
  RerankResult,
  SessionLoadResult,
} from './types';

/**
 * A part of a streamed generation: new text and the log-probabilities of new tokens; or, when
 * `reasoningFormat` returns reasoning apart, a piece of the reasoning block (`text` is then '').
 */
export interface StreamPart {
  text: string;
  logprobs: ChatCompletionTokenLogprob[];
  reasoning?: string;
}

/** The error of a stream cut short by another request on its context while it was paused. */
function preemptedError(): LocalLLMError {
  return new LocalLLMError(
    LocalLLMErrorCode.STREAM_FAILED,
    'the stream was cancelled: another request started on its context while the stream was paused ' +
      '(generations on one context run one at a time; finish or break out of a stream first)',
  );
}

/**
 * An inference context: worker threads and `maxSequences` sequences (1 by default), each a KV
 * cache for one model. Every generation (`generate`, `stream`, batches, chat completions, with
 * or without tools, grammars, log-probabilities or a draft model) takes a free sequence, or
 * waits for one (first come, first served in the order of the calls; a stream when it is first
 * read), and all running ones advance together, one forward
 * pass per step (a `contextShift` shifts the request's own sequence); each answer equals the one
 * it gets alone (greedy: token for token). A sequence's cache keeps its previous prompt, so a
 * follow-up sharing its prefix skips re-evaluating it. The other calls (clear, embed, warmup,
 * benchmark, sessions) need the whole context and run once the generations before them are done.
 *
 * A stream advances only while it is read. A call that needs the whole context, made while a
 * stream is paused at a piece its consumer has not asked past, cancels that stream, which then
 * rejects with STREAM_FAILED if read again; a generation cancels paused streams only when they
 * hold every sequence (the oldest ones). So a stream abandoned without `return()` frees its
 * sequence for the next request, and reading a second stream inside the `for await` of a first
 * one works (with one sequence, the first one then fails).
 */
export class InferenceContext {
  private handle: LlmContext | null;
  private lastResult: GenerationResult | null = null;
  /** This context's streams paused at a `yield` (see {@link PausedStreams}). */
  private readonly paused = new PausedStreams();
  /** The order of its generations (see {@link Turns}). */
  private readonly turns = new Turns();

  /** @internal Use {@link Model.createContext}. */
  constructor(handle: LlmContext) {
    this.handle = handle;
  }

  private ensureHandle(): LlmContext {
    if (this.handle === null) {
      throw disposedError('context');
    }
    return this.handle;
  }

  /** Context size in tokens. */
  get contextSize(): number {
    return this.ensureHandle().contextSize();
  }

  /**
   * Generate the answer to `prompt` (raw text) and return its text. As in local-llm-rn, an abort
   * of `signal` during the generation resolves with the text so far; a signal already aborted
   * rejects with an AbortError.
   */
  async generate(prompt: string, options: GenerateOptions = {}): Promise<string> {
    return (await this.run(prompt, options)).result.text;
  }

  /**
   * Addition: fill in the middle between `prefix` and `suffix` and return the middle
   * (node-llama-cpp's `generateInfillCompletion`); see {@link InfillPrompt}. A model without
   * fill-in-the-middle tokens rejects with INVALID_OPTION.
   */
  async infill(
    prefix: string,
    suffix: string,
    options: GenerateOptions & Omit<InfillPrompt, 'prefix' | 'suffix'> = {},
  ): Promise<string> {
    const { prompt, extra, spm, ...generate } = options;
    return (await this.generateResult({ prefix, suffix, prompt, extra, spm }, generate)).text;
  }

  /**
   * Addition: generate and return text, tokens, finish reason and timings. `signal` stops native
   * decoding; the promise then rejects with an AbortError once the worker has stopped.
   */
  async generateResult(prompt: PromptSource, options: GenerateOptions = {}): Promise<GenerationResult> {
    return this.generateResultInTurn(prompt, options, this.turns.take());
  }

  /**
   * @internal A place in this context's order of generations, for a caller that prepares
   * asynchronously between its call and {@link generateResultInTurn} (chat completions): its
   * generation then reaches the scheduler in the order the calls were made (see {@link Turns}).
   */
  takeTurn(): Turn {
    return this.turns.take();
  }

  /** @internal {@link generateResult} in a turn from {@link takeTurn}. */
  async generateResultInTurn(prompt: PromptSource, options: GenerateOptions, turn: Turn): Promise<GenerationResult> {
    const { result, aborted } = await this.run(prompt, options, turn);
    if (aborted) {
      throw abortError(options.signal);
    }
    return result;
  }

  /**
   * One generation; `aborted` when `options.signal` stopped it (the result then holds what was
   * generated before). Rejects when the signal was aborted before the generation began.
   */
  private async run(
    prompt: PromptSource,
    options: GenerateOptions,
    turn: Turn = this.turns.take(),
  ): Promise<{ result: GenerationResult; aborted: boolean }> {
    if (options.onPromptProgress !== undefined) {
      turn.done(); // a stream starts when it is read
      return this.runStreamed(prompt, withProgressStop(options));
    }
    const { CancelToken } = getBindings();
    const token = new CancelToken();
    const { signal } = options;
    const onAbort = () => token.cancel();
    try {
      const handle = this.ensureHandle();
      if (signal?.aborted) {
        throw abortError(signal);
      }
      signal?.addEventListener('abort', onAbort);
      const params = wrapSync(LocalLLMErrorCode.INFERENCE_FAILED, () => toParams(prompt, options));
      await turn.ready;
      this.paused.preemptFor(handle.maxSequences());
      // The native call queues the request before it returns: the next turn may go.
      const pending = wrapAsync(LocalLLMErrorCode.INFERENCE_FAILED, () => handle.generate(params, token));
      turn.done();
      const native = await pending.catch((e: unknown) => {
        // A request aborted before it got a sequence ends with an error, not a result.
        throw signal?.aborted ? abortError(signal) : e;
      });
      const result = toResult(native, options.nProbs !== undefined);
      this.lastResult = result;
      return { result, aborted: signal?.aborted === true || result.finishReason === 'cancelled' };
    } finally {
      turn.done();
      signal?.removeEventListener('abort', onAbort);
      destroy(token);
    }
  }

  /** {@link run} through a stream, whose chunks carry the prompt progress. */
  private async runStreamed(
    prompt: PromptSource,
    options: GenerateOptions,
  ): Promise<{ result: GenerationResult; aborted: boolean }> {
    let result = null as GenerationResult | null;
    try {
      const parts = this.streamParts(prompt, options, (r) => {
        result = r;
      });
      // The text is in the result; the parts only drive the stream.
      for (let next = await parts.next(); next.done !== true; next = await parts.next()) {
        // each part: one more piece
      }
    } catch (e) {
      if (!(options.signal?.aborted && isAbortError(e))) {
        throw e;
      }
    }
    if (result === null) {
      throw abortError(options.signal); // aborted before the generation began
    }
    return { result, aborted: options.signal?.aborted === true || result.finishReason === 'cancelled' };
  }

  /**
   * Generate the answers to `prompts` (raw text) together: up to the context's `maxSequences`
   * at a time (the others wait for a free sequence), one forward pass per token for all of
   * them. `options` applies to every prompt, or is one per prompt. Each answer equals what
   * {@link generate} gives its prompt alone (greedy: token for token).
   */
  async generateBatch(prompts: string[], options: GenerateOptions | GenerateOptions[] = {}): Promise<BatchResult[]> {
    const results = await this.generateBatchResults(prompts, options);
    return results.map((r, index) => ({
      index,
      text: r.text,
      finishReason: r.openAiFinishReason === 'length' ? 'length' : 'stop',
    }));
  }

  /**
   * Addition: {@link generateBatch} for any {@link PromptSource}, returning each
   * whole generation. An abort of any request's `signal` stops them all; the promise then
   * rejects with an AbortError.
   */
  async generateBatchResults(
    prompts: PromptSource[],
    options: GenerateOptions | GenerateOptions[] = {},
  ): Promise<GenerationResult[]> {
    return this.generateBatchResultsInTurn(prompts, options, this.turns.take());
  }

  /** @internal {@link generateBatchResults} in a turn from {@link takeTurn}. */
  async generateBatchResultsInTurn(
    prompts: PromptSource[],
    options: GenerateOptions | GenerateOptions[],
    turn: Turn,
  ): Promise<GenerationResult[]> {
    const { CancelToken } = getBindings();
    const token = new CancelToken();
    const onAbort = () => token.cancel();
    let signals: AbortSignal[] = [];
    try {
      const handle = this.ensureHandle();
      const list = batchOptions(prompts, options);
      signals = list.flatMap((o) => (o.signal === undefined ? [] : [o.signal]));
      const aborted = signals.find((s) => s.aborted);
      if (aborted !== undefined) {
        throw abortError(aborted);
      }
      signals.forEach((s) => s.addEventListener('abort', onAbort));
      const params = wrapSync(LocalLLMErrorCode.INFERENCE_FAILED, () =>
        prompts.map((prompt, i) => toParams(prompt, list[i])),
      );
      await turn.ready;
      this.paused.preemptFor(handle.maxSequences());
      // The native call queues the requests before it returns: the next turn may go.
      const pending = wrapAsync(LocalLLMErrorCode.INFERENCE_FAILED, () => handle.generateBatch(params, token));
      turn.done();
      const native = await pending.catch((e: unknown) => {
        // A request aborted before it got a sequence ends with an error, not a result.
        const abortedNow = signals.find((s) => s.aborted);
        throw abortedNow !== undefined ? abortError(abortedNow) : e;
      });
      const results = native.map((r, i) => toResult(r, list[i].nProbs !== undefined));
      this.lastResult = results[results.length - 1] ?? this.lastResult;
      const abortedNow = signals.find((s) => s.aborted);
      if (abortedNow !== undefined || results.some((r) => r.finishReason === 'cancelled')) {
        throw abortError(abortedNow);
      }
      return results;
    } finally {
      turn.done();
      signals.forEach((s) => s.removeEventListener('abort', onAbort));
      destroy(token);
    }
  }

  /**
   * Stream the answer to `prompt` (raw text) piece by piece. As in local-llm-rn, an abort of
   * `signal` during the generation ends the stream; a signal already aborted rejects with an
   * AbortError.
   */
  async *stream(prompt: string, options: GenerateOptions = {}): AsyncGenerator<string> {
    const o = withProgressStop(options);
    const { signal } = o;
    if (signal?.aborted) {
      throw abortError(signal);
    }
    try {
      yield* this.streamPieces(prompt, o);
    } catch (e) {
      if (!(signal?.aborted && isAbortError(e))) {
        throw e;
      }
    }
  }

  /**
   * Addition: stream pieces of text for any {@link PromptSource}; `onResult` receives the whole
   * generation when it ends (also after a `break`, a stop string or an abort). Native decoding
   * advances only while the generator is read: breaking out of `for await` or aborting stops it
   * with no token generated after the stop.
   */
  async *streamPieces(
    prompt: PromptSource,
    options: GenerateOptions = {},
    onResult?: (result: GenerationResult) => void,
  ): AsyncGenerator<string> {
    for await (const part of this.streamParts(prompt, options, onResult)) {
      if (part.text !== '') {
        yield part.text;
      }
    }
  }

  /**
   * Addition: like {@link streamPieces}, yielding each new piece of text together with the
   * log-probabilities of the tokens generated since the previous part (with `nProbs`; a token's
   * entry may come a part before its text, which can be held back, e.g. for a stop string).
   */
  async *streamParts(
    prompt: PromptSource,
    given: GenerateOptions = {},
    onResult?: (result: GenerationResult) => void,
  ): AsyncGenerator<StreamPart> {
    const handle = this.ensureHandle();
    const options = withProgressStop(given);
    const { signal } = options;
    if (signal?.aborted) {
      throw abortError(signal);
    }
    const params = wrapSync(LocalLLMErrorCode.STREAM_FAILED, () => toParams(prompt, options));
    this.paused.preemptFor(handle.maxSequences());
    const withLogprobs = options.nProbs !== undefined;
    const stream = wrapSync(LocalLLMErrorCode.STREAM_FAILED, () => handle.stream(params));
    const onAbort = () => stream.cancel();
    signal?.addEventListener('abort', onAbort);
    let preempted = false;
    const preempt = () => {
      preempted = true;
      stream.cancel();
    };
    let result: GenerationResult | null = null;
    try {
      for (;;) {
        const chunk = await wrapAsync(LocalLLMErrorCode.STREAM_FAILED, () => stream.next()).catch((e: unknown) => {
          // A stream aborted before it got a sequence ends with an error, not a result.
          throw signal?.aborted ? abortError(signal) : e;
        });
        if (chunk.promptProgress !== undefined) {
          // May abort `signal` (returning false), which cancels the stream.
          options.onPromptProgress?.(chunk.promptProgress.evaluated, chunk.promptProgress.total);
        }
        if (signal?.aborted) {
          break;
        }
        const logprobs = toLogprobs(chunk.logprobs);
        const parts: StreamPart[] = [
          ...chunk.reasoningPieces.map((reasoning) => ({ text: '', reasoning, logprobs: [] as typeof logprobs })),
          ...chunk.pieces.map((text) => ({ text, logprobs: [] as typeof logprobs })),
        ];
        if (parts.length > 0) {
          parts[0].logprobs = logprobs;
        } else if (logprobs.length > 0) {
          parts.push({ text: '', logprobs });
        }
        for (const part of parts) {
          this.paused.pause(preempt);
          try {
            yield part;
          } finally {
            this.paused.resume(preempt);
          }
          if (preempted) {
            throw preemptedError();
          }
        }
        if (chunk.done && chunk.result !== undefined) {
          result = toResult(chunk.result, withLogprobs);
          break;
        }
      }
      if (signal?.aborted) {
        throw abortError(signal);
      }
    } finally {
      signal?.removeEventListener('abort', onAbort);
      if (result === null) {
        // break, abort or an error: stop decoding and wait for the worker to end.
        try {
          result = toResult(await stream.finish(), withLogprobs);
        } catch {
          result = null;
        }
      }
      destroy(stream);
      if (result !== null) {
        this.lastResult = result;
        onResult?.(result);
      }
    }
  }

  /** Timings of the last generation on this context, `null` before the first. */
  getPerf(): InferenceMetrics | null {
    return this.lastResult?.timing ?? null;
  }

  /** Addition: the last generation on this context (text, tokens, finish reason, timings). */
  get lastGeneration(): GenerationResult | null {
    return this.lastResult;
  }

  /** Measure prompt processing and generation speed (async here; sync in local-llm-rn). */
  async benchmark(options: BenchmarkOptions = {}): Promise<BenchmarkResult> {
    const handle = this.ensureHandle();
    checkOptions(options, benchmarkOptionRules());
    this.paused.preemptAll();
    const r = await wrapAsync(LocalLLMErrorCode.INFERENCE_FAILED, () =>
      handle.benchmark({
        promptTokens: options.promptTokens ?? 64,
        generateTokens: options.generateTokens ?? 32,
        iterations: options.iterations ?? 1,
      }),
    );
    return {
      promptTokensPerSec: r.promptTokensPerSec,
      generatedTokensPerSec: r.generatedTokensPerSec,
      ttftMs: r.ttftMs,
      totalMs: r.totalMs,
      iterations: r.iterations,
      individual: r.individual.map(toMetrics),
    };
  }

  /** Evaluate one token so the first request runs at full speed (async here). */
  async warmup(): Promise<void> {
    const handle = this.ensureHandle();
    this.paused.preemptAll();
    await wrapAsync(LocalLLMErrorCode.INFERENCE_FAILED, () => handle.warmup());
  }

  /** Addition: empty the KV cache (waits for a running generation). */
  async clear(): Promise<void> {
    const handle = this.ensureHandle();
    this.paused.preemptAll();
    await wrapAsync(LocalLLMErrorCode.INFERENCE_FAILED, () => handle.clear());
  }

  /**
   * Addition (llama.rn's `applyLoraAdapters`): apply these LoRA adapters (GGUF files in
   * llama.cpp's LoRA format, for this model; `scaled` default 1) to every generation from now
   * on, replacing the set in use, without reloading the model. Waits for running generations;
   * a different set empties the KV cache. A missing file rejects with INVALID_PATH, a file that
   * is not a LoRA adapter for this model with MODEL_LOAD_FAILED (the set in use is kept).
   */
  async applyLoraAdapters(adapters: ReadonlyArray<{ path: string; scaled?: number }>): Promise<void> {
    const handle = this.ensureHandle();
    if (!Array.isArray(adapters)) {
      throw invalidOption('adapters', adapters, 'an array of { path, scaled? }');
    }
    const { LoraAdapterSpec } = getBindings();
    const specs = adapters.map((a, i) => {
      if (a === null || typeof a !== 'object' || typeof a.path !== 'string') {
        throw invalidOption(`adapters[${i}]`, a, 'an object { path, scaled? }');
      }
      const scale = a.scaled === undefined ? 1 : checkNumber(`adapters[${i}].scaled`, a.scaled, REAL_RULE);
      return LoraAdapterSpec.create({ path: localPath(a.path), scale });
    });
    this.paused.preemptAll();
    await wrapAsync(LocalLLMErrorCode.MODEL_LOAD_FAILED, () => handle.setLoraAdapters(specs));
  }

  /** Addition (llama.rn's `removeLoraAdapters`): stop applying LoRA adapters. */
  async removeLoraAdapters(): Promise<void> {
    await this.applyLoraAdapters([]);
  }

  /** Addition (llama.rn's `getLoadedLoraAdapters`): the LoRA adapters in use. */
  getLoadedLoraAdapters(): Array<{ path: string; scaled: number }> {
    return this.ensureHandle()
      .loraAdapters()
      .map((a) => ({ path: a.path, scaled: a.scale }));
  }

  /**
   * Addition: an embedding of `text`, pooled as the model says (mean unless its file says
   * otherwise) and L2-normalized; the KV cache is not touched. `signal` stops the native
   * evaluation; the call then rejects with an AbortError.
   */
  async embed(text: string, options: { signal?: AbortSignal } = {}): Promise<number[]> {
    const vector = await this.cancellable(options.signal, (handle, token) => handle.embed(text, token));
    return Array.from(vector);
  }

  /**
   * Addition: the embeddings of `texts`, several per forward pass (up to the batch size in
   * tokens), pooled by `pooling` (default: the model's own; 'rank' gives a reranker's scores)
   * and normalised by `normalize` (default 2: unit length; -1 none).
   */
  async embedMany(
    texts: string[],
    options: { pooling?: EmbeddingPoolingType; normalize?: EmbeddingNormalize; signal?: AbortSignal } = {},
  ): Promise<Float32Array[]> {
    const params = { pooling: options.pooling, normalize: options.normalize ?? 2 };
    const vectors = await this.cancellable(options.signal, (handle, token) => handle.embedMany(texts, params, token));
    return vectors.map((v) => Float32Array.from(v));
  }

  /**
   * Addition (llama.rn's `rerank`): the relevance of each of `documents` to `query` from a
   * reranker (a model with a classification head, e.g. bge-reranker), sorted by score, highest
   * first; `topN` keeps the best ones. A model that is not a reranker rejects with
   * INVALID_OPTION.
   */
  async rerank(query: string, documents: string[], options: RerankOptions = {}): Promise<RerankResult[]> {
    const scores = await this.cancellable(options.signal, (handle, token) => handle.rerank(query, documents, token));
    const ranked = scores
      .map((score, index) => ({ score, index, document: documents[index] }))
      .sort((a, b) => b.score - a.score);
    return options.topN === undefined ? ranked : ranked.slice(0, Math.max(0, options.topN));
  }

  /**
   * Run `work` on the native context with a cancel token that `signal` fires; an abort rejects
   * with an AbortError, an engine error with its code (EMBEDDING_FAILED unless the engine says
   * otherwise, e.g. INVALID_OPTION).
   */
  private async cancellable<T>(
    signal: AbortSignal | undefined,
    work: (handle: LlmContext, token: CancelTokenLike) => Promise<T>,
  ): Promise<T> {
    const handle = this.ensureHandle();
    if (signal?.aborted) {
      throw abortError(signal);
    }
    const { CancelToken } = getBindings();
    const token = new CancelToken();
    const onAbort = () => token.cancel();
    signal?.addEventListener('abort', onAbort);
    try {
      this.paused.preemptAll();
      return await wrapAsync(LocalLLMErrorCode.EMBEDDING_FAILED, () => work(handle, token));
    } catch (e) {
      throw signal?.aborted ? abortError(signal) : e;
    } finally {
      signal?.removeEventListener('abort', onAbort);
      destroy(token);
    }
  }

  /**
   * llama.rn's `saveSession`: write the cached tokens and their KV cache to `path` (a versioned,
   * checksummed file bound to this model); resolves to the number of tokens saved.
   */
  async saveSession(path: string): Promise<number> {
    const handle = this.ensureHandle();
    this.paused.preemptAll();
    return wrapAsync(LocalLLMErrorCode.INFERENCE_FAILED, () => handle.saveSession(path));
  }

  /**
   * llama.rn's `loadSession`: restore a state saved by {@link saveSession} with the same model; a
   * later prompt starting with the restored tokens does not evaluate them again. A file of another
   * model, or a corrupt or truncated one, rejects with CACHE_CORRUPT and leaves the context as it was.
   */
  async loadSession(path: string): Promise<SessionLoadResult> {
    const handle = this.ensureHandle();
    this.paused.preemptAll();
    const r = await wrapAsync(LocalLLMErrorCode.INFERENCE_FAILED, () => handle.loadSession(path));
    return { tokens_loaded: r.tokensLoaded, prompt: r.prompt };
  }

  /** Release the KV cache; a running generation is cancelled. */
  dispose(): void {
    const handle = this.handle;
    if (handle !== null) {
      this.handle = null;
      handle.dispose();
      destroy(handle);
    }
  }

  /** Whether {@link dispose} was called. */
  get disposed(): boolean {
    return this.handle === null;
  }
}

addDisposeSymbol(InferenceContext);
