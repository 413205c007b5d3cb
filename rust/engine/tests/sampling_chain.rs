//! The samplers beyond llama.cpp's default chain, through [`Sampler`]: logit bias, ignore-eos,
//! DRY, top-n-σ, XTC and Mirostat 1.0/2.0 (their single-stage maths is checked against
//! llama.cpp's own cases in `sampling_oracle.rs`).

mod common;

use local_llm_engine::gguf::GgufFile;
use local_llm_engine::sampling::dry::DryBreakers;
use local_llm_engine::sampling::{LogitBias, Sampler, SamplingParams};
use local_llm_engine::tokenizer::Tokenizer;
use local_llm_engine::Error;

/// Every stage off, temperature 1, seeded.
fn plain(seed: u64) -> SamplingParams {
    SamplingParams {
        temperature: 1.0,
        seed: Some(seed),
        ..SamplingParams::greedy()
    }
}

fn counts(sampler: &mut Sampler, logits: &[f32], history: &[u32], draws: usize) -> Vec<usize> {
    let mut c = vec![0; logits.len()];
    for _ in 0..draws {
        c[sampler.sample(logits, history) as usize] += 1;
    }
    c
}

#[test]
fn logit_bias_bans_forces_and_adds_up() {
    let logits = [1.0, 3.0, 2.0, 0.5];
    let ban = |token, bias| LogitBias { token, bias };
    let mut s = Sampler::new(SamplingParams {
        logit_bias: vec![ban(1, f32::NEG_INFINITY)],
        ..SamplingParams::greedy()
    })
    .unwrap();
    assert_eq!(
        s.sample(&logits, &[]),
        2,
        "the banned best token is skipped"
    );
    let mut s = Sampler::new(SamplingParams {
        logit_bias: vec![ban(1, f32::NEG_INFINITY)],
        ..plain(1)
    })
    .unwrap();
    assert_eq!(counts(&mut s, &logits, &[], 2000)[1], 0);
    let mut s = Sampler::new(SamplingParams {
        logit_bias: vec![ban(3, f32::INFINITY)],
        ..plain(2)
    })
    .unwrap();
    assert_eq!(
        counts(&mut s, &logits, &[], 500)[3],
        500,
        "+inf forces the token"
    );
    // Repeated ids add up: +5 and -5 cancel, leaving the greedy choice alone.
    let mut s = Sampler::new(SamplingParams {
        logit_bias: vec![ban(0, 5.0), ban(0, -5.0), ban(2, 1.5)],
        ..SamplingParams::greedy()
    })
    .unwrap();
    assert_eq!(s.sample(&logits, &[]), 2, "2.0 + 1.5 beats 3.0");
    let nan = SamplingParams {
        logit_bias: vec![ban(0, f32::NAN)],
        ..SamplingParams::default()
    };
    assert!(matches!(Sampler::new(nan), Err(Error::InvalidOption(_))));
}

fn smollm_tokenizer() -> Option<Tokenizer> {
    let path = common::real_model("smollm2")?;
    Some(Tokenizer::from_gguf(&GgufFile::open(&path).unwrap()).unwrap())
}

#[test]
fn ignore_eos_bans_every_end_of_generation_token_and_bias_ids_are_checked() {
    let Some(tok) = smollm_tokenizer() else {
        return;
    };
    let eog = tok.eog_tokens().to_vec();
    assert!(!eog.is_empty());
    let mut logits = vec![0.0f32; tok.n_vocab()];
    for &t in &eog {
        logits[t as usize] = 50.0;
    }
    let params = SamplingParams {
        ignore_eos: true,
        ..plain(3)
    };
    let mut s = Sampler::for_vocabulary(params, &tok).unwrap();
    for _ in 0..200 {
        assert!(!eog.contains(&s.sample(&logits, &[])));
    }
    let outside = SamplingParams {
        logit_bias: vec![LogitBias {
            token: tok.n_vocab() as u32,
            bias: 1.0,
        }],
        ..SamplingParams::default()
    };
    match Sampler::for_vocabulary(outside, &tok) {
        Err(Error::InvalidOption(m)) => assert!(m.contains("outside the vocabulary"), "{m}"),
        other => panic!("expected InvalidOption, got {:?}", other.map(|_| ())),
    }
}

