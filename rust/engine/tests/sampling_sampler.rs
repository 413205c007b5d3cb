//! Sampler properties: greedy, top-k/top-p/min-p, penalties, seeding, distribution, speed.

use local_llm_engine::sampling::{Sampler, SamplingParams};
use local_llm_engine::Error;

/// Tiny deterministic generator for test logits (independent of the sampler's PRNG).
struct Lcg(u64);
impl Lcg {
    fn next(&mut self) -> f32 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        ((self.0 >> 40) as f32 / (1u64 << 24) as f32) * 20.0 - 10.0
    }
    fn logits(&mut self, n: usize) -> Vec<f32> {
        (0..n).map(|_| self.next()).collect()
    }
}

fn off(temperature: f32, seed: u64) -> SamplingParams {
    SamplingParams {
        temperature,
        seed: Some(seed),
        ..SamplingParams::greedy()
    }
}

fn argmax(logits: &[f32]) -> u32 {
    let mut best = 0;
    for (i, &l) in logits.iter().enumerate() {
        if l > logits[best] {
            best = i;
        }
    }
    best as u32
}

fn softmax(logits: &[f64], t: f64) -> Vec<f64> {
    let max = logits.iter().cloned().fold(f64::NEG_INFINITY, f64::max);
    let e: Vec<f64> = logits.iter().map(|l| ((l - max) / t).exp()).collect();
    let s: f64 = e.iter().sum();
    e.iter().map(|x| x / s).collect()
}

fn frequencies(sampler: &mut Sampler, logits: &[f32], history: &[u32], draws: usize) -> Vec<f64> {
    let mut counts = vec![0usize; logits.len()];
    for _ in 0..draws {
        counts[sampler.sample(logits, history) as usize] += 1;
    }
    counts.iter().map(|&c| c as f64 / draws as f64).collect()
}

fn assert_close(got: &[f64], want: &[f64], tol: f64) {
    for (i, (g, w)) in got.iter().zip(want).enumerate() {
        assert!(
            (g - w).abs() < tol,
            "token {i}: frequency {g} vs probability {w} ({got:?} vs {want:?})"
        );
    }
}

#[test]
fn defaults_are_llama_cpp_defaults_and_valid() {
    let d = SamplingParams::default();
    assert_eq!(
        (d.temperature, d.top_k, d.top_p, d.min_p),
        (0.8, 40, 0.95, 0.05)
    );
    assert_eq!(
        (d.repeat_penalty, d.frequency_penalty, d.presence_penalty),
        (1.0, 0.0, 0.0)
    );
    assert_eq!((d.penalty_last_n, d.seed), (64, None));
    d.validate().unwrap();
    SamplingParams::greedy().validate().unwrap();
}

#[test]
fn validate_rejects_bad_params() {
    let base = SamplingParams::default();
    let bad = [
        SamplingParams {
            temperature: -0.1,
            ..base.clone()
        },
        SamplingParams {
            temperature: f32::NAN,
            ..base.clone()
        },
        SamplingParams {
            temperature: f32::INFINITY,
            ..base.clone()
        },
        SamplingParams {
            top_p: 0.0,
            ..base.clone()
        },
        SamplingParams {
            top_p: 1.01,
            ..base.clone()
        },
        SamplingParams {
            top_p: f32::NAN,
            ..base.clone()
        },
        SamplingParams {
            min_p: -0.01,
            ..base.clone()
        },
        SamplingParams {
            min_p: 1.5,
            ..base.clone()
        },
        SamplingParams {
            min_p: f32::NAN,
            ..base.clone()
        },
        SamplingParams {
            repeat_penalty: 0.0,
            ..base.clone()
        },
        SamplingParams {
            repeat_penalty: -1.0,
            ..base.clone()
        },
        SamplingParams {
            repeat_penalty: f32::NAN,
            ..base.clone()
        },
        SamplingParams {
            frequency_penalty: f32::NAN,
            ..base.clone()
        },
        SamplingParams {
            presence_penalty: f32::INFINITY,
            ..base.clone()
        },
    ];
    for p in bad {
        assert!(
            matches!(p.validate(), Err(Error::InvalidOption(_))),
            "{p:?}"
        );
        assert!(Sampler::new(p).is_err());
    }
}

