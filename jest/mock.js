// A Jest mock of react-native-local-llm-rs for app tests: no native module, no model file.
//
//   jest.mock('react-native-local-llm-rs', () => require('react-native-local-llm-rs/jest/mock'));
//
// `LocalLLM.create` resolves to an instance whose `chat.completions.create` answers with a
// canned, deterministic reply (by default "You said: <the last user message>"), whole or
// streamed word by word in the package's OpenAI-style chunks; `max_tokens` counts words, and an
// AbortSignal rejects the call or the iteration with an AbortError, as the real API does. Errors
// are `LocalLLMError`s with the real codes. `configureMock` changes the reply and the pace of a
// stream. The hooks (`useChat`, `useCompletion`) are the package's real ones; they are its
// TypeScript source, so Jest must transform this package for them (add
// `react-native-local-llm-rs` to the exceptions of `transformIgnorePatterns`).
'use strict';

const { LocalLLMError, LocalLLMErrorCode, abortError, invalidOption } = require('./mock-errors');
const { completions, configureMock, embed, words } = require('./mock-chat');

const disposedError = () => new LocalLLMError(LocalLLMErrorCode.NOT_INITIALIZED, 'LocalLLM has been disposed');

/** The mock of `LocalLLM`: create, chat.completions, embeddings, context (streaming), dispose. */
class LocalLLM {
  constructor(options) {
    this.options = options || {};
    this.modelName =
      String(this.options.model || 'mock')
        .split('/')
        .pop()
        .replace(/\.gguf$/i, '') || 'mock';
    this.disposed = false;
    this.lastTiming = null;
    this._chat = { completions: completions(this, this.modelName) };
  }

  /** Resolves to a mock instance (a `model` that is not a non-empty string is INVALID_OPTION). */
  static async create(options) {
    if (!options || typeof options.model !== 'string' || options.model === '') {
      throw invalidOption('model', options && options.model, 'a model path or URL');
    }
    if (options.signal && options.signal.aborted) {
      throw abortError();
    }
    const instance = new LocalLLM(options);
    if (options.onProgress) options.onProgress(100);
    return instance;
  }

  /** The local path of `model` (URLs: a fake cache path). */
  static async preload(model) {
    return fakePath(model);
  }

  /** `chat.completions` (NOT_INITIALIZED after `dispose()`, as the real API). */
  get chat() {
    if (this.disposed) throw disposedError();
    return this._chat;
  }

  /** Needs `embeddings: true` in `create`'s options (else EMBEDDING_FAILED), as the real API. */
  get embeddings() {
    if (this.disposed) throw disposedError();
    if (!this.options.embeddings) {
      throw new LocalLLMError(
        LocalLLMErrorCode.EMBEDDING_FAILED,
        'Embeddings not enabled. Pass `embeddings: true` to LocalLLM.create().',
      );
    }
    return {
      create: async (params) => {
        const inputs = typeof params.input === 'string' ? [params.input] : params.input;
        if (!Array.isArray(inputs) || inputs.some((t) => typeof t !== 'string')) {
          throw new LocalLLMError(
            LocalLLMErrorCode.EMBEDDING_FAILED,
            '`input` must be a string or an array of strings',
          );
        }
        if (params.signal && params.signal.aborted) throw abortError();
        const tokens = inputs.reduce((n, t) => n + words(t).length, 0);
        return {
          object: 'list',
          model: params.model ?? this.modelName,
          data: inputs.map((t, index) => ({ object: 'embedding', index, embedding: embed(t) })),
          usage: { prompt_tokens: tokens, total_tokens: tokens },
        };
      },
    };
  }

