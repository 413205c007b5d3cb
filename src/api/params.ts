// What a generation request becomes natively: prompts (text, chat, tokens, infill) and the
// options turned into the engine's generation parameters, with this API's defaults and checks.
import type { GenerateParams, PromptInput } from '../generated/local_llm_ffi';
import { getBindings } from './bindings';
import { defined, allowedTools, toNativeMessages, toNativeToolChoice, toNativeTools } from './convert';
import { appDefaults } from './defaults';
import { LocalLLMError, LocalLLMErrorCode } from './errors';
import {
  checkOptions,
  generateOptionRules,
  invalidOption,
  nativeSeed,
  reasoningParams,
  breakerList,
  flag,
  logitBiasList,
  stopList,
  tokenIds,
} from './options';
import { nativeContextShift } from './overflow';
import type {
  ChatCompletionTool,
  ChatCompletionToolChoice,
  ChatMessage,
  CustomTool,
  GenerateOptions,
  ResponseFormat,
} from './types';

/**
 * What a generation starts from: raw text, chat messages (templated natively, optionally
 * offering tools) or token ids.
 */
export type PromptSource =
  | string
  | { messages: ChatMessage[]; tools?: Array<ChatCompletionTool | CustomTool>; toolChoice?: ChatCompletionToolChoice }
  | { tokens: number[] | Int32Array }
  | InfillPrompt;

/**
 * Addition: fill in the middle between `prefix` and `suffix` (coder models with FIM tokens,
 * see {@link ModelInfo.infillSupported}), laid out as llama-server's `/infill`:
 * `[FIM_PRE] prefix prompt [FIM_SUF] suffix [FIM_MID]`, with `extra` files before it (repo-level
 * FIM when the vocabulary has its tokens) and suffix first when `spm`. Prefix and suffix are cut
 * to fit one batch as llama.cpp does (3/4 of it for the prefix's end, 1/4 for the suffix's start).
 */
export interface InfillPrompt {
  /** The text before the hole. */
  prefix: string;
  /** The text after the hole. */
  suffix: string;
  /** Text the middle starts with (default none). */
  prompt?: string;
  /** Other files as context (llama-server's `input_extra`; `filename` defaults to `tmp`). */
  extra?: Array<{ filename?: string; text: string }>;
  /** Suffix before prefix (llama.cpp's `--spm-infill`). */
  spm?: boolean;
}

function toPrompt(prompt: PromptSource): PromptInput {
  const { PromptInput } = getBindings();
  if (typeof prompt === 'string') {
    return new PromptInput.Text({ text: prompt });
  }
  if (prompt !== null && typeof prompt === 'object' && 'messages' in prompt) {
    return new PromptInput.Chat({ messages: toNativeMessages(prompt.messages) });
  }
  if (prompt !== null && typeof prompt === 'object' && 'tokens' in prompt) {
    return new PromptInput.Tokens({ tokens: tokenIds(prompt.tokens) });
  }
  if (prompt !== null && typeof prompt === 'object' && 'prefix' in prompt && 'suffix' in prompt) {
    return toInfill(prompt);
  }
  throw invalidOption('prompt', prompt, 'a string, { messages } or { tokens }');
}

/** The native prompt of an infill; bad fields throw INVALID_OPTION naming them. */
function toInfill(p: InfillPrompt): PromptInput {
  const { PromptInput } = getBindings();
  const text = (name: string, value: unknown, fallback?: string): string => {
    if (value === undefined && fallback !== undefined) {
      return fallback;
    }
    if (typeof value !== 'string') {
      throw invalidOption(name, value, 'a string');
    }
    return value;
  };
  if (p.extra !== undefined && !Array.isArray(p.extra)) {
    throw invalidOption('extra', p.extra, 'an array of { filename?, text }');
  }
  const extra = (p.extra ?? []).map((chunk, i) => ({
    filename: text(`extra[${i}].filename`, chunk?.filename, 'tmp'),
    text: text(`extra[${i}].text`, chunk?.text),
  }));
  return new PromptInput.Infill({
    prefix: text('prefix', p.prefix),
    suffix: text('suffix', p.suffix),
    prompt: text('prompt', p.prompt, ''),
    extra,
    spm: flag(p.spm, 'spm') ?? false,
  });
}

/**
 * `options` whose `signal` also fires when `onPromptProgress` returns false (local-llm-rn's way
 * to stop a prompt's evaluation), so every path handles that stop as an abort. Options without
 * `onPromptProgress` come back as they are; a value that is not a function is INVALID_OPTION.
 */
export function withProgressStop(options: GenerateOptions): GenerateOptions {
  const { onPromptProgress: report, signal } = options;
  if (report === undefined || progressStopping.has(options)) {
    return options;
  }
  if (typeof report !== 'function') {
    throw invalidOption('onPromptProgress', report, 'a function');
  }
  const stop = new AbortController();
  const forward = () => stop.abort(signal?.reason);
  if (signal?.aborted) {
    forward();
  } else {
    signal?.addEventListener('abort', forward, { once: true });
  }
  const wrapped: GenerateOptions = {
    ...options,
    signal: stop.signal,
    onPromptProgress: (processed, total) => {
      const go = report(processed, total);
      if (go === false) {
        stop.abort();
      }
      return go;
    },
  };
  progressStopping.add(wrapped);
  return wrapped;
}

