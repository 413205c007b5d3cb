import type { LlmModelLike as LlmModel } from '../generated/local_llm_ffi';
import { appDefaults } from './defaults';
import { addDisposeSymbol, destroy, getBindings } from './bindings';
import { InferenceContext } from './context';
import { EmbeddingContext } from './embeddings';
import { defined, toMemoryEstimate, toModelFileInfo, toModelInfo, toNativeMessages } from './convert';
import { LocalLLMErrorCode, abortError, abortable, disposedError, wrapAsync, wrapSync } from './errors';
import { localPath } from './paths';
import {
  CACHE_TYPE_OPTIONS,
  CONTEXT_TEXT_OPTIONS,
  ESTIMATE_OPTION_RULES,
  MODEL_OPTION_RULES,
  checkOptions,
  checkTextOptions,
  contextOptionRules,
  tokenIds,
} from './options';
import type {
  ChatMessage,
  ContextOptions,
  EmbeddingContextOptions,
  KvCacheTypes,
  MemoryEstimate,
  ModelFileInfo,
  ModelInfo,
  ModelOptions,
} from './types';

export { localPath };

/** A loaded GGUF model: tokenizer, chat template and weights, shared by its contexts. */
export class Model {
  private handle: LlmModel | null;
  private infoCache: ModelInfo | null = null;

  private constructor(handle: LlmModel) {
    this.handle = handle;
  }

  /**
   * Addition: describe a GGUF file from its header without loading it (architecture, whether
   * this engine runs it, parameters, quantization, context length, vocabulary, chat template,
   * memory for `contextSize` tokens, default the model's up to 4096; metadata), on a worker
   * thread. A missing file rejects with INVALID_PATH, a file that is not GGUF (or is corrupt)
   * with MODEL_LOAD_FAILED.
   */
  static async inspect(path: string, options: { contextSize?: number } = {}): Promise<ModelFileInfo> {
    const file = localPath(path);
    checkOptions(options, ESTIMATE_OPTION_RULES);
    const { inspectModel } = getBindings();
    return toModelFileInfo(
      await wrapAsync(LocalLLMErrorCode.MODEL_LOAD_FAILED, () => inspectModel(file, options.contextSize ?? 0)),
    );
  }

  /**
   * Load a GGUF model on a worker thread. A missing file rejects with INVALID_PATH, a file that
   * is not a usable model with MODEL_LOAD_FAILED. `signal` rejects the call with an AbortError at
   * once; the native load is skipped if it has not started, else its model is released.
   */
  static async load(path: string, options: ModelOptions = {}): Promise<Model> {
    const file = localPath(path);
    checkOptions(options, MODEL_OPTION_RULES);
    const { signal } = options;
    if (signal?.aborted) {
      throw abortError(signal);
    }
    const { loadModel, LoadOptions, CancelToken } = getBindings();
    // Unset options take the engine's defaults (the generated record's).
    const loadOptions = LoadOptions.create(
      defined({
        useMmap: options.useMmap,
        cpuOnly: options.compute === undefined ? undefined : options.compute === 'cpu',
      }),
    );
    const token = new CancelToken();
    const onAbort = () => token.cancel();
    signal?.addEventListener('abort', onAbort);
    const release = (handle: LlmModel) => {
      handle.dispose();
      destroy(handle);
    };
    try {
      const loading = wrapAsync(LocalLLMErrorCode.MODEL_LOAD_FAILED, () => loadModel(file, loadOptions, token));
      return new Model(await abortable(loading, signal, release));
    } finally {
      signal?.removeEventListener('abort', onAbort);
    }
  }

  private ensureHandle(): LlmModel {
    if (this.handle === null) {
      throw disposedError('model');
    }
    return this.handle;
  }

  /** File size in bytes. */
  get sizeBytes(): number {
    return this.info.sizeBytes;
  }

  /** Embedding (hidden state) size. */
  get embeddingDimension(): number {
    return this.info.embeddingLength;
  }

  /** Addition: the model's metadata, size, parameters, context length and chat template. */
  get info(): ModelInfo {
    const handle = this.ensureHandle();
    if (this.infoCache === null) {
      this.infoCache = toModelInfo(wrapSync(LocalLLMErrorCode.MODEL_LOAD_FAILED, () => handle.info()));
    }
    return this.infoCache;
  }

  /**
   * Addition: memory for the weights plus the KV cache of `contextSize` tokens (0: the default
   * context), stored as `cache` says (default f16; a type the model's heads cannot be cached as
   * throws INVALID_OPTION).
   */
  estimateMemory(contextSize = 0, cache: KvCacheTypes = {}): MemoryEstimate {
    const handle = this.ensureHandle();
    checkOptions({ contextSize }, ESTIMATE_OPTION_RULES);
    checkTextOptions(cache, CACHE_TYPE_OPTIONS);
    return toMemoryEstimate(
      wrapSync(LocalLLMErrorCode.MODEL_LOAD_FAILED, () =>
        handle.estimateMemory(contextSize, cache.kvCacheTypeK, cache.kvCacheTypeV),
      ),
    );
  }

