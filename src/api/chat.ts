import type { InferenceContext } from './context';
import type { PromptSource } from './params';
import { chatMaxTokens } from './defaults';
import {
  breakerList,
  checkOptions,
  flag,
  generateOptionRules,
  invalidOption,
  logitBiasList,
  reasoningParams,
  stopList,
} from './options';
import {
  type ChatFitter,
  type Fitted,
  type Normalized,
  checkStrategy,
  fitMessages,
  normalizeOverflow,
} from './overflow';
import type { ChatCompletionChunk, ChatCompletionRequest, ChatCompletionResponse } from './chat-types';
import type { ChatCompletionTokenLogprob, ChatFinishReason, GenerateOptions, GenerationResult } from './types';

function createId(): string {
  const c = (globalThis as { crypto?: { randomUUID?: () => string } }).crypto;
  const rand = c?.randomUUID?.() ?? `${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 10)}`;
  return `chatcmpl-${rand}`;
}

/** The names of a chat request's options, for errors. */
const OPENAI_NAMES: Partial<Record<keyof GenerateOptions, string>> = {
  maxTokens: 'max_tokens',
  topP: 'top_p',
  topK: 'top_k',
  typicalP: 'typical_p',
  frequencyPenalty: 'frequency_penalty',
  presencePenalty: 'presence_penalty',
  nProbs: 'top_logprobs',
  minP: 'min_p',
  repeatPenalty: 'repeat_penalty',
  penaltyLastN: 'repeat_last_n',
  dryMultiplier: 'dry_multiplier',
  dryBase: 'dry_base',
  dryAllowedLength: 'dry_allowed_length',
  dryPenaltyLastN: 'dry_penalty_last_n',
  drySequenceBreakers: 'dry_sequence_breakers',
  topNSigma: 'top_n_sigma',
  xtcProbability: 'xtc_probability',
  xtcThreshold: 'xtc_threshold',
  mirostat: 'mirostat',
  mirostatTau: 'mirostat_tau',
  mirostatEta: 'mirostat_eta',
  logitBias: 'logit_bias',
  ignoreEos: 'ignore_eos',
  reasoningFormat: 'reasoning_format',
  chatTemplateKwargs: 'chat_template_kwargs',
  thinkingBudgetTokens: 'thinking_budget_tokens',
};

function usage(result: GenerationResult) {
  return {
    prompt_tokens: result.promptTokens,
    completion_tokens: result.completionTokens,
    total_tokens: result.promptTokens + result.completionTokens,
  };
}

/** The chat completion of a finished generation. */
function response(result: GenerationResult, options: GenerateOptions, model: string): ChatCompletionResponse {
  const calls = result.toolCalls.length > 0;
  const reasoning = result.reasoning !== undefined ? { reasoning_content: result.reasoning } : {};
  const message = calls
    ? {
        role: 'assistant' as const,
        content: result.text === '' ? null : result.text,
        refusal: null,
        ...reasoning,
        tool_calls: result.toolCalls,
      }
    : { role: 'assistant' as const, content: result.text, refusal: null, ...reasoning };
  return {
    id: createId(),
    object: 'chat.completion',
    created: Math.floor(Date.now() / 1000),
    model,
    choices: [
      {
        index: 0,
        message,
        finish_reason: result.openAiFinishReason,
        logprobs: options.nProbs !== undefined ? { content: result.logprobs ?? [], refusal: null } : null,
      },
    ],
    usage: usage(result),
    _timing: result.timing,
  };
}

/** A request with its `null` options removed (see {@link openAiRequest}). */
type Request = { [K in keyof ChatCompletionRequest]: Exclude<ChatCompletionRequest[K], null> };

/**
 * `params` as OpenAI means it: a `null` option is the default (unset), `max_completion_tokens`
 * is `max_tokens` (both set and different is INVALID_OPTION), and `n` other than 1 is
 * INVALID_OPTION (one choice per request). `developer` messages become `system` ones where all
 * messages become native ones (`nativeRole`).
 */
function openAiRequest(params: ChatCompletionRequest): Request {
  if (params === null || typeof params !== 'object') {
    throw invalidOption('request', params, 'a chat completion request object');
  }
  const set = Object.fromEntries(Object.entries(params).filter(([, v]) => v !== null)) as Request;
  if (set.n !== undefined && set.n !== 1) {
    throw invalidOption('n', set.n, '1 (one choice per request)');
  }
  const { max_completion_tokens: completion, max_tokens: max } = set;
  if (completion !== undefined && max !== undefined && completion !== max) {
    throw invalidOption('max_completion_tokens', completion, `equal to max_tokens (${String(max)}) when both are set`);
  }
  return { ...set, max_tokens: completion ?? max };
}

/** The alternatives per token `params` asks for (range checked with the other options); undefined without `logprobs: true`. */
function topLogprobs(params: Request): number | undefined {
  if (params.logprobs !== true) {
    if (params.top_logprobs !== undefined) {
      throw invalidOption('top_logprobs', params.top_logprobs, 'set only with logprobs: true');
    }
    return undefined;
  }
  return params.top_logprobs ?? 0;
}

