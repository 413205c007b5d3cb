import { LocalLLMEmbeddingModel, LocalLLMRerankingModel } from './ai-embedding';
import { LocalLLMProvider } from './ai-provider';
import { addDisposeSymbol } from './bindings';
import { ChatCompletions } from './chat';
import type { InferenceContext } from './context';
import { appDefaults } from './defaults';
import { EmbeddingContext, Embeddings } from './embeddings';
import { LocalLLMError, LocalLLMErrorCode, abortError } from './errors';
import { setLogCallback } from './logging';
import { Model, localPath } from './model';
import { preloadModel, resolveModelFile, type PreloadOptions } from './model-source';
import { ModelPool } from './model-pool';
import { normalizeOverflow } from './overflow';
import { invalidOption } from './options';
import type {
  BenchmarkOptions,
  BenchmarkResult,
  ChatMessage,
  ContextOverflowStrategy,
  LocalLLMOptions,
  LogCallback,
  LogLevel,
  LoraOption,
  RerankOptions,
  RerankResult,
} from './types';

/**
 * On-device LLM inference: load a GGUF model and chat with it.
 * ```ts
 * const ai = await LocalLLM.create({ model: '/path/to/model.gguf' });
 * const res = await ai.chat.completions.create({ messages: [{ role: 'user', content: 'Hi' }] });
 * ai.dispose();
 * ```
 */
export class LocalLLM {
  private _model: Model | null = null;
  private _context: InferenceContext | null = null;
  private _chat: { completions: ChatCompletions } | null = null;
  private _embeddingContext: EmbeddingContext | null = null;
  private _embeddings: Embeddings | null = null;
  private _modelName = 'local';
  private initPromise: Promise<void> | null = null;
  private disposed = false;
  /** Whether `_model` came from {@link LocalLLM.pool} (then the pool disposes it, not this instance). */
  private pooledModel = false;
  private static sharedPool: ModelPool | null = null;

  constructor(private readonly options: LocalLLMOptions) {}

  /** Create and initialize an instance: load the model, create the context, warm up. */
  static async create(options: LocalLLMOptions): Promise<LocalLLM> {
    const instance = new LocalLLM(options);
    await instance.init();
    return instance;
  }

  /**
   * Download a model (and a vision projector) into the cache without loading it: its local path
   * (a local path is returned as it is). local-llm-rn's `LocalLLM.preload`.
   */
  static preload(model: string, options?: PreloadOptions): Promise<string> {
    return preloadModel(model, options);
  }

  /** Load the model (idempotent). */
  init(): Promise<void> {
    if (this.initPromise === null) {
      this.initPromise = this.doInit();
    }
    return this.initPromise;
  }

  private async doInit(): Promise<void> {
    const o = this.options;
    if (o.onLog) {
      setLogCallback(o.onLog, o.logLevel ?? 'info');
    }
    const file = await resolveModelFile(o);
    const model = await Model.load(file, {
      compute: o.compute,
      gpuLayers: o.gpuLayers,
      useMmap: o.useMmap,
      signal: o.signal,
    });
    if (this.disposed) {
      model.dispose();
      throw this.disposedDuringInit();
    }
    this._model = model;
    this._modelName =
      o.model
        .split('/')
        .pop()
        ?.replace(/\.gguf$/i, '') || 'local';
    try {
      this._context = await this.createContext(model);
      this._chat = { completions: this.completions(model, this._modelName) };
      if (o.embeddings) {
        const embedding = typeof o.embeddings === 'object' ? o.embeddings : {};
        this._embeddingContext = model.createEmbeddingContext({
          contextSize: o.contextSize,
          batchSize: o.batchSize,
          threads: o.threads,
          poolingType: embedding.poolingType,
          normalize: embedding.normalize,
        });
        // Count tokens as the engine embeds them: special-token text is plain text.
        const countTokens = (text: string) => model.tokenize(text, { parseSpecial: false }).length;
        this._embeddings = new Embeddings(countTokens, () => this.embeddingContext, this._modelName);
      }
      if (o.warmup !== false) {
        await this._context.warmup();
      }
      if (o.signal?.aborted) {
        throw abortError(o.signal);
      }
      if (this.disposed) {
        throw this.disposedDuringInit();
      }
    } catch (e) {
      this.dispose();
      throw e;
    }
    o.onProgress?.(100);
  }

