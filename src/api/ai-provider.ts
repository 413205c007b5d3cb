// A Vercel AI SDK language model (specification v3, the one `ai` 6 calls) on top of this
// package's chat API: text, streaming, tool calls and JSON output through the engine's grammar.
// The types below are our own structural copies of the parts of `@ai-sdk/provider` we use, so
// the package needs no AI SDK dependency; tests check them against the real ones.
import type { InferenceContext } from './context';
import { LocalLLMError, LocalLLMErrorCode, disposedError } from './errors';
import type { Model } from './model';
import type {
  ChatCompletionTool,
  ChatCompletionToolCall,
  ChatCompletionToolChoice,
  ChatMessage,
  GenerateOptions,
  GenerationResult,
  NativeFinishReason,
} from './types';

/** A JSON value (what the AI SDK exchanges as tool inputs, outputs and metadata). */
type JsonValue = null | string | number | boolean | { [key: string]: JsonValue | undefined } | JsonValue[];

/**
 * A JSON value the SDK hands in: possibly read-only (`ai` 7's `providerOptions` are), so that
 * every major's values are accepted.
 */
type JsonInput =
  null | string | number | boolean | { readonly [key: string]: JsonInput | undefined } | readonly JsonInput[];

/** A part of a prompt message, as the AI SDK passes it (only the fields used here are typed). */
type PromptPart =
  | { type: 'text'; text: string }
  | { type: 'reasoning'; text: string }
  | { type: 'file'; mediaType: string; data: unknown }
  | { type: 'tool-call'; toolCallId: string; toolName: string; input: unknown }
  | { type: 'tool-result'; toolCallId: string; toolName: string; output: ToolResultOutput }
  | { type: 'tool-approval-response'; approvalId: string; approved: boolean };

/** The output of a tool call in a prompt (AI SDK `LanguageModelV3ToolResultOutput`). */
type ToolResultOutput =
  | { type: 'text' | 'error-text'; value: string }
  | { type: 'json' | 'error-json'; value: unknown }
  | { type: 'execution-denied'; reason?: string }
  | { type: 'content'; value: Array<{ type: string; text?: string }> };

/** A message of an AI SDK prompt (`LanguageModelV3Message`). */
export type AiSdkMessage =
  { role: 'system'; content: string } | { role: 'user' | 'assistant' | 'tool'; content: PromptPart[] };

/** A tool offered by the AI SDK: a function with a JSON schema, or a provider-defined tool. */
type AiSdkTool =
  | { type: 'function'; name: string; description?: string; inputSchema: unknown }
  | { type: 'provider'; id: string; name: string; args: Record<string, unknown> };

/** The options of an AI SDK model call (`LanguageModelV3CallOptions`). */
export interface AiSdkCallOptions {
  prompt: AiSdkMessage[];
  maxOutputTokens?: number;
  temperature?: number;
  stopSequences?: string[];
  topP?: number;
  topK?: number;
  presencePenalty?: number;
  frequencyPenalty?: number;
  responseFormat?: { type: 'text' } | { type: 'json'; schema?: unknown; name?: string; description?: string };
  seed?: number;
  tools?: AiSdkTool[];
  toolChoice?: { type: 'auto' | 'none' | 'required' } | { type: 'tool'; toolName: string };
  includeRawChunks?: boolean;
  abortSignal?: AbortSignal;
  headers?: Record<string, string | undefined>;
  providerOptions?: Record<string, Readonly<Record<string, JsonInput | undefined>>>;
}

/** Why a generation ended, in the AI SDK's terms plus the engine's own reason. */
export interface AiSdkFinishReason {
  unified: 'stop' | 'length' | 'content-filter' | 'tool-calls' | 'error' | 'other';
  raw: string | undefined;
}

/** Token counts in the AI SDK's shape (cache counts are not reported by this engine). */
export interface AiSdkUsage {
  inputTokens: { total: number; noCache: undefined; cacheRead: undefined; cacheWrite: undefined };
  outputTokens: { total: number; text: number; reasoning: undefined };
}

/** A warning about a setting this provider ignores. */
export type AiSdkWarning = { type: 'unsupported'; feature: string; details?: string };

/** What the AI SDK gets from a generation: text and tool calls. */
export type AiSdkContent =
  | { type: 'text' | 'reasoning'; text: string }
  | { type: 'tool-call'; toolCallId: string; toolName: string; input: string };

/** Provider metadata: the engine's timings under `local-llm`. */
type ProviderMetadata = Record<string, Record<string, JsonValue>>;

