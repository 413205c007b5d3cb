// Conversions between the generated bindings' records and this package's public types.
import type {
  DeviceInfo as NativeBackendDevice,
  GenerationResult as NativeGenerationResult,
  MemoryEstimate as NativeMemoryEstimate,
  ModelInfo as NativeModelInfo,
  Perf,
} from '../generated/local_llm_ffi';
import { getBindings } from './bindings';
import { LocalLLMError, LocalLLMErrorCode } from './errors';
import type {
  BackendDevice,
  ChatFinishReason,
  ChatMessage,
  GenerationResult,
  InferenceMetrics,
  MemoryEstimate,
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
  };
}

/** A native generation result. */
export function toResult(r: NativeGenerationResult): GenerationResult {
  return {
    text: r.text,
    tokens: Array.from(r.tokens),
    promptTokens: r.promptTokens,
    completionTokens: r.completionTokens,
    // The names are the engine's (FinishReason::name / openai_name in Rust).
    finishReason: getBindings().finishReasonName(r.finishReason) as NativeFinishReason,
    openAiFinishReason: getBindings().finishReasonOpenaiName(r.finishReason) as ChatFinishReason,
    timing: toMetrics(r.perf),
  };
}

/** The message text of a chat message (image parts are not supported). */
export function messageText(m: ChatMessage): string {
  if (typeof m.content === 'string') {
    return m.content;
  }
  if (!Array.isArray(m.content)) {
    throw new LocalLLMError(LocalLLMErrorCode.INFERENCE_FAILED, `message content must be a string or an array of parts`);
  }
  return m.content
    .map((part) => {
      if (part.type === 'text') {
        return part.text;
      }
      throw new LocalLLMError(LocalLLMErrorCode.VISION_FAILED, 'image content is not supported by this engine');
    })
    .join('');
}

/** Chat messages as native records. */
export function toNativeMessages(messages: ChatMessage[]): Array<{ role: string; content: string }> {
  if (!Array.isArray(messages) || messages.length === 0) {
    throw new LocalLLMError(LocalLLMErrorCode.INFERENCE_FAILED, 'messages must be a non-empty array');
  }
  return messages.map((m) => ({ role: String(m.role), content: messageText(m) }));
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
    loadMs: i.loadMs,
    metadata: map(i.metadata, (v) => v),
    placement: map(i.placement, (v) => v),
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
