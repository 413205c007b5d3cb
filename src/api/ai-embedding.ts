// The Vercel AI SDK embedding model (`ai.embeddingModel()`): `embed` and `embedMany` of the `ai`
// package on this package's embeddings. Typed structurally after `@ai-sdk/provider`'s
// `EmbeddingModelV3` (the package is not a dependency; tests check the assignability).
import type { Embeddings } from './embeddings';

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
 * embedded one after the other on the instance's embedding context (mean-pooled,
 * L2-normalized, as `ai.embeddings.create`).
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
