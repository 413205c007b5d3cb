//! `local-llm perplexity`: perplexity of a text, and KL divergence from saved logits, computed
//! as llama-perplexity computes them (llama.cpp's `tools/perplexity`), so the two engines'
//! numbers and saved-logits files can be compared directly.
//!
//! The text (a trailing newline dropped) is tokenized with the model's BOS and without
//! parsing special-token text, and cut into `n_chunk` chunks of `n_ctx` tokens. Each chunk is
//! evaluated from an empty cache with its first token replaced by BOS when the model adds
//! BOS; the first half is context, and each position of the second half but the last
//! predicts the next token. Perplexity is `exp` of the mean negative log-likelihood; its
//! uncertainty is `PPL · sqrt(var(nll) / (count - 1))`. As in llama-perplexity, the running
//! perplexity after each chunk and the KL report go to stdout, progress and the final estimate
//! to stderr. With `--kl-divergence-base FILE` the scored positions' log-probabilities are
//! saved in llama-perplexity's format ([`crate::logits_file`]); adding `--kl-divergence`
//! reads such a file instead (its tokens and chunk size, not the text) and compares.

use std::path::{Path, PathBuf};
use std::time::Instant;

use clap::Args;
use local_llm_engine::model::Output;
use local_llm_engine::session::{Context, ContextOptions, LoadOptions, LoadedModel};
use local_llm_engine::{Error, Result};

use crate::commands::model_path;
use crate::kld::KldStats;
use crate::logits_file::{self, BaseRow, LogitsReader, LogitsWriter};
use crate::ModelArg;

/// Options of `local-llm perplexity` (llama-perplexity's names).
#[derive(Args)]
pub struct PerplexityArgs {
    #[command(flatten)]
    model: ModelArg,
    #[command(flatten)]
    lora: crate::lora::LoraArgs,
    #[command(flatten)]
    cache: crate::cache::CacheArgs,
    /// Text file to evaluate (not needed with --kl-divergence: the base file has the tokens).
    #[arg(short = 'f', long = "file")]
    file: Option<PathBuf>,
    /// Tokens per chunk.
    #[arg(short = 'c', long = "ctx-size", default_value_t = 512)]
    ctx_size: u32,
    /// Tokens per forward pass.
    #[arg(short = 'b', long = "batch-size", default_value_t = 2048)]
    batch_size: u32,
    /// Threads (0: all cores).
    #[arg(short = 't', long = "threads", default_value_t = 0)]
    threads: u32,
    /// Chunks to evaluate (-1: all).
    #[arg(long = "chunks", default_value_t = -1, allow_negative_numbers = true)]
    chunks: i64,
    /// Saved-logits file: written by a perplexity run, read by --kl-divergence.
    #[arg(long = "kl-divergence-base", alias = "save-all-logits")]
    kl_divergence_base: Option<PathBuf>,
    /// Compare with the logits saved in --kl-divergence-base instead of computing perplexity.
    #[arg(long = "kl-divergence", requires = "kl_divergence_base")]
    kl_divergence: bool,
}

/// `local-llm perplexity`.
pub fn perplexity(args: &PerplexityArgs) -> Result<()> {
    let path = model_path(&args.model)?;
    let model = LoadedModel::load(&path, &LoadOptions::default())?;
    let info = model.info();
    eprintln!(
        "loaded {} ({}, placement {:?})",
        path.display(),
        info.config.architecture,
        info.placement
    );
    let n_vocab = model.tokenizer().n_vocab();
    if info.config.n_vocab != n_vocab {
        return Err(Error::InvalidModel(format!(
            "the model computes {} logits per token but its vocabulary has {n_vocab} tokens",
            info.config.n_vocab
        )));
    }
    match (&args.kl_divergence_base, args.kl_divergence) {
        (Some(base), true) => kl_divergence(args, model, base),
        (base, _) => perplexity_of_text(args, model, base.as_deref()),
    }
}

/// Evaluates chunks of `n_ctx` tokens from an empty cache and hands each chunk's logits of
/// the scored positions (`rows_per_chunk × n_vocab`) to `score`.
struct Evaluator {
    ctx: Context,
    n_ctx: usize,
    bos: Option<u32>,
}