  /** A little of `InferenceContext`: `getPerf`, and raw generation (`generate`, `stream`, `streamPieces`). */
  get context() {
    if (this.disposed) throw disposedError();
    const chat = this._chat;
    const request = (prompt, options = {}) => ({
      messages: typeof prompt === 'string' ? [{ role: 'user', content: prompt }] : prompt && prompt.messages,
      max_tokens: options.maxTokens,
      signal: options.signal,
      stream: true,
    });
    async function* streamPieces(prompt, options, onResult) {
      const chunks = await chat.completions.create(request(prompt, options));
      for await (const c of chunks) {
        const piece = c.choices[0] && c.choices[0].delta.content;
        if (piece) yield piece;
        if (c._timing && onResult) onResult({ text: '', timing: c._timing });
      }
    }
    return {
      contextSize: this.options.contextSize ?? 4096,
      getPerf: () => this.lastTiming,
      streamPieces,
      stream: (prompt, options) => streamPieces(prompt, options),
      generate: async (prompt, options) => {
        let text = '';
        for await (const piece of streamPieces(prompt, options)) text += piece;
        return text;
      },
    };
  }

  /** Release the instance: `chat`, `embeddings` and `context` then throw NOT_INITIALIZED. */
  dispose() {
    this.disposed = true;
  }
}

const fakePath = (url) => `/mock/models/${String(url).split('/').pop() || 'model.gguf'}`;

/** The mock of `ModelManager`: downloads resolve at once to a fake path and are listed. */
class ModelManager {
  constructor(cacheDir) {
    this.cacheDir = cacheDir;
    this.entries = new Map();
  }

  async downloadModel(url, options = {}) {
    if (options.signal && options.signal.aborted) throw abortError();
    const path = fakePath(url);
    if (options.onProgress) options.onProgress(1, 1, 100);
    const now = new Date(0).toISOString();
    this.entries.set(url, { url, path, size: 1, sha256: '0'.repeat(64), downloadedAt: now, lastUsedAt: now });
    return path;
  }

  async getCachedModel(url) {
    return this.entries.get(url) ?? null;
  }

  async listModels() {
    return [...this.entries.values()];
  }

  async removeModel(url) {
    return this.entries.delete(url);
  }

  modelPath(url) {
    return fakePath(url);
  }
}

const GB = 1024 ** 3;
const capabilities = () => ({
  totalRAM: 8 * GB,
  availableRAM: 4 * GB,
  gpuName: 'Mock CPU',
  isLowPowerMode: false,
  backends: [{ name: 'CPU', kind: 'cpu', description: 'Mock CPU', memoryTotal: null, memoryFree: null, features: [] }],
});

let hooks;
/** The package's real hooks (its TypeScript source, transformed by the app's Jest). */
function realHooks() {
  if (hooks === undefined) {
    try {
      hooks = require('../src/hooks/index.ts');
    } catch (e) {
      throw new Error(
        'react-native-local-llm-rs/jest/mock: the hooks are TypeScript source; let Jest transform the package ' +
          "(transformIgnorePatterns: ['node_modules/(?!((jest-)?react-native|@react-native(-community)?|react-native-local-llm-rs)/)']): " +
          e.message,
      );
    }
  }
  return hooks;
}

module.exports = {
  LocalLLM,
  LocalLLMError,
  LocalLLMErrorCode,
  ModelManager,
  configureMock,
  getDeviceCapabilities: capabilities,
  canRunModel: (model) => {
    const bytes = typeof model === 'number' ? model : 0;
    return bytes > 0.8 * capabilities().availableRAM
      ? { canRun: false, memoryKnown: true, reason: 'Model needs more memory than the mock device has' }
      : { canRun: true, memoryKnown: true };
  },
  canRunModelFile: async () => ({ canRun: true, memoryKnown: true }),
  recommendQuantization: () => 'Q8_0',
  optimalThreadCount: () => 4,
  getBackends: () => capabilities().backends,
  isRemoteModel: (model) => /^(https?:|hf:)/.test(String(model)),
  setLogCallback: () => {},
  setLogLevel: () => {},
  setPlatform: () => {},
};
Object.defineProperty(module.exports, 'useChat', { enumerable: true, get: () => realHooks().useChat });
Object.defineProperty(module.exports, 'useCompletion', { enumerable: true, get: () => realHooks().useCompletion });
