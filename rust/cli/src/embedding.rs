//! `local-llm embedding`: embeddings and rerank scores of texts, with llama-embedding's flags
//! and output formats (llama.cpp's `examples/embedding`), so the two engines' vectors can be
//! compared directly. The prompt is split into texts at `--embd-separator` (a newline); with
//! `--pooling rank` each text is a query and a document split at `--cls-separator` (a tab),
//! laid out as llama.cpp does ([`rerank_text`]).

use std::path::PathBuf;

use clap::Args;
use local_llm_engine::model::Pooling;
use local_llm_engine::session::{
    rerank_text, Context, ContextOptions, EmbedOptions, LoadOptions, LoadedModel,
};
use local_llm_engine::{Error, Result};
use serde_json::json;

use crate::commands::model_path;
use crate::ModelArg;

/// Options of `local-llm embedding` (llama-embedding's names).
#[derive(Args)]
pub struct EmbeddingArgs {
    #[command(flatten)]
    model: ModelArg,
    #[command(flatten)]
    lora: crate::lora::LoraArgs,
    /// The texts, separated by --embd-separator.
    #[arg(short = 'p', long = "prompt")]
    prompt: Option<String>,
    /// Read the texts from a file instead.
    #[arg(short = 'f', long = "file")]
    file: Option<PathBuf>,
    /// Pooling: none, mean, cls, last or rank (default: the model's).
    #[arg(long = "pooling")]
    pooling: Option<String>,
    /// Normalisation: -1 none, 0 max absolute (int16 range), 1 taxicab, 2 Euclidean, >2 p-norm.
    #[arg(
        long = "embd-normalize",
        default_value_t = 2,
        allow_negative_numbers = true
    )]
    embd_normalize: i32,
    /// Output format: "" (a summary), "array", "json", "json+" (with the cosine similarity
    /// matrix) or "raw" (one vector per line).
    #[arg(long = "embd-output-format", default_value = "")]
    embd_output_format: String,
    /// Separator of the texts in the prompt.
    #[arg(long = "embd-separator", default_value = "\n")]
    embd_separator: String,
    /// Separator of a query and its document (rank pooling).
    #[arg(long = "cls-separator", default_value = "\t")]
    cls_separator: String,
    /// Context size (0: the model's, up to 4096).
    #[arg(short = 'c', long = "ctx-size", default_value_t = 0)]
    ctx_size: u32,
    /// Tokens per forward pass: texts are batched up to it.
    #[arg(short = 'b', long = "batch-size", default_value_t = 2048)]
    batch_size: u32,
    /// Threads (0: all cores).
    #[arg(short = 't', long = "threads", default_value_t = 0)]
    threads: u32,
}

/// `local-llm embedding`.
pub fn embedding(args: &EmbeddingArgs) -> Result<()> {
    let format = args.embd_output_format.as_str();
    if !["", "array", "json", "json+", "raw"].contains(&format) {
        return Err(Error::InvalidOption(format!(
            "unknown --embd-output-format '{format}' (expected array, json, json+ or raw)"
        )));
    }
    if args.embd_separator.is_empty() || args.cls_separator.is_empty() {
        return Err(Error::InvalidOption("separators must not be empty".into()));
    }
    let prompt = match (&args.prompt, &args.file) {
        (Some(p), None) => p.clone(),
        (None, Some(f)) => std::fs::read_to_string(f).map_err(|e| Error::Io {
            path: f.display().to_string(),
            source: e,
        })?,
        _ => {
            return Err(Error::InvalidOption(
                "give the texts with exactly one of -p or -f".into(),
            ))
        }
    };
    let path = model_path(&args.model)?;
    let model = LoadedModel::load(&path, &LoadOptions::default())?;
    let pooling = match &args.pooling {
        Some(name) => Pooling::parse(name)?,
        None => model.model().pooling(),
    };
    let texts: Vec<String> = prompt
        .split(args.embd_separator.as_str())
        .map(|text| match text.split_once(args.cls_separator.as_str()) {
            Some((query, doc)) if pooling == Pooling::Rank => rerank_text(&model, query, doc),
            _ => text.to_string(),
        })
        .collect();
    let options = ContextOptions {
        n_ctx: args.ctx_size,
        n_batch: args.batch_size,
        threads: args.threads,
        ..ContextOptions::default()
    };
    let mut ctx = Context::new(model.clone(), &options)?;
    ctx.set_lora(args.lora.load(&model)?)?;
    let embed = EmbedOptions {
        pooling: Some(pooling),
        normalize: args.embd_normalize,
        // As llama-embedding: special-token text is read as those tokens.
        parse_special: true,
    };
    let start = std::time::Instant::now();
    let vectors = ctx.embed_many(&texts, &embed, None)?;
    eprintln!(
        "embedded {} texts in {:.1} ms ({} pooling)",
        texts.len(),
        start.elapsed().as_secs_f64() * 1e3,
        pooling.name()
    );
    let d = model.model().n_embd_out();
    // With no pooling, one vector per token.
    let rows: Vec<&[f32]> = vectors
        .iter()
        .flat_map(|v| match pooling {
            Pooling::None => v.chunks(d).collect::<Vec<_>>(),
            _ => vec![v.as_slice()],
        })
        .collect();
    let labels = labels(&model);
    print(format, (pooling, &labels), &rows, args.embd_normalize == 0);
    Ok(())
}

