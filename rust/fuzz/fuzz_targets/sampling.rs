//! Fuzz target: sampling options and logits. Input: 22 option fields (f32 bit patterns and
//! u32 values, NaN and infinities included: the default chain's, the seed, DRY, top-n-sigma,
//! XTC, Mirostat, one logit bias), the number of logits and of draws (a byte each), then the
//! logits (f32 bit patterns) and a token history. Options must be validated (invalid ones are a typed error); valid
//! ones must sample an index of the logits, whatever the logits hold.
#![no_main]

use libfuzzer_sys::fuzz_target;
use local_llm_engine::sampling::{LogitBias, Sampler, SamplingParams};

fn f32_at(data: &[u8], i: usize) -> f32 {
    f32::from_bits(u32_at(data, i))
}

fn u32_at(data: &[u8], i: usize) -> u32 {
    data.get(4 * i..4 * i + 4)
        .map_or(0, |b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]))
}

fuzz_target!(|data: &[u8]| {
    const HEADER: usize = 4 * 22 + 2;
    if data.len() < HEADER {
        return;
    }
    let n_logits = usize::from(data[HEADER - 2]) + 1;
    let params = SamplingParams {
        temperature: f32_at(data, 0),
        top_k: u32_at(data, 1) % 1000,
        typical_p: f32_at(data, 2),
        top_p: f32_at(data, 3),
        min_p: f32_at(data, 4),
        repeat_penalty: f32_at(data, 5),
        frequency_penalty: f32_at(data, 6),
        presence_penalty: f32_at(data, 7),
        penalty_last_n: u32_at(data, 8) as i32,
        seed: Some(u64::from(u32_at(data, 9))),
        dry_multiplier: f32_at(data, 10),
        dry_base: f32_at(data, 11),
        dry_allowed_length: u32_at(data, 12) % 8,
        dry_penalty_last_n: u32_at(data, 13) as i32,
        dry_sequence_breakers: None,
        top_n_sigma: f32_at(data, 14),
        xtc_probability: f32_at(data, 15),
        xtc_threshold: f32_at(data, 16),
        mirostat: u32_at(data, 17) % 4,
        mirostat_tau: f32_at(data, 18),
        mirostat_eta: f32_at(data, 19),
        logit_bias: vec![LogitBias {
            token: u32_at(data, 20) % (n_logits as u32 + 4),
            bias: f32_at(data, 21),
        }],
        ignore_eos: false,
    };
    let body = &data[HEADER..];
    let logits: Vec<f32> = (0..n_logits).map(|i| f32_at(body, i)).collect();
    let history: Vec<u32> = body
        .get(4 * n_logits..)
        .unwrap_or_default()
        .chunks_exact(4)
        .map(|b| u32::from_le_bytes([b[0], b[1], b[2], b[3]]) % (n_logits as u32 + 4))
        .collect();
    if params.validate().is_err() {
        assert!(
            Sampler::new(params).is_err(),
            "Sampler::new accepts what validate rejects"
        );
        return;
    }
    let mut sampler = Sampler::new(params).expect("validated options make a sampler");
    for _ in 0..usize::from(data[HEADER - 1] % 4) + 1 {
        let token = sampler.sample(&logits, &history);
        assert!(
            (token as usize) < logits.len(),
            "token {token} of {} logits",
            logits.len()
        );
    }
});
