//! llama.cpp's own sampler test cases run against our sampling stages.
//!
//! The cases are extracted at test time by `scripts/checks/llama_sampling_cases.py` from
//! llama.cpp's `tests/test-sampling.cpp` (llama.cpp 0c1e570, vendored by the PyPI sdist
//! llama-cpp-python==0.3.36, downloaded once into ~/.cache/local-llm). Each case gives input
//! probabilities (logits = their logs), a stage with its parameters and the probabilities
//! llama.cpp leaves. Ours are compared as a distribution: both lists sorted and padded with
//! zeros (we remove a filtered token where llama.cpp may set its logit to -inf), each within
//! llama.cpp's own 1e-5. Cases without a `dist` stage in llama.cpp (XTC, typical) keep the
//! probabilities of the input, unnormalized; so do we. `test_sampler_queue` chains top-k, top-p
//! and min-p over a 10,000-token vocabulary with the size and end-id checks of the C++ test.
//! Set `LOCAL_LLM_SKIP_LLAMA_SOURCES=1` to skip when that download is impossible (offline).

use std::collections::BTreeMap;
use std::process::Command;

use local_llm_engine::sampling::dry::{dry_penalties, DryBreakers, DryParams};
use local_llm_engine::sampling::stages::{self, Candidate};
use local_llm_engine::sampling::{SamplingParams, DEFAULT_DRY_SEQUENCE_BREAKERS};
use serde_json::Value;

/// Cases we do not run, with the reason.
const OUT_OF_SCOPE: &[(&str, &str)] = &[
    (
        "test_dist_singleton_rng",
        "checks llama.cpp's own PRNG stream (std::mt19937); ours is a seeded xoshiro256**",
    ),
    ("test_perf", "a benchmark, not a check"),
];

/// The extractor's output: `{"cases": [...], "defaults": {...}}`.
fn extracted() -> Option<Value> {
    if std::env::var("LOCAL_LLM_SKIP_LLAMA_SOURCES").is_ok_and(|v| v == "1") {
        eprintln!("LOCAL_LLM_SKIP_LLAMA_SOURCES=1: skipping the llama.cpp sampler oracle");
        return None;
    }
    let script = concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../../scripts/checks/llama_sampling_cases.py"
    );
    let out = Command::new("python3")
        .arg(script)
        .output()
        .expect("python3 must be installed to extract llama.cpp's sampler tests");
    assert!(
        out.status.success(),
        "extracting llama.cpp's sampler tests failed (set LOCAL_LLM_SKIP_LLAMA_SOURCES=1 to skip \
         when offline): {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Some(serde_json::from_slice(&out.stdout).expect("the extractor prints JSON"))
}

fn floats(v: &Value) -> Vec<f32> {
    v.as_array()
        .expect("a list")
        .iter()
        .map(|x| x.as_f64().expect("a number") as f32)
        .collect()
}

fn tokens(v: &Value) -> Vec<u32> {
    v.as_array()
        .expect("a list")
        .iter()
        .map(|x| x.as_u64().expect("a token id") as u32)
        .collect()
}

fn num(v: &Value) -> f32 {
    v.as_f64().expect("a number") as f32
}

/// Candidates with logits ln(p) (ln 0 = -inf), ids in order.
fn from_probs(probs: &[f32]) -> Vec<Candidate> {
    probs
        .iter()
        .enumerate()
        .map(|(id, &p)| Candidate {
            id: id as u32,
            logit: p.ln(),
        })
        .collect()
}

/// The softmax of the candidates (llama.cpp's `dist` stage), as f32.
fn dist(cands: &[Candidate]) -> Vec<f32> {
    stages::softmax(cands).iter().map(|&p| p as f32).collect()
}

/// The input probability of each surviving candidate (stages llama.cpp does not follow with
/// `dist` leave its unnormalized softmax).
fn input_probs(input: &[f32], cands: &[Candidate]) -> Vec<f32> {
    cands.iter().map(|c| input[c.id as usize]).collect()
}

/// Compare as distributions: sorted descending, the shorter padded with zeros, each within
/// 1e-5 (llama.cpp's tolerance).
fn same_distribution(ours: &[f32], expected: &[f32]) -> Result<(), String> {
    let sorted = |v: &[f32]| {
        let mut v = v.to_vec();
        v.sort_by(|a, b| b.total_cmp(a));
        v
    };
    let (mut a, mut b) = (sorted(ours), sorted(expected));
    let n = a.len().max(b.len());
    a.resize(n, 0.0);
    b.resize(n, 0.0);
    if a.iter().zip(&b).all(|(x, y)| (x - y).abs() < 1e-5) {
        Ok(())
    } else {
        Err(format!("ours {a:?}, llama.cpp {b:?}"))
    }
}

/// The repetition/frequency/presence penalties over `last` (llama.cpp's `penalties` stage with
/// `penalty_last_n` = its length), through our stage function.
fn penalties(cands: &mut [Candidate], last: &[u32], repeat: f32, freq: f32, present: f32) {
    let mut counts: BTreeMap<u32, usize> = BTreeMap::new();
    for &t in last {
        *counts.entry(t).or_default() += 1;
    }
    for c in cands.iter_mut() {
        if let Some(&n) = counts.get(&c.id) {
            c.logit = stages::penalize(c.logit, n, repeat, freq, present);
        }
    }
}

