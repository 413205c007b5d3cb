//! Several sequences on one context: each sequence's greedy output in a batch equals its
//! output alone, token for token, on the real SmolLM2 and Gemma 3 models (Gemma with a prompt
//! longer than its 512-position sliding window, so a sequence's local layers slide while the
//! others' do not); a sequence with a context shift shifts its own cache past `n_ctx` as it
//! does alone; a sequence cancelled mid-batch leaves the others as they were; bad
//! settings and misuse are typed errors.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use local_llm_engine::session::{
    Context, ContextOptions, ContextShift, FinishReason, GenerateRequest, Generation, LoadedModel,
    Prompt,
};
use local_llm_engine::Error;

/// Four different prompts with different lengths, so sequences finish at different steps
/// and the batch shrinks while it runs.
fn requests() -> Vec<GenerateRequest> {
    vec![
        common::greedy_chat("What is the capital of France?", 24),
        common::greedy_chat("Write a haiku about the sea.", 32),
        common::greedy_chat("List three colours.", 16),
        common::greedy_chat("Explain in one sentence why the sky is blue.", 28),
    ]
}

/// Each request generated alone on a fresh single-sequence context.
fn solo(model: &Arc<LoadedModel>, requests: &[GenerateRequest]) -> Vec<Generation> {
    requests
        .iter()
        .map(|r| {
            common::context(model, 1024, 1, 1)
                .generate(r, &mut |_| {}, None)
                .expect("solo generation")
        })
        .collect()
}

fn assert_same(batch: &[local_llm_engine::Result<Generation>], alone: &[Generation]) {
    assert_eq!(batch.len(), alone.len());
    for (i, (b, a)) in batch.iter().zip(alone).enumerate() {
        let b = b.as_ref().unwrap_or_else(|e| panic!("request {i}: {e}"));
        assert_eq!(
            b.tokens, a.tokens,
            "request {i}: tokens differ from the solo run"
        );
        assert_eq!(b.text, a.text, "request {i}");
        assert_eq!(b.finish_reason, a.finish_reason, "request {i}");
        assert_eq!(b.prompt_tokens, a.prompt_tokens, "request {i}");
    }
    // Different prompts give different answers: a mix-up of sequences would show.
    for i in 0..alone.len() {
        for j in i + 1..alone.len() {
            assert_ne!(alone[i].tokens, alone[j].tokens, "requests {i} and {j}");
        }
    }
}

fn batch_equals_solo(name: &str, requests: &[GenerateRequest]) {
    let Some(model) = common::load_real_model(name) else {
        return;
    };
    let alone = solo(&model, requests);
    let mut ctx = common::context(&model, 1024, 1, 4);
    let batch = ctx.generate_batch(requests, None).expect("batch");
    assert_same(&batch, &alone);
    // The context serves single generations again afterwards, from the same caches.
    let again = ctx.generate(&requests[0], &mut |_| {}, None).unwrap();
    assert_eq!(again.tokens, alone[0].tokens);
}

#[test]
fn smollm2_batch_of_four_equals_solo_outputs() {
    batch_equals_solo("smollm2", &requests());
}

#[test]
fn gemma3_batch_of_four_equals_solo_outputs_across_the_sliding_window() {
    let mut requests = requests();
    // About 700 prompt tokens: past Gemma 3's 512-position window.
    let long = "The quick brown fox jumps over the lazy dog. ".repeat(70);
    requests[2] = common::greedy_chat(&format!("{long}\nHow many times did the fox jump?"), 16);
    batch_equals_solo("gemma3", &requests);
}

#[test]
fn a_batched_sequence_shifts_its_own_context_like_a_solo_run() {
    let Some(model) = common::load_real_model("smollm2") else {
        return;
    };
    let shifting = |text: &str, n_keep| {
        let mut r = common::greedy_chat(text, 40);
        r.context_shift = Some(ContextShift { n_keep });
        r
    };
    // Two requests generate past the 64 positions with a shift each (the whole prompt kept,
    // or 4 tokens), one without a shift ends at the full context, one ends early.
    let requests = vec![
        shifting("Tell me a long story about a dragon and a knight.", None),
        common::greedy_chat("Describe a walk in the forest in detail.", 40),
        shifting("Write a long poem about the sea.", Some(4)),
        common::greedy_chat("Name a fruit.", 8),
    ];
    let alone: Vec<Generation> = requests
        .iter()
        .map(|r| {
            common::context(&model, 64, 2, 1)
                .generate(r, &mut |_| {}, None)
                .expect("solo generation")
        })
        .collect();
    for i in [0, 2] {
        let g = &alone[i];
        assert!(
            g.prompt_tokens + g.tokens.len() > 64,
            "request {i} never shifted: {g:?}"
        );
    }
    assert_eq!(alone[1].finish_reason, FinishReason::ContextFull);
    let batch = common::context(&model, 64, 2, 4)
        .generate_batch(&requests, None)
        .expect("batch");
    assert_same(&batch, &alone);
}