impl Evaluator {
    fn new(
        args: &PerplexityArgs,
        model: std::sync::Arc<LoadedModel>,
        n_ctx: usize,
    ) -> Result<Self> {
        if n_ctx < 4 {
            return Err(Error::InvalidOption(format!(
                "the context size must be at least 4 to score half of it, not {n_ctx}"
            )));
        }
        let bos =
            match model.tokenizer().add_bos() {
                true => Some(model.tokenizer().bos().ok_or_else(|| {
                    Error::Tokenizer("model adds BOS but has no BOS token".into())
                })?),
                false => None,
            };
        let options = args.cache.apply(ContextOptions {
            n_ctx: u32::try_from(n_ctx)
                .map_err(|_| Error::InvalidOption(format!("context size {n_ctx} is too large")))?,
            n_batch: args.batch_size,
            threads: args.threads,
            ..ContextOptions::default()
        });
        let adapters = args.lora.load(&model)?;
        let mut ctx = Context::new(model, &options)?;
        ctx.set_lora(adapters)?;
        Ok(Evaluator { ctx, n_ctx, bos })
    }

    /// Logits of positions `n_ctx/2 .. n_ctx-1` of `chunk` (the last position predicts
    /// nothing in the chunk and is not evaluated).
    fn chunk_logits(&mut self, chunk: &[u32]) -> Result<Vec<f32>> {
        let first = self.n_ctx / 2;
        let mut tokens = chunk[..self.n_ctx - 1].to_vec();
        if let Some(bos) = self.bos {
            tokens[0] = bos;
        }
        self.ctx.clear();
        let mut progress = |_, _| {};
        self.ctx
            .eval(&tokens[..first], Output::LastLogits, &mut progress, None)?;
        self.ctx
            .eval(&tokens[first..], Output::AllLogits, &mut progress, None)
    }
}

/// llama-perplexity's progress line after the first chunk: seconds per chunk and the ETA.
fn print_eta(start: Instant, n_chunk: usize) {
    let t = start.elapsed().as_secs_f32();
    let mut total = (t * n_chunk as f32) as u64;
    let mut eta = String::new();
    if total >= 3600 {
        eta = format!("{} hours ", total / 3600);
        total %= 3600;
    }
    // llama-perplexity logs the first part at info level (stderr), the rest plainly (stdout).
    eprintln!("perplexity: {t:.2} seconds per pass - ETA");
    println!("{eta}{:.2} minutes", total as f64 / 60.0);
}

/// Reads the text of `--file` as llama.cpp does (one trailing newline removed).
fn read_text(path: &Path) -> Result<String> {
    let mut text = std::fs::read_to_string(path).map_err(|source| Error::Io {
        path: path.display().to_string(),
        source,
    })?;
    if text.ends_with('\n') {
        text.pop();
    }
    Ok(text)
}

/// Negative log-likelihood of `token` under `logits` (double where llama-perplexity uses it).
fn nll(logits: &[f32], token: usize) -> f64 {
    let max = logits.iter().copied().fold(f32::NEG_INFINITY, f32::max);
    let sum_exp: f64 = logits.iter().map(|&l| f64::from((l - max).exp())).sum();
    -(f64::from(logits[token] - max) - sum_exp.ln())
}

