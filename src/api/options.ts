// The one table of the numeric options' rules, checked before anything reaches the native layer
// (where a JS number would otherwise be truncated or wrapped to the native integer type). The
// bounds the engine owns (sequences, drafts, lookup n-grams, top log-probabilities, benchmark
// iterations) are read from it (`engineLimits()`), not restated here. Ranges of real-valued
// sampling options are the engine's (`SamplingParams::validate`): they are checked there and
// reported with the same INVALID_OPTION code.
import type { EngineLimits } from '../generated/local_llm_ffi';
import { getBindings } from './bindings';
import { LocalLLMError, LocalLLMErrorCode } from './errors';
import type { BenchmarkOptions, ContextOptions, GenerateOptions } from './types';

const U32_MAX = 2 ** 32 - 1;

/** A numeric option: an integer within [min, max], or any finite real number. */
type Rule = { integer: true; min: number; max: number } | { integer: false };

const count = (min: number): Rule => ({ integer: true, min, max: U32_MAX });
const upTo = (min: number, max: number): Rule => ({ integer: true, min, max });
const real: Rule = { integer: false };

let limits: EngineLimits | undefined;

/** The engine's option bounds (read once from the native layer). */
function engineLimits(): EngineLimits {
  limits ??= getBindings().engineLimits();
  return limits;
}

/** The numeric options of a context (0 for `contextSize` / `threads` means the default). */
export function contextOptionRules(): Record<keyof ContextOptions, Rule> {
  const l = engineLimits();
  return {
    contextSize: count(0),
    batchSize: count(1),
    threads: count(0),
    maxSequences: upTo(1, l.maxSequences),
    draftNMax: upTo(0, l.maxDraft),
    promptLookup: upTo(0, l.maxLookupNgram),
  };
}

/** The options of a memory estimate (`canRunModel`, `canRunModelFile`, `Model.estimateMemory`). */
export const ESTIMATE_OPTION_RULES: Record<'contextSize', Rule> = { contextSize: count(0) };

/** The options of a benchmark. */
export function benchmarkOptionRules(): Record<keyof BenchmarkOptions, Rule> {
  return {
    promptTokens: count(1),
    generateTokens: count(1),
    iterations: upTo(1, engineLimits().maxBenchmarkIterations),
  };
}

/** The numeric options of a generation. A seed of -1 or 2^32-1 asks for a random seed (llama.cpp). */
export function generateOptionRules(): Record<
  Exclude<keyof GenerateOptions, 'stop' | 'signal' | 'grammar' | 'grammarRoot' | 'responseFormat' | 'contextShift'>,
  Rule
> {
  return {
    maxTokens: count(0),
    topK: count(0),
    seed: { integer: true, min: -1, max: U32_MAX },
    temperature: real,
    topP: real,
    typicalP: real,
    minP: real,
    repeatPenalty: real,
    frequencyPenalty: real,
    presencePenalty: real,
    nProbs: upTo(0, engineLimits().maxTopLogprobs),
  };
}

/** The error for option `name` set to `value`. */
export function invalidOption(name: string, value: unknown, expected: string): LocalLLMError {
  const shown = typeof value === 'number' || value === null ? String(value) : JSON.stringify(value);
  return new LocalLLMError(LocalLLMErrorCode.INVALID_OPTION, `${name} must be ${expected}, got ${shown}`);
}

/**
 * Check the options of `values` that have a rule in `rules` (unset ones are skipped); `names`
 * renames options in messages (the OpenAI-style names of a chat request).
 */
export function checkOptions<K extends string>(
  values: Partial<Record<K, unknown>>,
  rules: Record<K, Rule>,
  names: Partial<Record<K, string>> = {},
): void {
  for (const key of Object.keys(rules) as K[]) {
    const value = values[key];
    if (value === undefined) {
      continue;
    }
    const rule = rules[key];
    const name = names[key] ?? key;
    if (typeof value !== 'number' || !Number.isFinite(value)) {
      throw invalidOption(name, value, 'a finite number');
    }
    if (rule.integer && (!Number.isInteger(value) || value < rule.min || value > rule.max)) {
      throw invalidOption(name, value, `an integer from ${rule.min} to ${rule.max}`);
    }
  }
}

/** Stop strings as a list: a string or an array of strings (named `name` in errors). */
export function stopList(stop: unknown, name = 'stop'): string[] | undefined {
  if (stop === undefined) {
    return undefined;
  }
  const list = Array.isArray(stop) ? stop : [stop];
  if (!list.every((s) => typeof s === 'string')) {
    throw invalidOption(name, stop, 'a string or an array of strings');
  }
  return list as string[];
}

/** The native seed of a checked `seed`: `undefined` (random) for none, -1 and 2^32-1. */
export function nativeSeed(seed: number | undefined): bigint | undefined {
  return seed === undefined || seed === -1 || seed === U32_MAX ? undefined : BigInt(seed);
}
