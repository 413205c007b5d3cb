// Public option and result types. Names and shapes follow local-llm-rn / local-llm-js-core so
// that code written for it type-checks against this package; additions are marked.

import type { EmbeddingNormalize, EmbeddingPoolingType } from './embedding-types';

/** Where to run: this engine runs on the CPU plus any accelerator in its backend registry. */
export type ComputeMode = 'cpu' | 'hybrid' | 'gpu' | 'auto';

/** Options of {@link Model.load}. */
export interface ModelOptions {
  /** `'cpu'` uses the CPU only; other values use every detected device (default `'auto'`). */
  compute?: ComputeMode;
  /** Accepted for compatibility; layers are placed per weight by the backend registry. */
  gpuLayers?: number;
  /** Memory-map the model file (default true). */
  useMmap?: boolean;
  /** Addition: abort the load (the model is released if it finishes loading after the abort). */
  signal?: AbortSignal;
}

/**
 * The element type of the cached keys or values (local-llm-rn's `KvCacheType` and llama.cpp's
 * `--cache-type-k/-v` names): `f16` (default), `q8_0` (about half the memory), `q4_0` (about a
 * quarter), and as additions `q4_1`, `q5_0`, `q5_1`, `iq4_nl`, `bf16` and `f32`.
 */
export type KvCacheType = 'f16' | 'q8_0' | 'q4_0' | 'q4_1' | 'q5_0' | 'q5_1' | 'iq4_nl' | 'bf16' | 'f32';

/**
 * Flash attention (local-llm-rn's `FlashAttentionMode`, llama.cpp's `--flash-attn`). Accepted
 * for compatibility: every mode runs the same attention, which is always fused (scores of a few
 * queries at a time, never a context-sized matrix) and exact, and works with every
 * {@link KvCacheType} (llama.cpp needs flash attention for a quantized value cache; this engine
 * does not).
 */
export type FlashAttentionMode = 'auto' | 'enabled' | 'disabled';

/** The KV cache types of a memory estimate (`Model.estimateMemory`, `canRunModel`). */
export interface KvCacheTypes {
  /** How the cache stores keys (default `f16`). */
  kvCacheTypeK?: KvCacheType;
  /** How the cache stores values (default `f16`). */
  kvCacheTypeV?: KvCacheType;
}

/** Options of {@link Model.createContext}. */
export interface ContextOptions {
  /** Context size in tokens (default 512, local-llm-rn's; 0: the model's training context, at most 4096). */
  contextSize?: number;
  /** Prompt tokens per forward pass (default 512). */
  batchSize?: number;
  /**
   * Worker threads (default: the performance cores, local-llm-rn's: on big.LITTLE phones the
   * cores faster than the slowest cluster, on Apple silicon its P cores; 0: all cores, see
   * `optimalThreadCount()`; more than the cores are capped to them).
   */
  threads?: number;
  /**
   * Sequences the context generates at once (default 1, at most 64): `generateBatch` and
   * `chat.completions.createBatch` decode a token of every sequence in one forward pass. Each
   * sequence has its own KV cache of `contextSize` tokens, so memory grows with it.
   */
  maxSequences?: number;
  /** How the KV cache stores keys (default `f16`); a session saved with one type loads only into a context of the same. */
  kvCacheTypeK?: KvCacheType;
  /** How the KV cache stores values (default `f16`). */
  kvCacheTypeV?: KvCacheType;
  /** Flash attention (default `auto`); see {@link FlashAttentionMode} for what it does here. */
  flashAttention?: FlashAttentionMode;
  /**
   * Speculative decoding (local-llm-js-core): most tokens drafted per step (default 16, at most
   * 64; 0 turns speculation off). Drafts come from `draftModel` (see {@link Model.createContext})
   * and/or `promptLookup`; the output is what plain decoding gives, and `_timing` reports the
   * drafted and accepted tokens.
   */
  draftNMax?: number;
  /**
   * Addition: prompt-lookup drafting, no second model: the longest n-gram of at most this many
   * tokens (1..16) ending the text that occurred earlier in the prompt or output drafts the
   * tokens that followed it (good for rewriting and editing given text). Unset or 0: off.
   */
  promptLookup?: number;
}

