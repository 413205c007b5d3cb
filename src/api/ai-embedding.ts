// The Vercel AI SDK embedding and reranking models (`ai.embeddingModel()`,
// `ai.rerankingModel()`): `embed`, `embedMany` and `rerank` of the `ai` package on this
// package's embeddings. Typed structurally after `@ai-sdk/provider`'s `EmbeddingModelV3` and
// `RerankingModelV3` (the package is not a dependency; tests check the assignability).
import type { EmbeddingContext, Embeddings } from './embeddings';

/** The options of an AI SDK embedding call (`EmbeddingModelV3CallOptions`). */
export interface EmbeddingCallOptions {
  /** The texts to embed. */
  values: string[];
  /** Stops between texts (the call rejects with an AbortError). */
  abortSignal?: AbortSignal;
  /** Provider options: none are read. */
  providerOptions?: Readonly<Record<string, Readonly<Record<string, unknown>>>>;
  /** HTTP headers: meaningless on-device, ignored. */
  headers?: Readonly<Record<string, string | undefined>>;
}

/** The result of an AI SDK embedding call (`EmbeddingModelV3Result`). */
export interface EmbeddingCallResult {
  embeddings: number[][];
  usage: { tokens: number };
  warnings: never[];
}

/**
 * A Vercel AI SDK embedding model (specification v3) on a {@link LocalLLM}'s embeddings (create
 * the instance with `embeddings: true`): pass it as `model` to `embed` or `embedMany`. Texts are
 * embedded several per forward pass on the instance's embedding context (pooled and normalised
 * as `ai.embeddings.create`).
 */
export class LocalLLMEmbeddingModel {
  /** The AI SDK specification this model implements. */
  readonly specificationVersion = 'v3' as const;
  /** The provider's name. */
  readonly provider = 'local-llm';
  /** The model's id (default: the model file's name). */
  readonly modelId: string;
  /** Texts per call: no limit (`embedMany` sends them all in one call). */
  readonly maxEmbeddingsPerCall = Infinity;
  /** One embedding context: calls run one after the other, so the SDK need not split them. */
  readonly supportsParallelCalls = false;

  constructor(
    private readonly embeddings: () => Embeddings,
    modelId: string,
  ) {
    this.modelId = modelId;
  }

  /** Embed `values` (the SDK calls this; apps call `embed` / `embedMany`). */
  async doEmbed(options: EmbeddingCallOptions): Promise<EmbeddingCallResult> {
    const res = await this.embeddings().create({ input: options.values, signal: options.abortSignal });
    return {
      embeddings: res.data.map((d) => d.embedding as number[]),
      usage: { tokens: res.usage.prompt_tokens },
      warnings: [],
    };
  }
}

/** The options of an AI SDK reranking call (`RerankingModelV3CallOptions`). */
export interface RerankingCallOptions {
  /** The documents: texts, or JSON objects (ranked by their JSON text). */
  documents: { type: 'text'; values: string[] } | { type: 'object'; values: Array<Record<string, unknown>> };
  /** The query to rank them against. */
  query: string;
  /** Keep only the `topN` most relevant. */
  topN?: number;
  /** Stops the native evaluation. */
  abortSignal?: AbortSignal;
  /** Provider-specific options (none are read). */
  providerOptions?: Record<string, Record<string, unknown>>;
  /** HTTP headers (not used by a local model). */
  headers?: Record<string, string | undefined>;
}

/** The result of an AI SDK reranking call. */
export interface RerankingCallResult {
  /** Documents by descending relevance, as their index in the call's list and their score. */
  ranking: Array<{ index: number; relevanceScore: number }>;
  warnings: never[];
}

/**
 * A Vercel AI SDK reranking model (specification v3) on a {@link LocalLLM}'s embedding context
 * (create the instance with `embeddings: true` and a reranker model, e.g. bge-reranker): pass it
 * as `model` to the SDK's `rerank`.
 */
export class LocalLLMRerankingModel {
  /** The AI SDK specification this model implements. */
  readonly specificationVersion = 'v3' as const;
  /** The provider's name. */
  readonly provider = 'local-llm';
  /** The model's id (default: the model file's name). */
  readonly modelId: string;

  constructor(
    private readonly context: () => EmbeddingContext,
    modelId: string,
  ) {
    this.modelId = modelId;
  }

  /** Rank `options.documents` (the SDK calls this; apps call `rerank`). */
  async doRerank(options: RerankingCallOptions): Promise<RerankingCallResult> {
    const texts =
      options.documents.type === 'text'
        ? options.documents.values
        : options.documents.values.map((v) => JSON.stringify(v));
    const ranked = await this.context().rerank(options.query, texts, {
      topN: options.topN,
      signal: options.abortSignal,
    });
    return { ranking: ranked.map((r) => ({ index: r.index, relevanceScore: r.score })), warnings: [] };
  }
}
