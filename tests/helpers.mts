// Helpers shared by the JS integration tests (imported by them; not a test file itself).
import assert from 'node:assert/strict';

import { LocalLLMError, type LocalLLMErrorCode } from '../src/api/index.ts';

/** `p`, or a rejection naming `what` after `ms` milliseconds. */
export async function within<T>(p: Promise<T>, ms: number, what: string): Promise<T> {
  let timer: ReturnType<typeof setTimeout> | undefined;
  const timeout = new Promise<never>((_, reject) => {
    timer = setTimeout(() => reject(new Error(`${what} did not settle within ${ms} ms`)), ms);
  });
  try {
    return await Promise.race([p, timeout]);
  } finally {
    clearTimeout(timer);
  }
}

/** An `assert.rejects` check: the error is a LocalLLMError with code `c`. */
export function code(c: LocalLLMErrorCode) {
  return (e: unknown) => {
    assert.ok(e instanceof LocalLLMError, `expected LocalLLMError, got ${e}`);
    assert.equal(e.code, c, `code of: ${e.message}`);
    return true;
  };
}

/** The default model's path from `LOCAL_LLM_MODEL` (set by scripts/checks/js-test.sh); fails without it. */
export function defaultModel(): string {
  const model = process.env.LOCAL_LLM_MODEL ?? '';
  assert.ok(model, 'LOCAL_LLM_MODEL must be set (run scripts/checks/js-test.sh)');
  return model;
}

/** Four short chat questions whose greedy answers differ (batch and scheduler tests). */
export const QUESTIONS = [
  'What is the capital of France?',
  'Write a haiku about the sea.',
  'List three colours.',
  'Explain in one sentence why the sky is blue.',
];

/** One OpenAI-style tool (a weather lookup by city), for requests that call tools. */
export const WEATHER_TOOLS = [
  {
    type: 'function' as const,
    function: {
      name: 'get_weather',
      description: 'Current weather in a city',
      parameters: { type: 'object', properties: { city: { type: 'string' } }, required: ['city'] },
    },
  },
];

/**
 * A response message with its tool-call ids blanked: every call gets an id of its own, so two
 * equal answers differ there (and only there).
 */
export function blankCallIds<M extends { tool_calls?: Array<{ id: string }> }>(m: M): M {
  return m.tool_calls === undefined ? m : { ...m, tool_calls: m.tool_calls.map((c) => ({ ...c, id: '' })) };
}
