import { ModelManager, isRemoteModel } from './model-manager';
import type { LocalLLMOptions } from './types';

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