/** The result of {@link LocalLLMProvider.doGenerate}. */
export interface AiSdkGenerateResult {
  content: AiSdkContent[];
  finishReason: AiSdkFinishReason;
  usage: AiSdkUsage;
  warnings: AiSdkWarning[];
  response: { id: string; timestamp: Date; modelId: string };
  providerMetadata: ProviderMetadata;
}

/** A part of the stream of {@link LocalLLMProvider.doStream}. */
export type AiSdkStreamPart =
  | { type: 'stream-start'; warnings: AiSdkWarning[] }
  | { type: 'response-metadata'; id: string; timestamp: Date; modelId: string }
  | { type: 'text-start' | 'text-end' | 'reasoning-start' | 'reasoning-end'; id: string }
  | { type: 'text-delta' | 'reasoning-delta'; id: string; delta: string }
  | { type: 'tool-input-start'; id: string; toolName: string }
  | { type: 'tool-input-delta'; id: string; delta: string }
  | { type: 'tool-input-end'; id: string }
  | { type: 'tool-call'; toolCallId: string; toolName: string; input: string }
  | { type: 'finish'; finishReason: AiSdkFinishReason; usage: AiSdkUsage; providerMetadata: ProviderMetadata };

/** Options of {@link LocalLLMProvider} (local-llm-js-core's `LocalLLMProviderConfig`). */
export interface LocalLLMProviderConfig {
  /**
   * Accepted for compatibility with local-llm-js-core; this engine has no vision, so image and
   * file parts in a prompt fail with VISION_FAILED whatever is given here.
   */
  visionPromptBuilder?: unknown;
}

const UNIFIED_FINISH: Record<NativeFinishReason, AiSdkFinishReason['unified']> = {
  eog: 'stop',
  stop_string: 'stop',
  grammar_complete: 'stop',
  max_tokens: 'length',
  context_full: 'length',
  tool_calls: 'tool-calls',
  cancelled: 'other',
  grammar_dead_end: 'error',
};

function finishReason(result: GenerationResult): AiSdkFinishReason {
  return { unified: UNIFIED_FINISH[result.finishReason], raw: result.finishReason };
}

function usage(result: GenerationResult): AiSdkUsage {
  return {
    inputTokens: { total: result.promptTokens, noCache: undefined, cacheRead: undefined, cacheWrite: undefined },
    outputTokens: { total: result.completionTokens, text: result.completionTokens, reasoning: undefined },
  };
}

function metadata(result: GenerationResult): ProviderMetadata {
  return { 'local-llm': { finishReason: result.finishReason, timing: { ...result.timing } } };
}

/** The text a tool result gives the model. */
function toolOutputText(output: ToolResultOutput): string {
  switch (output.type) {
    case 'text':
    case 'error-text':
      return output.value;
    case 'json':
    case 'error-json':
      return JSON.stringify(output.value);
    case 'execution-denied':
      return output.reason ? `Tool execution denied: ${output.reason}` : 'Tool execution denied';
    case 'content':
      return output.value.map((p) => (p.type === 'text' ? (p.text ?? '') : '')).join('');
  }
}

function noVision(): LocalLLMError {
  return new LocalLLMError(
    LocalLLMErrorCode.VISION_FAILED,
    'this engine is text-only: file and image parts in a prompt are not supported',
  );
}

/** The chat messages of an AI SDK prompt. */
export function toChatMessages(prompt: AiSdkMessage[]): ChatMessage[] {
  if (!Array.isArray(prompt)) {
    throw new LocalLLMError(LocalLLMErrorCode.INVALID_OPTION, 'prompt must be an array of messages');
  }
  const messages: ChatMessage[] = [];
  for (const message of prompt) {
    if (message.role === 'system') {
      messages.push({ role: 'system', content: message.content });
      continue;
    }
    let text = '';
    const calls: ChatCompletionToolCall[] = [];
    for (const part of message.content) {
      switch (part.type) {
        case 'text':
          text += part.text;
          break;
        case 'file':
          throw noVision();
        case 'tool-call':
          calls.push({
            id: part.toolCallId,
            type: 'function',
            function: { name: part.toolName, arguments: JSON.stringify(part.input ?? {}) },
          });
          break;
        case 'tool-result':
          if (message.role === 'tool') {
            messages.push({
              role: 'tool',
              tool_call_id: part.toolCallId,
              name: part.toolName,
              content: toolOutputText(part.output),
            });
          }
          break;
        // Reasoning is not fed back; approvals are the SDK's business.
      }
    }
    if (message.role === 'assistant') {
      messages.push(
        calls.length > 0
          ? { role: 'assistant', content: text === '' ? null : text, tool_calls: calls }
          : { role: 'assistant', content: text },
      );
    } else if (message.role === 'user') {
      messages.push({ role: 'user', content: text });
    }
  }
  return messages;
}

