// local-llm-rn's `createNativeDownloader()`: a DownloadAdapter over this package's own native
// downloader (Rust: resumable, verified; the same one ModelManager uses without an adapter).
import { destroy, getBindings } from './bindings';
import { LocalLLMError, LocalLLMErrorCode, wrapAsync, wrapSync } from './errors';
import type { DownloadAdapter } from './model-manager';

/** The folder of `path` (`/` separators: the paths of Android, iOS and Node on POSIX). */
function parent(path: string): string {
  const cut = path.replace(/\/+$/, '').lastIndexOf('/');
  return cut <= 0 ? '/' : path.slice(0, cut);
}

/**
 * A {@link DownloadAdapter} that downloads natively, for apps that pass local-llm-rn's
 * `createNativeDownloader()` to `ModelManager`. Here a `ModelManager` without an adapter already
 * downloads natively, so this adds nothing but compatibility. It writes where the cache keeps
 * the URL's file, so `destPath` must be `manager.modelPath(url)` (what `ModelManager` passes);
 * another path is INVALID_PATH. Resumes partial files; `cancel(url)` stops a download.
 */
export function createNativeDownloader(): DownloadAdapter {
  const running = new Map<string, { cancel(): void }>();
  return {
    supportsResume: true,
    async download(url, destPath, onProgress) {
      const b = getBindings();
      const cacheDir = parent(parent(destPath));
      if (wrapSync(LocalLLMErrorCode.INVALID_PATH, () => b.modelCachePath(url, cacheDir)) !== destPath) {
        throw new LocalLLMError(
          LocalLLMErrorCode.INVALID_PATH,
          `createNativeDownloader writes into a ModelManager cache: ${destPath} is not where it keeps ${url}`,
        );
      }
      const params = b.DownloadParams.create({ cacheDir });
      const task = wrapSync(LocalLLMErrorCode.DOWNLOAD_FAILED, () => b.startDownload(url, params));
      running.set(url, task);
      try {
        for (;;) {
          const p = await wrapAsync(LocalLLMErrorCode.DOWNLOAD_FAILED, () => task.next());
          onProgress?.(Number(p.downloaded), Number(p.total), p.percent);
          if (p.done) {
            return;
          }
        }
      } finally {
        running.delete(url);
        destroy(task);
      }
    },
    cancel(url) {
      running.get(url)?.cancel();
    },
  };
}
