//! The `run`, `chat`, `info`, `tokenize` and `devices` commands.

use std::io::{BufRead, Write};
use std::path::PathBuf;
use std::sync::Arc;

use local_llm_engine::backend::Registry;
use local_llm_engine::chat::{ChatMessage, ReasoningOptions, TemplateVars};
use local_llm_engine::gguf::GgufFile;
use local_llm_engine::grammar::GrammarRequest;
use local_llm_engine::sampling::{LogitBias, SamplingParams};
use local_llm_engine::session::{
    describe, Context, ContextOptions, ContextShift, GenerateEvent, GenerateRequest, Generation,
    Infill, LoadOptions, LoadedModel, ModelFileInfo, Prompt,
};
use local_llm_engine::tokenizer::Tokenizer;
use local_llm_engine::{Error, Result};

use crate::{InfoArgs, ModelArg, RunArgs, TokenizeArgs};

/// File name of the default model in the cache.
const DEFAULT_MODEL_FILE: &str = "SmolLM2-135M-Instruct.Q4_1.gguf";

/// The model path: `--model`, else `$LOCAL_LLM_MODEL`, else the cached default model.
pub fn model_path(arg: &ModelArg) -> Result<PathBuf> {
    if let Some(p) = &arg.model {
        let spec = p.to_string_lossy();
        if !p.exists() && local_llm_download::is_remote_model(&spec) {
            return crate::download::fetch(&spec, None, None, None);
        }
        return Ok(p.clone());
    }
    if let Some(p) = std::env::var_os("LOCAL_LLM_MODEL") {
        return Ok(PathBuf::from(p));
    }
    let cache = std::env::var_os("LOCAL_LLM_CACHE")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".cache/local-llm")))
        .ok_or_else(|| Error::InvalidOption("no --model given and HOME is not set".into()))?;
    let path = cache.join("models").join(DEFAULT_MODEL_FILE);
    if !path.exists() {
        return Err(Error::InvalidOption(format!(
            "no --model given and the default model is not at {} (run scripts/setup/fetch-models.sh)",
            path.display()
        )));
    }
    Ok(path)
}

fn load(args: &RunArgs) -> Result<Context> {
    let path = model_path(&args.model)?;
    let options = LoadOptions {
        use_mmap: !args.no_mmap,
        ..LoadOptions::default()
    };
    let model = LoadedModel::load(&path, &options)?;
    let info = model.info();
    eprintln!(
        "loaded {} ({}, {} layers, {:.1} M params) in {:.0} ms",
        path.display(),
        info.config.architecture,
        info.config.n_layer,
        info.n_params as f64 / 1e6,
        info.load_ms
    );
    let mut ctx = Context::new(
        model,
        &args.cache.apply(ContextOptions {
            n_ctx: args.ctx_size,
            n_batch: args.batch_size,
            threads: args.threads,
            ..ContextOptions::default()
        }),
    )?;
    args.spec.apply(&mut ctx)?;
    let adapters = args.lora.load(ctx.model())?;
    ctx.set_lora(adapters)?;
    Ok(ctx)
}

/// The grammar `--grammar`, `--grammar-file`, `--json-schema` or `--json-schema-file` asks
/// for (at most one of them: clap enforces it).
fn grammar(args: &RunArgs) -> Result<Option<GrammarRequest>> {
    let read = |path: &PathBuf| {
        std::fs::read_to_string(path).map_err(|source| Error::Io {
            path: path.display().to_string(),
            source,
        })
    };
    let request = if let Some(g) = &args.grammar {
        GrammarRequest::new(g.clone())
    } else if let Some(path) = &args.grammar_file {
        GrammarRequest::new(read(path)?)
    } else if let Some(schema) = &args.json_schema {
        GrammarRequest::json_schema(schema)?
    } else if let Some(path) = &args.json_schema_file {
        GrammarRequest::json_schema(&read(path)?)?
    } else {
        return Ok(None);
    };
    // Report a bad grammar before the model loads.
    request.compile()?;
    Ok(Some(request))
}

