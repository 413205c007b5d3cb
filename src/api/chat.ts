import type { InferenceContext, PromptSource } from './context';
import { LocalLLMError, LocalLLMErrorCode } from './errors';
import type {
  ChatCompletionChunk,
  ChatCompletionRequest,
  ChatCompletionResponse,
  ChatCompletionTokenLogprob,
  ChatFinishReason,
  GenerateOptions,
  GenerationResult,
} from './types';

function createId(): string {
  const c = (globalThis as { crypto?: { randomUUID?: () => string } }).crypto;
  const rand = c?.randomUUID?.() ?? `${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 10)}`;
  return `chatcmpl-${rand}`;
}

function usage(result: GenerationResult) {
  return {
    prompt_tokens: result.promptTokens,
    completion_tokens: result.completionTokens,
    total_tokens: result.promptTokens + result.completionTokens,
  };
}

/** The alternatives per token `params` asks for; undefined without `logprobs: true`. */
function topLogprobs(params: ChatCompletionRequest): number | undefined {
  const n = params.top_logprobs;
  if (n !== undefined && !(Number.isInteger(n) && n >= 0 && n <= 20)) {
    throw new LocalLLMError(LocalLLMErrorCode.INFERENCE_FAILED, 'top_logprobs must be an integer from 0 to 20');
  }
  if (params.logprobs !== true) {
    if (n !== undefined) {
      throw new LocalLLMError(LocalLLMErrorCode.INFERENCE_FAILED, 'top_logprobs needs logprobs: true');
    }
    return undefined;
  }
  return n ?? 0;
}

/** OpenAI-style chat completions on one context (`ai.chat.completions`). */
export class ChatCompletions {
  /** @internal Created by {@link LocalLLM}. */
  constructor(
    private readonly context: () => InferenceContext,
    private readonly modelName: string,
  ) {}

  private options(params: ChatCompletionRequest): GenerateOptions {
    return {
      maxTokens: params.max_tokens,
      temperature: params.temperature,
      topP: params.top_p,
      topK: params.top_k,
      typicalP: params.typical_p,
      seed: params.seed,
      stop: params.stop === undefined ? undefined : Array.isArray(params.stop) ? params.stop : [params.stop],
      frequencyPenalty: params.frequency_penalty,
      presencePenalty: params.presence_penalty,
      nProbs: topLogprobs(params),
      signal: params.signal,
    };
  }

  private prompt(params: ChatCompletionRequest): PromptSource {
    return { messages: params.messages, tools: params.tools, toolChoice: params.tool_choice };
  }

  /**
   * Answer `params.messages` (templated with the model's chat template, offering
   * `params.tools`). With `stream: true` resolves to an async iterable of chunks: the first
   * carries the role, then one chunk per piece of text, then (when the model calls tools) one
   * chunk with `delta.tool_calls`, and the last `finish_reason`, `usage` and `_timing`.
   */
  create(params: ChatCompletionRequest & { stream: true }): Promise<AsyncIterable<ChatCompletionChunk>>;
  create(params: ChatCompletionRequest & { stream?: false }): Promise<ChatCompletionResponse>;
  create(params: ChatCompletionRequest): Promise<ChatCompletionResponse | AsyncIterable<ChatCompletionChunk>>;
  async create(params: ChatCompletionRequest): Promise<ChatCompletionResponse | AsyncIterable<ChatCompletionChunk>> {
    const context = this.context();
    const options = this.options(params);
    const model = params.model ?? this.modelName;
    if (params.stream) {
      return this.createStream(context, params, options, model);
    }
    const result = await context.generateResult(this.prompt(params), options);
    const calls = result.toolCalls.length > 0;
    const message = calls
      ? { role: 'assistant' as const, content: result.text === '' ? null : result.text, tool_calls: result.toolCalls }
      : { role: 'assistant' as const, content: result.text };
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
          ...(options.nProbs !== undefined ? { logprobs: { content: result.logprobs ?? [] } } : {}),
        },
      ],
      usage: usage(result),
      _timing: result.timing,
    };
  }

  private async *createStream(
    context: InferenceContext,
    params: ChatCompletionRequest,
    options: GenerateOptions,
    model: string,
  ): AsyncGenerator<ChatCompletionChunk> {
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
        { index: 0, delta, finish_reason: finish, ...(withLogprobs ? { logprobs: { content: logprobs ?? [] } } : {}) },
      ],
    });
    let result: GenerationResult | null = null;
    const parts = context.streamParts(this.prompt(params), options, (r) => {
      result = r;
    });
    yield chunk({ role: 'assistant' }, null);
    for await (const part of parts) {
      yield chunk(part.text === '' ? {} : { content: part.text }, null, part.logprobs);
    }
    const final = result as GenerationResult | null;
    if (final !== null) {
      if (final.toolCalls.length > 0) {
        const toolCalls = final.toolCalls.map((c, index) => ({ index, ...c }));
        yield chunk({ tool_calls: toolCalls }, null);
      }
      yield { ...chunk({}, final.openAiFinishReason), usage: usage(final), _timing: final.timing };
    }
  }
}
