// The platform-independent API; src/index.tsx installs the React Native bindings first.
export { setBindings } from './bindings';
export type { Bindings } from './bindings';
export { LocalLLM } from './local-llm';
export type { PreloadOptions } from './model-source';
export { Model, localPath } from './model';
export { ModelPool } from './model-pool';
export type { ModelPoolOptions, ModelPoolLoadOptions, PoolInfo } from './model-pool';
export { InferenceContext } from './context';
export { quantize } from './quantize';
export type { QuantizationType, QuantizeOptions } from './quantize';
export type { InfillPrompt, PromptSource } from './params';
export { ChatCompletions } from './chat';
export { LocalLLMProvider } from './ai-provider';
export { LocalLLMEmbeddingModel, LocalLLMRerankingModel } from './ai-embedding';
export type {
  EmbeddingCallOptions,
  EmbeddingCallResult,
  RerankingCallOptions,
  RerankingCallResult,
} from './ai-embedding';
export type { LocalLLMProviderConfig } from './ai-provider';
export { EmbeddingContext, Embeddings } from './embeddings';
export { LocalLLMError, LocalLLMErrorCode } from './errors';
export { ModelManager, isRemoteModel, resolveModelUrl } from './model-manager';
export { createNativeDownloader } from './native-downloader';
export type { CacheEntry, DownloadAdapter, DownloadOptions, DownloadProgressCallback } from './model-manager';
export { setLogCallback, setLogLevel } from './logging';
export {
  getBackends,
  getDeviceCapabilities,
  canRunModel,
  canRunModelFile,
  recommendQuantization,
  optimalThreadCount,
  setPlatform,
} from './device';
export type { DeviceCapabilities, CanRunResult, PlatformInfo } from './device';
export type * from './types';
export type * from './chat-types';