  /**
   * A context on `model` with this instance's options, speculative decoding included (the draft
   * model is loaded for it; one with another vocabulary is INVALID_OPTION).
   */
  private async createContext(model: Model): Promise<InferenceContext> {
    const o = this.options;
    const draft =
      o.draftModel === undefined
        ? undefined
        : await Model.load(localPath(o.draftModel), { compute: o.compute, useMmap: o.useMmap, signal: o.signal });
    let context: InferenceContext;
    try {
      context = model.createContext({
        contextSize: o.contextSize,
        batchSize: o.batchSize,
        threads: o.threads,
        maxSequences: o.maxSequences,
        kvCacheTypeK: o.kvCacheTypeK,
        kvCacheTypeV: o.kvCacheTypeV,
        flashAttention: o.flashAttention,
        draftModel: draft,
        draftNMax: o.draftNMax,
        promptLookup: o.promptLookup,
      });
    } finally {
      draft?.dispose(); // the context keeps the draft's weights
    }
    if (o.lora !== undefined) {
      try {
        await context.applyLoraAdapters(loraAdapters(o.lora));
      } catch (e) {
        context.dispose();
        throw e;
      }
      if (typeof o.lora === 'object') {
        o.lora.onLoadProgress?.(1);
      }
    }
    return context;
  }

  private disposedDuringInit(): LocalLLMError {
    return new LocalLLMError(LocalLLMErrorCode.NOT_INITIALIZED, 'LocalLLM was disposed while it was being created');
  }

  private notInitialized(): LocalLLMError {
    return new LocalLLMError(
      LocalLLMErrorCode.NOT_INITIALIZED,
      this.disposed
        ? 'LocalLLM has been disposed'
        : 'LocalLLM not initialized. Call await init() first, or use await LocalLLM.create().',
    );
  }

  /** OpenAI-style chat completions. */
  get chat(): { completions: ChatCompletions } {
    if (this._chat === null || this.disposed) {
      throw this.notInitialized();
    }
    return this._chat;
  }

  /** OpenAI-style embeddings; needs `embeddings: true` in {@link LocalLLM.create}'s options. */
  get embeddings(): Embeddings {
    if (this._embeddings !== null && !this.disposed) {
      return this._embeddings;
    }
    if (this._model !== null && !this.disposed) {
      throw new LocalLLMError(
        LocalLLMErrorCode.EMBEDDING_FAILED,
        'Embeddings not enabled. Pass `embeddings: true` to LocalLLM.create().',
      );
    }
    throw this.notInitialized();
  }

  private get embeddingContext(): EmbeddingContext {
    if (this._embeddingContext === null || this.disposed) {
      throw this.notInitialized();
    }
    return this._embeddingContext;
  }

  /** Addition: the loaded model. */
  get model(): Model {
    if (this._model === null || this.disposed) {
      throw this.notInitialized();
    }
    return this._model;
  }

  /** Addition: the inference context behind `chat.completions`. */
  get context(): InferenceContext {
    if (this._context === null || this.disposed) {
      throw this.notInitialized();
    }
    return this._context;
  }

  /**
   * A Vercel AI SDK language model on this instance's model and context, for `generateText`,
   * `streamText`, `generateObject`... (`id`: its `modelId`, default the model file's name).
   */
  languageModel(id?: string): LocalLLMProvider {
    return new LocalLLMProvider(this.model, this.context, id ?? this._modelName);
  }

  /**
   * Addition: a Vercel AI SDK embedding model for `embed` / `embedMany` (needs `embeddings: true`
   * in {@link LocalLLM.create}'s options; `id`: its `modelId`, default the model file's name).
   */
  embeddingModel(id?: string): LocalLLMEmbeddingModel {
    return new LocalLLMEmbeddingModel(() => this.embeddings, id ?? this._modelName);
  }

  /**
   * Addition: a Vercel AI SDK reranking model for `rerank` (needs `embeddings: true` in
   * {@link LocalLLM.create}'s options and a reranker model; `id`: its `modelId`).
   */
  rerankingModel(id?: string): LocalLLMRerankingModel {
    return new LocalLLMRerankingModel(() => this.embeddingContext, id ?? this._modelName);
  }