#[test]
fn greedy_picks_argmax_with_lowest_id_on_ties() {
    let mut rng = Lcg(1);
    let mut s = Sampler::new(SamplingParams::greedy()).unwrap();
    for n in [1, 2, 7, 1000] {
        for _ in 0..20 {
            let logits = rng.logits(n);
            assert_eq!(s.sample(&logits, &[]), argmax(&logits));
        }
    }
    assert_eq!(s.sample(&[1.0, 3.0, 3.0, 2.0, 3.0], &[]), 1);
    assert_eq!(s.sample(&[f32::NAN, 0.5, f32::NAN], &[]), 1);
    // A vocabulary's worth, scanned in blocks: the best anywhere (first, last, at and around
    // block edges), ties in other blocks, NaNs and infinities around it.
    let n = 49_152;
    for at in [0, 1, 63, 64, 65, 4_000, n - 65, n - 64, n - 1] {
        let mut logits = rng.logits(n);
        for i in (3..n).step_by(97) {
            logits[i] = f32::NAN;
        }
        logits[at] = 11.0;
        assert_eq!(s.sample(&logits, &[]), at as u32, "best at {at}");
        logits[(at + 64 * 7) % n] = 11.0;
        let tie = at.min((at + 64 * 7) % n);
        assert_eq!(s.sample(&logits, &[]), tie as u32, "tie at {at}");
        logits.iter_mut().for_each(|l| *l = f32::NEG_INFINITY);
        logits[at] = f32::NAN;
        logits[n - 1 - at] = -1e30;
        assert_eq!(
            s.sample(&logits, &[]),
            (n - 1 - at) as u32,
            "lone finite at {at}"
        );
    }
}

#[test]
fn top_k_one_equals_greedy_at_any_temperature() {
    let mut rng = Lcg(2);
    for t in [0.05f32, 0.8, 1.0, 5.0, 100.0] {
        let mut s = Sampler::new(SamplingParams {
            top_k: 1,
            temperature: t,
            seed: Some(3),
            ..SamplingParams::default()
        })
        .unwrap();
        for _ in 0..50 {
            let mut logits = rng.logits(500);
            logits[17] = 11.0;
            logits[400] = 11.0; // tie: lowest id wins
            assert_eq!(s.sample(&logits, &[]), 17);
            let logits = rng.logits(500);
            assert_eq!(s.sample(&logits, &[]), argmax(&logits));
        }
    }
}

#[test]
fn same_seed_reproduces_and_different_seed_differs() {
    let logits: Vec<f32> = (0..1000).map(|i| ((i * 37 % 101) as f32) * 0.01).collect();
    let run = |seed| {
        let mut s = Sampler::new(SamplingParams {
            seed: Some(seed),
            top_k: 0,
            top_p: 1.0,
            min_p: 0.0,
            temperature: 1.0,
            ..SamplingParams::default()
        })
        .unwrap();
        (0..100)
            .map(|_| s.sample(&logits, &[]))
            .collect::<Vec<u32>>()
    };
    assert_eq!(run(42), run(42));
    assert_ne!(run(42), run(43));
    let distinct: std::collections::HashSet<u32> = run(42).into_iter().collect();
    assert!(
        distinct.len() > 50,
        "samples are not spread: {}",
        distinct.len()
    );
}

#[test]
fn frequencies_match_softmax() {
    let logits = [1.0f32, 2.0, 0.5, 3.0, -1.0, 2.2];
    let l64: Vec<f64> = logits.iter().map(|&l| l as f64).collect();
    for t in [0.7f32, 1.0, 1.6] {
        let mut s = Sampler::new(off(t, 11)).unwrap();
        let freq = frequencies(&mut s, &logits, &[], 20_000);
        assert_close(&freq, &softmax(&l64, t as f64), 0.02);
        // Chi-square with 5 degrees of freedom: 99.9% quantile is 20.5.
        let want = softmax(&l64, t as f64);
        let chi: f64 = freq
            .iter()
            .zip(&want)
            .map(|(f, w)| 20_000.0 * (f - w).powi(2) / w)
            .sum();
        assert!(chi < 20.5, "chi-square {chi}");
    }
}

fn log_probs(p: &[f64]) -> Vec<f32> {
    p.iter().map(|x| x.ln() as f32).collect()
}

