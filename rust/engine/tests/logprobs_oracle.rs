//! Token log-probabilities against llama.cpp (node-llama-cpp): for a greedy chat answer on
//! SmolLM2, llama.cpp evaluates the same tokens (teacher-forced) and reports the
//! log-probabilities of the whole-vocabulary softmax; ours must name the same most likely
//! token (where the top-2 gap is above the numerical noise floor measured in
//! generation_oracle.rs), give probabilities within [`MAX_DP`] and, where both engines give a
//! token at least [`CONDITIONED`] probability, log-probabilities within [`TOLERANCE`].

mod common;

use local_llm_engine::chat::ChatMessage;
use local_llm_engine::sampling::SamplingParams;
use local_llm_engine::session::{
    Context, ContextOptions, GenerateRequest, LoadOptions, LoadedModel, Prompt,
};
use serde_json::json;

const N_PREDICT: usize = 16;
const N_TOP: usize = 5;
/// Largest allowed |ours - llama.cpp| of a log-probability (nats) of a token both give at least
/// [`CONDITIONED`] probability. Both engines quantize activations to 8 bits before each matmul,
/// with different rounding, and the difference grows along the sequence (see
/// generation_oracle.rs). Measured on this prompt over the 16 generated tokens and their top-5
/// alternatives: max 0.262 with the x86 kernels' former 8-lane block sums, 0.246 with the
/// 4-lane ones, 0.222 with the portable kernels (`LOCAL_LLM_SIMD=scalar`); 0.02 or less where
/// the distribution is peaked. Below 10% probability a log-probability is ill-conditioned: the
/// same runs differ by up to 0.585 nats there (a 1.4% vs 2.5% alternative), so those are held to
/// [`MAX_DP`] only.
const TOLERANCE: f64 = 0.35;
/// Probability from which log-probabilities are compared.
const CONDITIONED: f64 = 0.1;
/// Largest allowed |ours - llama.cpp| of a probability. Measured as above: max 0.057, 0.081 and
/// 0.058.
const MAX_DP: f64 = 0.12;
/// Top-2 gap below which the most likely token is a near-tie (generation_oracle.rs).
const NEAR_TIE: f64 = 1.0;

#[test]
fn smollm2_logprobs_match_llama_cpp() {
    let Some(path) = common::real_model("smollm2") else {
        return;
    };
    let model = LoadedModel::load(&path, &LoadOptions::default()).expect("load");
    let mut ctx = Context::new(
        model,
        &ContextOptions {
            n_ctx: 512,
            threads: 2,
            ..ContextOptions::default()
        },
    )
    .expect("context");
    let prompt = Prompt::Chat(vec![ChatMessage::new(
        "user",
        "Name three colours of the rainbow.",
    )]);
    let prompt_tokens = ctx.prompt_tokens(&prompt).expect("prompt tokens");
    let mut request = GenerateRequest::new(prompt);
    request.sampling = SamplingParams::greedy();
    request.max_tokens = N_PREDICT;
    request.logprobs = Some(N_TOP);
    let gen = ctx.generate(&request, &mut |_| {}, None).expect("generate");
    assert_eq!(gen.logprobs.len(), gen.tokens.len());
    assert!(gen.tokens.len() >= 4, "too short an answer: {:?}", gen.text);

    let mut seq = prompt_tokens.clone();
    seq.extend_from_slice(&gen.tokens);
    let positions: Vec<usize> = (0..gen.tokens.len())
        .map(|i| prompt_tokens.len() - 1 + i)
        .collect();
    let reply = common::run_oracle(&json!({
        "cmd": "logits", "model": path.to_string_lossy(), "tokens": seq,
        "positions": positions, "top_k": N_TOP, "full_softmax": true, "context_size": 512,
    }));
    let mut max_diff = 0f64;
    for (i, (ours, theirs)) in gen
        .logprobs
        .iter()
        .zip(reply["positions"].as_array().expect("positions"))
        .enumerate()
    {
        let top: Vec<(u32, f64)> = theirs["top"]
            .as_array()
            .expect("top")
            .iter()
            .map(|e| {
                (
                    e["id"].as_u64().unwrap() as u32,
                    e["logprob"].as_f64().unwrap(),
                )
            })
            .collect();
        assert_eq!(ours.token, gen.tokens[i]);
        assert_eq!(ours.top.len(), N_TOP);
        // Greedy: the generated token is our most likely one.
        assert_eq!(ours.top[0].token, ours.token);
        assert!((ours.top[0].logprob - ours.logprob).abs() < 1e-6);
        let gap = top[0].1 - top[1].1;
        if gap > NEAR_TIE {
            assert_eq!(ours.top[0].token, top[0].0, "top-1 at generated token {i}");
        }
        for alt in &ours.top {
            if let Some((_, lp)) = top.iter().find(|(id, _)| *id == alt.token) {
                let ours = f64::from(alt.logprob);
                let dp = (ours.exp() - lp.exp()).abs();
                assert!(
                    dp < MAX_DP,
                    "token {i}: probability of {} is {} here, {} in llama.cpp",
                    alt.token,
                    ours.exp(),
                    lp.exp()
                );
                if ours.min(*lp) >= CONDITIONED.ln() {
                    let d = (ours - lp).abs();
                    max_diff = max_diff.max(d);
                    assert!(
                        d < TOLERANCE,
                        "token {i}: logprob of {} is {} here, {lp} in llama.cpp",
                        alt.token,
                        alt.logprob
                    );
                }
            }
        }
    }
    eprintln!(
        "smollm2: {} tokens, max |logprob - llama.cpp| over the top-{N_TOP} above {CONDITIONED} = {max_diff:.4}",
        gen.tokens.len()
    );
}
