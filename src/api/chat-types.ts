// OpenAI-shaped chat completion requests, responses and stream chunks (`ai.chat.completions`).
import type {
  ChatCompletionLogprobs,
  ChatCompletionTool,
  ChatCompletionToolCall,
  ChatCompletionToolCallDelta,
  ChatCompletionToolChoice,
  ChatFinishReason,
  ChatMessage,
  ContextMetadata,
  ContextOverflowStrategy,
  CustomTool,
  InferenceMetrics,
  ReasoningFormat,
  ResponseFormat,
} from './types';

/** OpenAI-style chat completion request. */
export interface ChatCompletionRequest {
  messages: ChatMessage[];
  model?: string;
  // As in OpenAI's API, `null` means the default for the options that allow it.
  temperature?: number | null;
  top_p?: number | null;
  top_k?: number;
  max_tokens?: number | null;
  /** OpenAI's newer name for `max_tokens` (both set must agree). */
  max_completion_tokens?: number | null;
  /** Choices per request: only 1 (anything else is INVALID_OPTION). */
  n?: number | null;
  stream?: boolean | null;
  /** With `include_usage: true` a stream ends with a chunk of no choices and the token counts. */
  stream_options?: { include_usage?: boolean } | null;
  stop?: string | string[] | null;
  /** Random seed (see `GenerateOptions.seed`). */
  seed?: number | null;
  frequency_penalty?: number | null;
  presence_penalty?: number | null;
  /** Addition: locally typical sampling mass (1 = off), like llama.cpp's `typical_p`. */
  typical_p?: number;
  /** Biases added to token logits, by token id (OpenAI's `logit_bias`; see `GenerateOptions.logitBias`). */
  logit_bias?: Readonly<Record<string, number | false>> | null;
  /** Addition (llama-server's name): see `GenerateOptions.minP`. */
  min_p?: number;
  /** Addition (llama-server's name): see `GenerateOptions.repeatPenalty`. */
  repeat_penalty?: number;
  /** Addition (llama-server's name): see `GenerateOptions.penaltyLastN`. */
  repeat_last_n?: number;
  /** Addition (llama-server's name): see `GenerateOptions.dryMultiplier`. */
  dry_multiplier?: number;
  /** Addition (llama-server's name): see `GenerateOptions.dryBase`. */
  dry_base?: number;
  /** Addition (llama-server's name): see `GenerateOptions.dryAllowedLength`. */
  dry_allowed_length?: number;
  /** Addition (llama-server's name): see `GenerateOptions.dryPenaltyLastN`. */
  dry_penalty_last_n?: number;
  /** Addition (llama-server's name): see `GenerateOptions.drySequenceBreakers`. */
  dry_sequence_breakers?: string[];
  /** Addition (llama-server's name): see `GenerateOptions.topNSigma`. */
  top_n_sigma?: number;
  /** Addition (llama-server's name): see `GenerateOptions.xtcProbability`. */
  xtc_probability?: number;
  /** Addition (llama-server's name): see `GenerateOptions.xtcThreshold`. */
  xtc_threshold?: number;
  /** Addition (llama-server's name): see `GenerateOptions.mirostat`. */
  mirostat?: 0 | 1 | 2;
  /** Addition (llama-server's name): see `GenerateOptions.mirostatTau`. */
  mirostat_tau?: number;
  /** Addition (llama-server's name): see `GenerateOptions.mirostatEta`. */
  mirostat_eta?: number;
  /** Addition (llama-server's name): see `GenerateOptions.ignoreEos`. */
  ignore_eos?: boolean;
  /** Functions the model may call (OpenAI's `custom` tools are INVALID_OPTION). */
  tools?: Array<ChatCompletionTool | CustomTool>;
  /** Which tools the model may or must call (default 'auto'). */
  tool_choice?: ChatCompletionToolChoice;
  /** Return each generated token's log-probability (OpenAI's `logprobs`). */
  logprobs?: boolean | null;
  /** Most likely alternatives per token, 0..20 (needs `logprobs: true`). */
  top_logprobs?: number | null;
  /** Addition: stops native decoding; the call (or the iteration) rejects with an AbortError. */
  signal?: AbortSignal;
  /** JSON output: `{type: 'json_object'}` or `{type: 'json_schema', json_schema: {name, schema, strict}}`. */
  response_format?: ResponseFormat;
  /** A GBNF grammar the output must match (start rule `root`). */
  grammar?: string;
  /** This request's overflow strategy (local-llm-js-core), overriding `contextOverflow`. */
  context_overflow?: ContextOverflowStrategy;
  /**
   * Addition (llama-server): `'auto'` (default) / `'deepseek'` return a `<think>` block as
   * `message.reasoning_content` (`delta.reasoning_content` when streaming); `'none'` keeps it in
   * `content`.
   */
  reasoning_format?: ReasoningFormat;
  /** Addition (llama-server): extra chat template variables, e.g. `{ enable_thinking: false }`. */
  chat_template_kwargs?: Record<string, unknown>;
  /** Addition (llama.rn): most tokens of reasoning before its close tag is forced. */
  thinking_budget_tokens?: number;
}

/** Token counts of a completion. */
export interface ChatCompletionUsage {
  prompt_tokens: number;
  completion_tokens: number;
  total_tokens: number;
}

/** A non-streamed chat completion. */
export interface ChatCompletionResponse {
  id: string;
  object: 'chat.completion';
  created: number;
  model: string;
  choices: Array<{
    index: number;
    /** `refusal` is always null (OpenAI's field; a local model has no refusal channel). */
    message: {
      role: 'assistant';
      content: string | null;
      refusal: null;
      tool_calls?: ChatCompletionToolCall[];
      /** Addition (llama-server, DeepSeek's API): the reasoning block (see `reasoning_format`). */
      reasoning_content?: string;
    };
    finish_reason: ChatFinishReason;
    /** The tokens' log-probabilities when `logprobs` was requested, else `null` (as OpenAI). */
    logprobs: ChatCompletionLogprobs | null;
  }>;
  usage: ChatCompletionUsage;
  _timing?: InferenceMetrics;
  /** How the messages were fitted into the context (with `contextOverflow`). */
  _context?: ContextMetadata;
}

/** One chunk of a streamed chat completion; the last carries `finish_reason` and `_timing`. */
export interface ChatCompletionChunk {
  id: string;
  object: 'chat.completion.chunk';
  created: number;
  model: string;
  choices: Array<{
    index: number;
    delta: {
      role?: 'assistant';
      content?: string;
      tool_calls?: ChatCompletionToolCallDelta[];
      /** Addition (llama-server): a piece of the reasoning block. */
      reasoning_content?: string;
    };
    finish_reason: ChatFinishReason | null;
    /** The log-probabilities of this chunk's tokens, when `logprobs` was requested. */
    logprobs?: ChatCompletionLogprobs | null;
  }>;
  /** Addition (on the last chunk): token counts, as OpenAI's `stream_options.include_usage`. */
  usage?: ChatCompletionUsage;
  _timing?: InferenceMetrics;
  /** How the messages were fitted into the context (with `contextOverflow`). */
  _context?: ContextMetadata;
}
