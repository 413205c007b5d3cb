import { addDisposeSymbol } from './bindings';
import type { InferenceContext } from './context';
import { LocalLLMError, LocalLLMErrorCode, disposedError } from './errors';
import { invalidOption } from './options';
import type {
  EmbeddingNormalize,
  EmbeddingPoolingType,
  EmbeddingRequest,
  EmbeddingResponse,
  RerankOptions,
  RerankResult,
} from './types';

/**
 * A context dedicated to sentence embeddings (local-llm-rn's `EmbeddingContext`): a text's last
 * hidden states pooled (as the model's file says unless `poolingType` is given: mean, CLS or
 * last token) and normalised (unit length unless `normalize` says otherwise). Encoder models
 * (BERT, nomic-bert) and decoder models both embed. Calls are async here (sync in local-llm-rn)
 * because they run on a worker thread.
 */
export class EmbeddingContext {
  private context: InferenceContext | null;
  private readonly dimensionValue: number;
  private readonly pooling: EmbeddingPoolingType | undefined;
  private readonly normalize: EmbeddingNormalize;

  /** @internal Use {@link Model.createEmbeddingContext}. */
  constructor(
    context: InferenceContext,
    dimension: number,
    poolingType?: EmbeddingPoolingType,
    normalize: EmbeddingNormalize = 2,
  ) {
    const poolings: ReadonlyArray<string> = ['mean', 'cls', 'last', 'rank'];
    if (poolingType !== undefined && !poolings.includes(poolingType)) {
      context.dispose();
      throw invalidOption('poolingType', poolingType, `one of ${poolings.join(', ')}`);
    }
    if (!Number.isInteger(normalize) || normalize < -1) {
      context.dispose();
      throw invalidOption('normalize', normalize, 'an integer of at least -1');
    }
    this.context = context;
    this.dimensionValue = dimension;
    this.pooling = poolingType;
    this.normalize = normalize;
  }

  /** Length of every embedding vector (the model's hidden size). */
  get dimension(): number {
    return this.dimensionValue;
  }

  private ensureContext(): InferenceContext {
    if (this.context === null) {
      throw disposedError('embedding context');
    }
    return this.context;
  }

  /** The embedding of `text`; `signal` stops the native evaluation (rejecting with an AbortError). */
  async embed(text: string, options: { signal?: AbortSignal } = {}): Promise<Float32Array> {
    const [vector] = await this.embedBatch([text], options);
    return vector;
  }

  /** The embeddings of `texts`, in order (several texts per forward pass). */
  async embedBatch(texts: string[], options: { signal?: AbortSignal } = {}): Promise<Float32Array[]> {
    if (!Array.isArray(texts) || texts.some((t) => typeof t !== 'string')) {
      throw new LocalLLMError(LocalLLMErrorCode.EMBEDDING_FAILED, '`texts` must be an array of strings');
    }
    if (texts.length === 0) {
      return [];
    }
    const context = this.ensureContext();
    return context.embedMany(texts, { pooling: this.pooling, normalize: this.normalize, signal: options.signal });
  }

  /**
   * Addition (llama.rn's `rerank`): `documents` ranked by relevance to `query` with a reranker
   * model (one with a classification head, e.g. bge-reranker), highest score first.
   */
  async rerank(query: string, documents: string[], options: RerankOptions = {}): Promise<RerankResult[]> {
    return this.ensureContext().rerank(query, documents, options);
  }

  /** Release the context. */
  dispose(): void {
    this.context?.dispose();
    this.context = null;
  }
}

addDisposeSymbol(EmbeddingContext);

const BASE64 = 'ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/';

/** Standard base64 (with padding) of `bytes`; Hermes has no Buffer. */
/* eslint-disable no-bitwise -- base64 regroups the bits of every 3 bytes into 4 characters */
export function toBase64(bytes: Uint8Array): string {
  let out = '';
  for (let i = 0; i < bytes.length; i += 3) {
    const n = (bytes[i] << 16) | ((bytes[i + 1] ?? 0) << 8) | (bytes[i + 2] ?? 0);
    out += BASE64[(n >> 18) & 63] + BASE64[(n >> 12) & 63];
    out += i + 1 < bytes.length ? BASE64[(n >> 6) & 63] : '=';
    out += i + 2 < bytes.length ? BASE64[n & 63] : '=';
  }
  return out;
}
/* eslint-enable no-bitwise */

/** Little-endian bytes of `v` (the layout OpenAI's base64 embeddings use). */
function float32Bytes(v: Float32Array): Uint8Array {
  const bytes = new Uint8Array(v.length * 4);
  const view = new DataView(bytes.buffer);
  v.forEach((x, i) => view.setFloat32(4 * i, x, true));
  return bytes;
}

/** OpenAI-style `embeddings.create`, as `ai.embeddings` of a {@link LocalLLM}. */
export class Embeddings {
  /** @internal */
  constructor(
    private readonly countTokens: (text: string) => number,
    private readonly context: () => EmbeddingContext,
    private readonly modelName: string,
  ) {}

  /** Embed one text or a list of texts; `usage` counts their tokens. */
  async create(params: EmbeddingRequest): Promise<EmbeddingResponse> {
    const inputs = typeof params.input === 'string' ? [params.input] : params.input;
    if (!Array.isArray(inputs) || inputs.some((t) => typeof t !== 'string')) {
      throw new LocalLLMError(LocalLLMErrorCode.EMBEDDING_FAILED, '`input` must be a string or an array of strings');
    }
    const base64 = params.encoding_format === 'base64';
    const tokens = inputs.reduce((sum, text) => sum + this.countTokens(text), 0);
    const vectors = await this.context().embedBatch(inputs, { signal: params.signal });
    const data: EmbeddingResponse['data'] = vectors.map((embedding, index) => ({
      object: 'embedding',
      index,
      embedding: base64 ? toBase64(float32Bytes(embedding)) : Array.from(embedding),
    }));
    return {
      object: 'list',
      model: params.model ?? this.modelName,
      data,
      usage: { prompt_tokens: tokens, total_tokens: tokens },
    };
  }
}
