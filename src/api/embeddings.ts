import { addDisposeSymbol } from './bindings';
import type { InferenceContext } from './context';
import { LocalLLMError, LocalLLMErrorCode, disposedError } from './errors';
import type { EmbeddingPoolingType, EmbeddingRequest, EmbeddingResponse } from './types';

/**
 * A context dedicated to sentence embeddings (local-llm-rn's `EmbeddingContext`): the mean of
 * the last hidden states of a text's tokens, L2-normalized. Calls are async here (sync in
 * local-llm-rn) because they run on a worker thread.
 */
export class EmbeddingContext {
  private context: InferenceContext | null;
  private readonly dimensionValue: number;

  /** @internal Use {@link Model.createEmbeddingContext}. */
  constructor(context: InferenceContext, dimension: number, poolingType: EmbeddingPoolingType = 'mean') {
    if (poolingType !== 'mean') {
      context.dispose();
      throw new LocalLLMError(
        LocalLLMErrorCode.EMBEDDING_FAILED,
        `pooling type '${poolingType}' is not supported: this engine pools by mean`,
      );
    }
    this.context = context;
    this.dimensionValue = dimension;
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
    const context = this.ensureContext();
    return Float32Array.from(await context.embed(text, options));
  }

  /** The embeddings of `texts`, in order (one forward pass each). */
  async embedBatch(texts: string[], options: { signal?: AbortSignal } = {}): Promise<Float32Array[]> {
    const out: Float32Array[] = [];
    for (const text of texts) {
      out.push(await this.embed(text, options));
    }
    return out;
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
    const context = this.context();
    let tokens = 0;
    const data: EmbeddingResponse['data'] = [];
    for (const [index, text] of inputs.entries()) {
      tokens += this.countTokens(text);
      const embedding = await context.embed(text, { signal: params.signal });
      data.push({
        object: 'embedding',
        index,
        embedding: base64 ? toBase64(float32Bytes(embedding)) : Array.from(embedding),
      });
    }
    return {
      object: 'list',
      model: params.model ?? this.modelName,
      data,
      usage: { prompt_tokens: tokens, total_tokens: tokens },
    };
  }
}