  /** Create an inference context (its own KV cache). */
  createContext(options: ContextOptions & { draftModel?: Model } = {}): InferenceContext {
    const handle = this.ensureHandle();
    checkOptions(options, contextOptionRules());
    checkTextOptions(options, CONTEXT_TEXT_OPTIONS);
    const bindings = getBindings();
    // Unset options take this API's defaults (appDefaults), else the engine's (the generated record's).
    const d = appDefaults();
    const native = bindings.ContextOptions.create(
      defined({
        nCtx: options.contextSize ?? d.contextSize,
        nBatch: options.batchSize,
        threads: options.threads ?? d.threads,
        maxSequences: options.maxSequences,
        cacheTypeK: options.kvCacheTypeK,
        cacheTypeV: options.kvCacheTypeV,
        flashAttn: options.flashAttention,
      }),
    );
    const draft = options.draftModel?.ensureHandle();
    const speculative = draft !== undefined || (options.promptLookup ?? 0) > 0;
    const ctx = wrapSync(LocalLLMErrorCode.CONTEXT_CREATE_FAILED, () =>
      speculative
        ? handle.createSpeculativeContext(
            native,
            bindings.SpeculativeOptions.create(
              defined({ draftNMax: options.draftNMax ?? d.draftNMax, lookupNgramMax: options.promptLookup }),
            ),
            draft,
          )
        : handle.createContext(native),
    );
    return new InferenceContext(ctx);
  }

  /**
   * A context for sentence embeddings (pooled as the model's file says unless `poolingType` is
   * given, L2-normalized unless `normalize` says otherwise) and, with a reranker, `rerank`.
   */
  createEmbeddingContext(options: EmbeddingContextOptions = {}): EmbeddingContext {
    const context = this.createContext(options);
    return new EmbeddingContext(context, this.embeddingDimension, options.poolingType, options.normalize);
  }

  /**
   * Token ids of `text`. By default BOS is added as the model asks and special-token text is
   * parsed (like `local-llm tokenize`).
   */
  tokenize(text: string, options: { addSpecial?: boolean; parseSpecial?: boolean } = {}): Int32Array {
    const handle = this.ensureHandle();
    const ids = wrapSync(LocalLLMErrorCode.INFERENCE_FAILED, () =>
      handle.tokenize(text, options.addSpecial ?? true, options.parseSpecial ?? true),
    );
    return Int32Array.from(ids);
  }

  /**
   * Text of `tokens` (control tokens are not rendered). An id that is not an integer from 0 to
   * 2^32-1 is INVALID_OPTION; one outside the vocabulary, INFERENCE_FAILED (from the engine).
   */
  detokenize(tokens: Int32Array | number[]): string {
    const handle = this.ensureHandle();
    const ids = tokenIds(tokens);
    return wrapSync(LocalLLMErrorCode.INFERENCE_FAILED, () => handle.detokenize(ids, false));
  }

  /** Render `messages` with the model's chat template (adding the assistant prompt by default). */
  applyChatTemplate(messages: ChatMessage[], addAssistant = true): string {
    const handle = this.ensureHandle();
    return wrapSync(LocalLLMErrorCode.INFERENCE_FAILED, () =>
      handle.applyChatTemplate(toNativeMessages(messages), addAssistant),
    );
  }

  /**
   * @internal The messages of `messages` to keep so the prompt has at most `available` tokens
   * (`contextOverflow`): all of them when they fit or `trim` is undefined, else the strategy's
   * system messages and the longest run of newest messages that fits. Runs off the JS thread.
   */
  async fitChat(
    messages: ChatMessage[],
    trim: 'truncate_oldest' | 'sliding_window' | undefined,
    available: number,
  ): Promise<{ messages: ChatMessage[]; promptTokens: number }> {
    const handle = this.ensureHandle();
    const { ChatTrim } = getBindings();
    const native =
      trim === undefined ? undefined : trim === 'truncate_oldest' ? ChatTrim.TruncateOldest : ChatTrim.SlidingWindow;
    const budget = Math.min(Math.max(0, Math.floor(available)), 2 ** 32 - 1);
    const fit = await wrapAsync(LocalLLMErrorCode.INFERENCE_FAILED, () =>
      handle.fitChat(toNativeMessages(messages), native, budget),
    );
    return { messages: fit.kept.map((i) => messages[i]), promptTokens: fit.promptTokens };
  }

  /** Release the model (contexts keep the weights alive until they are disposed). */
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

addDisposeSymbol(Model);