/** Our chat request for an AI SDK call: the tools offered, the generation options, warnings. */
function toRequest(options: AiSdkCallOptions): {
  tools: ChatCompletionTool[] | undefined;
  toolChoice: ChatCompletionToolChoice | undefined;
  generate: GenerateOptions;
  warnings: AiSdkWarning[];
} {
  const warnings: AiSdkWarning[] = [];
  const tools: ChatCompletionTool[] = [];
  for (const tool of options.tools ?? []) {
    if (tool.type === 'function') {
      tools.push({
        type: 'function',
        function: {
          name: tool.name,
          ...(tool.description !== undefined ? { description: tool.description } : {}),
          parameters: tool.inputSchema as Record<string, unknown>,
        },
      });
    } else {
      warnings.push({ type: 'unsupported', feature: `provider-defined tool ${tool.name}` });
    }
  }
  const choice = options.toolChoice;
  const toolChoice: ChatCompletionToolChoice | undefined =
    choice === undefined
      ? undefined
      : choice.type === 'tool'
        ? { type: 'function', function: { name: choice.toolName } }
        : choice.type;
  const format = options.responseFormat;
  const generate: GenerateOptions = {
    // A <think> block comes back as a reasoning part, as the SDK's other providers do.
    reasoningFormat: 'auto',
    maxTokens: options.maxOutputTokens,
    temperature: options.temperature,
    topP: options.topP,
    topK: options.topK,
    presencePenalty: options.presencePenalty,
    frequencyPenalty: options.frequencyPenalty,
    seed: options.seed,
    stop: options.stopSequences,
    signal: options.abortSignal,
    responseFormat:
      format?.type !== 'json'
        ? undefined
        : format.schema !== undefined && format.schema !== null
          ? {
              type: 'json_schema',
              json_schema: { name: format.name, schema: format.schema as Record<string, unknown> },
            }
          : { type: 'json_object' },
  };
  // This provider's own options (`providerOptions['local-llm']`), checked where they become
  // native values (INVALID_OPTION naming them).
  const own = options.providerOptions?.['local-llm'] ?? {};
  for (const key of PROVIDER_OPTIONS) {
    if (own[key] !== undefined) {
      (generate as Record<string, unknown>)[key] = own[key];
    }
  }
  return { tools: tools.length > 0 ? tools : undefined, toolChoice, generate, warnings };
}

/** The generate options `providerOptions['local-llm']` may set. */
const PROVIDER_OPTIONS = [
  'grammar',
  'reasoningFormat',
  'enableThinking',
  'thinkingBudgetTokens',
  'thinkingBudgetMessage',
  'chatTemplateKwargs',
  'minP',
  'repeatPenalty',
] as const satisfies ReadonlyArray<keyof GenerateOptions>;

function responseId(): string {
  const c = (globalThis as { crypto?: { randomUUID?: () => string } }).crypto;
  return `local-llm-${c?.randomUUID?.() ?? `${Date.now().toString(36)}-${Math.random().toString(36).slice(2, 10)}`}`;
}

/**
 * A Vercel AI SDK language model (specification v3) running on an {@link InferenceContext}:
 * pass it as `model` to `generateText`, `streamText`, `generateObject` or `streamObject`.
 * Get one from `ai.languageModel()`. Function tools are offered through the model's chat
 * template (calls come back as `tool-call` content); `responseFormat: { type: 'json', schema }`
 * constrains the output with a grammar made from the schema. Calls on one context run one at
 * a time.
 */
export class LocalLLMProvider {
  /** The AI SDK specification this model implements. */
  readonly specificationVersion = 'v3' as const;
  /** The provider's name. */
  readonly provider = 'local-llm';
  /** The model's id (default: the model file's name). */
  readonly modelId: string;
  /** URLs the model reads itself: none (the SDK downloads files, which this engine rejects anyway). */
  readonly supportedUrls: Record<string, RegExp[]> = {};

  constructor(
    private readonly model: Model,
    private readonly context: InferenceContext,
    modelId: string,
    _config: LocalLLMProviderConfig = {},
  ) {
    this.modelId = modelId;
  }