/** One prompt's result of {@link InferenceContext.generateBatch} (local-llm-js-core's shape). */
export interface BatchResult {
  /** The prompt's index in the batch. */
  index: number;
  /** Generated text (stop string excluded). */
  text: string;
  /** 'length' when `maxTokens` or the context cut it short, else 'stop'. */
  finishReason: 'stop' | 'length';
}

/** Sampling and stopping options of a generation. */
export interface GenerateOptions {
  /**
   * Most tokens to generate (local-llm-rn's defaults: 512 for `generate` and `stream`; a chat
   * completion may fill the room its prompt leaves less 64 tokens, at most 3/4 of the context).
   */
  maxTokens?: number;
  /** Temperature (default 0.7, local-llm-rn's; 0 = greedy). */
  temperature?: number;
  /** Top-p (default 0.9, local-llm-rn's). */
  topP?: number;
  /** Top-k (default 40; 0 = off). */
  topK?: number;
  /** Addition: locally typical sampling mass (default 1 = off), like llama.cpp's `--typical`. */
  typicalP?: number;
  /** Min-p (default 0 = off, local-llm-rn's; addition). */
  minP?: number;
  /** Repetition penalty (default 1.1, local-llm-rn's; 1 = off). */
  repeatPenalty?: number;
  /** Frequency penalty (default 0). */
  frequencyPenalty?: number;
  /** Presence penalty (default 0). */
  presencePenalty?: number;
  /**
   * Addition: how many of the most recent tokens the repetition, frequency and presence
   * penalties look at (default 64; 0 = off, -1 = the whole context), llama.rn's `penalty_last_n`.
   */
  penaltyLastN?: number;
  /**
   * Addition: DRY ("don't repeat yourself") strength, llama.rn's `dry_multiplier` (default 0 =
   * off; 0.8 is a common setting). A token that would extend a sequence already repeated in the
   * last {@link dryPenaltyLastN} tokens loses `dryMultiplier * dryBase^(length - dryAllowedLength)`
   * from its logit.
   */
  dryMultiplier?: number;
  /** Addition: DRY's growth per repeated token (default 1.75; below 1 = off). */
  dryBase?: number;
  /** Addition: repeats up to this many tokens are not penalized by DRY (default 2). */
  dryAllowedLength?: number;
  /** Addition: how many recent tokens DRY scans (default 64; 0 = off, -1 = the whole context). */
  dryPenaltyLastN?: number;
  /**
   * Addition: strings that end a repetition for DRY (default `['\n', ':', '"', '*']`; `[]` = none;
   * at most 256, each cut to 40 bytes).
   */
  drySequenceBreakers?: string[];
  /**
   * Addition: top-n-σ, llama.rn's `top_n_sigma`: keep only tokens whose logit is within this many
   * standard deviations of the best (default off; any value <= 0 is off).
   */
  topNSigma?: number;
  /**
   * Addition: XTC ("exclude top choices"), llama.rn's `xtc_probability`: the chance per token of
   * removing every token above {@link xtcThreshold} probability except the least likely of them
   * (default 0 = off).
   */
  xtcProbability?: number;
  /** Addition: XTC's probability threshold (default 0.1; above 0.5 = off). */
  xtcThreshold?: number;
  /**
   * Addition: Mirostat, llama.rn's `mirostat`: 0 = off (default), 1 = Mirostat, 2 = Mirostat 2.0.
   * When on it replaces top-k, top-p, min-p, typical, top-n-σ, XTC, the penalties and DRY.
   */
  mirostat?: 0 | 1 | 2;
  /** Addition: Mirostat's target surprise in bits (default 5). */
  mirostatTau?: number;
  /** Addition: Mirostat's learning rate (default 0.1). */
  mirostatEta?: number;
  /**
   * Addition: biases added to token logits before sampling: llama.rn's `logit_bias` (an array of
   * `[tokenId, bias]`) or OpenAI's (an object from token id to bias). `false` or `-Infinity` bans
   * a token; repeated ids add up; ids must be in the vocabulary.
   */
  logitBias?: LogitBiasInput;
  /** Addition: never end at an end-of-generation token (they are banned), llama.rn's `ignore_eos`. */
  ignoreEos?: boolean;
  /** Random seed, an integer from 0 to 2^32-2 (default, -1 and 2^32-1: random, as llama.cpp). */
  seed?: number;
  /** Stop strings, excluded from the output. */
  stop?: string[];
  /**
   * Addition (llama.cpp's `n_probs`): report each generated token's log-probability with this
   * many most likely alternatives (0..20) in {@link GenerationResult.logprobs}.
   */
  nProbs?: number;
  /**
   * Stops native decoding between tokens (and the prompt's evaluation between batches):
   * `generate` and `stream` then end with the text so far, `generateResult` and chat
   * completions reject with an `AbortError`.
   */
  signal?: AbortSignal;
  /**
   * local-llm-rn's prompt progress: called after each batch of the prompt's evaluation with the
   * prompt tokens evaluated so far and the total to evaluate (tokens reused from the cache do
   * not count); return `false` to stop the generation as an abort of `signal` would. Reported to
   * `generate`, `generateResult`, `stream`, `streamPieces` and `streamParts` (not to batches).
   */
  onPromptProgress?: (processed: number, total: number) => boolean | void;
  /**
   * Addition (llama.cpp's `--context-shift` / `--keep`): when the context fills up, keep the first
   * `nKeep` prompt tokens (default and -1: the whole prompt), drop half of the rest and go on
   * generating instead of finishing with 'length'. `true` is `{}`.
   */
  contextShift?: boolean | { nKeep?: number };
  /** A GBNF grammar (llama.cpp syntax) the output must match; takes precedence over `responseFormat`. */
  grammar?: string;
  /** The start rule of {@link grammar} (default `root`). */
  grammarRoot?: string;
  /** JSON output: any JSON object (`json_object`) or JSON matching a schema (`json_schema`). */
  responseFormat?: ResponseFormat;
  /**
   * Addition (llama.rn's `reasoning_format`, llama.cpp's `--reasoning-format`): for models whose
   * chat template writes `<think>` … `</think>` blocks (Qwen 3, SmolLM3, DeepSeek-R1 distills),
   * `'auto'` / `'deepseek'` return the block apart ({@link GenerationResult.reasoning}, stream
   * parts with `reasoning`) and the answer alone as the text; `'none'` keeps it in the text.
   * Default `'none'` here, `'auto'` in `chat.completions.create` (as llama-server).
   */
  reasoningFormat?: ReasoningFormat;
  /**
   * Addition (llama.rn's `thinking_budget_tokens`): most tokens inside a reasoning block; then
   * {@link thinkingBudgetMessage} and the close tag are generated and the answer follows.
   */
  thinkingBudgetTokens?: number;
  /** Addition (llama.rn's `thinking_budget_message`): text before the forced close tag. */
  thinkingBudgetMessage?: string;
  /**
   * Addition (llama.rn's `enable_thinking`): `false` asks the chat template not to think
   * (Qwen 3 writes an empty block into the prompt); sets `chatTemplateKwargs.enable_thinking`.
   */
  enableThinking?: boolean;
  /** Addition (llama-server's `chat_template_kwargs`): extra variables for the chat template. */
  chatTemplateKwargs?: Record<string, unknown>;
}