fn request(args: &RunArgs, prompt: Prompt) -> Result<GenerateRequest> {
    Ok(GenerateRequest {
        sampling: SamplingParams {
            temperature: args.temp,
            top_k: args.top_k,
            typical_p: args.typical,
            top_p: args.top_p,
            min_p: args.min_p,
            repeat_penalty: args.repeat_penalty,
            frequency_penalty: args.frequency_penalty,
            presence_penalty: args.presence_penalty,
            penalty_last_n: args.repeat_last_n,
            dry_multiplier: args.dry_multiplier,
            dry_base: args.dry_base,
            dry_allowed_length: args.dry_allowed_length,
            dry_penalty_last_n: args.dry_penalty_last_n,
            dry_sequence_breakers: dry_sequence_breakers(&args.dry_sequence_breaker),
            top_n_sigma: args.top_nsigma,
            xtc_probability: args.xtc_probability,
            xtc_threshold: args.xtc_threshold,
            mirostat: args.mirostat,
            mirostat_tau: args.mirostat_ent,
            mirostat_eta: args.mirostat_lr,
            logit_bias: args
                .logit_bias
                .iter()
                .map(|b| logit_bias(b))
                .collect::<Result<_>>()?,
            ignore_eos: args.ignore_eos,
            seed: seed(args)?,
        },
        max_tokens: args.n_predict,
        stop: args.stop.clone(),
        stop_at_eog: !args.ignore_eos,
        logprobs: (args.n_probs > 0).then_some(args.n_probs),
        grammar: grammar(args)?,
        context_shift: context_shift(args)?,
        reasoning: reasoning(args)?,
        template_vars: template_vars(args)?,
        ..GenerateRequest::new(prompt)
    })
}

/// `--reasoning-format` with `--reasoning-budget` (none: the output as it is).
fn reasoning(args: &RunArgs) -> Result<Option<ReasoningOptions>> {
    let split = args.reasoning_format != "none";
    let budget = match args.reasoning_budget {
        -1 | 0 => None,
        n => Some(usize::try_from(n).map_err(|_| {
            Error::InvalidOption(format!("--reasoning-budget {n}: expected -1, 0 or a count"))
        })?),
    };
    Ok((split || budget.is_some()).then(|| ReasoningOptions {
        split,
        budget,
        budget_message: String::new(),
    }))
}

/// `--chat-template-kwargs`, with `enable_thinking` false for `--reasoning-budget 0`.
fn template_vars(args: &RunArgs) -> Result<TemplateVars> {
    let mut vars = match &args.chat_template_kwargs {
        Some(json) => local_llm_engine::chat::template_vars(json)?,
        None => TemplateVars::new(),
    };
    if args.reasoning_budget == 0 {
        vars.insert("enable_thinking".into(), false.into());
    }
    Ok(vars)
}

/// The breakers of `--dry-sequence-breaker` (as llama.cpp: none given keeps the defaults,
/// "none" means no breakers).
fn dry_sequence_breakers(given: &[String]) -> Option<Vec<String>> {
    match given {
        [] => None,
        [only] if only == "none" => Some(Vec::new()),
        list => Some(list.to_vec()),
    }
}

/// One `--logit-bias TOKEN_ID(+/-)BIAS` (llama.cpp's form; `inf` is accepted as a bias).
fn logit_bias(arg: &str) -> Result<LogitBias> {
    let bad = || {
        Error::InvalidOption(format!(
            "--logit-bias takes TOKEN_ID(+/-)BIAS, e.g. 15043+1 or 15043-inf, got {arg:?}"
        ))
    };
    let sign = arg.find(['+', '-']).ok_or_else(bad)?;
    let token: u32 = arg[..sign].trim().parse().map_err(|_| bad())?;
    let bias: f32 = arg[sign..].trim().parse().map_err(|_| bad())?;
    if bias.is_nan() {
        return Err(bad());
    }
    Ok(LogitBias { token, bias })
}

/// The engine seed of `--seed`: llama.cpp's rule, which the JS API's `seed` follows too (an
/// integer from -1 to 2^32-1; none, -1 and 2^32-1 (`LLAMA_DEFAULT_SEED`) ask for a random seed).
fn seed(args: &RunArgs) -> Result<Option<u64>> {
    match args.seed {
        None | Some(-1) => Ok(None),
        Some(n) => match u32::try_from(n) {
            Ok(u32::MAX) => Ok(None),
            Ok(seed) => Ok(Some(u64::from(seed))),
            Err(_) => Err(Error::InvalidOption(format!(
                "--seed {n}: expected -1 or 0..={}",
                u32::MAX
            ))),
        },
    }
}

/// `--context-shift` with `--keep`.
fn context_shift(args: &RunArgs) -> Result<Option<ContextShift>> {
    let n_keep = match args.keep {
        -1 => None,
        n => Some(u32::try_from(n).map_err(|_| {
            Error::InvalidOption(format!("--keep {n}: expected -1 or 0..={}", u32::MAX))
        })?),
    };
    Ok(args.context_shift.then_some(ContextShift { n_keep }))
}

/// `--n-probs`: one line per generated token with its log-probability and the alternatives.
fn print_probs(gen: &Generation) {
    let text = |bytes: &[u8]| String::from_utf8_lossy(bytes).into_owned();
    for lp in &gen.logprobs {
        let top: Vec<String> = lp
            .top
            .iter()
            .map(|t| format!("{:?} {:.4}", text(&t.bytes), t.logprob))
            .collect();
        eprintln!(
            "{:?} {:.4} | {}",
            text(&lp.bytes),
            lp.logprob,
            top.join(", ")
        );
    }
}

