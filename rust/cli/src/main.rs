//! `local-llm`: run, chat with, benchmark and inspect GGUF models from a terminal.

mod bench;
mod cache;
mod commands;
mod download;
mod embedding;
mod fidelity;
mod kld;
mod logits_file;
mod lora;
mod perplexity;
mod quantize;
mod speculative;

use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, Parser, Subcommand};
use local_llm_engine::sampling::SamplingParams;
use local_llm_engine::session::{ContextOptions, GenerateRequest};

/// On-device LLM inference (GGUF models, CPU and accelerator backends).
#[derive(Parser)]
#[command(name = "local-llm", version, about)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Generate text from a prompt; the text goes to stdout, logs and timings to stderr.
    Run(RunArgs),
    /// Chat interactively (one line per user turn; an empty line or EOF ends).
    Chat(RunArgs),
    /// Measure prompt processing and generation speed (like llama-bench).
    Bench(bench::BenchArgs),
    /// Describe a model file from its header alone (no weight is loaded): architecture,
    /// parameters, quantization, context, vocabulary, chat template, memory, metadata.
    Info(InfoArgs),
    /// Print token ids of a text as JSON.
    Tokenize(TokenizeArgs),
    /// List the compute devices in the backend registry.
    Devices,
    /// Download a model into the cache (resuming an earlier attempt) and print its path.
    Download(download::DownloadArgs),
    /// Compare the emulated IBM Z NNPA (DLFLOAT16 matmuls) with the CPU: greedy-token
    /// agreement and logit error.
    NnpaFidelity(fidelity::FidelityArgs),
    /// Quantize an F32/F16/BF16 GGUF model (llama-quantize's arguments and type names).
    Quantize(quantize::QuantizeArgs),
    /// Perplexity of a text, and KL divergence from saved logits (like llama-perplexity).
    Perplexity(perplexity::PerplexityArgs),
    /// Embeddings or rerank scores of texts (like llama-embedding).
    Embedding(embedding::EmbeddingArgs),
}

/// Selecting the model file.
#[derive(Args, Clone)]
struct ModelArg {
    /// Path of a GGUF model, or an http(s) URL / `user/repo/file.gguf` shorthand to download
    /// into the cache first (default: $LOCAL_LLM_MODEL, else the cached SmolLM2 135M Instruct).
    #[arg(short = 'm', long = "model")]
    model: Option<PathBuf>,
}

#[derive(Args)]
struct InfoArgs {
    #[command(flatten)]
    model: ModelArg,
    /// Context size of the memory estimate (0: the model's, up to 4096).
    #[arg(short = 'c', long = "ctx-size", default_value_t = 0)]
    ctx_size: u32,
    /// Print the description as one JSON object.
    #[arg(long)]
    json: bool,
}

#[derive(Args)]
struct TokenizeArgs {
    #[command(flatten)]
    model: ModelArg,
    /// Text to tokenize.
    #[arg(short = 'p', long = "prompt")]
    prompt: String,
    /// Do not add BOS/EOS.
    #[arg(long)]
    no_special: bool,
    /// Treat special-token text as plain text.
    #[arg(long)]
    no_parse_special: bool,
}

