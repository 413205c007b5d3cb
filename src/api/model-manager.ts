import type { CacheEntry as NativeCacheEntry, DownloadParams } from '../generated/local_llm_ffi';
import { getBindings } from './bindings';
import {
  LocalLLMError,
  LocalLLMErrorCode,
  abortError,
  abortable,
  toLocalLLMError,
  wrapAsync,
  wrapSync,
} from './errors';

/** A cached model (local-llm-js-core's `CacheEntry`, with the file's SHA-256 added). */
export interface CacheEntry {
  /** The URL it was downloaded from (shorthands resolved). */
  url: string;
  /** The verified file. */
  path: string;
  /** Its size in bytes. */
  size: number;
  /** Its SHA-256 (lower-case hex). */
  sha256: string;
  /** ISO 8601 time of the download. */
  downloadedAt: string;
  /** ISO 8601 time of the last lookup. */
  lastUsedAt: string;
}

/** Download progress: bytes present, total size (0 while unknown), percent. */
export type DownloadProgressCallback = (downloaded: number, total: number, percent: number) => void;

/** Options of {@link ModelManager.downloadModel}. */
export interface DownloadOptions {
  onProgress?: DownloadProgressCallback;
  /** Expected file size in bytes; another size rejects with DOWNLOAD_INTEGRITY_MISMATCH. */
  expectedSize?: number;
  /**
   * Expected SHA-256 (hex); another hash rejects with DOWNLOAD_INTEGRITY_MISMATCH. Without one
   * the file is still checked to be a GGUF file: anything else (e.g. an HTML error page)
   * rejects the same way and is not cached.
   */
  expectedSha256?: string;
  /** Addition: cancel (the partial file stays, and the next call resumes it). */
  signal?: AbortSignal;
}

/**
 * An app's own downloader (e.g. a background download service): local-llm-js-core's
 * `DownloadAdapter`. It writes the whole file to `destPath`; {@link ModelManager} then checks its
 * size, GGUF magic and SHA-256 and enters it in the cache index. On abort, `cancel(url)` is
 * called when the adapter has one, and the download rejects with an AbortError at once either
 * way (without waiting for `download()` to settle; its file is then not adopted).
 */
export interface DownloadAdapter {
  download(url: string, destPath: string, onProgress?: DownloadProgressCallback): Promise<void>;
  cancel?(url: string): void;
  supportsResume?: boolean;
  resume?(url: string, destPath: string, resumeToken: unknown, onProgress?: DownloadProgressCallback): Promise<void>;
}

function toEntry(e: NativeCacheEntry): CacheEntry {
  return {
    url: e.url,
    path: e.path,
    size: Number(e.size),
    sha256: e.sha256,
    downloadedAt: e.downloadedAt,
    lastUsedAt: e.lastUsedAt,
  };
}

/** Whether `model` is an http(s) URL or a `user/repo[/branch]/file` shorthand. */
export function isRemoteModel(model: string): boolean {
  return getBindings().isRemoteModel(model);
}

/** The URL of a model specifier (local-llm-js-core's `resolveModelUrl` rules). */
export function resolveModelUrl(model: string): string {
  return wrapSync(LocalLLMErrorCode.INVALID_OPTION, () => getBindings().resolveModelUrl(model));
}

/**
 * Downloads models into a cache folder and keeps its index (local-llm-rn's `ModelManager`).
 * Downloads run in Rust: resumed after an interruption, verified before they get their final
 * name, shared between concurrent calls for one URL. The default folder is
 * `$XDG_CACHE_HOME/local-llm/models` (or `~/.cache/local-llm/models`) on Node and desktops,
 * `local-llm/models` in an Android app's files directory, and `Library/Application
 * Support/local-llm/models` in an iOS app's container, excluded from backups.
 */
export class ModelManager {
  /** The cache folder (undefined: the platform default). */
  readonly cacheDir: string | undefined;
  private readonly downloader: DownloadAdapter | undefined;

  constructor(cacheDir?: string, downloader?: DownloadAdapter) {
    this.cacheDir = cacheDir;
    this.downloader = downloader;
  }

  private params(options: DownloadOptions = {}): DownloadParams {
    const { DownloadParams } = getBindings();
    if (
      options.expectedSize !== undefined &&
      !(Number.isSafeInteger(options.expectedSize) && options.expectedSize >= 0)
    ) {
      throw new LocalLLMError(
        LocalLLMErrorCode.INVALID_OPTION,
        `expectedSize must be a non-negative integer, got ${options.expectedSize}`,
      );
    }
    return DownloadParams.create({
      cacheDir: this.cacheDir,
      expectedSize: options.expectedSize === undefined ? undefined : BigInt(options.expectedSize),
      expectedSha256: options.expectedSha256,
    });
  }