fn stream_to_stdout(piece: &str) {
    let mut out = std::io::stdout().lock();
    let _ = out.write_all(piece.as_bytes());
    let _ = out.flush();
}

/// `local-llm run`.
pub fn run(args: &RunArgs) -> Result<()> {
    let infill = (args.in_prefix.is_some() || args.in_suffix.is_some()).then(|| Infill {
        prefix: args.in_prefix.clone().unwrap_or_default(),
        suffix: args.in_suffix.clone().unwrap_or_default(),
        prompt: args.prompt.clone().unwrap_or_default(),
        extra: Vec::new(),
        spm: args.spm_infill,
    });
    if infill.is_some() && args.chat {
        return Err(Error::InvalidOption(
            "--in-prefix/--in-suffix and --chat cannot be combined".into(),
        ));
    }
    let prompt_text = || {
        args.prompt
            .clone()
            .ok_or_else(|| Error::InvalidOption("run needs a prompt (-p)".into()))
    };
    let prompt = if let Some(infill) = infill {
        Prompt::Infill(infill)
    } else if args.chat {
        let mut messages = Vec::new();
        if let Some(system) = &args.system {
            messages.push(ChatMessage::new("system", system.clone()));
        }
        messages.push(ChatMessage::new("user", prompt_text()?));
        Prompt::Chat(messages)
    } else {
        Prompt::Text(prompt_text()?)
    };
    let request = request(args, prompt)?;
    let mut ctx = load(args)?;
    if let Some(path) = args.prompt_cache.as_deref().filter(|p| p.exists()) {
        let restored = ctx.load_state(path)?;
        eprintln!("prompt cache: restored {} tokens", restored.len());
    }
    // The answer to stdout, a reasoning block split from it to stderr.
    let mut on_event = |event: GenerateEvent| match event {
        GenerateEvent::Text(t) => stream_to_stdout(t),
        GenerateEvent::Reasoning(r) => eprint!("{r}"),
        _ => {}
    };
    let gen = ctx.generate_events(&request, &mut on_event, None)?;
    println!();
    if !gen.reasoning.is_empty() {
        eprintln!();
    }
    if let Some(path) = &args.prompt_cache {
        ctx.save_state(path)?;
    }
    if args.print_tokens {
        eprintln!("tokens: {:?}", gen.tokens);
    }
    print_probs(&gen);
    let t = gen.timings;
    eprintln!(
        "prompt: {} tokens in {:.1} ms ({:.1} tok/s) | generation: {} tokens in {:.1} ms ({:.1} tok/s) | finish: {:?}",
        t.prompt_tokens,
        t.prompt_ms,
        t.prompt_tokens_per_second(),
        t.generated_tokens,
        t.generation_ms,
        t.generation_tokens_per_second(),
        gen.finish_reason
    );
    if let Some(line) = crate::speculative::summary(&gen) {
        eprintln!("{line}");
    }
    Ok(())
}

/// `local-llm chat`.
pub fn chat(args: &RunArgs) -> Result<()> {
    let mut ctx = load(args)?;
    let mut messages = Vec::new();
    if let Some(system) = &args.system {
        messages.push(ChatMessage::new("system", system.clone()));
    }
    let mut first = args.prompt.clone();
    let stdin = std::io::stdin();
    loop {
        let line = match first.take() {
            Some(p) => p,
            None => {
                eprint!("> ");
                let mut line = String::new();
                let n = stdin.lock().read_line(&mut line).map_err(|e| Error::Io {
                    path: "<stdin>".into(),
                    source: e,
                })?;
                if n == 0 || line.trim().is_empty() {
                    return Ok(());
                }
                line.trim_end().to_string()
            }
        };
        messages.push(ChatMessage::new("user", line));
        let gen = ctx.generate(
            &request(args, Prompt::Chat(messages.clone()))?,
            &mut stream_to_stdout,
            None,
        )?;
        println!();
        messages.push(ChatMessage::new("assistant", gen.text));
    }
}

