// Types of embeddings (local-llm-rn's embedding context, OpenAI's `embeddings.create`) and
// reranking (llama.rn's `rerank`).
/**
 * How token states are pooled into one embedding (llama.cpp's `--pooling`): local-llm-rn's
 * 'mean', 'cls' and 'last'; 'rank' gives a reranker's score instead (its classification head).
 */
export type EmbeddingPoolingType = 'mean' | 'cls' | 'last' | 'rank';

/**
 * How embeddings are normalised (llama.cpp's `--embd-normalize`, llama.rn's `embd_normalize`):
 * -1 none, 0 max absolute scaled to the int16 range, 1 taxicab, 2 Euclidean (default), larger
 * numbers that p-norm.
 */
export type EmbeddingNormalize = number;

/** The request of `ai.embeddings.create` (OpenAI's shape). */
export interface EmbeddingRequest {
  input: string | string[];
  /** Echoed in the response (default: the model file's name). */
  model?: string;
  /** 'float' (default) or 'base64' of the little-endian float32 bytes. */
  encoding_format?: 'float' | 'base64';
  /** Addition: stop between inputs. */
  signal?: AbortSignal;
}

/** One embedding of an {@link EmbeddingResponse}. */
export interface EmbeddingData {
  object: 'embedding';
  index: number;
  embedding: number[] | string;
}

/** Token counts of an embedding request. */
export interface EmbeddingUsage {
  prompt_tokens: number;
  total_tokens: number;
}

/** The response of `ai.embeddings.create`. */
export interface EmbeddingResponse {
  object: 'list';
  model: string;
  data: EmbeddingData[];
  usage: EmbeddingUsage;
}

/** Options of `rerank` (llama.rn's shape, plus `topN` and `signal`). */
export interface RerankOptions {
  /** Return only the `topN` most relevant documents (default: all). */
  topN?: number;
  /** Stop between forward passes; the call then rejects with an AbortError. */
  signal?: AbortSignal;
}

/** One ranked document (llama.rn's `RerankResult`): sorted by `score`, highest first. */
export interface RerankResult {
  /** The reranker's relevance score (unnormalised: higher is more relevant). */
  score: number;
  /** The document's index in the list given. */
  index: number;
  /** The document. */
  document: string;
}