/** Options made by {@link withProgressStop}: passed on (`stream` to `streamParts`), not wrapped again. */
const progressStopping = new WeakSet<GenerateOptions>();

/**
 * Native generation parameters; options left unset take this API's defaults ({@link appDefaults}:
 * sampling and the length of a raw generation) or else the engine's (from the generated
 * records). Bad options throw INVALID_OPTION, named by `names` (default: as in
 * {@link GenerateOptions}).
 */
export function toParams(
  prompt: PromptSource,
  o: GenerateOptions,
  names: Partial<Record<keyof GenerateOptions, string>> = {},
): GenerateParams {
  checkOptions(o, generateOptionRules(), names);
  const input = toPrompt(prompt);
  const stop = stopList(o.stop, names.stop);
  const { GenerateParams, SamplingParams } = getBindings();
  const d = appDefaults();
  const sampling = SamplingParams.create(
    defined({
      temperature: o.temperature ?? d.temperature,
      topK: o.topK ?? d.topK,
      typicalP: o.typicalP,
      topP: o.topP ?? d.topP,
      minP: o.minP ?? d.minP,
      repeatPenalty: o.repeatPenalty ?? d.repeatPenalty,
      frequencyPenalty: o.frequencyPenalty,
      presencePenalty: o.presencePenalty,
      penaltyLastN: o.penaltyLastN ?? d.penaltyLastN,
      dryMultiplier: o.dryMultiplier,
      dryBase: o.dryBase,
      dryAllowedLength: o.dryAllowedLength,
      dryPenaltyLastN: o.dryPenaltyLastN,
      drySequenceBreakers: breakerList(o.drySequenceBreakers, names.drySequenceBreakers),
      topNSigma: o.topNSigma,
      xtcProbability: o.xtcProbability,
      xtcThreshold: o.xtcThreshold,
      mirostat: o.mirostat,
      mirostatTau: o.mirostatTau,
      mirostatEta: o.mirostatEta,
      logitBias: logitBiasList(o.logitBias, names.logitBias),
      ignoreEos: flag(o.ignoreEos, names.ignoreEos ?? 'ignoreEos'),
      seed: nativeSeed(o.seed),
    }),
  );
  const chat = typeof prompt !== 'string' && 'messages' in prompt ? allowedTools(prompt) : undefined;
  return GenerateParams.create({
    prompt: input,
    sampling,
    tools: toNativeTools(chat?.tools),
    ...defined({
      maxTokens: o.maxTokens ?? d.generateMaxTokens,
      // Streams hand over each prompt batch and wait for the reader, for onPromptProgress.
      promptProgress: o.onPromptProgress !== undefined ? true : undefined,
      stop,
      toolChoice: toNativeToolChoice(chat?.toolChoice),
      logprobs: o.nProbs,
      grammar: o.grammar,
      grammarRoot: o.grammarRoot,
      jsonSchema: jsonSchema(o.responseFormat),
      contextShift: nativeContextShift(o.contextShift),
    }),
    ...reasoningParams(o, names),
  });
}

/** One options object per prompt: `options` itself when it is an array of the prompts' length. */
export function batchOptions(prompts: unknown, options: GenerateOptions | GenerateOptions[]): GenerateOptions[] {
  if (!Array.isArray(prompts)) {
    throw new LocalLLMError(LocalLLMErrorCode.INVALID_OPTION, 'prompts must be an array');
  }
  if (!Array.isArray(options)) {
    return prompts.map(() => options);
  }
  if (options.length !== prompts.length) {
    throw new LocalLLMError(
      LocalLLMErrorCode.INVALID_OPTION,
      `options has ${options.length} entries for ${prompts.length} prompts (give one per prompt, or one for all)`,
    );
  }
  return options;
}

/** The JSON schema text a response format asks for (`json_object`: any object), or undefined. */
function jsonSchema(format: ResponseFormat | undefined): string | undefined {
  switch (format?.type) {
    case undefined:
    case 'text':
      return undefined;
    case 'json_object':
      return JSON.stringify({ type: 'object' });
    case 'json_schema': {
      const schema = format.json_schema?.schema;
      if (schema === null || typeof schema !== 'object') {
        throw new LocalLLMError(
          LocalLLMErrorCode.INVALID_OPTION,
          'responseFormat json_schema needs json_schema.schema (an object)',
        );
      }
      return JSON.stringify(schema);
    }
    default:
      throw new LocalLLMError(
        LocalLLMErrorCode.INVALID_OPTION,
        `unknown responseFormat type '${String((format as { type: unknown }).type)}'`,
      );
  }
}
