// Conversions between the generated bindings' records and this package's public types.
import type {
  ChatMessage as NativeChatMessage,
  DeviceInfo as NativeBackendDevice,
  GenerationResult as NativeGenerationResult,
  TokenLogprob as NativeTokenLogprob,
  Tool as NativeTool,
  ToolCall as NativeToolCall,
  ToolChoice as NativeToolChoice,
  MemoryEstimate as NativeMemoryEstimate,
  ModelFileInfo as NativeModelFileInfo,
  ModelInfo as NativeModelInfo,
  Perf,
} from '../generated/local_llm_ffi';
import { getBindings } from './bindings';
import { LocalLLMError, LocalLLMErrorCode } from './errors';
import type {
  BackendDevice,
  ChatCompletionTokenLogprob,
  ChatCompletionTool,
  ChatCompletionToolCall,
  CustomTool,
  CustomToolCall,
  ChatCompletionToolChoice,
  ChatCompletionTopLogprob,
  ChatFinishReason,
  ChatMessage,
  GenerationResult,
  InferenceMetrics,
  MemoryEstimate,
  ModelFileInfo,
  ModelInfo,
  NativeFinishReason,
} from './types';

/** `values` without its `undefined` entries, so that a generated record's defaults fill them. */
export function defined<T extends object>(values: T): Partial<T> {
  return Object.fromEntries(Object.entries(values).filter(([, v]) => v !== undefined)) as Partial<T>;
}

/** A native 64-bit count as a JS number. */
export function num(v: bigint | number): number {
  return typeof v === 'bigint' ? Number(v) : v;
}

/** A native `Perf` as local-llm-rn's `InferenceMetrics`. */
export function toMetrics(p: Perf): InferenceMetrics {
  return {
    promptEvalMs: p.promptEvalMs,
    generationMs: p.generationMs,
    promptTokens: p.promptTokens,
    generatedTokens: p.generatedTokens,
    promptTokensPerSec: p.promptTokensPerSec,
    generatedTokensPerSec: p.generatedTokensPerSec,
    ...(p.draftTokens > 0 && {
      draftTokens: p.draftTokens,
      draftAcceptedTokens: p.draftAccepted,
      draftAcceptanceRate: p.draftAccepted / p.draftTokens,
    }),
  };
}

/** UTF-8 text of `bytes`, invalid sequences replaced by U+FFFD. */
function utf8(bytes: Uint8Array): string {
  const Decoder = (globalThis as { TextDecoder?: new (label: string) => { decode(b: Uint8Array): string } })
    .TextDecoder;
  if (Decoder !== undefined) {
    return new Decoder('utf-8').decode(bytes);
  }
  let escaped = '';
  bytes.forEach((b) => {
    escaped += `%${b.toString(16).padStart(2, '0')}`;
  });
  try {
    return decodeURIComponent(escaped);
  } catch {
    return Array.from(bytes, (b) => (b < 0x80 ? String.fromCharCode(b) : '\ufffd')).join('');
  }
}

function toTopLogprob(t: { logprob: number; bytes: ArrayBuffer }): ChatCompletionTopLogprob {
  const bytes = new Uint8Array(t.bytes);
  return { token: utf8(bytes), logprob: t.logprob, bytes: Array.from(bytes) };
}

/** Native token log-probabilities in OpenAI's shape. */
export function toLogprobs(l: NativeTokenLogprob[]): ChatCompletionTokenLogprob[] {
  return l.map((t) => ({ ...toTopLogprob(t), top_logprobs: t.top.map(toTopLogprob) }));
}

/** A native tool call in OpenAI's shape. */
function toToolCall(c: NativeToolCall): ChatCompletionToolCall {
  return { id: c.id, type: 'function', function: { name: c.name, arguments: c.arguments } };
}

/** A native generation result; `logprobs` is set when `withLogprobs`. */
export function toResult(r: NativeGenerationResult, withLogprobs = false): GenerationResult {
  return {
    text: r.text,
    ...(r.reasoning !== '' ? { reasoning: r.reasoning } : {}),
    toolCalls: r.toolCalls.map(toToolCall),
    ...(withLogprobs ? { logprobs: toLogprobs(r.logprobs) } : {}),
    tokens: Array.from(r.tokens),
    promptTokens: r.promptTokens,
    completionTokens: r.completionTokens,
    // The names are the engine's (FinishReason::name / openai_name in Rust).
    finishReason: getBindings().finishReasonName(r.finishReason) as NativeFinishReason,
    openAiFinishReason: getBindings().finishReasonOpenaiName(r.finishReason) as ChatFinishReason,
    timing: toMetrics(r.perf),
  };
}

