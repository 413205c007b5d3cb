// The one numeric rule of this package and the table of the numeric options' rules: every number
// the API takes (options, token ids, byte counts) is checked by `checkNumber` before anything
// reaches the native layer, where a JS number would otherwise be truncated or wrapped to the
// native integer type (NaN to 0, 3000.7 to 3000, 2^32+3000 to 3000). A value must be a JS
// `number`: a BigInt, a numeric string or null is INVALID_OPTION like NaN or an out-of-range
// integer, as the option types say `number`. The bounds the engine owns (sequences, drafts,
// lookup n-grams, top log-probabilities, benchmark iterations) are read from it
// (`engineLimits()`), not restated here. Ranges of real-valued sampling options are the
// engine's (`SamplingParams::validate`): they are checked there and reported with the same
// INVALID_OPTION code.
import type { EngineLimits } from '../generated/local_llm_ffi';
import { getBindings } from './bindings';
import { LocalLLMError, LocalLLMErrorCode } from './errors';
import type { BenchmarkOptions, ContextOptions, GenerateOptions, ModelOptions } from './types';

const U32_MAX = 2 ** 32 - 1;
const I32_MAX = 2 ** 31 - 1;

/**
 * A numeric option's rule: a finite JS `number` from `min` to `max`, an integer when `integer`
 * (see {@link checkNumber}).
 */
export interface Rule {
  integer: boolean;
  min: number;
  max: number;
}

const count = (min: number): Rule => ({ integer: true, min, max: U32_MAX });
const upTo = (min: number, max: number): Rule => ({ integer: true, min, max });
const real: Rule = { integer: false, min: -Infinity, max: Infinity };

/** Any finite number (a LoRA scale). */
export const REAL_RULE: Rule = real;

/** A token id: an integer from 0 to 2^32-1 (the engine checks it against the vocabulary). */
const TOKEN_ID_RULE: Rule = count(0);

/** A size in bytes: a finite number >= 0 (`canRunModel`'s model size). */
export const BYTES_RULE: Rule = { integer: false, min: 0, max: Infinity };

let limits: EngineLimits | undefined;

/** The engine's option bounds (read once from the native layer). */
function engineLimits(): EngineLimits {
  limits ??= getBindings().engineLimits();
  return limits;
}

/** The options of a context that are names (strings here, their values checked by the engine). */
export const CONTEXT_TEXT_OPTIONS = ['kvCacheTypeK', 'kvCacheTypeV', 'flashAttention'] as const;
type ContextTextOptions = (typeof CONTEXT_TEXT_OPTIONS)[number];

/** The cache-type options of a memory estimate (strings, checked by the engine). */
export const CACHE_TYPE_OPTIONS = ['kvCacheTypeK', 'kvCacheTypeV'] as const;

/** The numeric options of a context (0 for `contextSize` / `threads` means the default). */
export function contextOptionRules(): Record<Exclude<keyof ContextOptions, ContextTextOptions>, Rule> {
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

/**
 * The numeric options of a model load: `gpuLayers` (accepted for compatibility and not used) is
 * an integer from -1 (all layers, llama.cpp's convention) to 2^31-1 (llama.cpp's `int32_t`).
 */
export const MODEL_OPTION_RULES: Record<keyof Pick<ModelOptions, 'gpuLayers'>, Rule> = { gpuLayers: upTo(-1, I32_MAX) };

/** The limits of a model pool (0: no limit). */
export const POOL_OPTION_RULES: Record<'maxMemoryBytes' | 'maxModels', Rule> = {
  maxMemoryBytes: upTo(0, Number.MAX_SAFE_INTEGER),
  maxModels: upTo(0, Number.MAX_SAFE_INTEGER),
};

/** The numeric options of a quantization. */
export const QUANTIZE_OPTION_RULES: Record<'threads', Rule> = { threads: upTo(1, 1024) };

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
  Exclude<
    keyof GenerateOptions,
    | 'stop'
    | 'signal'
    | 'grammar'
    | 'grammarRoot'
    | 'responseFormat'
    | 'contextShift'
    | 'logitBias'
    | 'drySequenceBreakers'
    | 'ignoreEos'
    | 'onPromptProgress'
    | 'reasoningFormat'
    | 'thinkingBudgetMessage'
    | 'enableThinking'
    | 'chatTemplateKwargs'
  >,
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
    penaltyLastN: upTo(-1, I32_MAX),
    dryMultiplier: real,
    dryBase: real,
    dryAllowedLength: count(0),
    dryPenaltyLastN: upTo(-1, I32_MAX),
    topNSigma: real,
    xtcProbability: real,
    xtcThreshold: real,
    mirostat: upTo(0, 2),
    mirostatTau: real,
    mirostatEta: real,
    nProbs: upTo(0, engineLimits().maxTopLogprobs),
    thinkingBudgetTokens: count(0),
  };
}

