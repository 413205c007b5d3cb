//! Our Mirostat and DRY against llama.cpp's own implementations, run on the same inputs.
//!
//! `tools/sampler-oracle/oracle.c` is built here against the `llama.h` of the node-llama-cpp
//! bundle in tools/oracle and linked with that package's prebuilt libllama (the same release),
//! so the samplers that answer are llama.cpp's compiled code, not a port.
//!
//! - Mirostat 1.0 and 2.0: llama.cpp's chain (temperature, Mirostat) on rows of logits shaped like
//!   a language model's (Zipf-like with noise, shuffled ids). At every step the number of
//!   candidates its truncation keeps must equal ours; the token it draws (from its own PRNG) is
//!   fed back into our surprise estimate so the two runs stay on the same path.
//! - DRY with llama.cpp's default sequence breakers and with multi-token ones, resolved against
//!   the real vocabularies of both models (byte-level BPE and SentencePiece): after every token
//!   of a repetitive text the penalties of every token must be equal.

mod common;
mod tokenizer_support;

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::OnceLock;

use local_llm_engine::gguf::GgufFile;
use local_llm_engine::sampling::dry::{dry_penalties, DryBreakers, DryParams};
use local_llm_engine::sampling::stages::{self, Candidate};
use local_llm_engine::sampling::DEFAULT_DRY_SEQUENCE_BREAKERS;
use local_llm_engine::tokenizer::Tokenizer;

/// The oracle executable, built once.
fn oracle() -> &'static Path {
    static BUILT: OnceLock<PathBuf> = OnceLock::new();
    BUILT.get_or_init(|| {
        let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../..");
        let bins = root.join("tools/oracle/node_modules/@node-llama-cpp/linux-x64/bins/linux-x64");
        assert!(
            bins.join("libllama.v0.4.0.so").exists(),
            "node-llama-cpp's prebuilt libllama missing in {}: run `npm ci` in tools/oracle",
            bins.display()
        );
        let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("sampler-oracle");
        tokenizer_support::llama_cpp_checkout(&["include", "ggml/include"], &dir);
        let exe = dir.join("oracle");
        let out = Command::new("cc")
            .args(["-O2", "-std=c11", "-Wall", "-Werror"])
            .arg(format!("-I{}", dir.join("include").display()))
            .arg(format!("-I{}", dir.join("ggml/include").display()))
            .arg(root.join("tools/sampler-oracle/oracle.c"))
            .arg("-o")
            .arg(&exe)
            .args(
                ["libllama.v0.4.0.so", "libggml.v0.4.0.so", "libggml-base.so"]
                    .map(|l| bins.join(l)),
            )
            .arg(format!("-Wl,-rpath,{}", bins.display()))
            .output()
            .expect("a C compiler (cc) is needed to build the sampler oracle");
        assert!(
            out.status.success(),
            "building the sampler oracle failed: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        exe
    })
}