/** The message text of a chat message (image parts are not supported; null content is empty). */
export function messageText(m: ChatMessage): string {
  if (typeof m.content === 'string') {
    return m.content;
  }
  if (m.content === null || m.content === undefined) {
    return '';
  }
  if (!Array.isArray(m.content)) {
    throw new LocalLLMError(
      LocalLLMErrorCode.INFERENCE_FAILED,
      `message content must be a string or an array of parts`,
    );
  }
  return m.content
    .map((part) => {
      if (part?.type === 'text' && typeof part.text === 'string') {
        return part.text;
      }
      if (part?.type === 'text') {
        throw invalid('a text content part needs its text (a string)');
      }
      if (part?.type === 'image_url') {
        throw new LocalLLMError(LocalLLMErrorCode.VISION_FAILED, 'image content is not supported by this engine');
      }
      throw invalid(`content parts of type ${JSON.stringify(part?.type)} are not supported (text parts only)`);
    })
    .join('');
}

function invalid(message: string): LocalLLMError {
  return new LocalLLMError(LocalLLMErrorCode.INVALID_OPTION, message);
}

/** A tool call of a request message as a native record. */
function toNativeToolCall(c: ChatCompletionToolCall | CustomToolCall): NativeToolCall {
  if (c?.type === 'custom') {
    throw invalid('custom tool calls are not supported (function tools only)');
  }
  if (typeof c?.function?.name !== 'string' || typeof c.function.arguments !== 'string') {
    throw invalid('a tool call needs function.name and function.arguments (JSON text)');
  }
  return { id: String(c.id ?? ''), name: c.function.name, arguments: c.function.arguments };
}

/** The role the engine and its templates know a message by: OpenAI's `developer` messages are instructions, `system`. */
export function nativeRole(role: ChatMessage['role']): string {
  return role === 'developer' ? 'system' : String(role);
}

/** Chat messages as native records. */
export function toNativeMessages(messages: ChatMessage[]): NativeChatMessage[] {
  if (!Array.isArray(messages) || messages.length === 0) {
    throw invalid('messages must be a non-empty array');
  }
  return messages.map((m) => ({
    role: nativeRole(m.role),
    content: m.content === null || m.content === undefined ? undefined : messageText(m),
    toolCalls: Array.isArray(m.tool_calls) ? m.tool_calls.map(toNativeToolCall) : [],
    toolCallId: m.tool_call_id === undefined ? undefined : String(m.tool_call_id),
    name: m.name === undefined ? undefined : String(m.name),
  }));
}

/** OpenAI tool definitions as native records (the parameters schema as JSON text). */
export function toNativeTools(tools: Array<ChatCompletionTool | CustomTool> | undefined): NativeTool[] {
  if (tools === undefined) {
    return [];
  }
  if (!Array.isArray(tools)) {
    throw invalid('tools must be an array');
  }
  return tools.map((t) => {
    if (t?.type !== 'function' || typeof t.function?.name !== 'string') {
      throw invalid("each tool must be {type: 'function', function: {name, ...}}");
    }
    return {
      name: t.function.name,
      description: t.function.description,
      parameters: t.function.parameters === undefined ? undefined : JSON.stringify(t.function.parameters),
    };
  });
}

/**
 * OpenAI's `allowed_tools` choice resolved: only the tools it lists (by function name) are
 * offered, and its mode is the choice. Other choices pass through.
 */
export function allowedTools<
  T extends { tools?: Array<ChatCompletionTool | CustomTool>; toolChoice?: ChatCompletionToolChoice },
>(chat: T): T {
  const choice = chat.toolChoice;
  if (typeof choice !== 'object' || choice === null || choice.type !== 'allowed_tools') {
    return chat;
  }
  const allowed = choice.allowed_tools;
  if (!Array.isArray(allowed?.tools) || (allowed.mode !== 'auto' && allowed.mode !== 'required')) {
    throw invalid("tool_choice.allowed_tools needs mode 'auto' or 'required' and a tools array");
  }
  const names = new Set(
    allowed.tools.map((t) => {
      const name = (t as { type?: unknown; function?: { name?: unknown } }).function?.name;
      if (t?.type !== 'function' || typeof name !== 'string') {
        throw invalid("tool_choice.allowed_tools.tools entries must be {type: 'function', function: {name}}");
      }
      return name;
    }),
  );
  const tools = (chat.tools ?? []).filter((t) => t?.type === 'function' && names.has(t.function?.name));
  const missing = [...names].filter((n) => !tools.some((t) => t.type === 'function' && t.function.name === n));
  if (missing.length > 0) {
    throw invalid(`tool_choice.allowed_tools names tools the request does not define: ${missing.join(', ')}`);
  }
  return { ...chat, tools, toolChoice: allowed.mode };
}

