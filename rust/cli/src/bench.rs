//! `local-llm bench`: prompt-processing (pp) and text-generation (tg) throughput, like llama-bench;
//! `--parallel N` measures the total generation throughput of N sequences decoding together, `-d D`
//! starts each test after D tokens of context (attention over a long context).

use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;
use std::time::Instant;

use clap::Args;
use local_llm_engine::backend::Threads;
use local_llm_engine::model::Output;
use local_llm_engine::sampling::SamplingParams;
use local_llm_engine::session::{
    Context, ContextOptions, GenerateRequest, LoadOptions, LoadedModel, Prompt,
};
use local_llm_engine::{Error, Result};

use crate::commands::model_path;
use crate::ModelArg;

/// Options of `local-llm bench`.
#[derive(Args)]
pub struct BenchArgs {
    #[command(flatten)]
    model: ModelArg,
    #[command(flatten)]
    lora: crate::lora::LoraArgs,
    #[command(flatten)]
    cache: crate::cache::CacheArgs,
    /// Prompt lengths to test (comma-separated; 0 skips).
    #[arg(
        short = 'p',
        long = "n-prompt",
        default_value = "512",
        value_delimiter = ','
    )]
    n_prompt: Vec<usize>,
    /// Generation lengths to test (comma-separated; 0 skips).
    #[arg(
        short = 'n',
        long = "n-gen",
        default_value = "128",
        value_delimiter = ','
    )]
    n_gen: Vec<usize>,
    /// Thread counts to test (comma-separated).
    #[arg(
        short = 't',
        long = "threads",
        default_value = "1",
        value_delimiter = ','
    )]
    threads: Vec<usize>,
    /// Sequences decoding at once in the generation tests (comma-separated, llama.cpp's
    /// `-np`): with N > 1, N sequences each generate `n-gen` tokens together (one forward pass
    /// per step for all of them), and the rate is their total tokens per second.
    #[arg(
        long = "parallel",
        visible_alias = "np",
        default_value = "1",
        value_delimiter = ','
    )]
    parallel: Vec<usize>,
    /// Tokens already in the context when each test starts (comma-separated, llama-bench's
    /// `-d`): evaluated before the clock starts, so that pp and tg measure attention over a
    /// long context.
    #[arg(
        short = 'd',
        long = "n-depth",
        default_value = "0",
        value_delimiter = ','
    )]
    n_depth: Vec<usize>,
    /// Repetitions of each test.
    #[arg(short = 'r', long = "repetitions", default_value_t = 5)]
    repetitions: usize,
    /// Prompt batch size.
    #[arg(short = 'b', long = "batch-size", default_value_t = ContextOptions::default().n_batch)]
    batch_size: u32,
    /// Print results as JSON lines instead of a table.
    #[arg(long)]
    json: bool,
    /// Also measure the memory read bandwidth at each thread count and the decoding ceiling it
    /// implies (bytes of weights read per token / bandwidth).
    #[arg(long)]
    bandwidth: bool,
    /// With speculative flags, compare plain and speculative generation of `n-gen` tokens on a
    /// rewrite, a code edit and an open question instead of the pp/tg tests.
    #[command(flatten)]
    spec: crate::speculative::SpecArgs,
}

/// Best-of-3 read bandwidth in GB/s of `threads` threads summing a 512 MiB buffer (far larger
/// than the caches), each thread streaming its own contiguous part.
fn read_bandwidth(threads: usize) -> Result<f64> {
    const WORDS: usize = 64 << 20;
    let buf: Vec<u64> = (0..WORDS as u64).collect();
    let pool = Threads::new(threads)?;
    let sink = AtomicU64::new(0);
    let mut best = f64::INFINITY;
    for _ in 0..3 {
        let start = Instant::now();
        pool.for_each_chunk(WORDS, WORDS / threads.max(1) / 4, |range| {
            let s = buf[range].iter().fold(0u64, |a, &b| a.wrapping_add(b));
            sink.fetch_add(s, Ordering::Relaxed);
        });
        best = best.min(start.elapsed().as_secs_f64());
    }
    std::hint::black_box(sink.load(Ordering::Relaxed));
    Ok((WORDS * 8) as f64 / best / 1e9)
}

