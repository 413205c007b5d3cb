import { canRunModelFile } from './device';
import { LocalLLMError, LocalLLMErrorCode } from './errors';
import { Model, localPath } from './model';
import { POOL_OPTION_RULES, checkOptions, invalidOption } from './options';
import type { ModelOptions } from './types';

/** Options of a {@link ModelPool} (local-llm-js-core's `ModelPoolOptions`). */
export interface ModelPoolOptions {
  /**
   * Most bytes the pool's models may need together (each counted by the engine's estimate:
   * weights plus the KV cache of {@link ModelPoolLoadOptions.contextSize}); 0 or absent: no limit.
   */
  maxMemoryBytes?: number;
  /** Most models loaded at once; 0 or absent: no limit. */
  maxModels?: number;
}

/** A pooled model (local-llm-js-core's `PoolInfo`). */
export interface PoolInfo {
  alias: string;
  /** The memory counted for the model (see {@link ModelPoolOptions.maxMemoryBytes}). */
  sizeBytes: number;
  /** Holders that have not released it yet ({@link ModelPool.load} adds one, {@link ModelPool.release} removes one). */
  refCount: number;
  /** When it was last loaded or got (ms since the epoch). */
  lastAccess: number;
}

/** Options of {@link ModelPool.load}: the model's, plus the context size to count memory for. */
export interface ModelPoolLoadOptions extends ModelOptions {
  /** Addition: count the KV cache of a context of this many tokens too (default 0: weights only). */
  contextSize?: number;
}

interface Entry {
  alias: string;
  /** The model; a promise while it loads (concurrent loads of one alias share it). */
  model: Model | Promise<Model>;
  sizeBytes: number;
  refCount: number;
  lastAccess: number;
}

function insufficient(message: string): LocalLLMError {
  return new LocalLLMError(LocalLLMErrorCode.INSUFFICIENT_MEMORY, message);
}

/**
 * Models loaded once and shared by alias (local-llm-js-core's `ModelPool`, `LocalLLM.pool`),
 * with memory accounting: before a load, the engine's estimate of what the model needs (read
 * from the file's metadata, nothing loaded) is checked against the pool's `maxMemoryBytes` and
 * `maxModels` and against the device's available memory; a load that does not fit rejects with
 * INSUFFICIENT_MEMORY instead of letting the OS kill the app.
 */
export class ModelPool {
  private readonly entries = new Map<string, Entry>();
  private readonly maxMemoryBytes: number;
  private readonly maxModels: number;

  constructor(options: ModelPoolOptions = {}) {
    checkOptions(options, POOL_OPTION_RULES);
    this.maxMemoryBytes = options.maxMemoryBytes ?? 0;
    this.maxModels = options.maxModels ?? 0;
  }

  /**
   * The model `alias` names, loading it from `path` if it is not in the pool yet (a second load
   * of an alias returns the same model and counts one more holder; `path` is then ignored).
   * Rejects with INSUFFICIENT_MEMORY, before loading anything, when the model would exceed
   * the pool's limits or the device's available memory; a `Uint8Array` (local-llm-js-core's
   * in-memory model) rejects with INVALID_PATH: this engine maps model files.
   */
  async load(alias: string, path: string | Uint8Array, options: ModelPoolLoadOptions = {}): Promise<Model> {
    if (typeof alias !== 'string' || alias === '') {
      throw invalidOption('alias', alias, 'a non-empty string');
    }
    const existing = this.entries.get(alias);
    if (existing !== undefined) {
      existing.refCount++;
      existing.lastAccess = Date.now();
      return existing.model;
    }
    if (typeof path !== 'string') {
      throw new LocalLLMError(
        LocalLLMErrorCode.INVALID_PATH,
        'this engine loads models from files: pass a path, not a buffer',
      );
    }
    const file = localPath(path);
    const { contextSize, ...modelOptions } = options;
    const check = await canRunModelFile(file, { contextSize });
    const need = check.estimate?.totalBytes ?? 0;
    // Checked after the await: another load may have taken the alias or the room meanwhile.
    const raced = this.entries.get(alias);
    if (raced !== undefined) {
      raced.refCount++;
      raced.lastAccess = Date.now();
      return raced.model;
    }
    const mb = (b: number) => `${Math.round(b / (1024 * 1024))} MB`;
    if (this.maxModels > 0 && this.entries.size >= this.maxModels) {
      throw insufficient(
        `the pool holds its maximum of ${this.maxModels} models: release or unload one before loading '${alias}'`,
      );
    }
    if (this.maxMemoryBytes > 0 && this.totalMemory() + need > this.maxMemoryBytes) {
      throw insufficient(
        `'${alias}' needs ~${mb(need)}; the pool's models need ${mb(this.totalMemory())} of its ${mb(this.maxMemoryBytes)} budget`,
      );
    }
    if (!check.canRun) {
      throw insufficient(
        `'${alias}': ${check.reason ?? 'not enough memory'}${check.suggestion ? `. ${check.suggestion}` : ''}`,
      );
    }
    const entry: Entry = {
      alias,
      model: Model.load(file, modelOptions),
      sizeBytes: need,
      refCount: 1,
      lastAccess: Date.now(),
    };
    this.entries.set(alias, entry);
    try {
      const model = await entry.model;
      if (this.entries.get(alias) !== entry) {
        // Unloaded (or the pool disposed) while it loaded.
        model.dispose();
        throw new LocalLLMError(LocalLLMErrorCode.NOT_INITIALIZED, `'${alias}' was unloaded while it was loading`);
      }
      entry.model = model;
      return model;
    } catch (e) {
      if (this.entries.get(alias) === entry) {
        this.entries.delete(alias);
      }
      throw e;
    }
  }

  /** The loaded model `alias` names, or undefined (also while it is still loading). */
  get(alias: string): Model | undefined {
    const entry = this.entries.get(alias);
    if (entry === undefined || entry.model instanceof Promise) {
      return undefined;
    }
    entry.lastAccess = Date.now();
    return entry.model;
  }

  /** Remove one holder of `alias`; the last one disposes the model. False if it is not in the pool. */
  release(alias: string): boolean {
    const entry = this.entries.get(alias);
    if (entry === undefined) {
      return false;
    }
    entry.refCount--;
    if (entry.refCount <= 0) {
      this.drop(entry);
    }
    return true;
  }

  /** Dispose the model `alias` names whatever its holders (their contexts keep working until disposed). */
  unload(alias: string): void {
    const entry = this.entries.get(alias);
    if (entry !== undefined) {
      this.drop(entry);
    }
  }

  /** The pooled models (those still loading included). */
  list(): PoolInfo[] {
    return Array.from(this.entries.values(), ({ alias, sizeBytes, refCount, lastAccess }) => ({
      alias,
      sizeBytes,
      refCount,
      lastAccess,
    }));
  }

  /** Addition: the memory the pooled models are counted for. */
  totalMemory(): number {
    let total = 0;
    for (const entry of this.entries.values()) {
      total += entry.sizeBytes;
    }
    return total;
  }

  /** Dispose every pooled model. */
  dispose(): void {
    for (const entry of Array.from(this.entries.values())) {
      this.drop(entry);
    }
  }

  private drop(entry: Entry): void {
    this.entries.delete(entry.alias);
    if (!(entry.model instanceof Promise)) {
      entry.model.dispose();
    }
    // A model still loading is disposed by `load` once it arrives.
  }
}