/** OpenAI's `tool_choice` as the native enum (undefined: the engine's default, 'auto'). */
export function toNativeToolChoice(choice: ChatCompletionToolChoice | undefined): NativeToolChoice | undefined {
  const { ToolChoice } = getBindings();
  switch (choice) {
    case undefined:
      return undefined;
    case 'none':
      return new ToolChoice.None();
    case 'auto':
      return new ToolChoice.Auto();
    case 'required':
      return new ToolChoice.Required();
    default:
      if (choice?.type === 'function' && typeof choice.function?.name === 'string') {
        return new ToolChoice.Function({ name: choice.function.name });
      }
      throw invalid(
        "tool_choice must be 'none', 'auto', 'required', {type: 'function', function: {name}} or {type: 'allowed_tools', ...}",
      );
  }
}

/** Native model facts. */
export function toModelInfo(i: NativeModelInfo): ModelInfo {
  const map = <V, W>(m: Map<string, V>, f: (v: V) => W): Record<string, W> => {
    const out: Record<string, W> = {};
    m.forEach((v, k) => {
      out[k] = f(v);
    });
    return out;
  };
  return {
    architecture: i.architecture,
    name: i.name,
    sizeBytes: num(i.sizeBytes),
    weightsBytes: num(i.weightsBytes),
    nParams: num(i.nParams),
    contextLength: i.contextLength,
    embeddingLength: i.embeddingLength,
    nLayer: i.nLayer,
    nHead: i.nHead,
    nHeadKv: i.nHeadKv,
    nVocab: i.nVocab,
    hasChatTemplate: i.hasChatTemplate,
    chatTemplate: i.chatTemplate,
    infillSupported: i.infillSupported,
    poolingType: i.poolingType,
    isEncoder: i.isEncoder,
    canRerank: i.canRerank,
    loadMs: i.loadMs,
    metadata: map(i.metadata, (v) => v),
    placement: map(i.placement, (v) => v),
  };
}

/** A native model-file description. */
export function toModelFileInfo(i: NativeModelFileInfo): ModelFileInfo {
  const opt = (v: bigint | number | undefined) => (v === undefined ? null : num(v));
  const metadata: Record<string, string> = {};
  i.metadata.forEach((v, k) => {
    metadata[k] = v;
  });
  return {
    architecture: i.architecture,
    name: i.name,
    supported: i.supported,
    sizeBytes: num(i.sizeBytes),
    ggufVersion: i.ggufVersion,
    nParams: num(i.nParams),
    weightsBytes: num(i.weightsBytes),
    fileType: i.fileType ?? null,
    tensorTypes: i.tensorTypes.map((t) => ({ type: t.typeName, count: num(t.count), bytes: num(t.bytes) })),
    contextLength: opt(i.contextLength),
    embeddingLength: opt(i.embeddingLength),
    nLayer: opt(i.nLayer),
    nHead: opt(i.nHead),
    nHeadKv: opt(i.nHeadKv),
    nVocab: opt(i.nVocab),
    tokenizer: i.tokenizer ?? null,
    chatTemplate: i.chatTemplate ?? null,
    memory: i.memory === undefined ? null : toMemoryEstimate(i.memory),
    metadata,
  };
}

/** A native memory estimate. */
export function toMemoryEstimate(e: NativeMemoryEstimate): MemoryEstimate {
  return {
    weightsBytes: num(e.weightsBytes),
    kvCacheBytes: num(e.kvCacheBytes),
    contextSize: e.contextSize,
    totalBytes: num(e.totalBytes),
  };
}

/** A native backend device. */
export function toBackendDevice(d: NativeBackendDevice): BackendDevice {
  return {
    name: d.name,
    kind: getBindings().deviceKindName(d.kind),
    description: d.description,
    memoryTotal: d.memoryTotal === undefined ? null : num(d.memoryTotal),
    memoryFree: d.memoryFree === undefined ? null : num(d.memoryFree),
    features: Array.from(d.features),
  };
}
