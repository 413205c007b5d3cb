// The TypeScript API's defaults: local-llm-rn 1.0.3's, defined once in the Rust layer
// (rust/ffi/src/profile.rs, `appDefaults()`); the engine and the CLI keep llama.cpp's.
import type { AppDefaults } from '../generated/local_llm_ffi';
import { getBindings } from './bindings';

let cached: AppDefaults | undefined;

/**
 * The defaults every option of this API left unset takes: sampling (temperature 0.7, top-p
 * 0.9, top-k 40, min-p off, repeat penalty 1.1 over 64 tokens), a 512-token context, the
 * performance cores, 16 draft tokens, 512 tokens per raw generation, chats that slide their
 * window. Read once from the native layer.
 */
export function appDefaults(): AppDefaults {
  cached ??= getBindings().appDefaults();
  return cached;
}

/**
 * The default length of a chat answer (local-llm-js-core's rule): the room the prompt of
 * `promptTokens` leaves in a context of `contextSize`, less a margin, at most a share of the
 * context, at least 1.
 */
export function chatMaxTokens(contextSize: number, promptTokens: number): number {
  const d = appDefaults();
  return Math.max(
    1,
    Math.min(contextSize - promptTokens - d.chatMarginTokens, Math.floor(contextSize * d.chatMaxShare)),
  );
}