/// One probability case: our result for `name` on `args`, and llama.cpp's expectation.
fn run_case(name: &str, args: &[Value]) -> (Vec<f32>, Vec<f32>) {
    let probs = floats(&args[0]);
    let mut c = from_probs(&probs);
    match name {
        "test_temp" => {
            stages::temperature(&mut c, num(&args[2]));
            (dist(&c), floats(&args[1]))
        }
        "test_temp_ext" => {
            // Dynamic temperature (delta != 0) is not a stage of ours; with delta 0 it is the
            // plain temperature, which is what these cases use.
            assert_eq!(num(&args[3]), 0.0, "dynamic temperature case");
            stages::temperature(&mut c, num(&args[2]));
            (dist(&c), floats(&args[1]))
        }
        "test_top_k" => {
            stages::top_k(&mut c, num(&args[2]) as usize);
            (dist(&c), floats(&args[1]))
        }
        "test_top_p" => {
            stages::top_p(&mut c, num(&args[2]));
            (dist(&c), floats(&args[1]))
        }
        "test_min_p" => {
            stages::min_p(&mut c, num(&args[2]));
            (dist(&c), floats(&args[1]))
        }
        "test_xtc" => {
            // llama.cpp draws the chance from its PRNG (seed 0); these cases expect XTC to act
            // (probability 0.99), so our draw is 0.
            stages::xtc(&mut c, num(&args[2]), num(&args[3]), 0.0);
            (input_probs(&probs, &c), floats(&args[1]))
        }
        "test_typical" => {
            stages::typical(&mut c, num(&args[2]));
            (input_probs(&probs, &c), floats(&args[1]))
        }
        "test_top_n_sigma" => {
            stages::top_n_sigma(&mut c, num(&args[2]));
            (dist(&c), floats(&args[1]))
        }
        "test_penalties" => {
            let last = tokens(&args[1]);
            penalties(&mut c, &last, num(&args[3]), num(&args[4]), num(&args[5]));
            (dist(&c), floats(&args[2]))
        }
        "test_dry" => {
            let last = tokens(&args[1]);
            let last_n = num(&args[6]) as usize;
            let window = &last[last.len().saturating_sub(last_n)..];
            let seqs: Vec<Vec<u32>> = args[7]
                .as_array()
                .expect("breaker list")
                .iter()
                .map(tokens)
                .collect();
            let params = DryParams {
                multiplier: num(&args[3]),
                base: num(&args[4]),
                allowed_length: num(&args[5]) as usize,
            };
            let pen = dry_penalties(window, &DryBreakers::from_token_sequences(&seqs), &params);
            for (id, p) in pen {
                c[id as usize].logit -= p;
            }
            (dist(&c), floats(&args[2]))
        }
        other => panic!("unknown llama.cpp sampler case {other}: extend this test"),
    }
}

/// `test_sampler_queue`: the stages of `seq` ('k' top-k, 'p' top-p, 'm' min-p) over logits
/// ln(id) for ids 0..n_vocab, checked as the C++ test checks them (ported from its source:
/// expected sizes and the ids at both ends).
fn run_queue(args: &[Value]) -> Result<(), String> {
    let n_vocab = num(&args[0]) as i64;
    let seq = args[1].as_str().expect("sampler sequence");
    let top_k = num(&args[2]) as i64;
    let top_p = num(&args[3]);
    let min_p = num(&args[4]);
    let mut c: Vec<Candidate> = (0..n_vocab)
        .map(|id| Candidate {
            id: id as u32,
            logit: (id as f32).ln(),
        })
        .collect();
    let max_token_id = n_vocab - 1;
    let mut min_token_id: i64 = 0;
    let sorted = |c: &[Candidate]| c.windows(2).all(|w| w[0].logit >= w[1].logit);
    for s in seq.chars() {
        match s {
            'k' => stages::top_k(&mut c, top_k as usize),
            'p' => stages::top_p(&mut c, top_p),
            'm' => stages::min_p(&mut c, min_p),
            other => return Err(format!("unknown stage {other}")),
        }
        let size = c.len() as i64;
        let (first, last) = (c[0].id as i64, c[c.len() - 1].id as i64);
        let expected_size;
        match s {
            'k' => {
                expected_size = size.min(top_k);
                min_token_id = min_token_id.max(n_vocab - top_k);
                if first != max_token_id || last != min_token_id {
                    return Err(format!(
                        "top-k ends {first}..{last}, want {max_token_id}..{min_token_id}"
                    ));
                }
            }
            'p' => {
                let divisor = n_vocab * (n_vocab - 1) / 2 - min_token_id * (min_token_id - 1) / 2;
                let target = (top_p * divisor as f32).ceil() as i64;
                min_token_id = n_vocab;
                let (mut size_want, mut cumsum) = (0, 0);
                loop {
                    min_token_id -= 1;
                    size_want += 1;
                    cumsum += min_token_id;
                    if cumsum >= target {
                        break;
                    }
                }
                if min_token_id == 1 {
                    min_token_id -= 1;
                    size_want += 1;
                }
                expected_size = size_want;
                if sorted(&c) && (first != max_token_id || last != min_token_id) {
                    return Err(format!(
                        "top-p ends {first}..{last}, want {max_token_id}..{min_token_id}"
                    ));
                }
            }
            _ => {
                let want = (((1.0f32 - min_p) * n_vocab as f32).ceil() as i64).max(1);
                expected_size = want.min(size);
                min_token_id = ((min_p * n_vocab as f32).floor() as i64)
                    .max(1)
                    .max(n_vocab - size)
                    .min(n_vocab - 1);
                if sorted(&c) && (first != max_token_id || last != min_token_id) {
                    return Err(format!(
                        "min-p ends {first}..{last}, want {max_token_id}..{min_token_id}"
                    ));
                }
            }
        }
        if size != expected_size {
            return Err(format!(
                "stage {s}: {size} candidates, want {expected_size}"
            ));
        }
    }
    Ok(())
}

