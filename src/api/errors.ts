import type { LlmError_Tags } from '../generated/local_llm_ffi';

/** Error codes: local-llm-rn's `LocalLLMErrorCode` values plus INVALID_OPTION (an addition). */
export enum LocalLLMErrorCode {
  MODEL_LOAD_FAILED = 'MODEL_LOAD_FAILED',
  MODEL_TOO_LARGE = 'MODEL_TOO_LARGE',
  CONTEXT_CREATE_FAILED = 'CONTEXT_CREATE_FAILED',
  CONTEXT_EXHAUSTED = 'CONTEXT_EXHAUSTED',
  INFERENCE_FAILED = 'INFERENCE_FAILED',
  STREAM_FAILED = 'STREAM_FAILED',
  DOWNLOAD_FAILED = 'DOWNLOAD_FAILED',
  DOWNLOAD_INTEGRITY_MISMATCH = 'DOWNLOAD_INTEGRITY_MISMATCH',
  VISION_FAILED = 'VISION_FAILED',
  VISION_FETCH_FAILED = 'VISION_FETCH_FAILED',
  EMBEDDING_FAILED = 'EMBEDDING_FAILED',
  NOT_INITIALIZED = 'NOT_INITIALIZED',
  INVALID_PATH = 'INVALID_PATH',
  CACHE_CORRUPT = 'CACHE_CORRUPT',
  QUANTIZE_FAILED = 'QUANTIZE_FAILED',
  INSUFFICIENT_MEMORY = 'INSUFFICIENT_MEMORY',
  /** Addition: an option is out of range or of the wrong type (the message names it). */
  INVALID_OPTION = 'INVALID_OPTION',
}

/** An error with a {@link LocalLLMErrorCode}. */
export class LocalLLMError extends Error {
  readonly code: LocalLLMErrorCode;

  constructor(code: LocalLLMErrorCode, message: string, options?: { cause?: unknown }) {
    super(message);
    this.name = 'LocalLLMError';
    this.code = code;
    if (options && 'cause' in options) {
      (this as { cause?: unknown }).cause = options.cause;
    }
  }
}

/**
 * The code of each variant of the native error enum (Rust `LlmError`), keyed by the generated
 * tag type: adding, removing or renaming a Rust variant fails `tsc` here.
 */
const VARIANT_CODES: Record<LlmError_Tags, LocalLLMErrorCode> = {
  ModelLoadFailed: LocalLLMErrorCode.MODEL_LOAD_FAILED,
  ContextCreateFailed: LocalLLMErrorCode.CONTEXT_CREATE_FAILED,
  ContextExhausted: LocalLLMErrorCode.CONTEXT_EXHAUSTED,
  InferenceFailed: LocalLLMErrorCode.INFERENCE_FAILED,
  StreamFailed: LocalLLMErrorCode.STREAM_FAILED,
  EmbeddingFailed: LocalLLMErrorCode.EMBEDDING_FAILED,
  NotInitialized: LocalLLMErrorCode.NOT_INITIALIZED,
  InvalidOption: LocalLLMErrorCode.INVALID_OPTION,
  QuantizeFailed: LocalLLMErrorCode.QUANTIZE_FAILED,
  InvalidPath: LocalLLMErrorCode.INVALID_PATH,
  CacheCorrupt: LocalLLMErrorCode.CACHE_CORRUPT,
  InsufficientMemory: LocalLLMErrorCode.INSUFFICIENT_MEMORY,
  DownloadFailed: LocalLLMErrorCode.DOWNLOAD_FAILED,
  DownloadIntegrityMismatch: LocalLLMErrorCode.DOWNLOAD_INTEGRITY_MISMATCH,
};

/**
 * Turn an error thrown by the generated bindings into a {@link LocalLLMError}; `fallback` is the
 * code of anything else (an internal error of the bindings). AbortErrors pass through.
 */
export function toLocalLLMError(e: unknown, fallback: LocalLLMErrorCode): Error {
  if (e instanceof LocalLLMError || isAbortError(e)) {
    return e as Error;
  }
  const err = e as { tag?: unknown; inner?: { message?: unknown }; message?: unknown } | null;
  const tag = typeof err?.tag === 'string' ? err.tag : undefined;
  const code =
    tag !== undefined && Object.prototype.hasOwnProperty.call(VARIANT_CODES, tag)
      ? VARIANT_CODES[tag as LlmError_Tags]
      : undefined;
  if (code !== undefined) {
    const message = typeof err?.inner?.message === 'string' ? err.inner.message : String(err?.message);
    return new LocalLLMError(code, message, { cause: e });
  }
  return new LocalLLMError(fallback, e instanceof Error ? e.message : String(e), { cause: e });
}

/** Call `f`, translating its errors with {@link toLocalLLMError}. */
export function wrapSync<T>(fallback: LocalLLMErrorCode, f: () => T): T {
  try {
    return f();
  } catch (e) {
    throw toLocalLLMError(e, fallback);
  }
}

/** Await `f()`, translating its errors with {@link toLocalLLMError}. */
export async function wrapAsync<T>(fallback: LocalLLMErrorCode, f: () => Promise<T>): Promise<T> {
  try {
    return await f();
  } catch (e) {
    throw toLocalLLMError(e, fallback);
  }
}

/** Whether `e` is an abort (a DOMException-style error named `AbortError`). */
export function isAbortError(e: unknown): boolean {
  return typeof e === 'object' && e !== null && (e as { name?: unknown }).name === 'AbortError';
}

/** The error a call rejects with when its `AbortSignal` fires. */
export function abortError(signal?: AbortSignal): Error {
  const reason = signal?.reason;
  if (isAbortError(reason)) {
    return reason as Error;
  }
  const e = new Error(reason !== undefined ? String(reason) : 'The operation was aborted');
  e.name = 'AbortError';
  return e;
}

/**
 * Reject with an AbortError as soon as `signal` fires, else settle as `p`; `onLate` receives
 * the value `p` resolves with after the abort (to release it).
 */
export function abortable<T>(p: Promise<T>, signal: AbortSignal | undefined, onLate: (value: T) => void): Promise<T> {
  if (signal === undefined) {
    return p;
  }
  return new Promise<T>((resolve, reject) => {
    const onAbort = () => reject(abortError(signal));
    if (signal.aborted) {
      onAbort();
    } else {
      signal.addEventListener('abort', onAbort, { once: true });
    }
    p.then(
      (value) => {
        signal.removeEventListener('abort', onAbort);
        if (signal.aborted) {
          onLate(value);
          reject(abortError(signal));
        } else {
          resolve(value);
        }
      },
      (e: unknown) => {
        signal.removeEventListener('abort', onAbort);
        reject(signal.aborted ? abortError(signal) : e);
      },
    );
  });
}

/** The error for an object used after `dispose()`. */
export function disposedError(what: string): LocalLLMError {
  return new LocalLLMError(LocalLLMErrorCode.NOT_INITIALIZED, `The ${what} has been disposed`);
}
