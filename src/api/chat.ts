import type { InferenceContext } from './context';
import type {
  ChatCompletionChunk,
  ChatCompletionRequest,
  ChatCompletionResponse,
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
      signal: params.signal,
      responseFormat: params.response_format,
      grammar: params.grammar,
    };
  }

  /**
   * Answer `params.messages` (templated with the model's chat template). With `stream: true`
   * resolves to an async iterable of chunks: the first carries the role, then one chunk per
   * piece of text, and the last `finish_reason`, `usage` and `_timing`.
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
    const result = await context.generateResult({ messages: params.messages }, options);
    return {
      id: createId(),
      object: 'chat.completion',
      created: Math.floor(Date.now() / 1000),
      model,
      choices: [{ index: 0, message: { role: 'assistant', content: result.text }, finish_reason: result.openAiFinishReason }],
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
    const chunk = (delta: { role?: 'assistant'; content?: string }, finish: ChatFinishReason | null): ChatCompletionChunk => ({
      id,
      object: 'chat.completion.chunk',
      created,
      model,
      choices: [{ index: 0, delta, finish_reason: finish }],
    });
    let result: GenerationResult | null = null;
    const pieces = context.streamPieces({ messages: params.messages }, options, (r) => {
      result = r;
    });
    yield chunk({ role: 'assistant' }, null);
    for await (const piece of pieces) {
      yield chunk({ content: piece }, null);
    }
    const final = result as GenerationResult | null;
    if (final !== null) {
      yield { ...chunk({}, final.openAiFinishReason), usage: usage(final), _timing: final.timing };
    }
  }
}
