//! `local-llm nnpa-fidelity`: how closely the emulated NNPA (DLFLOAT16 matmuls) follows the CPU.
//!
//! For each prompt the model runs twice, once with every weight on the CPU and once with every
//! eligible matmul on the emulated NNPA (quantized weights included unless `--no-quantized`).
//! Teacher-forced: both see the CPU's greedy tokens, and at each of `n` positions we compare the
//! NNPA's argmax with the CPU's and the logits (max and mean absolute error). Free-running: the
//! NNPA generates greedily on its own; we report how many leading tokens match the CPU's.

use std::sync::Arc;

use clap::Args;
use local_llm_engine::backend::nnpa::{self, EmulatorOptions};
use local_llm_engine::backend::{Registry, Threads};
use local_llm_engine::model::{KvCache, Output};
use local_llm_engine::sampling::argmax;
use local_llm_engine::session::{default_threads, LoadOptions, LoadedModel};
use local_llm_engine::Result;

use crate::commands::model_path;
use crate::ModelArg;

/// Options of `local-llm nnpa-fidelity`.
#[derive(Args)]
pub struct FidelityArgs {
    #[command(flatten)]
    model: ModelArg,
    /// Prompt (repeatable).
    #[arg(short = 'p', long = "prompt", required = true)]
    prompts: Vec<String>,
    /// Tokens to generate per prompt.
    #[arg(short = 'n', long = "n-predict", default_value_t = 32)]
    n_predict: usize,
    /// Threads (0: all cores).
    #[arg(short = 't', long = "threads", default_value_t = 0)]
    threads: usize,
    /// Keep quantized weights on the CPU (only F32/F16/BF16 matmuls on the NNPA).
    #[arg(long)]
    no_quantized: bool,
}

fn load(path: &std::path::Path, registry: Registry) -> Result<Arc<LoadedModel>> {
    LoadedModel::load_on(path, &LoadOptions::default(), &registry)
}

/// One model step: logits of the last of `tokens`.
fn step(
    model: &LoadedModel,
    tokens: &[u32],
    cache: &mut KvCache,
    threads: &Threads,
) -> Result<Vec<f32>> {
    model
        .model()
        .forward(tokens, cache, threads, Output::LastLogits)
}

/// `local-llm nnpa-fidelity`.
pub fn fidelity(args: &FidelityArgs) -> Result<()> {
    let path = model_path(&args.model)?;
    let threads = Threads::new(if args.threads == 0 {
        default_threads()
    } else {
        args.threads
    })?;
    let cpu = load(&path, Registry::with_accelerators(Vec::new()))?;
    let options = EmulatorOptions {
        offload_quantized: !args.no_quantized,
        ..EmulatorOptions::default()
    };
    let emu = load(
        &path,
        Registry::with_accelerators(vec![nnpa::emulated_device(options)]),
    )?;
    println!("model: {}", path.display());
    println!("placement (emulated run): {:?}", emu.model().placement());
    let (mut agree_total, mut steps_total, mut max_total, mut sum_total, mut count_total) =
        (0, 0, 0f32, 0f64, 0u64);
    println!("| prompt | teacher-forced argmax agreement | free-running identical prefix | max abs logit error | mean abs logit error | max abs logit |");
    println!("|---|---|---|---|---|---|");
    for prompt in &args.prompts {
        let tokens = cpu.tokenize(prompt, true, true)?;
        let n = args.n_predict.max(1);
        let n_ctx = tokens.len() + n + 1;
        // Teacher-forced comparison along the CPU's greedy path.
        let (mut c_cache, mut e_cache) = (
            cpu.model().new_cache(n_ctx, Default::default())?,
            emu.model().new_cache(n_ctx, Default::default())?,
        );
        let mut c_logits = step(&cpu, &tokens, &mut c_cache, &threads)?;
        let mut e_logits = step(&emu, &tokens, &mut e_cache, &threads)?;
        let (mut agree, mut max_err, mut sum_err, mut max_logit) = (0, 0f32, 0f64, 0f32);
        let mut cpu_tokens = Vec::with_capacity(n);
        for i in 0..n {
            let want = argmax(&c_logits);
            agree += usize::from(argmax(&e_logits) == want);
            for (a, b) in e_logits.iter().zip(&c_logits) {
                let d = (a - b).abs();
                max_err = max_err.max(d);
                sum_err += f64::from(d);
                max_logit = max_logit.max(b.abs());
            }
            cpu_tokens.push(want);
            if i + 1 < n {
                c_logits = step(&cpu, &[want], &mut c_cache, &threads)?;
                e_logits = step(&emu, &[want], &mut e_cache, &threads)?;
            }
        }
        let values = (n * c_logits.len()) as u64;
        // Free-running NNPA greedy generation.
        let mut e_cache = emu.model().new_cache(n_ctx, Default::default())?;
        let mut logits = step(&emu, &tokens, &mut e_cache, &threads)?;
        let mut prefix = 0;
        for (i, &want) in cpu_tokens.iter().enumerate() {
            let got = argmax(&logits);
            if got != want {
                break;
            }
            prefix += 1;
            if i + 1 < n {
                logits = step(&emu, &[got], &mut e_cache, &threads)?;
            }
        }
        println!(
            "| {:?} | {agree}/{n} | {prefix}/{n} | {max_err:.4} | {:.5} | {max_logit:.2} |",
            prompt,
            sum_err / values as f64
        );
        eprintln!("CPU continuation: {:?}", cpu.detokenize(&cpu_tokens, false));
        agree_total += agree;
        steps_total += n;
        max_total = max_total.max(max_err);
        sum_total += sum_err;
        count_total += values;
    }
    println!(
        "| all | {agree_total}/{steps_total} | | {max_total:.4} | {:.5} | |",
        sum_total / count_total.max(1) as f64
    );
    Ok(())
}