/** How reasoning blocks are returned (see {@link GenerateOptions.reasoningFormat}). */
export type ReasoningFormat = 'none' | 'auto' | 'deepseek';

/**
 * Logit biases: `[tokenId, bias]` pairs (llama.rn) or an object from token id to bias (OpenAI's
 * `logit_bias`); a bias of `false` bans the token.
 */
export type LogitBiasInput =
  ReadonlyArray<readonly [number, number | false]> | Readonly<Record<string, number | false>>;

/**
 * The format of the output (local-llm-js-core's `ResponseFormat`, OpenAI's `response_format`).
 * The schema is converted to a grammar natively; `strict` and `name` are accepted and ignored
 * (the output always follows the schema).
 */
export interface ResponseFormat {
  type: 'text' | 'json_object' | 'json_schema';
  json_schema?: {
    name?: string;
    description?: string;
    strict?: boolean | null;
    /** Required here (OpenAI's type allows leaving it out; then INVALID_OPTION). */
    schema?: Record<string, unknown>;
  };
}

/** A text part of a message. */
export interface TextContentPart {
  type: 'text';
  text: string;
}

/** An image part of a message (not supported by this engine: VISION_FAILED). */
export interface ImageContentPart {
  type: 'image_url';
  image_url: { url: string };
}