#[test]
fn top_p_keeps_the_smallest_prefix_reaching_p() {
    let logits = log_probs(&[0.05, 0.5, 0.15, 0.3]);
    // Sorted: 0.5 (id1), 0.3 (id3), 0.15 (id2), 0.05 (id0).
    for (top_p, kept) in [
        (0.45f32, vec![1]),
        (0.75, vec![1, 3]),
        (0.9, vec![1, 3, 2]),
        (0.99, vec![1, 3, 2, 0]),
    ] {
        let mut s = Sampler::new(SamplingParams {
            top_p,
            ..off(1.0, 5)
        })
        .unwrap();
        let freq = frequencies(&mut s, &logits, &[], 10_000);
        let mass: f64 = kept.iter().map(|&i| [0.05, 0.5, 0.15, 0.3][i]).sum();
        for i in 0..4 {
            let want = if kept.contains(&i) {
                [0.05, 0.5, 0.15, 0.3][i] / mass
            } else {
                0.0
            };
            if want == 0.0 {
                assert_eq!(freq[i], 0.0, "top_p {top_p}: token {i} must be excluded");
            } else {
                assert!(
                    (freq[i] - want).abs() < 0.025,
                    "top_p {top_p} token {i}: {} vs {want}",
                    freq[i]
                );
            }
        }
    }
}

#[test]
fn min_p_drops_tokens_below_fraction_of_best() {
    let probs = [0.05, 0.5, 0.15, 0.3];
    let logits = log_probs(&probs);
    // min_p 0.2 -> threshold 0.1: keeps ids 1, 2, 3. min_p 0.5 -> 0.25: ids 1, 3. 1.0: id 1.
    for (min_p, kept) in [
        (0.2f32, vec![1, 2, 3]),
        (0.5, vec![1, 3]),
        (1.0, vec![1]),
        (0.05, vec![0, 1, 2, 3]),
    ] {
        let mut s = Sampler::new(SamplingParams {
            min_p,
            ..off(1.0, 6)
        })
        .unwrap();
        let freq = frequencies(&mut s, &logits, &[], 10_000);
        for i in 0..4 {
            assert_eq!(
                freq[i] > 0.0,
                kept.contains(&i),
                "min_p {min_p} token {i}: {freq:?}"
            );
        }
    }
}

#[test]
fn top_k_restricts_to_the_k_best() {
    let mut rng = Lcg(9);
    let logits = rng.logits(300);
    let mut order: Vec<u32> = (0..300).collect();
    order.sort_by(|&a, &b| logits[b as usize].total_cmp(&logits[a as usize]));
    let best5: Vec<u32> = order[..5].to_vec();
    let mut s = Sampler::new(SamplingParams {
        top_k: 5,
        ..off(50.0, 8)
    })
    .unwrap();
    let mut seen = std::collections::HashSet::new();
    for _ in 0..2000 {
        let t = s.sample(&logits, &[]);
        assert!(best5.contains(&t), "{t} not in top 5");
        seen.insert(t);
    }
    assert_eq!(seen.len(), 5, "high temperature reaches all of the top 5");
}

#[test]
fn penalties_change_logits_as_documented() {
    let logits = [1.0f32, 0.5, -0.5, 0.2];
    // last 4 of the history: [0, 2, 1, 9999] (9999 is outside the vocabulary and ignored).
    let history = [0u32, 0, 2, 1, 9999];
    let params = SamplingParams {
        repeat_penalty: 1.5,
        frequency_penalty: 0.1,
        presence_penalty: 0.2,
        penalty_last_n: 4,
        ..off(1.0, 12)
    };
    let expected = [
        1.0 / 1.5 - 0.1 - 0.2,
        0.5 / 1.5 - 0.3,
        -0.5 * 1.5 - 0.3,
        0.2,
    ];
    let mut s = Sampler::new(params.clone()).unwrap();
    let freq = frequencies(&mut s, &logits, &history, 20_000);
    assert_close(&freq, &softmax(&expected, 1.0), 0.02);

    // Frequency penalty counts occurrences: token 0 appears 3 times -> 2.0 - 3*0.5 = 0.5 < 0.6.
    let mut g = Sampler::new(SamplingParams {
        frequency_penalty: 0.5,
        penalty_last_n: 64,
        ..SamplingParams::greedy()
    })
    .unwrap();
    assert_eq!(g.sample(&[2.0, 0.6], &[0, 0, 0]), 1);
    assert_eq!(g.sample(&[2.0, 0.6], &[0, 0]), 0); // 2.0 - 1.0 = 1.0 > 0.6
                                                   // Repeat penalty divides positive logits and multiplies negative ones.
    let mut r = Sampler::new(SamplingParams {
        repeat_penalty: 2.0,
        penalty_last_n: 64,
        ..SamplingParams::greedy()
    })
    .unwrap();
    assert_eq!(r.sample(&[1.0, 0.6], &[0]), 1); // 0.5 < 0.6
    assert_eq!(r.sample(&[-1.0, -1.5], &[0]), 1); // -2.0 < -1.5
                                                  // Only the last penalty_last_n tokens count.
    let mut w = Sampler::new(SamplingParams {
        presence_penalty: 5.0,
        penalty_last_n: 1,
        ..SamplingParams::greedy()
    })
    .unwrap();
    assert_eq!(w.sample(&[1.0, 0.0], &[0, 1]), 0);
    assert_eq!(w.sample(&[1.0, 0.0], &[1, 0]), 1);
}

