//! `local-llm quantize IN OUT TYPE [NTHREADS]`: llama-quantize's arguments and type names.
//! TYPE is a mix (Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q2_K, Q3_K_S/M/L, Q4_K_S/M, Q5_K_S/M, Q6_K,
//! IQ4_NL, IQ4_XS) or F16, BF16, F32 to write a float copy (quantized inputs are dequantized).

use std::path::PathBuf;
use std::time::Instant;

use clap::Args;
use local_llm_engine::convert::{QuantizeOptions, Target};
use local_llm_engine::Result;

/// Options of `local-llm quantize`.
#[derive(Args)]
pub struct QuantizeArgs {
    /// Input GGUF model (F32, F16 or BF16 weights to quantize).
    input: PathBuf,
    /// Output GGUF path.
    output: PathBuf,
    /// Output type: a llama-quantize mix name (e.g. Q4_K_M) or F16, BF16, F32.
    #[arg(value_name = "TYPE")]
    ty: String,
    /// Threads (default: all cores).
    nthreads: Option<usize>,
    /// Accept already quantized tensors (dequantized, then quantized again).
    #[arg(long = "allow-requantize")]
    allow_requantize: bool,
    /// Leave output.weight unquantized.
    #[arg(long = "leave-output-tensor")]
    leave_output_tensor: bool,
    /// Give every quantized tensor the type's default (no per-tensor mix).
    #[arg(long)]
    pure: bool,
}

/// Runs the command: prints each tensor's type and the sizes to stderr.
pub fn quantize(args: &QuantizeArgs) -> Result<()> {
    let options = QuantizeOptions {
        threads: args.nthreads.unwrap_or(0),
        cancel: None,
        allow_requantize: args.allow_requantize,
        quantize_output_tensor: !args.leave_output_tensor,
        pure: args.pure,
    };
    let start = Instant::now();
    let report = Target::from_name(&args.ty)?.write(&args.input, &args.output, &options)?;
    for (name, ty) in &report.tensors {
        eprintln!("{name:<40} {ty}");
    }
    let mib = |b: u64| b as f64 / (1024.0 * 1024.0);
    eprintln!(
        "quantize: {:.2} MiB -> {:.2} MiB in {:.2} s",
        mib(report.input_bytes),
        mib(report.output_bytes),
        start.elapsed().as_secs_f64()
    );
    Ok(())
}