/** A part of a message's content. */
export type ContentPart = TextContentPart | ImageContentPart;

/**
 * A content part typed loosely, as local-llm-js-core types the parts of request and overflow
 * messages. Checked when the prompt is rendered: a `text` part needs its `text`, an `image_url`
 * part fails with VISION_FAILED, any other type with INVALID_OPTION.
 */
export interface LooseContentPart {
  type: string;
  text?: string;
  image_url?: { url: string; detail?: string };
}

/** OpenAI's roles; `developer` (OpenAI's newer name for instructions) is taken as `system`. */
export type ChatRole = 'system' | 'developer' | 'user' | 'assistant' | 'tool';

/** A chat message. */
export interface ChatMessage {
  /**
   * A {@link ChatRole}, or any other string (local-llm-rn types roles as `string`): other roles
   * reach the model's chat template as they are.
   */
  role: ChatRole | (string & {});
  /** The text; `null` (or absent) for an assistant message that only calls tools. */
  content?: string | Array<ContentPart | LooseContentPart> | null;
  /** Tools an assistant message calls (OpenAI's `custom` tool calls are INVALID_OPTION). */
  tool_calls?: Array<ChatCompletionToolCall | CustomToolCall>;
  /** For a `tool` message: the id of the call whose result it holds. */
  tool_call_id?: string;
  /** The speaker's name (for a `tool` message, the tool's name). */
  name?: string;
}

/** A function the model may call. */
export interface ChatCompletionTool {
  type: 'function';
  function: {
    name: string;
    description?: string;
    /** JSON Schema of the arguments object. */
    parameters?: Record<string, unknown>;
  };
}

/**
 * Which tools the model may or must call: `'none'` (not offered), `'auto'` (default),
 * `'required'` (output without a call fails with INFERENCE_FAILED), one named function, or
 * OpenAI's `allowed_tools` (only the listed functions are offered, with mode `auto` or
 * `required`). A named `custom` tool is INVALID_OPTION.
 */
export type ChatCompletionToolChoice =
  | 'auto'
  | 'none'
  | 'required'
  | { type: 'function'; function: { name: string } }
  | {
      type: 'allowed_tools';
      allowed_tools: { mode: 'auto' | 'required'; tools: Array<{ [key: string]: unknown }> };
    }
  | { type: 'custom'; custom: { name: string } };

/** A call of a tool; `arguments` is JSON text. */
export interface ChatCompletionToolCall {
  id: string;
  type: 'function';
  function: { name: string; arguments: string };
}

/** OpenAI's `custom` (free-text) tool: typed so that OpenAI's requests fit; not supported. */
export interface CustomTool {
  type: 'custom';
  custom: { name: string; description?: string; format?: unknown };
}

/** OpenAI's call of a `custom` (free-text) tool: typed so that OpenAI's messages fit; not supported. */
export interface CustomToolCall {
  id: string;
  type: 'custom';
  custom: { name: string; input: string };
}

/** A piece of a tool call in a stream chunk (here each call comes whole in one chunk). */
export interface ChatCompletionToolCallDelta {
  index: number;
  id?: string;
  type?: 'function';
  function?: { name?: string; arguments?: string };
}

/** A token with its log-probability (OpenAI's shape; `bytes` are the token's UTF-8 bytes). */
export interface ChatCompletionTopLogprob {
  token: string;
  logprob: number;
  bytes: number[] | null;
}

/**
 * A generated token's log-probability (natural log of the softmax of the model's raw logits,
 * before any sampling transform) with the most likely alternatives at its step.
 */
export interface ChatCompletionTokenLogprob extends ChatCompletionTopLogprob {
  top_logprobs: ChatCompletionTopLogprob[];
}