/** OpenAI-style chat completions on one context (`ai.chat.completions`). */
export class ChatCompletions {
  /**
   * @internal Created by {@link LocalLLM}; `overflow` fits a chat into its prompt tokens and holds the
   * `contextOverflow` settings (none: only per-request `context_overflow`).
   */
  constructor(
    private readonly context: () => InferenceContext,
    private readonly modelName: string,
    private readonly overflow?: { config?: Normalized; fit: ChatFitter },
  ) {}

  /** The messages fitted into the context by the request's or the instance's overflow strategy. */
  private async fit(params: Request, options: GenerateOptions, context: InferenceContext): Promise<Fitted | undefined> {
    const override =
      params.context_overflow === undefined ? undefined : checkStrategy(params.context_overflow, 'context_overflow');
    const config = this.overflow?.config ?? (override !== undefined ? normalizeOverflow(override) : undefined);
    if (this.overflow === undefined || config === undefined) {
      return undefined;
    }
    const fitted = await fitMessages(
      params.messages,
      config,
      override,
      options.maxTokens,
      context.contextSize,
      this.overflow.fit,
    );
    if (fitted.contextShift) {
      options.contextShift = true;
    }
    // Without max_tokens the answer may fill the room the prompt leaves (appDefaults).
    options.maxTokens ??= chatMaxTokens(fitted.meta.contextSize, fitted.meta.promptTokens);
    return fitted;
  }

  /** The generation options of a request; bad values throw INVALID_OPTION naming them. */
  private options(params: Request): GenerateOptions {
    if (!Array.isArray(params.messages) || params.messages.length === 0) {
      throw invalidOption('messages', params.messages, 'a non-empty array of messages');
    }
    const options: GenerateOptions = {
      maxTokens: params.max_tokens,
      temperature: params.temperature,
      topP: params.top_p,
      topK: params.top_k,
      typicalP: params.typical_p,
      seed: params.seed,
      stop: stopList(params.stop),
      frequencyPenalty: params.frequency_penalty,
      presencePenalty: params.presence_penalty,
      minP: params.min_p,
      repeatPenalty: params.repeat_penalty,
      penaltyLastN: params.repeat_last_n,
      dryMultiplier: params.dry_multiplier,
      dryBase: params.dry_base,
      dryAllowedLength: params.dry_allowed_length,
      dryPenaltyLastN: params.dry_penalty_last_n,
      drySequenceBreakers: params.dry_sequence_breakers,
      topNSigma: params.top_n_sigma,
      xtcProbability: params.xtc_probability,
      xtcThreshold: params.xtc_threshold,
      mirostat: params.mirostat,
      mirostatTau: params.mirostat_tau,
      mirostatEta: params.mirostat_eta,
      logitBias: params.logit_bias,
      ignoreEos: params.ignore_eos,
      nProbs: topLogprobs(params),
      signal: params.signal,
      responseFormat: params.response_format,
      grammar: params.grammar,
      // llama-server's default: a <think> block comes back as reasoning_content.
      reasoningFormat: params.reasoning_format ?? 'auto',
      chatTemplateKwargs: params.chat_template_kwargs,
      thinkingBudgetTokens: params.thinking_budget_tokens,
    };
    const names =
      params.max_completion_tokens === undefined
        ? OPENAI_NAMES
        : { ...OPENAI_NAMES, maxTokens: 'max_completion_tokens' };
    checkOptions(options, generateOptionRules(), names);
    // The other options are checked again where they become native values; here errors name
    // them as the request does.
    logitBiasList(options.logitBias, OPENAI_NAMES.logitBias);
    breakerList(options.drySequenceBreakers, OPENAI_NAMES.drySequenceBreakers);
    flag(options.ignoreEos, 'ignore_eos');
    reasoningParams(options, OPENAI_NAMES);
    return options;
  }

  private prompt(params: Request, fitted: Fitted | undefined): PromptSource {
    return { messages: fitted?.messages ?? params.messages, tools: params.tools, toolChoice: params.tool_choice };
  }