#[test]
fn llama_cpp_sampler_cases_pass() {
    let Some(all) = extracted() else { return };
    let cases = all["cases"].as_array().expect("cases");
    let mut ran: BTreeMap<String, usize> = BTreeMap::new();
    let mut failures = Vec::new();
    for case in cases {
        let name = case["name"].as_str().expect("name");
        let line = case["line"].as_u64().unwrap_or(0);
        if let Some((_, why)) = OUT_OF_SCOPE.iter().find(|(n, _)| *n == name) {
            eprintln!("line {line}: {name} not run: {why}");
            continue;
        }
        let args = case["args"].as_array().expect("args");
        let result = if name == "test_sampler_queue" {
            run_queue(args)
        } else {
            let (ours, expected) = run_case(name, args);
            same_distribution(&ours, &expected)
        };
        if let Err(e) = result {
            failures.push(format!("test-sampling.cpp:{line} {name}{args:?}: {e}"));
        }
        *ran.entry(name.to_string()).or_default() += 1;
    }
    eprintln!("ran {ran:?}");
    assert!(
        failures.is_empty(),
        "{} failed:\n{}",
        failures.len(),
        failures.join("\n")
    );
    for stage in [
        "test_temp",
        "test_top_k",
        "test_top_p",
        "test_min_p",
        "test_xtc",
        "test_typical",
        "test_penalties",
        "test_dry",
        "test_top_n_sigma",
        "test_sampler_queue",
    ] {
        assert!(
            ran.get(stage).is_some_and(|&n| n > 0),
            "no {stage} case ran"
        );
    }
}

/// Our defaults are llama.cpp's (`common_params_sampling` in common/common.h), read from its
/// sources. Top-n-σ is off in both (llama.cpp writes -1, we write 0: any value <= 0 is off).
#[test]
fn defaults_are_llama_cpp_tool_defaults() {
    let Some(all) = extracted() else { return };
    let d = &all["defaults"];
    let ours = SamplingParams::default();
    let f = |name: &str| {
        d[name]
            .as_f64()
            .unwrap_or_else(|| panic!("no default {name}")) as f32
    };
    let pairs: [(&str, f32); 16] = [
        ("temp", ours.temperature),
        ("top_k", ours.top_k as f32),
        ("top_p", ours.top_p),
        ("min_p", ours.min_p),
        ("typ_p", ours.typical_p),
        ("penalty_last_n", ours.penalty_last_n as f32),
        ("penalty_repeat", ours.repeat_penalty),
        ("penalty_freq", ours.frequency_penalty),
        ("penalty_present", ours.presence_penalty),
        ("dry_multiplier", ours.dry_multiplier),
        ("dry_base", ours.dry_base),
        ("dry_allowed_length", ours.dry_allowed_length as f32),
        ("dry_penalty_last_n", ours.dry_penalty_last_n as f32),
        ("xtc_probability", ours.xtc_probability),
        ("xtc_threshold", ours.xtc_threshold),
        ("mirostat", ours.mirostat as f32),
    ];
    for (name, value) in pairs {
        assert_eq!(value, f(name), "default of {name}");
    }
    assert_eq!(ours.mirostat_tau, f("mirostat_tau"));
    assert_eq!(ours.mirostat_eta, f("mirostat_eta"));
    assert!(f("top_n_sigma") <= 0.0 && ours.top_n_sigma <= 0.0);
    assert_eq!(d["ignore_eos"].as_bool(), Some(ours.ignore_eos));
    assert_eq!(ours.dry_sequence_breakers, None);
    let theirs: Vec<&str> = d["dry_sequence_breakers"]
        .as_array()
        .expect("breakers")
        .iter()
        .map(|v| v.as_str().expect("a string"))
        .collect();
    assert_eq!(theirs, DEFAULT_DRY_SEQUENCE_BREAKERS);
    assert!(ours.logit_bias.is_empty());
}