/// `local-llm info`: the file's description from its header (no weight is loaded), as text or
/// one JSON object.
pub fn info(args: &InfoArgs) -> Result<()> {
    let path = model_path(&args.model)?;
    let gguf = GgufFile::open(&path)?;
    let d = describe(&gguf, args.ctx_size);
    if args.json {
        println!("{}", info_json(&d));
        return Ok(());
    }
    let mib = |b: u64| b as f64 / 1048576.0;
    let opt = |v: Option<u64>| v.map_or_else(|| "-".to_string(), |v| v.to_string());
    println!(
        "file: {} ({} bytes, GGUF v{})",
        path.display(),
        d.file_size,
        d.gguf_version
    );
    let support = if d.supported {
        "runs here"
    } else {
        "not supported by this engine"
    };
    println!("architecture: {} ({support})", d.architecture);
    if let Some(name) = &d.name {
        println!("name: {name}");
    }
    println!(
        "parameters: {:.2} M, {:.2} MiB of weights, file type {}",
        d.n_params as f64 / 1e6,
        mib(d.weights_bytes),
        d.file_type.as_deref().unwrap_or("unknown")
    );
    println!(
        "context length {}, embedding {}, layers {}, heads {} (KV {})",
        opt(d.context_length),
        opt(d.embedding_length),
        opt(d.n_layer),
        opt(d.n_head),
        opt(d.n_head_kv)
    );
    println!(
        "vocabulary: {} tokens ({}), chat template: {}",
        opt(d.n_vocab),
        d.tokenizer.as_deref().unwrap_or("no tokenizer"),
        d.chat_template
            .as_ref()
            .map_or("none".to_string(), |t| format!(
                "{} chars",
                t.chars().count()
            ))
    );
    match &d.memory {
        Some(m) => println!(
            "memory for {} tokens: {:.1} MiB weights + {:.1} MiB KV cache (f16) = {:.1} MiB",
            m.context_size,
            mib(m.weights_bytes),
            mib(m.kv_cache_bytes),
            mib(m.total_bytes)
        ),
        None => println!("memory: unknown (hyper-parameters missing)"),
    }
    println!("metadata ({} keys):", gguf.metadata().len());
    for (key, value) in gguf.metadata() {
        println!("  {key} = {}", value.display_short());
    }
    println!("tensors ({}):", gguf.tensors().len());
    for t in &d.tensor_types {
        println!(
            "  {:6} {:5} tensors {:10.2} MiB",
            t.type_name,
            t.count,
            mib(t.bytes)
        );
    }
    Ok(())
}

/// The description as JSON (field names as in the TypeScript `ModelFileInfo`).
fn info_json(d: &ModelFileInfo) -> serde_json::Value {
    let types: Vec<serde_json::Value> = d
        .tensor_types
        .iter()
        .map(|t| serde_json::json!({"type": t.type_name, "count": t.count, "bytes": t.bytes}))
        .collect();
    let metadata: serde_json::Map<String, serde_json::Value> = d
        .metadata
        .iter()
        .map(|(k, v)| (k.clone(), serde_json::Value::from(v.as_str())))
        .collect();
    serde_json::json!({
        "architecture": d.architecture,
        "name": d.name,
        "supported": d.supported,
        "sizeBytes": d.file_size,
        "ggufVersion": d.gguf_version,
        "nParams": d.n_params,
        "weightsBytes": d.weights_bytes,
        "fileType": d.file_type,
        "tensorTypes": types,
        "contextLength": d.context_length,
        "embeddingLength": d.embedding_length,
        "nLayer": d.n_layer,
        "nHead": d.n_head,
        "nHeadKv": d.n_head_kv,
        "nVocab": d.n_vocab,
        "tokenizer": d.tokenizer,
        "chatTemplate": d.chat_template,
        "memory": d.memory.as_ref().map(|m| serde_json::json!({
            "weightsBytes": m.weights_bytes,
            "kvCacheBytes": m.kv_cache_bytes,
            "contextSize": m.context_size,
            "totalBytes": m.total_bytes,
        })),
        "metadata": metadata,
    })
}

/// `local-llm tokenize`: reads only the tokenizer, so vocab-only files (llama.cpp's
/// `ggml-vocab-*.gguf`) work as with llama-tokenize.
pub fn tokenize(args: &TokenizeArgs) -> Result<()> {
    let path = model_path(&args.model)?;
    let tokenizer = Tokenizer::from_gguf(&GgufFile::open(&path)?)?;
    let ids = tokenizer.encode(&args.prompt, !args.no_special, !args.no_parse_special)?;
    println!("{}", serde_json::to_string(&ids).unwrap_or_default());
    Ok(())
}

/// `local-llm devices`.
pub fn devices() -> Result<()> {
    let registry = Arc::new(Registry::detect());
    for d in registry.devices() {
        let mem = match (d.memory_free, d.memory_total) {
            (Some(f), Some(t)) => format!("{} / {} MiB free", f >> 20, t >> 20),
            _ => "memory unknown".to_string(),
        };
        println!(
            "{} [{}] {} ({mem}; {})",
            d.name,
            d.kind.name(),
            d.description,
            d.features.join(", ")
        );
    }
    Ok(())
}