  /**
   * Answer `params.messages` (templated with the model's chat template, offering
   * `params.tools`). With `stream: true` resolves to an async iterable of chunks: the first
   * carries the role, then one chunk per piece of text, then (when the model calls tools) one
   * chunk with `delta.tool_calls`, and the last `finish_reason`, `usage` and `_timing`.
   * Invalid options reject the call; errors of the generation itself (a disposed context, a
   * prompt that does not fit) reject the first `next()` of the stream.
   */
  create(params: ChatCompletionRequest & { stream: true }): Promise<AsyncIterable<ChatCompletionChunk>>;
  create(params: ChatCompletionRequest & { stream?: false | null }): Promise<ChatCompletionResponse>;
  create(params: ChatCompletionRequest): Promise<ChatCompletionResponse | AsyncIterable<ChatCompletionChunk>>;
  async create(request: ChatCompletionRequest): Promise<ChatCompletionResponse | AsyncIterable<ChatCompletionChunk>> {
    const params = openAiRequest(request);
    const context = this.context();
    const options = this.options(params);
    const model = params.model ?? this.modelName;
    if (params.stream) {
      return this.createStream(context, params, options, model);
    }
    // Taken now: the generation keeps the call's place while the messages are fitted.
    const turn = context.takeTurn();
    try {
      const fitted = await this.fit(params, options, context);
      const result = await context.generateResultInTurn(this.prompt(params, fitted), options, turn);
      return { ...response(result, options, model), ...(fitted !== undefined ? { _context: fitted.meta } : {}) };
    } finally {
      turn.done();
    }
  }

  /**
   * Answer every request together on the context's sequences (up to its `maxSequences` at a
   * time, one forward pass per token for all of them; local-llm-js-core's `createBatch`). Each
   * response equals what {@link create} gives its request alone (greedy: token for token),
   * context overflow included: each request's messages are fitted by its strategy (`onOverflow`
   * is called per request, in order; a request that cannot fit rejects the whole batch with
   * CONTEXT_EXHAUSTED before any generation), its response carries its `_context`, and under
   * 'sliding_window' its own sequence shifts while generating. Requests may offer tools and use
   * every other option of {@link create}, but may not stream (INVALID_OPTION).
   */
  async createBatch(requests: ChatCompletionRequest[]): Promise<ChatCompletionResponse[]> {
    if (!Array.isArray(requests)) {
      throw invalidOption('paramsList', requests, 'an array of chat completion requests');
    }
    const paramsList = requests.map(openAiRequest);
    const context = this.context();
    const list = paramsList.map((params) => {
      if (params.stream === true) {
        throw invalidOption('stream', params.stream, 'false or unset in createBatch');
      }
      return { options: this.options(params), model: params.model ?? this.modelName };
    });
    const turn = context.takeTurn();
    try {
      const fitted: (Fitted | undefined)[] = [];
      for (const [i, params] of paramsList.entries()) {
        fitted.push(await this.fit(params, list[i].options, context));
      }
      const results = await context.generateBatchResultsInTurn(
        paramsList.map((params, i) => this.prompt(params, fitted[i])),
        list.map((l) => l.options),
        turn,
      );
      return results.map((result, i) => {
        const meta = fitted[i]?.meta;
        return {
          ...response(result, list[i].options, list[i].model),
          ...(meta !== undefined ? { _context: meta } : {}),
        };
      });
    } finally {
      turn.done();
    }
  }

  private async *createStream(
    context: InferenceContext,
    params: Request,
    options: GenerateOptions,
    model: string,
  ): AsyncGenerator<ChatCompletionChunk> {
    // Overflow errors (CONTEXT_EXHAUSTED) reject the first next(), as generation errors do.
    const fitted = await this.fit(params, options, context);
    const id = createId();
    const created = Math.floor(Date.now() / 1000);
    const withLogprobs = options.nProbs !== undefined;
    const chunk = (
      delta: ChatCompletionChunk['choices'][0]['delta'],
      finish: ChatFinishReason | null,
      logprobs?: ChatCompletionTokenLogprob[],
    ): ChatCompletionChunk => ({
      id,
      object: 'chat.completion.chunk',
      created,
      model,
      choices: [
        {
          index: 0,
          delta,
          finish_reason: finish,
          ...(withLogprobs ? { logprobs: { content: logprobs ?? [], refusal: null } } : {}),
        },
      ],
    });
    let result: GenerationResult | null = null;
    const parts = context.streamParts(this.prompt(params, fitted), options, (r) => {
      result = r;
    });
    try {
      // The first part (or the end) before the role chunk, so that errors reject the first next().
      let next = await parts.next();
      yield chunk({ role: 'assistant' }, null);
      while (next.done !== true) {
        const part = next.value;
        const delta =
          part.reasoning !== undefined
            ? { reasoning_content: part.reasoning }
            : part.text === ''
              ? {}
              : { content: part.text };
        yield chunk(delta, null, part.logprobs);
        next = await parts.next();
      }
    } finally {
      await parts.return(undefined);
    }
    const final = result as GenerationResult | null;
    if (final !== null) {
      if (final.toolCalls.length > 0) {
        const toolCalls = final.toolCalls.map((c, index) => ({ index, ...c }));
        yield chunk({ tool_calls: toolCalls }, null);
      }
      yield {
        ...chunk({}, final.openAiFinishReason),
        usage: usage(final),
        _timing: final.timing,
        ...(fitted !== undefined ? { _context: fitted.meta } : {}),
      };
      if (params.stream_options?.include_usage === true) {
        // OpenAI's usage chunk: no choices, the token counts.
        yield { id, object: 'chat.completion.chunk', created, model, choices: [], usage: usage(final) };
      }
    }
  }
}
