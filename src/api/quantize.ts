import { getBindings } from './bindings';
import { defined } from './convert';
import { LocalLLMError, LocalLLMErrorCode, abortError, abortable, wrapAsync } from './errors';
import { localPath } from './model';
import { QUANTIZE_OPTION_RULES, checkOptions } from './options';

/**
 * llama-quantize's output type names, as local-llm-js-core 0.3.0 lists them. The engine
 * writes F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K_S/M/L, Q4_K_S/M, Q5_K_S/M,
 * Q6_K, IQ4_NL and IQ4_XS; the other IQ types (which need an importance matrix) and the TQ
 * types reject with INVALID_OPTION. Models in every one of these types load and run.
 */
export type QuantizationType =
  | 'F32'
  | 'F16'
  | 'BF16'
  | 'Q4_0'
  | 'Q4_1'
  | 'Q5_0'
  | 'Q5_1'
  | 'Q8_0'
  | 'Q2_K'
  | 'Q3_K_S'
  | 'Q3_K_M'
  | 'Q3_K_L'
  | 'Q4_K_S'
  | 'Q4_K_M'
  | 'Q5_K_S'
  | 'Q5_K_M'
  | 'Q6_K'
  | 'IQ2_XXS'
  | 'IQ2_XS'
  | 'IQ2_S'
  | 'IQ2_M'
  | 'IQ3_XXS'
  | 'IQ3_XS'
  | 'IQ3_S'
  | 'IQ3_M'
  | 'IQ4_NL'
  | 'IQ4_XS'
  | 'IQ1_S'
  | 'IQ1_M'
  | 'TQ1_0'
  | 'TQ2_0';

/** Options of {@link quantize} (local-llm-js-core's `QuantizeOptions`, plus `signal`). */
export interface QuantizeOptions {
  /** Output type (a llama-quantize mix name). */
  type: QuantizationType;
  /** Threads (default: all cores). */
  threads?: number;
  /** Accept an already quantized input (dequantized, then quantized again). */
  allowRequantize?: boolean;
  /** Quantize `output.weight` (default true). */
  quantizeOutputTensor?: boolean;
  /** Give every quantized tensor the type's default (no per-tensor mix). */
  pure?: boolean;
  /** Not supported: `true` rejects with INVALID_OPTION. */
  dryRun?: boolean;
  /** Addition: aborting rejects with an AbortError and stops the native work (no output is left). */
  signal?: AbortSignal;
}

/**
 * Quantize the GGUF model at `input` (F32/F16/BF16 weights) into `output` on a worker thread,
 * choosing each tensor's type like llama-quantize without an importance matrix. Rejects with
 * INVALID_OPTION for a bad option, INVALID_PATH for a missing input, QUANTIZE_FAILED otherwise.
 */
export async function quantize(input: string, output: string, options: QuantizeOptions): Promise<void> {
  const from = localPath(input);
  const to = localPath(output);
  if (typeof options !== 'object' || options === null || typeof options.type !== 'string') {
    throw new LocalLLMError(LocalLLMErrorCode.INVALID_OPTION, 'type: a quantization type name is required');
  }
  const { threads, signal } = options;
  checkOptions(options, QUANTIZE_OPTION_RULES);
  if (options.dryRun === true) {
    throw new LocalLLMError(LocalLLMErrorCode.INVALID_OPTION, 'dryRun: not supported');
  }
  if (signal?.aborted) {
    throw abortError(signal);
  }
  const { quantizeModel, CancelToken } = getBindings();
  const token = new CancelToken();
  const onAbort = () => token.cancel();
  signal?.addEventListener('abort', onAbort);
  try {
    const params = {
      quantType: options.type,
      ...defined({
        threads,
        allowRequantize: options.allowRequantize,
        quantizeOutputTensor: options.quantizeOutputTensor,
        pure: options.pure,
      }),
    };
    const running = wrapAsync(LocalLLMErrorCode.QUANTIZE_FAILED, () => quantizeModel(from, to, params, token));
    await abortable(running, signal, () => {});
  } finally {
    signal?.removeEventListener('abort', onAbort);
  }
}