#[test]
fn dry_steers_greedy_decoding_off_a_repeat() {
    // History "7 8 9 1 7 8": token 9 would repeat "7 8 9"; it is the best by a little.
    let mut logits = vec![0.0f32; 10];
    logits[9] = 1.0;
    logits[4] = 0.9;
    let history = [7, 8, 9, 1, 7, 8];
    let mut s = Sampler::new(SamplingParams::greedy()).unwrap();
    assert_eq!(s.sample(&logits, &history), 9);
    let dry = SamplingParams {
        dry_multiplier: 0.8,
        ..SamplingParams::greedy()
    };
    let mut s = Sampler::new(dry.clone()).unwrap();
    assert_eq!(s.sample(&logits, &history), 4, "DRY penalizes 9 by 0.8");
    // Outside the scanned window (the last 3 tokens), nothing repeats.
    let mut s = Sampler::new(SamplingParams {
        dry_penalty_last_n: 3,
        ..dry
    })
    .unwrap();
    assert_eq!(s.sample(&logits, &history), 9);
}

#[test]
fn dry_breakers_resolve_against_a_real_vocabulary() {
    let Some(tok) = smollm_tokenizer() else {
        return;
    };
    let text = |s: &str| tok.encode(s, false, false).unwrap();
    let newline = text("\n");
    assert_eq!(newline.len(), 1);
    // " alpha beta gamma\n alpha beta gamma\n": " alpha" would extend a 4-token repeat.
    let line = text(" alpha beta gamma");
    let history: Vec<u32> = [&line[..], &newline, &line, &newline].concat();
    let next = line[0];
    let mut logits = vec![0.0f32; tok.n_vocab()];
    logits[next as usize] = 1.0;
    logits[0] = 0.9;
    let dry = |breakers: Option<Vec<String>>| SamplingParams {
        dry_multiplier: 0.8,
        dry_sequence_breakers: breakers,
        ..SamplingParams::greedy()
    };
    let mut none = Sampler::for_vocabulary(dry(Some(Vec::new())), &tok).unwrap();
    assert_eq!(
        none.sample(&logits, &history),
        0,
        "no breakers: the repeat is penalized"
    );
    // llama.cpp's default breakers include "\n": the repeat cannot reach across it.
    let mut defaults = Sampler::for_vocabulary(dry(None), &tok).unwrap();
    assert_eq!(defaults.sample(&logits, &history), next);
    let breakers = DryBreakers::for_vocab(&["\n".to_string()], &tok).unwrap();
    assert!(format!("{breakers:?}").contains(&format!("{}: [[]]", newline[0])));
}

#[test]
fn top_n_sigma_keeps_only_logits_near_the_best() {
    // Nine logits at 0 and one at 10: mean 1, std 3, so n = 1 keeps logits >= 7.
    let mut logits = vec![0.0f32; 10];
    logits[5] = 10.0;
    logits[6] = 8.0;
    let mut s = Sampler::new(SamplingParams {
        top_n_sigma: 1.0,
        ..plain(4)
    })
    .unwrap();
    let c = counts(&mut s, &logits, &[], 3000);
    assert!(c[5] > 0 && c[6] > 0, "{c:?}");
    assert_eq!(c[5] + c[6], 3000, "{c:?}");
}