/** Longest value shown in an error message (a long array or string is cut). */
const SHOWN_MAX = 80;

/** `value` as an error message shows it; never throws (BigInts, cycles, symbols). */
function shown(value: unknown): string {
  let text: string;
  if (typeof value === 'bigint') {
    text = `${value}n`;
  } else if (typeof value === 'function') {
    text = 'a function';
  } else if (typeof value === 'string' || (typeof value === 'object' && value !== null)) {
    try {
      text = JSON.stringify(value, (_key, v: unknown) => (typeof v === 'bigint' ? `${v}n` : v)) ?? String(value);
    } catch {
      text = Object.prototype.toString.call(value);
    }
  } else {
    text = String(value);
  }
  return text.length > SHOWN_MAX ? `${text.slice(0, SHOWN_MAX)}…` : text;
}

/** The error for option `name` set to `value`. */
export function invalidOption(name: string, value: unknown, expected: string): LocalLLMError {
  return new LocalLLMError(LocalLLMErrorCode.INVALID_OPTION, `${name} must be ${expected}, got ${shown(value)}`);
}

/** What `rule` asks for, in words. */
function describe(rule: Rule): string {
  const kind = rule.integer ? 'an integer' : 'a finite number';
  if (rule.max !== Infinity) {
    return `${kind} from ${rule.min} to ${rule.max}`;
  }
  return rule.min === -Infinity ? kind : `${kind} >= ${rule.min}`;
}

/**
 * The one numeric rule: `value` must be a JS `number` (not a BigInt, string or null), finite,
 * an integer if `rule.integer`, and within [`rule.min`, `rule.max`]; otherwise INVALID_OPTION
 * naming `name`. Returns `value`.
 */
export function checkNumber(name: string, value: unknown, rule: Rule): number {
  const ok =
    typeof value === 'number' &&
    Number.isFinite(value) &&
    (!rule.integer || Number.isInteger(value)) &&
    value >= rule.min &&
    value <= rule.max;
  if (!ok) {
    throw invalidOption(name, value, describe(rule));
  }
  return value as number;
}

/**
 * Check the options of `values` that have a rule in `rules` with {@link checkNumber} (unset
 * ones are skipped); `names` renames options in messages (the OpenAI-style names of a chat
 * request).
 */
export function checkOptions<K extends string>(
  values: Partial<Record<K, unknown>>,
  rules: Record<K, Rule>,
  names: Partial<Record<K, string>> = {},
): void {
  for (const key of Object.keys(rules) as K[]) {
    const value = values[key];
    if (value !== undefined) {
      checkNumber(names[key] ?? key, value, rules[key]);
    }
  }
}

/**
 * Check that the options `keys` of `values` that are set are strings (INVALID_OPTION naming the
 * option otherwise); which names are valid is the engine's to say.
 */
export function checkTextOptions<K extends string>(values: Partial<Record<K, unknown>>, keys: readonly K[]): void {
  for (const key of keys) {
    const value = values[key];
    if (value !== undefined && typeof value !== 'string') {
      throw invalidOption(key, value, 'a string');
    }
  }
}

/**
 * Token ids as the native list: an array or typed array whose every element passes
 * {@link TOKEN_ID_RULE} (INVALID_OPTION naming `name[i]` otherwise).
 */
export function tokenIds(tokens: unknown, name = 'tokens'): number[] {
  if (!Array.isArray(tokens) && !(ArrayBuffer.isView(tokens) && !(tokens instanceof DataView))) {
    throw invalidOption(name, tokens, 'an array of token ids');
  }
  const ids = Array.from(tokens as ArrayLike<unknown>);
  ids.forEach((id, i) => checkNumber(`${name}[${i}]`, id, TOKEN_ID_RULE));
  return ids as number[];
}

