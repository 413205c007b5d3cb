// Local model paths: `file://` URLs and plain paths (remote URLs are refused).
import { LocalLLMError, LocalLLMErrorCode } from './errors';

/** A file path from a `file://` URL or a plain path. */
export function localPath(path: string): string {
  if (typeof path !== 'string' || path.length === 0) {
    throw new LocalLLMError(LocalLLMErrorCode.INVALID_PATH, 'the model path is empty');
  }
  if (path.startsWith('file://')) {
    return decodeURIComponent(path.slice('file://'.length));
  }
  if (/^[a-z][a-z0-9+.-]*:\/\//i.test(path)) {
    throw new LocalLLMError(
      LocalLLMErrorCode.INVALID_PATH,
      `'${path}' is a URL: this package loads local GGUF files only (download the file first)`,
    );
  }
  return path;
}
