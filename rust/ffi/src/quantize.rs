//! `quantize_model`: the engine's quantizer (llama-quantize's mixes) for JavaScript's
//! `quantize(input, output, { type })`.

use std::sync::Arc;

use local_llm_engine::convert::{QuantizeOptions, Target};

use crate::context::{cancellable, CancelToken};
use crate::error::{LlmError, Stage};

/// Options of [`quantize_model`] (local-llm-js-core's `QuantizeOptions`).
#[derive(Clone, Debug, uniffi::Record)]
pub struct QuantizeParams {
    /// llama-quantize's type name: Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K_S, Q3_K_M, Q3_K_L,
    /// Q4_K_S, Q4_K_M, Q5_K_S, Q5_K_M, Q6_K, IQ4_NL, IQ4_XS, or F16, BF16, F32.
    pub quant_type: String,
    /// Threads (default: all cores).
    pub threads: Option<u32>,
    /// Accept an already quantized input (dequantized, then quantized again).
    pub allow_requantize: Option<bool>,
    /// Quantize `output.weight` (default true).
    pub quantize_output_tensor: Option<bool>,
    /// Give every quantized tensor the mix's default type.
    pub pure: Option<bool>,
}

/// Quantize the GGUF model at `input` into `output` (on a worker thread). An unknown type is
/// INVALID_OPTION, a missing input INVALID_PATH, anything else that fails QUANTIZE_FAILED;
/// `cancel` stops the work between slabs of rows (no output file is left behind).
#[uniffi::export]
pub async fn quantize_model(
    input: String,
    output: String,
    params: QuantizeParams,
    cancel: Option<Arc<CancelToken>>,
) -> Result<(), LlmError> {
    cancellable(cancel, |flag| {
        let options = QuantizeOptions {
            threads: params.threads.unwrap_or(0) as usize,
            cancel: Some(flag),
            allow_requantize: params.allow_requantize.unwrap_or(false),
            quantize_output_tensor: params.quantize_output_tensor.unwrap_or(true),
            pure: params.pure.unwrap_or(false),
        };
        crate::run_blocking(Stage::Quantize, move || {
            Target::from_name(&params.quant_type)
                .and_then(|target| target.write(&input, &output, &options))
                .map(|_| ())
                .map_err(|e| LlmError::from_engine(e, Stage::Quantize))
        })
    })
    .await
}