/** The `logprobs` of a choice. */
export interface ChatCompletionLogprobs {
  content: ChatCompletionTokenLogprob[] | null;
  /** OpenAI's refusal tokens: always null here. */
  refusal: null;
}

/** Log severities. */
export type LogLevel = 'debug' | 'info' | 'warn' | 'error';

/** Receives engine log messages. */
export type LogCallback = (level: LogLevel, message: string) => void;

/**
 * Options of {@link LocalLLM.create}: the model's ({@link ModelOptions}) and its context's
 * ({@link ContextOptions}), defined once there, plus where the model comes from and the
 * instance's own settings.
 */
export interface LocalLLMOptions extends ModelOptions, ContextOptions {
  /**
   * Path of a local GGUF file (`/...`, `./...`, `file://...`), or an http(s) URL or Hugging Face
   * shorthand `user/repo[/branch]/file.gguf` to download into the cache first (ModelManager).
   */
  model: string;
  /**
   * local-llm-rn's vision projector (an mmproj GGUF). Accepted and not used yet: this engine has
   * no vision encoder (image parts fail with VISION_FAILED), so the file is neither downloaded
   * nor loaded. `LocalLLM.preload` does download it.
   */
  projector?: string;
  /** Cache folder of downloaded models (see ModelManager for the default). */
  cacheDir?: string;
  /** Addition: expected size of a downloaded model (else DOWNLOAD_INTEGRITY_MISMATCH). */
  expectedSize?: number;
  /** Addition: expected SHA-256 of a downloaded model (else DOWNLOAD_INTEGRITY_MISMATCH). */
  expectedSha256?: string;
  /** Addition: download progress in bytes (`onProgress` gets the percent). */
  onDownloadProgress?: (downloaded: number, total: number, percent: number) => void;
  /** Speculative decoding with this draft model (a local GGUF path; a smaller model with the same vocabulary). */
  draftModel?: string;
  /** Download progress in percent (for a URL model), then 100 once the model is loaded. */
  onProgress?: (percent: number) => void;
  /** Receives engine logs. */
  onLog?: LogCallback;
  /** Least severe level passed to `onLog` (default 'info'). */
  logLevel?: LogLevel;
  /** Evaluate one token after loading so the first request runs at full speed (default true). */
  warmup?: boolean;
  /**
   * What a chat does when its messages leave too little room for the answer (local-llm-js-core):
   * 'error', 'truncate_oldest', 'sliding_window' or a {@link ContextOverflowConfig} (default
   * 'sliding_window', local-llm-rn's: the oldest messages after the system ones make room, and
   * the context shifts while the answer grows).
   */
  contextOverflow?: ContextOverflowStrategy | ContextOverflowConfig;
  /**
   * Create an embedding context too, for `ai.embeddings.create`, `embeddingContext.rerank` and
   * the AI SDK's embedding model (default false); its pooling and normalisation.
   */
  embeddings?: boolean | { poolingType?: EmbeddingPoolingType; normalize?: EmbeddingNormalize };
  /**
   * Addition (node-llama-cpp's context option `lora`): LoRA adapters applied from the start (a
   * file path, or adapters with scales), as `context.applyLoraAdapters` does afterwards. A
   * missing file rejects `create` with INVALID_PATH, a file that is not an adapter for this
   * model with MODEL_LOAD_FAILED.
   */
  lora?: LoraOption;
}

/** {@link LocalLLMOptions.lora}: node-llama-cpp's shape. */
export type LoraOption =
  | string
  | {
      /** The adapters, in the order their deltas are added; `scale` defaults to 1. */
      adapters: ReadonlyArray<{ filePath: string; scale?: number }>;
      /** Called with 1 once the adapters are loaded (node-llama-cpp's load fraction). */
      onLoadProgress?(loadProgress: number): void;
    };

export type {
  EmbeddingData,
  EmbeddingNormalize,
  EmbeddingPoolingType,
  EmbeddingRequest,
  EmbeddingResponse,
  EmbeddingUsage,
  RerankOptions,
  RerankResult,
} from './embedding-types';

