// Chats that outgrow the context: local-llm-js-core 0.3.0's `contextOverflow` strategies and
// `onOverflow` callback at the message level, on top of the engine's context shift.
import { nativeRole } from './convert';
import { LocalLLMError, LocalLLMErrorCode } from './errors';
import { invalidOption } from './options';
import type {
  ChatMessage,
  GenerateOptions,
  ContextMetadata,
  ContextOverflowConfig,
  ContextOverflowStrategy,
} from './types';

const STRATEGIES: readonly ContextOverflowStrategy[] = ['error', 'truncate_oldest', 'sliding_window'];

/** A checked strategy (INVALID_OPTION naming `name` otherwise). */
export function checkStrategy(value: unknown, name: string): ContextOverflowStrategy {
  if (typeof value !== 'string' || !STRATEGIES.includes(value as ContextOverflowStrategy)) {
    throw invalidOption(name, value, `one of ${STRATEGIES.map((s) => `'${s}'`).join(', ')}`);
  }
  return value as ContextOverflowStrategy;
}

/** The checked settings of a `contextOverflow` option. */
export interface Normalized {
  strategy: ContextOverflowStrategy;
  reserveRatio: number;
  onOverflow?: ContextOverflowConfig['onOverflow'];
}

/** The settings of a `contextOverflow` option, checked. */
export function normalizeOverflow(input: ContextOverflowStrategy | ContextOverflowConfig): Normalized {
  if (typeof input === 'string') {
    return { strategy: checkStrategy(input, 'contextOverflow'), reserveRatio: 0.25 };
  }
  if (input === null || typeof input !== 'object') {
    throw invalidOption('contextOverflow', input, 'a strategy name or a ContextOverflowConfig');
  }
  const reserveRatio = input.reserveRatio ?? 0.25;
  if (typeof reserveRatio !== 'number' || !(reserveRatio >= 0 && reserveRatio < 1)) {
    throw invalidOption('contextOverflow.reserveRatio', reserveRatio, 'a number from 0 up to (not including) 1');
  }
  if (input.onOverflow !== undefined && typeof input.onOverflow !== 'function') {
    throw invalidOption('contextOverflow.onOverflow', input.onOverflow, 'a function');
  }
  return {
    strategy: checkStrategy(input.strategy ?? 'sliding_window', 'contextOverflow.strategy'),
    reserveRatio,
    onOverflow: input.onOverflow,
  };
}

/** The messages a request runs with, how they were fitted, and whether to shift while generating. */
export interface Fitted {
  messages: ChatMessage[];
  meta: ContextMetadata;
  /** Shift the context while generating (sliding_window): the answer may outgrow the context. */
  contextShift: boolean;
}

function exhausted(promptTokens: number, available: number, contextSize: number): LocalLLMError {
  return new LocalLLMError(
    LocalLLMErrorCode.CONTEXT_EXHAUSTED,
    `context window overflow: the prompt needs ${promptTokens} tokens but only ${available} are available ` +
      `(context ${contextSize} minus the generation reserve); drop messages or set contextOverflow to ` +
      `'truncate_oldest' or 'sliding_window'`,
  );
}

/**
 * Prompt tokens of `messages` fitted into `available` tokens: all of them when `trim` is
 * undefined (a count), else the messages `trim` keeps (see {@link fitMessages}).
 */
export type ChatFitter = (
  messages: ChatMessage[],
  trim: 'truncate_oldest' | 'sliding_window' | undefined,
  available: number,
) => Promise<{ messages: ChatMessage[]; promptTokens: number }>;

/**
 * Fit `messages` into a context of `contextSize` tokens keeping room for the answer, as
 * local-llm-js-core does: when the prompt (counted by `count`) is longer than the context minus
 * the reserve, `onOverflow` may replace the messages; otherwise (or if its messages still do not
 * fit) 'error' rejects with CONTEXT_EXHAUSTED, 'truncate_oldest' drops the oldest messages after
 * the leading system ones, 'sliding_window' keeps every system message and the newest others that
 * fit; when no non-system message fits it
 * rejects with CONTEXT_EXHAUSTED. Under 'sliding_window' the engine also shifts the context while
 * generating, so the answer is not cut at the context size (and at most `reserveRatio` is reserved).
 */
export async function fitMessages(
  messages: ChatMessage[],
  config: Normalized,
  strategyOverride: ContextOverflowStrategy | undefined,
  maxTokens: number | undefined,
  contextSize: number,
  fit: ChatFitter,
): Promise<Fitted> {
  const count = async (m: ChatMessage[]): Promise<number> => (await fit(m, undefined, 0)).promptTokens;
  const strategy = strategyOverride ?? config.strategy;
  const originalMessageCount = messages.length;
  // The shift makes room as the answer grows: under 'sliding_window' at most the ratio is reserved.
  const ratio = Math.floor(contextSize * config.reserveRatio);
  const reservedForGeneration =
    strategy === 'sliding_window' ? Math.min(maxTokens ?? ratio, ratio) : (maxTokens ?? ratio);
  const available = Math.max(0, contextSize - reservedForGeneration);
  const promptTokens = await count(messages);
  const meta = (kept: ChatMessage[], tokens: number, used?: ContextOverflowStrategy): ContextMetadata => ({
    overflowTriggered: used !== undefined,
    ...(used !== undefined ? { strategyUsed: used } : {}),
    originalMessageCount,
    keptMessageCount: kept.length,
    contextSize,
    promptTokens: tokens,
    reservedForGeneration,
  });
  const contextShift = strategy === 'sliding_window';
  if (promptTokens <= available) {
    return { messages, meta: meta(messages, promptTokens), contextShift };
  }
  let current = messages;
  if (config.onOverflow !== undefined) {
    const replacement = await config.onOverflow({
      messages: messages.map((m) => ({ ...m, content: m.content ?? '' })),
      originalMessageCount,
      promptTokens,
      availableTokens: available,
      contextSize,
      reservedForGeneration,
      strategy,
    });
    if (Array.isArray(replacement) && replacement.length > 0) {
      current = replacement;
      const tokens = await count(current);
      if (tokens <= available) {
        return { messages: current, meta: meta(current, tokens, strategy), contextShift };
      }
    }
  }
  if (strategy === 'error') {
    throw exhausted(await count(current), available, contextSize);
  }
  // Natively, off the JS thread, in O(n log n) renders of the chat (a binary search).
  const kept = await fit(current, strategy, available);
  if (!kept.messages.some((m) => nativeRole(m.role) !== 'system')) {
    throw exhausted(await count(current), available, contextSize);
  }
  return { messages: kept.messages, meta: meta(kept.messages, kept.promptTokens, strategy), contextShift };
}

/** The native context shift of a checked `contextShift` option (undefined: none). */
export function nativeContextShift(
  option: GenerateOptions['contextShift'],
  name = 'contextShift',
): { nKeep?: number } | undefined {
  if (option === undefined || option === false) {
    return undefined;
  }
  if (option === true) {
    return {};
  }
  if (option === null || typeof option !== 'object') {
    throw invalidOption(name, option, 'a boolean or { nKeep }');
  }
  const { nKeep } = option;
  if (nKeep === undefined || nKeep === -1) {
    return {};
  }
  if (typeof nKeep !== 'number' || !Number.isInteger(nKeep) || nKeep < 0 || nKeep > 2 ** 32 - 1) {
    throw invalidOption(`${name}.nKeep`, nKeep, `-1 or an integer from 0 to ${2 ** 32 - 1}`);
  }
  return { nKeep };
}