#[test]
fn degenerate_logits_do_not_panic() {
    let mut s = Sampler::new(SamplingParams {
        seed: Some(1),
        ..SamplingParams::default()
    })
    .unwrap();
    assert_eq!(s.sample(&[], &[]), 0);
    assert_eq!(s.sample(&[f32::NEG_INFINITY; 4], &[]), 0);
    assert_eq!(s.sample(&[0.0, f32::INFINITY, 1.0], &[]), 1);
    assert_eq!(s.sample(&[f32::NAN, f32::NAN, 3.0], &[5, 6, 7]), 2);
    let t = s.sample(&[1.0, 1.0], &[u32::MAX]);
    assert!(t < 2);
}

#[test]
fn large_vocabulary_top_k_is_fast() {
    let mut rng = Lcg(5);
    let logits = rng.logits(262_144);
    let history: Vec<u32> = (0..64).map(|i| i * 4000).collect();
    let mut s = Sampler::new(SamplingParams {
        seed: Some(9),
        repeat_penalty: 1.1,
        ..SamplingParams::default()
    })
    .unwrap();
    s.sample(&logits, &history);
    let start = std::time::Instant::now();
    let n = 20;
    for _ in 0..n {
        let t = s.sample(&logits, &history);
        assert!((t as usize) < logits.len());
    }
    let per = start.elapsed() / n;
    eprintln!("262k-vocab sample with top_k 40: {per:?} per token");
    assert!(per < std::time::Duration::from_millis(200), "{per:?}");
}

#[test]
fn typical_p_keeps_the_tokens_nearest_the_entropy() {
    // p = [0.40, 0.25, 0.15, 0.10, 0.06, 0.04]; computed by hand / with a few lines of Python
    // (not with this crate): entropy H = 1.5255 nats; |-ln p_i - H| = [0.609, 0.139, 0.372,
    // 0.777, 1.288, 1.693], so the typical order is 1, 2, 0, 3, 4, 5 with cumulative mass 0.25,
    // 0.40, 0.80, 0.90, 0.96, 1.0. The kept set is the shortest prefix whose mass exceeds
    // typical_p. Note that 0.1 drops the most likely token.
    let p = [0.40, 0.25, 0.15, 0.10, 0.06, 0.04];
    let logits = log_probs(&p);
    let cases: [(f32, &[usize]); 5] = [
        (0.1, &[1]),
        (0.3, &[1, 2]),
        (0.6, &[0, 1, 2]),
        (0.85, &[0, 1, 2, 3]),
        (1.0, &[0, 1, 2, 3, 4, 5]),
    ];
    for (mass, kept) in cases {
        let mut sampler = Sampler::new(SamplingParams {
            typical_p: mass,
            ..off(1.0, 7)
        })
        .unwrap();
        let got = frequencies(&mut sampler, &logits, &[], 4000);
        let kept_mass: f64 = kept.iter().map(|&i| p[i]).sum();
        let want: Vec<f64> = (0..p.len())
            .map(|i| {
                if kept.contains(&i) {
                    p[i] / kept_mass
                } else {
                    0.0
                }
            })
            .collect();
        for (i, &g) in got.iter().enumerate() {
            assert_eq!(
                g > 0.0,
                kept.contains(&i),
                "typical_p {mass}: token {i} drawn with frequency {g}, kept set {kept:?}"
            );
        }
        assert_close(&got, &want, 0.03);
    }
}

#[test]
fn typical_p_is_validated() {
    for bad in [0.0, -0.5, 1.5, f32::NAN] {
        let params = SamplingParams {
            typical_p: bad,
            ..SamplingParams::default()
        };
        assert!(
            matches!(params.validate(), Err(Error::InvalidOption(ref m)) if m.contains("typical_p")),
            "typical_p {bad} must be rejected"
        );
    }
}
