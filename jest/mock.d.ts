// Types of react-native-local-llm-rs/jest/mock: what the mock provides, typed as the package's
// own API (the mock implements the parts an app's tests touch; see jest/mock.js), plus
// configureMock.
import type { ChatMessage } from 'react-native-local-llm-rs';

export {
  LocalLLM,
  LocalLLMError,
  LocalLLMErrorCode,
  ModelManager,
  getDeviceCapabilities,
  canRunModel,
  canRunModelFile,
  recommendQuantization,
  optimalThreadCount,
  getBackends,
  isRemoteModel,
  setLogCallback,
  setLogLevel,
  setPlatform,
  useChat,
  useCompletion,
} from 'react-native-local-llm-rs';

/** How the mock answers (see {@link configureMock}). */
export interface MockOptions {
  /** The reply text from the last user message's text (default: `You said: ${text}`). */
  reply?: (lastUserText: string, messages: ChatMessage[]) => string;
  /** Milliseconds between streamed words (default 0: a microtask). */
  delayMs?: number;
}

/** Set how the mock answers; no argument restores the defaults. */
export function configureMock(options?: MockOptions): void;