/** Options of `Model.createEmbeddingContext`. */
export interface EmbeddingContextOptions extends ContextOptions {
  /** Pooling (default: the model's own, from its file; mean when the file does not say). */
  poolingType?: EmbeddingPoolingType;
  /** Normalisation (default 2: unit length). */
  normalize?: EmbeddingNormalize;
}

/** Timings of the last generation (local-llm-rn's `InferenceMetrics`). */
export interface InferenceMetrics {
  promptEvalMs: number;
  generationMs: number;
  promptTokens: number;
  generatedTokens: number;
  promptTokensPerSec: number;
  generatedTokensPerSec: number;
  /** Addition: tokens speculative decoding drafted (set when it drafted any). */
  draftTokens?: number;
  /** Addition: drafted tokens that were accepted. */
  draftAcceptedTokens?: number;
  /** Addition: `draftAcceptedTokens / draftTokens`. */
  draftAcceptanceRate?: number;
}

/** Benchmark settings. */
export interface BenchmarkOptions {
  promptTokens?: number;
  generateTokens?: number;
  iterations?: number;
}

/** Benchmark results. */
export interface BenchmarkResult {
  promptTokensPerSec: number;
  generatedTokensPerSec: number;
  ttftMs: number;
  totalMs: number;
  iterations: number;
  individual: InferenceMetrics[];
}

/** Why a generation ended (addition: the engine's own reasons). */
export type NativeFinishReason =
  | 'eog'
  | 'stop_string'
  | 'max_tokens'
  | 'context_full'
  | 'cancelled'
  | 'tool_calls'
  | 'grammar_complete'
  | 'grammar_dead_end';

/** A whole generation (addition; local-llm-rn's `generate` returns only the text). */
export interface GenerationResult {
  /** The text; with tool calls, the text before the first call; without the reasoning block when it is returned apart. */
  text: string;
  /** Addition: the reasoning block, when `reasoningFormat` returns it apart and the model wrote one. */
  reasoning?: string;
  /** Tools the output calls (chat prompts with tools). */
  toolCalls: ChatCompletionToolCall[];
  /** Each generated token's log-probabilities, when `nProbs` was given. */
  logprobs?: ChatCompletionTokenLogprob[];
  /** Generated token ids. */
  tokens: number[];
  promptTokens: number;
  completionTokens: number;
  finishReason: NativeFinishReason;
  /** OpenAI's name of {@link finishReason}. */
  openAiFinishReason: ChatFinishReason;
  timing: InferenceMetrics;
}

/** Facts about a loaded model (addition). */
export interface ModelInfo {
  architecture: string;
  name?: string;
  sizeBytes: number;
  weightsBytes: number;
  nParams: number;
  contextLength: number;
  embeddingLength: number;
  nLayer: number;
  nHead: number;
  nHeadKv: number;
  nVocab: number;
  hasChatTemplate: boolean;
  chatTemplate: string;
  /** Addition: whether the model can fill in the middle (its vocabulary has FIM tokens). */
  infillSupported: boolean;
  loadMs: number;
  metadata: Record<string, string>;
  placement: Record<string, number>;
  /** Addition: how the model pools embeddings by default ('none', 'mean', 'cls', 'last', 'rank'). */
  poolingType: string;
  /** Addition: an encoder (BERT family): it embeds and ranks but cannot generate text. */
  isEncoder: boolean;
  /** Addition: a reranker (it has a classification head for `rerank`). */
  canRerank: boolean;
}

/**
 * A model file's facts from its header alone, without loading it (addition; what
 * node-llama-cpp's `readGgufFileInfo` and llama.rn's `loadLlamaModelInfo` answer): for a model
 * picker, or to decide whether a downloaded file fits before loading it.
 */