fn perplexity_of_text(
    args: &PerplexityArgs,
    model: std::sync::Arc<LoadedModel>,
    base: Option<&Path>,
) -> Result<()> {
    let file = args
        .file
        .as_deref()
        .ok_or_else(|| Error::InvalidOption("perplexity needs a text file (-f)".into()))?;
    let text = read_text(file)?;
    let n_ctx = args.ctx_size as usize;
    let tokens = model.tokenize(&text, true, false)?;
    let n_vocab = model.tokenizer().n_vocab();
    if tokens.len() < 2 * n_ctx {
        return Err(Error::InvalidOption(format!(
            "you need at least {} tokens to evaluate perplexity with a context of {n_ctx}: \
             {} tokenizes to only {}",
            2 * n_ctx,
            file.display(),
            tokens.len()
        )));
    }
    let n_chunk_max = tokens.len() / n_ctx;
    let n_chunk = match usize::try_from(args.chunks) {
        Ok(n) => n.min(n_chunk_max),
        Err(_) => n_chunk_max,
    };
    let mut eval = Evaluator::new(args, model, n_ctx)?;
    let mut writer = match base {
        Some(p) => {
            eprintln!("perplexity: saving all logits to {}", p.display());
            Some(LogitsWriter::create(
                p,
                n_ctx,
                n_vocab,
                &tokens[..n_chunk * n_ctx],
            )?)
        }
        None => None,
    };
    eprintln!(
        "perplexity: calculating perplexity over {n_chunk} chunks, n_ctx={n_ctx}, batch_size={}, n_seq=1",
        args.batch_size.min(args.ctx_size)
    );
    let first = n_ctx / 2;
    let n_rows = logits_file::rows_per_chunk(n_ctx);
    let nv = logits_file::row_words(n_vocab);
    let mut rows = vec![0u16; if writer.is_some() { n_rows * nv } else { 0 }];
    let (mut sum, mut sum2, mut count) = (0f64, 0f64, 0usize);
    for i in 0..n_chunk {
        let start = Instant::now();
        let chunk = &tokens[i * n_ctx..(i + 1) * n_ctx];
        let logits = eval.chunk_logits(chunk)?;
        if i == 0 {
            print_eta(start, n_chunk);
        }
        for (r, row_logits) in logits.chunks_exact(n_vocab).take(n_rows).enumerate() {
            let next = chunk[first + r + 1] as usize;
            let v = match writer {
                Some(_) => {
                    logits_file::encode_row(row_logits, next, &mut rows[r * nv..(r + 1) * nv])
                }
                None => nll(row_logits, next),
            };
            sum += v;
            sum2 += v * v;
        }
        if let Some(w) = &mut writer {
            w.write_rows(&rows)?;
        }
        count += n_rows;
        print!("[{}]{:.4},", i + 1, (sum / count as f64).exp());
        use std::io::Write;
        let _ = std::io::stdout().flush();
    }
    println!();
    if let Some(w) = writer {
        w.finish()?;
    }
    let mean = sum / count as f64;
    let ppl = mean.exp();
    let var = sum2 / count as f64 - mean * mean;
    if var > 0.0 {
        let err = (var / (count - 1) as f64).sqrt();
        eprintln!("Final estimate: PPL = {ppl:.4} +/- {:.5}", err * ppl);
    } else {
        eprintln!("Unexpected negative standard deviation of log(prob)");
    }
    Ok(())
}

fn kl_divergence(
    args: &PerplexityArgs,
    model: std::sync::Arc<LoadedModel>,
    base: &Path,
) -> Result<()> {
    let mut reader = LogitsReader::open(base)?;
    let n_vocab = model.tokenizer().n_vocab();
    if reader.n_vocab != n_vocab {
        return Err(Error::InvalidOption(format!(
            "{} was computed over a vocabulary of {} tokens but this model has {n_vocab}",
            base.display(),
            reader.n_vocab
        )));
    }
    let n_ctx = reader.n_ctx;
    let n_chunk = match usize::try_from(args.chunks) {
        Ok(n) => n.min(reader.n_chunk),
        Err(_) => reader.n_chunk,
    };
    let mut eval = Evaluator::new(args, model, n_ctx)?;
    eprintln!(
        "kl_divergence: computing over {n_chunk} chunks, n_ctx={n_ctx}, batch_size={}, n_seq=1",
        args.batch_size
    );
    let first = n_ctx / 2;
    let nv = logits_file::row_words(n_vocab);
    let mut stats = KldStats::default();
    let mut rows = Vec::new();
    let tokens = std::mem::take(&mut reader.tokens);
    for i in 0..n_chunk {
        let start = Instant::now();
        let chunk = &tokens[i * n_ctx..(i + 1) * n_ctx];
        let logits = eval.chunk_logits(chunk)?;
        if i == 0 {
            print_eta(start, n_chunk);
            println!();
            println!("{}", KldStats::table_header());
        }
        reader.read_chunk(&mut rows)?;
        for (r, (row_logits, base_row)) in logits
            .chunks_exact(n_vocab)
            .zip(rows.chunks_exact(nv))
            .enumerate()
        {
            let next = chunk[first + r + 1] as usize;
            stats.add(row_logits, &BaseRow::new(base_row, n_vocab), next);
        }
        println!("{}", stats.table_row(i + 1));
    }
    println!();
    if let Some(report) = stats.report() {
        print!("{report}");
    }
    Ok(())
}