#[test]
fn more_requests_than_sequences_wait_for_a_free_one() {
    let Some(model) = common::load_real_model("smollm2") else {
        return;
    };
    let mut requests = requests();
    requests.push(common::greedy_chat("Name a fruit.", 12));
    requests.push(common::greedy_chat("Count from one to five.", 20));
    let alone = solo(&model, &requests);
    let batch = common::context(&model, 1024, 1, 3)
        .generate_batch(&requests, None)
        .unwrap();
    assert_same(&batch, &alone);
}

#[test]
fn cancelling_one_sequence_leaves_the_others_unchanged() {
    let Some(model) = common::load_real_model("smollm2") else {
        return;
    };
    let requests = requests();
    let alone = solo(&model, &requests);
    let mut ctx = common::context(&model, 1024, 1, 4);
    let flags: Vec<Arc<AtomicBool>> = requests.iter().map(|_| Arc::default()).collect();
    let ids: Vec<usize> = requests
        .iter()
        .zip(&flags)
        .map(|(r, f)| ctx.start_sequence(r, Some(f.clone()), &mut |_| {}).unwrap())
        .collect();
    assert_eq!(ctx.free_sequences(), 0);
    // A fifth request finds no free sequence; a single generation must wait too.
    assert!(matches!(
        ctx.start_sequence(&requests[0], None, &mut |_| {}),
        Err(Error::InvalidOption(_))
    ));
    assert!(matches!(
        ctx.generate(&requests[0], &mut |_| {}, None),
        Err(Error::InvalidOption(_))
    ));
    let mut done: Vec<Option<Generation>> = vec![None, None, None, None];
    let mut steps = 0;
    while done.iter().any(Option::is_none) {
        steps += 1;
        if steps == 5 {
            flags[1].store(true, Ordering::Relaxed);
        }
        // Sequence 3 is paused for a while (a stream nobody reads): it must not change.
        let paused = (8..14).contains(&steps);
        let ready = |id: usize| !(paused && id == ids[3]);
        for (id, g) in ctx.step_sequences(&ready, &mut |_, _| {}).unwrap() {
            let i = ids.iter().position(|&s| s == id).unwrap();
            done[i] = Some(g.expect("generation"));
        }
        assert!(steps < 200, "the batch never finished");
    }
    let done: Vec<Generation> = done.into_iter().flatten().collect();
    assert_eq!(done[1].finish_reason, FinishReason::Cancelled);
    assert!(!done[1].tokens.is_empty() && done[1].tokens.len() < alone[1].tokens.len());
    assert_eq!(done[1].tokens[..], alone[1].tokens[..done[1].tokens.len()]);
    for i in [0, 2, 3] {
        assert_eq!(done[i].tokens, alone[i].tokens, "request {i}");
    }
    assert_eq!(ctx.free_sequences(), 4);
}

#[test]
fn bad_settings_and_bad_requests_are_typed_errors() {
    let Some(model) = common::load_real_model("smollm2") else {
        return;
    };
    for n in [0, 100_000] {
        let options = ContextOptions {
            n_ctx: 64,
            max_sequences: n,
            ..ContextOptions::default()
        };
        assert!(matches!(
            Context::new(model.clone(), &options),
            Err(Error::InvalidOption(_))
        ));
    }
    let mut ctx = common::context(&model, 1024, 1, 2);
    let mut too_long = common::greedy_chat("hi", 4);
    too_long.prompt = Prompt::Tokens(vec![1; 2000]);
    let batch = [common::greedy_chat("hi", 4), too_long];
    assert!(matches!(
        ctx.generate_batch(&batch, None),
        Err(Error::ContextExhausted { .. })
    ));
    assert!(ctx.generate_batch(&[], None).unwrap().is_empty());
    // Nothing was left running.
    assert_eq!(ctx.free_sequences(), 2);
    let cancel = AtomicBool::new(true);
    let cancelled = ctx.generate_batch(&requests()[..2], Some(&cancel)).unwrap();
    assert!(cancelled
        .iter()
        .map(|g| g.as_ref().expect("generation"))
        .all(|g| g.finish_reason == FinishReason::Cancelled && g.tokens.is_empty()));
}
