import { ModelManager, isRemoteModel } from './model-manager';
import type { LocalLLMOptions } from './types';

/** Options of {@link preloadModel} (local-llm-rn's `LocalLLM.preload`). */
export interface PreloadOptions {
  /** The download cache folder (default: the platform's, see `ModelManager`). */
  cacheDir?: string;
  /** A vision projector to download alongside the model (in parallel). */
  projector?: string;
  /** Download progress in percent (0-100), of whichever file reports. */
  onProgress?: (percent: number) => void;
  /** Cancels the downloads (rejects with an AbortError). */
  signal?: AbortSignal;
}

/** Paths that are local whatever follows (local-llm-rn's `isLocalPath`). */
function isLocalPath(path: string): boolean {
  return ['/', './', '../', 'file://', 'content://'].some((prefix) => path.startsWith(prefix));
}

/**
 * The local file of `options.model`: a path as it is; an http(s) URL or a
 * `user/repo[/branch]/file` shorthand downloaded into the cache first (with progress).
 */
export async function resolveModelFile(options: LocalLLMOptions): Promise<string> {
  const { model } = options;
  if (typeof model !== 'string' || isLocalPath(model) || !isRemoteModel(model)) {
    return model;
  }
  const manager = new ModelManager(options.cacheDir);
  return manager.downloadModel(model, {
    expectedSize: options.expectedSize,
    expectedSha256: options.expectedSha256,
    signal: options.signal,
    onProgress: (downloaded, total, percent) => {
      options.onDownloadProgress?.(downloaded, total, percent);
      options.onProgress?.(percent);
    },
  });
}

/**
 * Download `model` (and `options.projector`) into the cache without loading anything; the local
 * path of the model. Local paths are returned as they are.
 */
export async function preloadModel(model: string, options: PreloadOptions = {}): Promise<string> {
  const download = (m: string) =>
    resolveModelFile({
      model: m,
      cacheDir: options.cacheDir,
      signal: options.signal,
      onProgress: options.onProgress,
    });
  const [path] = await Promise.all([
    download(model),
    ...(options.projector === undefined ? [] : [download(options.projector)]),
  ]);
  return path;
}