export interface ModelFileInfo {
  /** `general.architecture`, e.g. `llama`. */
  architecture: string;
  /** `general.name`, if present. */
  name?: string;
  /** Whether this engine runs the architecture (and finds the hyper-parameters it needs). */
  supported: boolean;
  sizeBytes: number;
  ggufVersion: number;
  /** Parameters (elements of every tensor). */
  nParams: number;
  /** Bytes of tensor data. */
  weightsBytes: number;
  /** llama-quantize's name of the file type (`general.file_type`), e.g. `Q4_K_M`; null if absent. */
  fileType: string | null;
  /** Tensor counts and bytes per type (`Q4_K`, `F32`, ...), most bytes first. */
  tensorTypes: Array<{ type: string; count: number; bytes: number }>;
  /** Training context length; null when the file does not say (likewise below). */
  contextLength: number | null;
  embeddingLength: number | null;
  nLayer: number | null;
  nHead: number | null;
  nHeadKv: number | null;
  nVocab: number | null;
  /** `tokenizer.ggml.model`, e.g. `gpt2` or `llama`. */
  tokenizer: string | null;
  /** The file's chat template; null when it has none. */
  chatTemplate: string | null;
  /** Weights plus f16 KV cache for the context asked for; null when the hyper-parameters are missing. */
  memory: MemoryEstimate | null;
  /** GGUF metadata as short strings (without the tokenizer's arrays). */
  metadata: Record<string, string>;
}

/** Memory a model needs: weights plus KV cache for a context size (addition). */
export interface MemoryEstimate {
  weightsBytes: number;
  kvCacheBytes: number;
  contextSize: number;
  totalBytes: number;
}

/** A compute device of the engine's backend registry (addition). */
export interface BackendDevice {
  name: string;
  kind: 'cpu' | 'accelerator' | string;
  description: string;
  /** Total memory in bytes, `null` when unknown. */
  memoryTotal: number | null;
  /** Free memory in bytes, `null` when unknown. */
  memoryFree: number | null;
  features: string[];
}

/** OpenAI-style finish reasons. */
export type ChatFinishReason = 'stop' | 'length' | 'tool_calls';

/** What to do when a chat's prompt leaves too little room for the answer (local-llm-js-core). */
export type ContextOverflowStrategy = 'error' | 'truncate_oldest' | 'sliding_window';

/**
 * A message as `onOverflow` sees it (local-llm-js-core's `OverflowMessage`): a {@link ChatMessage}
 * whose content is always there (`''` for an assistant message that only calls tools).
 */
export type OverflowMessage = ChatMessage & { content: string | Array<ContentPart | LooseContentPart> };

/** What `onOverflow` is told (local-llm-js-core's `ContextOverflowEvent`). */
export interface ContextOverflowEvent {
  /** The messages whose prompt is too long. */
  messages: OverflowMessage[];
  originalMessageCount: number;
  /** Tokens of their prompt. */
  promptTokens: number;
  /** Tokens the prompt may use: `contextSize - reservedForGeneration`. */
  availableTokens: number;
  contextSize: number;
  /** Tokens kept free for the answer: `max_tokens`, else `reserveRatio` of the context (under 'sliding_window' at most that ratio). */
  reservedForGeneration: number;
  /** The strategy applied when `onOverflow` returns nothing (or messages that still do not fit). */
  strategy: ContextOverflowStrategy;
}

/** A strategy with its settings (local-llm-js-core's `ContextOverflowConfig`). */
export interface ContextOverflowConfig {
  /** Default 'sliding_window' (as local-llm-js-core). */
  strategy?: ContextOverflowStrategy;
  /**
   * Share of the context kept for the answer when a request has no `max_tokens` (default 0.25):
   * a prompt that leaves less is fitted first. (local-llm-rn accepts it and ignores it.)
   */
  reserveRatio?: number;
  /** Called when the prompt does not fit; may return the messages to use instead. */
  onOverflow?: (event: ContextOverflowEvent) => ChatMessage[] | void | Promise<ChatMessage[] | void>;
}

/** How a request's messages were fitted (local-llm-js-core's `ContextMetadata`). */
export interface ContextMetadata {
  overflowTriggered: boolean;
  strategyUsed?: ContextOverflowStrategy;
  originalMessageCount: number;
  keptMessageCount: number;
  contextSize: number;
  promptTokens: number;
  reservedForGeneration: number;
}

/** What {@link InferenceContext.loadSession} restored (llama.rn's `NativeSessionLoadResult`). */
export interface SessionLoadResult {
  /** Tokens restored into the KV cache. */
  tokens_loaded: number;
  /** Their text. */
  prompt: string;
}
