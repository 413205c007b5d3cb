import type { GenerateParams, LlmContextLike as LlmContext, PromptInput } from '../generated/local_llm_ffi';
import { addDisposeSymbol, destroy, getBindings } from './bindings';
import { defined, toMetrics, toNativeMessages, toResult } from './convert';
import {
  LocalLLMError,
  LocalLLMErrorCode,
  abortError,
  disposedError,
  wrapAsync,
  wrapSync,
} from './errors';
import type {
  BenchmarkOptions,
  BenchmarkResult,
  ChatMessage,
  GenerateOptions,
  GenerationResult,
  InferenceMetrics,
  ResponseFormat,
} from './types';

/** What a generation starts from: raw text, chat messages (templated natively) or token ids. */
export type PromptSource = string | { messages: ChatMessage[] } | { tokens: number[] | Int32Array };

function toPrompt(prompt: PromptSource): PromptInput {
  const { PromptInput } = getBindings();
  if (typeof prompt === 'string') {
    return new PromptInput.Text({ text: prompt });
  }
  if ('messages' in prompt) {
    return new PromptInput.Chat({ messages: toNativeMessages(prompt.messages) });
  }
  return new PromptInput.Tokens({ tokens: Array.from(prompt.tokens) });
}

/** Native generation parameters; options left unset take the engine's defaults (from the generated records). */
function toParams(prompt: PromptSource, o: GenerateOptions): GenerateParams {
  const { GenerateParams, SamplingParams } = getBindings();
  const sampling = SamplingParams.create(
    defined({
      temperature: o.temperature,
      topK: o.topK,
      typicalP: o.typicalP,
      topP: o.topP,
      minP: o.minP,
      repeatPenalty: o.repeatPenalty,
      frequencyPenalty: o.frequencyPenalty,
      presencePenalty: o.presencePenalty,
      seed: o.seed === undefined ? undefined : BigInt(Math.trunc(o.seed) >>> 0),
    }),
  );
  return GenerateParams.create({
    prompt: toPrompt(prompt),
    sampling,
    ...defined({
      maxTokens: o.maxTokens,
      stop: o.stop === undefined ? undefined : Array.isArray(o.stop) ? o.stop : [String(o.stop)],
      grammar: o.grammar,
      grammarRoot: o.grammarRoot,
      jsonSchema: jsonSchema(o.responseFormat),
    }),
  });
}

/** The JSON schema text a response format asks for (`json_object`: any object), or undefined. */
function jsonSchema(format: ResponseFormat | undefined): string | undefined {
  switch (format?.type) {
    case undefined:
    case 'text':
      return undefined;
    case 'json_object':
      return JSON.stringify({ type: 'object' });
    case 'json_schema': {
      const schema = format.json_schema?.schema;
      if (schema === null || typeof schema !== 'object') {
        throw new LocalLLMError(LocalLLMErrorCode.INFERENCE_FAILED, 'responseFormat json_schema needs json_schema.schema (an object)');
      }
      return JSON.stringify(schema);
    }
    default:
      throw new LocalLLMError(LocalLLMErrorCode.INFERENCE_FAILED, `unknown responseFormat type '${String((format as { type: unknown }).type)}'`);
  }
}

/**
 * An inference context: a KV cache plus worker threads for one model. Generations on one
 * context run one at a time (concurrent calls wait their turn natively); the cache keeps the
 * previous prompt so a follow-up sharing its prefix skips re-evaluating it.
 */
export class InferenceContext {
  private handle: LlmContext | null;
  private lastResult: GenerationResult | null = null;

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

  /** Generate the answer to `prompt` (raw text) and return its text. */
  async generate(prompt: string, options: GenerateOptions = {}): Promise<string> {
    return (await this.generateResult(prompt, options)).text;
  }

  /**
   * Addition: generate and return text, tokens, finish reason and timings. `signal` stops native
   * decoding; the promise then rejects with an AbortError once the worker has stopped.
   */
  async generateResult(prompt: PromptSource, options: GenerateOptions = {}): Promise<GenerationResult> {
    const handle = this.ensureHandle();
    const { signal } = options;
    if (signal?.aborted) {
      throw abortError(signal);
    }
    const { CancelToken } = getBindings();
    const token = new CancelToken();
    const onAbort = () => token.cancel();
    signal?.addEventListener('abort', onAbort);
    try {
      const params = wrapSync(LocalLLMErrorCode.INFERENCE_FAILED, () => toParams(prompt, options));
      const native = await wrapAsync(LocalLLMErrorCode.INFERENCE_FAILED, () => handle.generate(params, token));
      const result = toResult(native);
      this.lastResult = result;
      if (signal?.aborted || result.finishReason === 'cancelled') {
        throw abortError(signal);
      }
      return result;
    } finally {
      signal?.removeEventListener('abort', onAbort);
      destroy(token);
    }
  }

  /** Stream the answer to `prompt` (raw text) piece by piece. */
  stream(prompt: string, options: GenerateOptions = {}): AsyncGenerator<string> {
    return this.streamPieces(prompt, options);
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
    const handle = this.ensureHandle();
    const { signal } = options;
    if (signal?.aborted) {
      throw abortError(signal);
    }
    const params = wrapSync(LocalLLMErrorCode.STREAM_FAILED, () => toParams(prompt, options));
    const stream = wrapSync(LocalLLMErrorCode.STREAM_FAILED, () => handle.stream(params));
    const onAbort = () => stream.cancel();
    signal?.addEventListener('abort', onAbort);
    let result: GenerationResult | null = null;
    try {
      for (;;) {
        const chunk = await wrapAsync(LocalLLMErrorCode.STREAM_FAILED, () => stream.next());
        if (signal?.aborted) {
          break;
        }
        for (const piece of chunk.pieces) {
          yield piece;
        }
        if (chunk.done && chunk.result !== undefined) {
          result = toResult(chunk.result);
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
          result = toResult(await stream.finish());
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
    await wrapAsync(LocalLLMErrorCode.INFERENCE_FAILED, () => handle.warmup());
  }

  /** Addition: empty the KV cache (waits for a running generation). */
  async clear(): Promise<void> {
    const handle = this.ensureHandle();
    await wrapAsync(LocalLLMErrorCode.INFERENCE_FAILED, () => handle.clear());
  }

  /** Addition: a mean-pooled, L2-normalized embedding of `text` (clears the KV cache). */
  async embed(text: string): Promise<number[]> {
    const handle = this.ensureHandle();
    return Array.from(await wrapAsync(LocalLLMErrorCode.EMBEDDING_FAILED, () => handle.embed(text)));
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