#[test]
fn xtc_removes_the_top_choices_but_the_least_likely_of_them() {
    // Probabilities about 0.47, 0.29, 0.17 and a tail: with threshold 0.1 XTC keeps only the
    // third of the three above it, plus the tail.
    let logits = [3.0, 2.5, 2.0, 0.0, -0.5];
    let mut s = Sampler::new(SamplingParams {
        xtc_probability: 1.0,
        xtc_threshold: 0.1,
        ..plain(5)
    })
    .unwrap();
    let c = counts(&mut s, &logits, &[], 3000);
    assert_eq!((c[0], c[1]), (0, 0), "{c:?}");
    assert!(c[2] > c[3] && c[3] > 0, "{c:?}");
    // Probability 0.5: about half of the draws keep the top token available.
    let mut s = Sampler::new(SamplingParams {
        xtc_probability: 0.5,
        xtc_threshold: 0.1,
        ..plain(6)
    })
    .unwrap();
    let top = counts(&mut s, &logits, &[], 4000)[0] as f64 / 4000.0;
    assert!((top - 0.5 * 0.47).abs() < 0.04, "{top}");
    // With temperature 0 the chain still runs: greedy takes the best of what XTC left.
    let mut s = Sampler::new(SamplingParams {
        xtc_probability: 1.0,
        xtc_threshold: 0.1,
        ..SamplingParams::greedy()
    })
    .unwrap();
    assert_eq!(s.sample(&logits, &[]), 2);
}

/// Zipf-like logits over 2,000 tokens.
fn zipf() -> Vec<f32> {
    (0..2000).map(|i| -1.1 * ((i + 1) as f32).ln()).collect()
}

/// The mean surprise, in bits under the untruncated distribution, of `draws` tokens.
fn mean_surprise(params: SamplingParams, draws: usize) -> f64 {
    let logits = zipf();
    let max = logits[0];
    let total: f64 = logits.iter().map(|&l| ((l - max) as f64).exp()).sum();
    let mut s = Sampler::new(params).unwrap();
    let mut sum = 0.0;
    for _ in 0..draws {
        let t = s.sample(&logits, &[]) as usize;
        sum += -(((logits[t] - max) as f64).exp() / total).log2();
    }
    sum / draws as f64
}

#[test]
fn mirostat_holds_the_surprise_near_its_target() {
    // Unconstrained sampling from this distribution averages about 7.4 bits. Mirostat steers the
    // surprise within its truncated distribution to tau; measured against the full distribution
    // (as here) it is higher by the log of the mass kept, about 0.5-1.5 bits.
    let free = mean_surprise(plain(7), 4000);
    assert!(free > 7.0, "{free}");
    for version in [1, 2] {
        let mut last = 0.0;
        for tau in [2.0f32, 3.0, 5.0] {
            let got = mean_surprise(
                SamplingParams {
                    mirostat: version,
                    mirostat_tau: tau,
                    ..plain(8)
                },
                4000,
            );
            assert!(
                got > tau as f64 && got < tau as f64 + 2.0 && got > last,
                "mirostat {version}, tau {tau}: {got} bits (free: {free}, lower tau: {last})"
            );
            last = got;
        }
    }
    let bad = SamplingParams {
        mirostat: 3,
        ..SamplingParams::default()
    };
    assert!(matches!(bad.validate(), Err(Error::InvalidOption(_))));
}

#[test]
fn new_ranges_are_validated() {
    let base = SamplingParams::default();
    let bad = [
        SamplingParams {
            xtc_probability: 1.5,
            ..base.clone()
        },
        SamplingParams {
            xtc_threshold: f32::NAN,
            ..base.clone()
        },
        SamplingParams {
            dry_multiplier: -1.0,
            ..base.clone()
        },
        SamplingParams {
            dry_base: f32::INFINITY,
            ..base.clone()
        },
        SamplingParams {
            dry_penalty_last_n: -2,
            ..base.clone()
        },
        SamplingParams {
            penalty_last_n: -2,
            ..base.clone()
        },
        SamplingParams {
            top_n_sigma: f32::NAN,
            ..base.clone()
        },
        SamplingParams {
            mirostat_eta: f32::NAN,
            ..base.clone()
        },
        SamplingParams {
            dry_sequence_breakers: Some(vec![String::new(); 257]),
            ..base.clone()
        },
    ];
    for p in bad {
        assert!(
            matches!(p.validate(), Err(Error::InvalidOption(_))),
            "{p:?}"
        );
    }
}