  /** The context, or NOT_INITIALIZED when the model or the context has been disposed. */
  private liveContext(): InferenceContext {
    if (this.model.disposed) {
      throw disposedError('model');
    }
    return this.context;
  }

  /** Generate a whole answer (what `generateText` and `generateObject` call). */
  async doGenerate(options: AiSdkCallOptions): Promise<AiSdkGenerateResult> {
    const context = this.liveContext();
    const { tools, toolChoice, generate, warnings } = toRequest(options);
    const messages = toChatMessages(options.prompt);
    const result = await context.generateResult({ messages, tools, toolChoice }, generate);
    const content: AiSdkContent[] = [];
    if (result.reasoning !== undefined) {
      content.push({ type: 'reasoning', text: result.reasoning });
    }
    if (result.text !== '') {
      content.push({ type: 'text', text: result.text });
    }
    for (const call of result.toolCalls) {
      content.push({
        type: 'tool-call',
        toolCallId: call.id,
        toolName: call.function.name,
        input: call.function.arguments,
      });
    }
    return {
      content,
      finishReason: finishReason(result),
      usage: usage(result),
      warnings,
      response: { id: responseId(), timestamp: new Date(), modelId: this.modelId },
      providerMetadata: metadata(result),
    };
  }

  /**
   * Stream an answer (what `streamText` and `streamObject` call). The engine decodes only while
   * the stream is read; cancelling the stream or aborting the call stops it, and errors
   * (including the abort) error the stream.
   */
  async doStream(options: AiSdkCallOptions): Promise<{ stream: ReadableStream<AiSdkStreamPart> }> {
    const context = this.liveContext();
    const { tools, toolChoice, generate, warnings } = toRequest(options);
    const messages = toChatMessages(options.prompt);
    let result: GenerationResult | null = null;
    const parts = context.streamParts({ messages, tools, toolChoice }, generate, (r) => {
      result = r;
    });
    const modelId = this.modelId;
    const textId = 'text-0';
    const reasoningId = 'reasoning-0';
    let started = false;
    let reasoning = false;
    // The reasoning block ends before the answer's first piece (or at the end).
    const endReasoning = (): AiSdkStreamPart[] => {
      const out: AiSdkStreamPart[] = reasoning ? [{ type: 'reasoning-end', id: reasoningId }] : [];
      reasoning = false;
      return out;
    };
    const pending: AiSdkStreamPart[] = [
      { type: 'stream-start', warnings },
      { type: 'response-metadata', id: responseId(), timestamp: new Date(), modelId },
    ];
    const finish = (final: GenerationResult): AiSdkStreamPart[] => {
      const out: AiSdkStreamPart[] = [
        ...endReasoning(),
        ...(started ? [{ type: 'text-end' as const, id: textId }] : []),
      ];
      for (const call of final.toolCalls) {
        const id = call.id;
        out.push(
          { type: 'tool-input-start', id, toolName: call.function.name },
          { type: 'tool-input-delta', id, delta: call.function.arguments },
          { type: 'tool-input-end', id },
          { type: 'tool-call', toolCallId: id, toolName: call.function.name, input: call.function.arguments },
        );
      }
      out.push({
        type: 'finish',
        finishReason: finishReason(final),
        usage: usage(final),
        providerMetadata: metadata(final),
      });
      return out;
    };
    const stream = new ReadableStream<AiSdkStreamPart>({
      async pull(controller) {
        try {
          while (pending.length === 0) {
            const next = await parts.next();
            if (next.done === true) {
              const final = result as GenerationResult | null;
              if (final === null) {
                throw new LocalLLMError(LocalLLMErrorCode.STREAM_FAILED, 'the generation ended without a result');
              }
              for (const part of finish(final)) {
                controller.enqueue(part);
              }
              controller.close();
              return;
            }
            const piece = next.value.reasoning;
            if (piece !== undefined && piece !== '') {
              if (!reasoning && !started) {
                reasoning = true;
                pending.push({ type: 'reasoning-start', id: reasoningId });
              }
              if (reasoning) {
                pending.push({ type: 'reasoning-delta', id: reasoningId, delta: piece });
              }
            }
            if (next.value.text !== '') {
              if (!started) {
                started = true;
                pending.push(...endReasoning(), { type: 'text-start', id: textId });
              }
              pending.push({ type: 'text-delta', id: textId, delta: next.value.text });
            }
          }
          controller.enqueue(pending.shift() as AiSdkStreamPart);
        } catch (e) {
          controller.error(e);
        }
      },
      async cancel() {
        await parts.return(undefined);
      },
    });
    return { stream };
  }
}