  /**
   * The cached file of `url` (an http(s) URL or shorthand), downloading it first. A cache entry
   * that no longer matches its file is dropped and the file downloaded again.
   */
  async downloadModel(url: string, options: DownloadOptions = {}): Promise<string> {
    const { signal } = options;
    if (signal?.aborted) {
      throw abortError(signal);
    }
    const params = this.params(options);
    if (this.downloader !== undefined) {
      return this.downloadWithAdapter(url, params, options);
    }
    const task = wrapSync(LocalLLMErrorCode.DOWNLOAD_FAILED, () => getBindings().startDownload(url, params));
    const onAbort = () => task.cancel();
    signal?.addEventListener('abort', onAbort, { once: true });
    try {
      for (;;) {
        const p = await wrapAsync(LocalLLMErrorCode.DOWNLOAD_FAILED, () => task.next());
        if (p.done && p.entry !== undefined) {
          return p.entry.path;
        }
        options.onProgress?.(Number(p.downloaded), Number(p.total), p.percent);
      }
    } catch (e) {
      throw signal?.aborted ? abortError(signal) : e;
    } finally {
      signal?.removeEventListener('abort', onAbort);
    }
  }

  private async downloadWithAdapter(url: string, params: DownloadParams, options: DownloadOptions): Promise<string> {
    const b = getBindings();
    const cached = await this.lookup(url, params);
    if (cached !== null) {
      return cached.path;
    }
    const resolved = resolveModelUrl(url);
    const dest = wrapSync(LocalLLMErrorCode.INVALID_OPTION, () => b.modelCachePath(url, this.cacheDir));
    const { signal } = options;
    const onAbort = () => {
      try {
        this.downloader?.cancel?.(resolved);
      } catch {
        // The abort settles the download anyway.
      }
    };
    signal?.addEventListener('abort', onAbort, { once: true });
    try {
      // Settles on abort even when the adapter cannot cancel (or its promise never settles).
      await abortable(this.downloader!.download(resolved, dest, options.onProgress), signal, () => {});
    } catch (e) {
      if (signal?.aborted) {
        throw abortError(signal);
      }
      throw e instanceof LocalLLMError
        ? e
        : new LocalLLMError(LocalLLMErrorCode.DOWNLOAD_FAILED, e instanceof Error ? e.message : String(e), {
            cause: e,
          });
    } finally {
      signal?.removeEventListener('abort', onAbort);
    }
    if (signal?.aborted) {
      throw abortError(signal);
    }
    const entry = await wrapAsync(LocalLLMErrorCode.DOWNLOAD_FAILED, () => b.adoptDownloadedModel(url, params));
    return entry.path;
  }

  /** The entry of `url` if cached and whole (a corrupt one is dropped: null). */
  private async lookup(url: string, params: DownloadParams): Promise<CacheEntry | null> {
    try {
      const e = await getBindings().lookupCachedModel(url, params);
      return e === undefined ? null : toEntry(e);
    } catch (e) {
      const err = toLocalLLMError(e, LocalLLMErrorCode.DOWNLOAD_FAILED);
      if (err instanceof LocalLLMError && err.code === LocalLLMErrorCode.CACHE_CORRUPT) {
        return null;
      }
      throw err;
    }
  }

  /**
   * Addition: the cached entry of `url`, checked against its file (the SHA-256 too when
   * `expectedSha256` is given); null when not cached. A corrupt entry is dropped and rejects
   * with CACHE_CORRUPT.
   */
  async getCachedModel(
    url: string,
    options: Pick<DownloadOptions, 'expectedSize' | 'expectedSha256'> = {},
  ): Promise<CacheEntry | null> {
    const params = this.params(options);
    const e = await wrapAsync(LocalLLMErrorCode.CACHE_CORRUPT, () => getBindings().lookupCachedModel(url, params));
    return e === undefined ? null : toEntry(e);
  }

  /** All cached models whose files exist. */
  async listModels(): Promise<CacheEntry[]> {
    return wrapSync(LocalLLMErrorCode.DOWNLOAD_FAILED, () => getBindings().listCachedModels(this.cacheDir)).map(
      toEntry,
    );
  }

  /** Remove a cached model (file, entry, partial download); true if it was cached. */
  async removeModel(url: string): Promise<boolean> {
    return wrapSync(LocalLLMErrorCode.DOWNLOAD_FAILED, () => getBindings().removeCachedModel(url, this.cacheDir));
  }

  /** Addition: where the cache keeps the file of `url` (what a {@link DownloadAdapter} writes). */
  modelPath(url: string): string {
    return wrapSync(LocalLLMErrorCode.INVALID_OPTION, () => getBindings().modelCachePath(url, this.cacheDir));
  }
}