/// Deterministic pseudo-random token ids (the content does not matter for speed).
fn tokens(n: usize, n_vocab: usize, seed: u64) -> Vec<u32> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            (s % n_vocab as u64) as u32
        })
        .collect()
}

/// Clear the context and evaluate `depth` (the tokens a test starts after).
fn start_at(ctx: &mut Context, depth: &[u32]) -> Result<()> {
    ctx.clear();
    if !depth.is_empty() {
        ctx.eval(depth, Output::LastLogits, &mut |_, _| {}, None)?;
    }
    Ok(())
}

fn time_pp(ctx: &mut Context, depth: &[u32], prompt: &[u32]) -> Result<f64> {
    start_at(ctx, depth)?;
    let start = Instant::now();
    ctx.eval(prompt, Output::LastLogits, &mut |_, _| {}, None)?;
    Ok(start.elapsed().as_secs_f64())
}

fn time_tg(ctx: &mut Context, depth: &[u32], gen: &[u32]) -> Result<f64> {
    start_at(ctx, depth)?;
    let start = Instant::now();
    for &t in gen {
        ctx.eval(&[t], Output::LastLogits, &mut |_, _| {}, None)?;
    }
    Ok(start.elapsed().as_secs_f64())
}

/// `gen.len()` tokens on each of `seqs` sequences decoded together (each sequence starts from
/// `depth` and a different last token, evaluated before the clock starts); total seconds.
fn time_tg_parallel(ctx: &mut Context, depth: &[u32], gen: &[u32], seqs: usize) -> Result<f64> {
    ctx.clear();
    // The context may hold more sequences than this test runs: it is done when all are free.
    let all = ctx.free_sequences();
    for s in 0..seqs {
        let mut prompt = depth.to_vec();
        prompt.push(gen[s % gen.len()]);
        let mut request = GenerateRequest::new(Prompt::Tokens(prompt));
        request.sampling = SamplingParams::greedy();
        request.max_tokens = gen.len();
        request.stop_at_eog = false;
        ctx.start_sequence(&request, None, &mut |_| {})?;
    }
    let start = Instant::now();
    while ctx.free_sequences() < all {
        ctx.step_sequences(&|_| true, &mut |_, _| {})?;
    }
    Ok(start.elapsed().as_secs_f64())
}

fn stats(rates: &mut [f64]) -> (f64, f64, f64) {
    rates.sort_by(f64::total_cmp);
    let n = rates.len() as f64;
    let mean = rates.iter().sum::<f64>() / n;
    let var = rates.iter().map(|r| (r - mean).powi(2)).sum::<f64>() / (n - 1.0).max(1.0);
    (rates[rates.len() / 2], mean, var.sqrt())
}