  /**
   * Addition (llama.rn's `rerank`): `documents` ranked by relevance to `query` (needs
   * `embeddings: true` and a reranker model), highest score first.
   */
  async rerank(query: string, documents: string[], options: RerankOptions = {}): Promise<RerankResult[]> {
    return this.embeddingContext.rerank(query, documents, options);
  }

  /** The process-wide model pool that {@link switchModel} takes models from. */
  static get pool(): ModelPool {
    LocalLLM.sharedPool ??= new ModelPool();
    return LocalLLM.sharedPool;
  }

  /**
   * Continue on the model `LocalLLM.pool` holds as `alias` (load it there first): the context is
   * replaced by a new one on that model (running generations on the old one are cancelled) and
   * `chat.completions` answers with it. The model this instance loaded itself is disposed.
   * Speculative decoding carries over (`draftModel` is loaded again for the new context,
   * `draftNMax`, `promptLookup`). An alias not in the pool, or a draft model whose vocabulary
   * differs from the new model's, rejects with INVALID_OPTION and the old model stays in use.
   */
  async switchModel(alias: string): Promise<void> {
    const model = LocalLLM.pool.get(alias);
    if (this._model === null || this.disposed) {
      throw this.notInitialized();
    }
    if (model === undefined) {
      throw new LocalLLMError(
        LocalLLMErrorCode.INVALID_OPTION,
        `Model "${alias}" not found in pool. Load it first with LocalLLM.pool.load().`,
      );
    }
    const context = await this.createContext(model);
    if (this.disposed) {
      context.dispose();
      throw this.notInitialized();
    }
    this._context?.dispose();
    if (!this.pooledModel && this._model !== model) {
      this._model.dispose();
    }
    this._model = model;
    this.pooledModel = true;
    this._context = context;
    this._modelName = alias;
    this._chat = { completions: this.completions(model, alias) };
  }

  /** Chat completions on `model` with this instance's overflow strategy. */
  private completions(model: Model, name: string): ChatCompletions {
    const o = this.options;
    const overflow = {
      config: normalizeOverflow(o.contextOverflow ?? (appDefaults().contextOverflow as ContextOverflowStrategy)),
      fit: (messages: ChatMessage[], trim: 'truncate_oldest' | 'sliding_window' | undefined, available: number) =>
        model.fitChat(messages, trim, available),
    };
    return new ChatCompletions(() => this.context, name, overflow);
  }

  /** Measure speed on this instance's context. */
  async benchmark(options?: BenchmarkOptions): Promise<BenchmarkResult> {
    return this.context.benchmark(options);
  }

  /** Release the context and the model; running generations are cancelled. */
  dispose(): void {
    this.disposed = true;
    this._context?.dispose();
    this._embeddingContext?.dispose();
    if (!this.pooledModel) {
      this._model?.dispose();
    }
    this._context = null;
    this._embeddingContext = null;
    this._embeddings = null;
    this._model = null;
    this._chat = null;
  }

  /** Send engine logs to `callback` (`null`: back to the default sink). */
  static setLogCallback(callback: LogCallback | null, minLevel: LogLevel = 'info'): void {
    setLogCallback(callback, minLevel);
  }
}

addDisposeSymbol(LocalLLM);

/** {@link LocalLLMOptions.lora} as `applyLoraAdapters`' list (a bad shape is INVALID_OPTION). */
function loraAdapters(lora: LoraOption): Array<{ path: string; scaled?: number }> {
  if (typeof lora === 'string') {
    return [{ path: lora }];
  }
  if (lora === null || typeof lora !== 'object' || !Array.isArray(lora.adapters)) {
    throw invalidOption('lora', lora, 'a file path or { adapters: [{ filePath, scale? }] }');
  }
  return lora.adapters.map((a, i) => {
    if (a === null || typeof a !== 'object' || typeof a.filePath !== 'string') {
      throw invalidOption(`lora.adapters[${i}]`, a, 'an object { filePath, scale? }');
    }
    return { path: a.filePath, scaled: a.scale };
  });
}
