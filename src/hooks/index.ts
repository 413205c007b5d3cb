// React hooks over the API (exported by src/index.tsx, not by the platform-free src/api).
export { useChat } from './use-chat';
export type { ChatRequestOptions, UseChatOptions, UseChatResult } from './use-chat';
export { useCompletion } from './use-completion';
export type { UseCompletionOptions, UseCompletionResult } from './use-completion';
export type { GenerationState, GenerationStatus } from './generation';