/// Run the benchmark.
pub fn bench(args: &BenchArgs) -> Result<()> {
    if args.parallel.contains(&0) {
        return Err(Error::InvalidOption("--parallel must be at least 1".into()));
    }
    if args.repetitions == 0 {
        return Err(Error::InvalidOption(
            "repetitions must be at least 1".into(),
        ));
    }
    let path = model_path(&args.model)?;
    let model: Arc<LoadedModel> = LoadedModel::load(&path, &LoadOptions::default())?;
    if args.spec.enabled() {
        let n_gen = args.n_gen.iter().copied().max().unwrap_or(0).max(1);
        return crate::speculative::bench(
            &model,
            &args.spec,
            &args.threads,
            n_gen,
            args.repetitions,
            args.json,
        );
    }
    let info = model.info();
    let n_vocab = info.config.n_vocab;
    let name = path
        .file_name()
        .map_or_else(String::new, |s| s.to_string_lossy().into_owned());
    if !args.json {
        println!(
            "model: {name}, load {:.0} ms, simd {}",
            info.load_ms,
            local_llm_engine::quant::simd_level()
        );
        println!("| threads | test  | median t/s | mean t/s ± std |");
        println!("|--------:|:------|-----------:|---------------:|");
    }
    for &threads in &args.threads {
        let max_len = args
            .n_prompt
            .iter()
            .chain(&args.n_gen)
            .copied()
            .max()
            .unwrap_or(0)
            .saturating_add(args.n_depth.iter().copied().max().unwrap_or(0))
            .saturating_add(1);
        let mut ctx = Context::new(
            model.clone(),
            &args.cache.apply(ContextOptions {
                n_ctx: u32::try_from(max_len.max(16)).unwrap_or(u32::MAX),
                n_batch: args.batch_size,
                threads: u32::try_from(threads).unwrap_or(u32::MAX),
                max_sequences: u32::try_from(args.parallel.iter().copied().max().unwrap_or(1))
                    .unwrap_or(u32::MAX),
                ..ContextOptions::default()
            }),
        )?;
        ctx.set_lora(args.lora.load(&model)?)?;
        // The engine caps thread counts at the core count: report the count that ran.
        let threads = ctx.threads();
        let tests = args
            .n_prompt
            .iter()
            .filter(|&&n| n > 0)
            .map(|&n| ("pp", n, 1))
            .chain(
                args.n_gen
                    .iter()
                    .filter(|&&n| n > 0)
                    .flat_map(|&n| args.parallel.iter().map(move |&seqs| ("tg", n, seqs))),
            );
        let tests: Vec<_> = tests.collect();
        let tests = args
            .n_depth
            .iter()
            .flat_map(|&d| tests.iter().map(move |&(kind, n, seqs)| (kind, n, seqs, d)));
        for (kind, n, seqs, d) in tests {
            let toks = tokens(n, n_vocab, n as u64);
            let depth = tokens(d, n_vocab, d as u64 ^ 0xdee9);
            let run = |ctx: &mut Context| match (kind, seqs) {
                ("pp", _) => time_pp(ctx, &depth, &toks),
                (_, 1) => time_tg(ctx, &depth, &toks),
                _ => time_tg_parallel(ctx, &depth, &toks, seqs),
            };
            run(&mut ctx)?; // warm-up
                            // Grown as measured: `-r` is an option, not an allocation size.
            let mut rates = Vec::new();
            for _ in 0..args.repetitions {
                rates.push((n * seqs) as f64 / run(&mut ctx)?);
            }
            let (median, mean, std) = stats(&mut rates);
            if args.json {
                println!(
                    "{{\"model\":\"{name}\",\"threads\":{threads},\"test\":\"{kind}{n}\",\"depth\":{d},\"sequences\":{seqs},\"median_tps\":{median:.3},\"mean_tps\":{mean:.3},\"std_tps\":{std:.3}}}"
                );
            } else {
                let mut test = match seqs {
                    1 => format!("{kind}{n}"),
                    _ => format!("{kind}{n}×{seqs}"),
                };
                if d > 0 {
                    test.push_str(&format!(" @ d{d}"));
                }
                println!("| {threads:7} | {test:<5} | {median:10.2} | {mean:8.2} ± {std:5.2} |");
            }
        }
        if args.bandwidth {
            let gbs = read_bandwidth(threads)?;
            let bytes = model.model().weight_bytes_per_token();
            let ceiling = gbs * 1e9 / bytes as f64;
            if args.json {
                println!(
                    "{{\"model\":\"{name}\",\"threads\":{threads},\"test\":\"bandwidth\",\"read_gbs\":{gbs:.2},\"weight_bytes_per_token\":{bytes},\"ceiling_tps\":{ceiling:.1}}}"
                );
            } else {
                println!(
                    "| {threads:7} | read bandwidth {gbs:.1} GB/s; {:.1} MB of weights per token: decoding ceiling {ceiling:.1} t/s |",
                    bytes as f64 / 1e6
                );
            }
        }
    }
    Ok(())
}