fn run_oracle(args: &[&std::ffi::OsStr]) -> String {
    let out = Command::new(oracle())
        .args(args)
        .output()
        .expect("run the sampler oracle");
    assert!(
        out.status.success(),
        "sampler oracle failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).expect("utf-8")
}

/// `steps` rows of `n_vocab` logits like a language model's: -s·ln(rank) plus noise, ranks
/// shuffled over the ids, a different exponent per row.
fn lm_like_logits(n_vocab: usize, steps: usize, seed: u64) -> Vec<Vec<f32>> {
    let mut state = seed;
    let mut next = move || {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        (state >> 11) as f64 / (1u64 << 53) as f64
    };
    (0..steps)
        .map(|_| {
            let s = 0.8 + 0.8 * next();
            let mut row: Vec<f32> = (0..n_vocab)
                .map(|r| (-s * ((r + 1) as f64).ln() + 0.3 * (next() - 0.5)) as f32)
                .collect();
            for i in (1..n_vocab).rev() {
                let j = (next() * (i + 1) as f64) as usize;
                row.swap(i, j.min(i));
            }
            row
        })
        .collect()
}

#[test]
fn mirostat_truncates_as_llama_cpp_does() {
    const N_VOCAB: usize = 4000;
    const STEPS: usize = 250;
    let rows = lm_like_logits(N_VOCAB, STEPS, 11);
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("sampler-oracle");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join(format!("mirostat-logits-{}.f32", std::process::id()));
    let bytes: Vec<u8> = rows
        .iter()
        .flatten()
        .flat_map(|v| v.to_le_bytes())
        .collect();
    std::fs::write(&file, bytes).unwrap();
    for (version, tau, eta, temp) in [
        (1u32, 5.0f32, 0.1f32, 1.0f32),
        (1, 3.0, 0.2, 0.7),
        (2, 5.0, 0.1, 1.0),
        (2, 3.0, 0.2, 0.7),
    ] {
        let out = run_oracle(&[
            "mirostat".as_ref(),
            version.to_string().as_ref(),
            "1234".as_ref(),
            tau.to_string().as_ref(),
            eta.to_string().as_ref(),
            temp.to_string().as_ref(),
            N_VOCAB.to_string().as_ref(),
            STEPS.to_string().as_ref(),
            file.as_os_str(),
        ]);
        let theirs: Vec<(usize, u32)> = out
            .lines()
            .map(|l| {
                let (k, t) = l.split_once(' ').expect("size token");
                (k.parse().unwrap(), t.parse().unwrap())
            })
            .collect();
        assert_eq!(theirs.len(), STEPS);
        let mut mu = 2.0 * tau;
        let (mut equal, mut sizes) = (0, Vec::new());
        for (step, (row, &(k, token))) in rows.iter().zip(&theirs).enumerate() {
            let mut cands: Vec<Candidate> = row
                .iter()
                .enumerate()
                .map(|(id, &logit)| Candidate {
                    id: id as u32,
                    logit,
                })
                .collect();
            stages::temperature(&mut cands, temp);
            if version == 1 {
                stages::mirostat_truncate(&mut cands, mu, N_VOCAB, 100);
            } else {
                stages::mirostat_v2_truncate(&mut cands, mu);
            }
            equal += usize::from(cands.len() == k);
            assert!(
                cands.len().abs_diff(k) <= 1,
                "mirostat {version} tau {tau}, step {step}: we keep {}, llama.cpp {k}",
                cands.len()
            );
            let probs = stages::softmax(&cands);
            let at = cands.iter().position(|c| c.id == token).unwrap_or_else(|| {
                panic!(
                    "step {step}: llama.cpp drew {token}, outside our {} candidates",
                    cands.len()
                )
            });
            mu = stages::mirostat_update(mu, probs[at], tau, eta);
            sizes.push(k);
        }
        sizes.sort_unstable();
        eprintln!(
            "mirostat {version} tau {tau} eta {eta} temp {temp}: kept-set size equal at {equal}/{STEPS} steps \
             (llama.cpp's sizes: min {}, median {}, max {})",
            sizes[0],
            sizes[STEPS / 2],
            sizes[STEPS - 1]
        );
        assert!(
            equal * 100 >= STEPS * 99,
            "equal sizes at only {equal}/{STEPS} steps"
        );
    }
    let _ = std::fs::remove_file(&file);
}

/// A text with repeats of many lengths, across and within the default breakers.
const REPETITIVE: &str = "Row, row, row your boat: gently down the stream.\n\
Merrily, merrily, merrily, merrily, life is but a dream.\n\
Row, row, row your boat: gently down the stream, \"merrily\" *merrily*.\n\
fn main() { let x = vec![1, 2, 3]; let y = vec![1, 2, 3]; let z = vec![1, 2, 3]; }\n\
the cat sat on the mat the cat sat on the mat the cat sat on the hat";

fn dry_case(model: &str, last_n: i32, breakers: &[&str]) {
    let Some(path) = common::real_model(model) else {
        return;
    };
    let tok = Tokenizer::from_gguf(&GgufFile::open(&path).unwrap()).unwrap();
    let tokens = tok.encode(REPETITIVE, false, false).unwrap();
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("sampler-oracle");
    std::fs::create_dir_all(&dir).unwrap();
    let file = dir.join(format!("dry-{model}-{}.txt", std::process::id()));
    let text: Vec<String> = tokens.iter().map(u32::to_string).collect();
    std::fs::write(&file, text.join(" ")).unwrap();
    let (mult, base, allowed) = (0.8f32, 1.75f32, 2usize);
    let mut args: Vec<std::ffi::OsString> = vec![
        "dry".into(),
        path.clone().into(),
        mult.to_string().into(),
        base.to_string().into(),
        allowed.to_string().into(),
        last_n.to_string().into(),
        file.clone().into(),
    ];
    args.extend(breakers.iter().map(|b| b.into()));
    let out = run_oracle(&args.iter().map(|a| a.as_os_str()).collect::<Vec<_>>());
    let strings: Vec<String> = breakers.iter().map(|b| b.to_string()).collect();
    let breakers = DryBreakers::for_vocab(&strings, &tok).unwrap();
    let params = DryParams {
        multiplier: mult,
        base,
        allowed_length: allowed,
    };
    let (mut penalized_steps, mut lines) = (0, 0);
    for line in out.lines() {
        let mut parts = line.split(' ');
        let n: usize = parts.next().unwrap().parse().unwrap();
        let mut theirs: Vec<(u32, f32)> = parts
            .map(|p| {
                let (id, v) = p.split_once(':').unwrap();
                (id.parse().unwrap(), v.parse().unwrap())
            })
            .collect();
        theirs.sort_by_key(|&(id, _)| id);
        let window = &tokens[n.saturating_sub(last_n as usize)..n];
        let ours = dry_penalties(window, &breakers, &params);
        let same = ours.len() == theirs.len()
            && ours
                .iter()
                .zip(&theirs)
                .all(|(a, b)| a.0 == b.0 && (a.1 - b.1).abs() <= 1e-5 * b.1.abs().max(1.0));
        assert!(
            same,
            "{model}, after {n} tokens: ours {ours:?}, llama.cpp {theirs:?}"
        );
        penalized_steps += usize::from(!ours.is_empty());
        lines += 1;
    }
    assert_eq!(lines, tokens.len());
    eprintln!(
        "{model} (last_n {last_n}, breakers {strings:?}): {} tokens, DRY penalties equal after \
         every one; {penalized_steps} steps penalize something",
        tokens.len()
    );
    assert!(
        penalized_steps * 4 > tokens.len(),
        "the text should repeat itself more"
    );
    let _ = std::fs::remove_file(&file);
}

#[test]
fn dry_matches_llama_cpp_on_real_vocabularies() {
    let defaults = DEFAULT_DRY_SEQUENCE_BREAKERS;
    // Breakers longer than a token: heads whose text ends with a breaker's start, and tails.
    let long = ["\n", "the cat", "row your boat", "vec![1"];
    for model in [tokenizer_support::SMOLLM, tokenizer_support::GEMMA] {
        dry_case(model, 64, &defaults);
        dry_case(model, 1000, &long);
    }
}