/// Options shared by `run` and `chat`.
#[derive(Args)]
struct RunArgs {
    #[command(flatten)]
    model: ModelArg,
    #[command(flatten)]
    lora: lora::LoraArgs,
    #[command(flatten)]
    cache: cache::CacheArgs,
    /// Prompt text (for `chat`: optional first user message).
    #[arg(short = 'p', long = "prompt")]
    prompt: Option<String>,
    /// Fill in the middle: the text before the hole (llama.cpp's `--in-prefix`); with it or
    /// `--in-suffix` the prompt is laid out as llama-server's `/infill` does and `-p` is the
    /// start of the middle.
    #[arg(long = "in-prefix")]
    in_prefix: Option<String>,
    /// Fill in the middle: the text after the hole (llama.cpp's `--in-suffix`).
    #[arg(long = "in-suffix")]
    in_suffix: Option<String>,
    /// Fill in the middle with the suffix first (llama.cpp's `--spm-infill`).
    #[arg(long = "spm-infill")]
    spm_infill: bool,
    /// Wrap the prompt as a user turn with the model's chat template.
    #[arg(long)]
    chat: bool,
    /// System message for chat prompts.
    #[arg(long)]
    system: Option<String>,
    /// Tokens to generate.
    #[arg(short = 'n', long = "n-predict", default_value_t = GenerateRequest::DEFAULT_MAX_TOKENS)]
    n_predict: usize,
    /// Threads (0: all cores).
    #[arg(short = 't', long = "threads", default_value_t = ContextOptions::default().threads)]
    threads: u32,
    /// Context size (0: the model's, up to 4096).
    #[arg(short = 'c', long = "ctx-size", default_value_t = ContextOptions::default().n_ctx)]
    ctx_size: u32,
    /// Prompt batch size.
    #[arg(short = 'b', long = "batch-size", default_value_t = ContextOptions::default().n_batch)]
    batch_size: u32,
    /// Temperature (0: greedy).
    #[arg(long = "temp", default_value_t = SamplingParams::default().temperature)]
    temp: f32,
    /// Top-k (0: off).
    #[arg(long = "top-k", default_value_t = SamplingParams::default().top_k)]
    top_k: u32,
    /// Locally typical sampling mass (1: off).
    #[arg(long = "typical", default_value_t = SamplingParams::default().typical_p)]
    typical: f32,
    /// Top-p (1: off).
    #[arg(long = "top-p", default_value_t = SamplingParams::default().top_p)]
    top_p: f32,
    /// Min-p (0: off).
    #[arg(long = "min-p", default_value_t = SamplingParams::default().min_p)]
    min_p: f32,
    /// Repeat penalty (1: off).
    #[arg(long = "repeat-penalty", default_value_t = SamplingParams::default().repeat_penalty)]
    repeat_penalty: f32,
    /// Tokens considered by the penalties (0: off, -1: the whole context).
    #[arg(long = "repeat-last-n", default_value_t = SamplingParams::default().penalty_last_n, allow_negative_numbers = true)]
    repeat_last_n: i32,
    /// Frequency penalty.
    #[arg(long = "frequency-penalty", default_value_t = SamplingParams::default().frequency_penalty)]
    frequency_penalty: f32,
    /// Presence penalty.
    #[arg(long = "presence-penalty", default_value_t = SamplingParams::default().presence_penalty)]
    presence_penalty: f32,
    /// DRY repetition penalty strength (0: off).
    #[arg(long = "dry-multiplier", default_value_t = SamplingParams::default().dry_multiplier)]
    dry_multiplier: f32,
    /// DRY's growth per repeated token.
    #[arg(long = "dry-base", default_value_t = SamplingParams::default().dry_base)]
    dry_base: f32,
    /// Repeats up to this length are not penalized by DRY.
    #[arg(long = "dry-allowed-length", default_value_t = SamplingParams::default().dry_allowed_length)]
    dry_allowed_length: u32,
    /// Tokens DRY scans (0: off, -1: the whole context).
    #[arg(long = "dry-penalty-last-n", default_value_t = SamplingParams::default().dry_penalty_last_n, allow_negative_numbers = true)]
    dry_penalty_last_n: i32,
    /// DRY sequence breaker (repeatable; replaces the defaults "\n", ":", "\"", "*"; "none":
    /// no breakers).
    #[arg(long = "dry-sequence-breaker")]
    dry_sequence_breaker: Vec<String>,
    /// Top-n-sigma (<= 0: off).
    #[arg(long = "top-nsigma", visible_alias = "top-n-sigma", default_value_t = SamplingParams::default().top_n_sigma, allow_negative_numbers = true)]
    top_nsigma: f32,
    /// XTC probability (0: off).
    #[arg(long = "xtc-probability", default_value_t = SamplingParams::default().xtc_probability)]
    xtc_probability: f32,
    /// XTC threshold (above 0.5: off).
    #[arg(long = "xtc-threshold", default_value_t = SamplingParams::default().xtc_threshold)]
    xtc_threshold: f32,
    /// Mirostat (0: off, 1: Mirostat, 2: Mirostat 2.0); replaces top-k, top-p, typical,
    /// min-p, XTC, top-n-sigma, the penalties and DRY.
    #[arg(long = "mirostat", default_value_t = SamplingParams::default().mirostat)]
    mirostat: u32,
    /// Mirostat learning rate (eta).
    #[arg(long = "mirostat-lr", default_value_t = SamplingParams::default().mirostat_eta)]
    mirostat_lr: f32,
    /// Mirostat target entropy (tau).
    #[arg(long = "mirostat-ent", default_value_t = SamplingParams::default().mirostat_tau)]
    mirostat_ent: f32,
    /// Logit bias TOKEN_ID(+/-)BIAS, e.g. `15043+1` or `15043-inf` (repeatable).
    #[arg(short = 'l', long = "logit-bias", allow_hyphen_values = true)]
    logit_bias: Vec<String>,
    /// RNG seed, an integer from -1 to 2^32-1 (default, -1 and 2^32-1: random, as llama.cpp's
    /// `--seed` and the JS API's `seed`).
    #[arg(short = 's', long = "seed", allow_negative_numbers = true)]
    seed: Option<i64>,
    /// Stop string (repeatable).
    #[arg(long = "stop")]
    stop: Vec<String>,
    /// Never end at an end-of-generation token: they are banned (logit bias -inf), as
    /// llama.cpp's `--ignore-eos`.
    #[arg(long)]
    ignore_eos: bool,
    /// Read the whole file into memory instead of memory-mapping it.
    #[arg(long)]
    no_mmap: bool,
    /// Print generated token ids as JSON on stderr after the text.
    #[arg(long)]
    print_tokens: bool,
    /// Print each generated token's log-probability and its N most likely alternatives on
    /// stderr after the text (0 = off, at most 20).
    #[arg(long, default_value_t = 0)]
    n_probs: usize,
    /// Constrain the output with a GBNF grammar (llama.cpp syntax, start rule `root`).
    #[arg(long, group = "constraint")]
    grammar: Option<String>,
    /// Read the GBNF grammar from a file.
    #[arg(long, group = "constraint")]
    grammar_file: Option<PathBuf>,
    /// Constrain the output to JSON matching this JSON schema (`{}`: any JSON value).
    #[arg(short = 'j', long, group = "constraint")]
    json_schema: Option<String>,
    /// Read the JSON schema from a file.
    #[arg(long, group = "constraint")]
    json_schema_file: Option<PathBuf>,
    /// When the context is full, keep the first --keep tokens, drop half of the rest and go
    /// on generating (llama.cpp's context shift) instead of stopping.
    #[arg(long)]
    context_shift: bool,
    /// Prompt tokens a context shift keeps (besides a BOS token; -1: the whole prompt).
    #[arg(long = "keep", default_value_t = 0, allow_negative_numbers = true)]
    keep: i64,
    /// Reasoning blocks (`<think>` … `</think>`, models whose chat template writes them):
    /// `none` prints them with the answer; `auto` and `deepseek` print them on stderr and the
    /// answer alone on stdout (llama.cpp's flag; its other formats are not supported).
    #[arg(long, default_value = "none", value_parser = ["none", "auto", "deepseek"])]
    reasoning_format: String,
    /// Reasoning budget: -1 no limit; 0 no thinking (the template's `enable_thinking` set to
    /// false); N at most N tokens inside the block, then its close tag is forced.
    #[arg(long, default_value_t = -1, allow_negative_numbers = true)]
    reasoning_budget: i64,
    /// Extra chat template variables, a JSON object (e.g. '{"enable_thinking": false}').
    #[arg(long)]
    chat_template_kwargs: Option<String>,
    /// Restore the context state from FILE when it exists (the matching start of the prompt
    /// is not evaluated again) and save it there after generating.
    #[arg(long = "prompt-cache")]
    prompt_cache: Option<PathBuf>,
    #[command(flatten)]
    spec: speculative::SpecArgs,
}

fn main() -> ExitCode {
    let cli = Cli::parse_from(std::env::args_os().map(cache::llama_spelling));
    let result = match cli.command {
        Command::Run(args) => commands::run(&args),
        Command::Chat(args) => commands::chat(&args),
        Command::Bench(args) => bench::bench(&args),
        Command::Info(args) => commands::info(&args),
        Command::Tokenize(args) => commands::tokenize(&args),
        Command::Devices => commands::devices(),
        Command::Download(args) => download::run(&args),
        Command::NnpaFidelity(args) => fidelity::fidelity(&args),
        Command::Quantize(args) => quantize::quantize(&args),
        Command::Perplexity(args) => perplexity::perplexity(&args),
        Command::Embedding(args) => embedding::embedding(&args),
    };
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::FAILURE
        }
    }
}