/**
 * Logit biases as the native list: `[token, bias]` pairs or an object from token id to bias
 * (named `name` in errors). Token ids pass {@link TOKEN_ID_RULE}; a bias is a number (not NaN;
 * ±Infinity allowed) or `false` (-Infinity: the token is banned).
 */
export function logitBiasList(input: unknown, name = 'logitBias'): Array<{ token: number; bias: number }> | undefined {
  if (input === undefined || input === null) {
    return undefined;
  }
  let pairs: Array<[unknown, unknown]>;
  if (Array.isArray(input)) {
    pairs = input.map((pair: unknown, i) => {
      if (!Array.isArray(pair) || pair.length !== 2) {
        throw invalidOption(`${name}[${i}]`, pair, 'a [tokenId, bias] pair');
      }
      return [pair[0], pair[1]];
    });
  } else if (typeof input === 'object') {
    pairs = Object.entries(input as Record<string, unknown>).map(([key, bias]) => {
      const token = /^(0|[1-9][0-9]*)$/.test(key) ? Number(key) : key;
      return [token, bias];
    });
  } else {
    throw invalidOption(name, input, 'an array of [tokenId, bias] pairs or an object from token id to bias');
  }
  return pairs.map(([token, bias]) => {
    const id = checkNumber(`${name} token`, token, TOKEN_ID_RULE);
    if (bias === false) {
      return { token: id, bias: -Infinity };
    }
    if (typeof bias !== 'number' || Number.isNaN(bias)) {
      throw invalidOption(`${name}[${id}]`, bias, 'a number or false');
    }
    return { token: id, bias };
  });
}

/** DRY's sequence breakers: an array of strings (named `name` in errors), or undefined. */
export function breakerList(value: unknown, name = 'drySequenceBreakers'): string[] | undefined {
  if (value === undefined) {
    return undefined;
  }
  if (!Array.isArray(value) || !value.every((s) => typeof s === 'string')) {
    throw invalidOption(name, value, 'an array of strings');
  }
  return value as string[];
}

/** A boolean option, or undefined (INVALID_OPTION naming `name` for anything else). */
export function flag(value: unknown, name: string): boolean | undefined {
  if (value !== undefined && typeof value !== 'boolean') {
    throw invalidOption(name, value, 'a boolean');
  }
  return value;
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

const REASONING_FORMATS = ['none', 'auto', 'deepseek'];

/** The native reasoning options of `o` (GenerateParams fields); bad values throw INVALID_OPTION named by `names`. */
export function reasoningParams(o: GenerateOptions, names: Partial<Record<keyof GenerateOptions, string>>) {
  const format = o.reasoningFormat;
  if (format !== undefined && !REASONING_FORMATS.includes(format)) {
    throw invalidOption(names.reasoningFormat ?? 'reasoningFormat', format, "'none', 'auto' or 'deepseek'");
  }
  const message = o.thinkingBudgetMessage;
  if (message !== undefined && typeof message !== 'string') {
    throw invalidOption(names.thinkingBudgetMessage ?? 'thinkingBudgetMessage', message, 'a string');
  }
  const kwargs = o.chatTemplateKwargs;
  if (kwargs !== undefined && (kwargs === null || typeof kwargs !== 'object' || Array.isArray(kwargs))) {
    throw invalidOption(names.chatTemplateKwargs ?? 'chatTemplateKwargs', kwargs, 'an object');
  }
  const thinking = flag(o.enableThinking, names.enableThinking ?? 'enableThinking');
  const vars = thinking === undefined ? kwargs : { ...kwargs, enable_thinking: thinking };
  return {
    ...(format !== undefined ? { reasoningFormat: format } : {}),
    ...(o.thinkingBudgetTokens !== undefined ? { reasoningBudget: o.thinkingBudgetTokens } : {}),
    ...(message !== undefined ? { reasoningBudgetMessage: message } : {}),
    ...(vars !== undefined ? { chatTemplateKwargs: JSON.stringify(vars) } : {}),
  };
}
