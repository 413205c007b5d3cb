// Errors of the Jest mock (see mock.js): LocalLLMError and its codes, as the real API's.
'use strict';

/** The codes of the real `LocalLLMErrorCode` (src/api/errors.ts; a test checks they agree). */
const LocalLLMErrorCode = Object.freeze(
  Object.fromEntries(
    [
      'MODEL_LOAD_FAILED',
      'MODEL_TOO_LARGE',
      'CONTEXT_CREATE_FAILED',
      'CONTEXT_EXHAUSTED',
      'INFERENCE_FAILED',
      'STREAM_FAILED',
      'DOWNLOAD_FAILED',
      'DOWNLOAD_INTEGRITY_MISMATCH',
      'VISION_FAILED',
      'VISION_FETCH_FAILED',
      'EMBEDDING_FAILED',
      'NOT_INITIALIZED',
      'INVALID_PATH',
      'CACHE_CORRUPT',
      'QUANTIZE_FAILED',
      'INSUFFICIENT_MEMORY',
      'INVALID_OPTION',
    ].map((code) => [code, code]),
  ),
);

/** An error with a {@link LocalLLMErrorCode}, as the real class. */
class LocalLLMError extends Error {
  constructor(code, message, options) {
    super(message);
    this.name = 'LocalLLMError';
    this.code = code;
    if (options && 'cause' in options) {
      this.cause = options.cause;
    }
  }
}

/**
 * The rejection of an aborted call: an Error named AbortError, made here (not the signal's
 * `reason`, which Node makes in another realm than Jest's sandbox: not `instanceof Error` there).
 */
function abortError() {
  const e = new Error('The operation was aborted');
  e.name = 'AbortError';
  return e;
}

/** The INVALID_OPTION error of a bad request option (the real API's message form). */
function invalidOption(name, value, expected) {
  return new LocalLLMError(
    LocalLLMErrorCode.INVALID_OPTION,
    `${name} must be ${expected}, got ${JSON.stringify(value)}`,
  );
}

module.exports = { LocalLLMError, LocalLLMErrorCode, abortError, invalidOption };