/// A reranker's score labels (`{arch}.classifier.output_labels`; empty without them).
fn labels(model: &LoadedModel) -> Vec<String> {
    let gguf = model.gguf();
    let arch = gguf.get_str("general.architecture").unwrap_or_default();
    let key = format!("{arch}.classifier.output_labels");
    gguf.get_array(&key)
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(String::from))
                .collect()
        })
        .unwrap_or_default()
}

/// Cosine similarity as llama.cpp's `common_embd_similarity_cos` (0 when one is all zeros).
fn cosine(a: &[f32], b: &[f32]) -> f64 {
    let (mut ab, mut aa, mut bb) = (0f64, 0f64, 0f64);
    for (x, y) in a.iter().zip(b) {
        ab += f64::from(x * y);
        aa += f64::from(x * x);
        bb += f64::from(y * y);
    }
    if aa == 0.0 || bb == 0.0 {
        return if aa == bb { 1.0 } else { 0.0 };
    }
    ab / (aa.sqrt() * bb.sqrt())
}

/// Print `rows` as llama-embedding does for `format` (JSON with full precision).
fn print(format: &str, (pooling, labels): (Pooling, &[String]), rows: &[&[f32]], int16: bool) {
    let number = |v: f32| {
        if int16 {
            format!("{v:.0}")
        } else {
            format!("{v:.7}")
        }
    };
    match format {
        "json" | "json+" => {
            let data: Vec<_> = rows
                .iter()
                .enumerate()
                .map(|(i, r)| json!({"object": "embedding", "index": i, "embedding": r}))
                .collect();
            let mut doc = json!({"object": "list", "data": data});
            if format == "json+" && rows.len() > 1 {
                let sims: Vec<Vec<f64>> = rows
                    .iter()
                    .map(|a| rows.iter().map(|b| cosine(a, b)).collect())
                    .collect();
                doc["cosineSimilarity"] = json!(sims);
            }
            println!("{}", serde_json::to_string_pretty(&doc).unwrap_or_default());
        }
        "array" => println!("{}", serde_json::to_string(rows).unwrap_or_default()),
        "raw" => {
            for r in rows {
                let line: Vec<String> = r.iter().map(|&v| number(v)).collect();
                println!("{}", line.join(" "));
            }
        }
        _ => {
            for (j, r) in rows.iter().enumerate() {
                if pooling == Pooling::Rank {
                    // As llama-embedding: one line per score, labelled when there are several.
                    match r {
                        [score] => println!("rerank score {j}: {score:8.3}"),
                        _ => {
                            for (i, score) in r.iter().enumerate() {
                                let label = labels.get(i).cloned().unwrap_or(i.to_string());
                                println!("rerank score {j}: {score:8.3} [{label}]");
                            }
                        }
                    }
                    continue;
                }
                let shown = if rows.len() > 1 {
                    r.len().min(16)
                } else {
                    r.len()
                };
                let line: Vec<String> = r[..shown].iter().map(|&v| number(v)).collect();
                println!("embedding {j}: {}", line.join(" "));
            }
            if rows.len() > 1 && pooling != Pooling::Rank {
                println!("\ncosine similarity matrix:");
                for a in rows {
                    let line: Vec<String> = rows
                        .iter()
                        .map(|b| format!("{:6.2}", cosine(a, b)))
                        .collect();
                    println!("{}", line.join(" "));
                }
            }
        }
    }
}
