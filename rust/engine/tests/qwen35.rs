//! Qwen 3.5's recurrent state through the runtime, on the synthetic `qwen35` model
//! (`tools/synth/qwen35.py`: gated delta nets in layers 0-2 and 4-6, attention in 3 and 7).
//! Part of each sequence's memory is the delta nets' states and their convolutions' recent
//! inputs, not a KV cache: the memory estimate counts them; a batch of four sequences equals
//! each sequence alone; feeding tokens one by one equals one batch; a saved and restored
//! state continues as the context it came from; a later prompt reuses the cached prefix where
//! the state can go back to it (the start of the last forward pass) and is evaluated again
//! otherwise; speculative decoding (prompt lookup, and the model as its own draft) feeds
//! accepted drafts again after a rejection and equals plain decoding; a context shift
//! evaluates the kept tokens again. (The logits themselves are compared with llama.cpp's by
//! `rust/cli/tests/architectures.rs`.)

mod common;

use std::sync::Arc;

use local_llm_engine::session::{
    Context, GenerateRequest, Generation, LoadOptions, LoadedModel, Prompt,
};

fn model() -> Arc<LoadedModel> {
    let path = common::synth_model("qwen35");
    LoadedModel::load(&path, &LoadOptions::default()).expect("qwen35 loads")
}

fn generate(ctx: &mut Context, r: &GenerateRequest) -> Generation {
    ctx.generate(r, &mut |_| {}, None).expect("generation")
}

#[test]
fn the_memory_is_the_attention_layers_cache_and_the_delta_nets_state() {
    let model = model();
    let config = model.model().config();
    let nets: Vec<bool> = config
        .layers
        .iter()
        .map(|l| l.delta_net.is_some())
        .collect();
    // The file's ninth block is a multi-token-prediction head, which the decoder skips.
    assert_eq!(nets, [true, true, true, false, true, true, true, false]);
    // Layers 3 and 7: 2 KV heads of 64, keys and values in f16.
    let kv = 2 * (2 * 64 + 2 * 64) * 2 * 100;
    // Six delta nets: a convolution of 4 taps over (2 + 2 + 4) heads of 32 channels reads 3
    // earlier inputs, 65 more positions are kept for rollbacks; 4 states of 32 x 32, twice.
    let conv = 6 * 256 * (3 + 65) * 4;
    let states = 6 * 4 * 32 * 32 * 4 * 2;
    assert_eq!(config.conv_state_bytes(), conv as u64);
    assert_eq!(config.matrix_state_bytes(), states as u64);
    let total = kv + conv + states;
    common::assert_recurrent_memory(&model, "qwen35", total);
}

#[test]
fn a_batch_of_four_equals_each_sequence_alone() {
    common::assert_batch_of_four_equals_alone(&model(), "qwen35");
}

#[test]
fn a_restored_state_continues_as_the_context_it_came_from() {
    common::assert_restored_state_continues(&model(), "qwen35");
}

#[test]
fn token_by_token_gives_the_logits_of_one_batch() {
    common::assert_sentence_token_by_token_equals_one_batch(&model());
}

#[test]
fn logits_do_not_depend_on_the_thread_count() {
    common::assert_sentence_logits_do_not_depend_on_threads(&model());
}

#[test]
fn a_later_prompt_reuses_the_prefix_the_state_can_go_back_to() {
    let model = model();
    let base = model
        .tokenize(
            &"the quick brown fox jumps over the lazy dog ".repeat(6),
            true,
            false,
        )
        .unwrap();
    let mut ctx = common::context(&model, 512, 2, 1);
    let first = generate(&mut ctx, &common::greedy(Prompt::Tokens(base.clone()), 8));
    // The cache holds the prompt and 7 generated tokens; the last pass fed the 7th, so the
    // state goes back to the 6th exactly.
    let mut near = base.clone();
    near.extend(&first.tokens[..6]);
    near.extend(
        model
            .tokenize(" and then the cat sat", false, false)
            .unwrap(),
    );
    let reused = generate(&mut ctx, &common::greedy(Prompt::Tokens(near.clone()), 12));
    assert_eq!(
        reused.timings.prompt_tokens,
        near.len() - (base.len() + 6),
        "only the new tokens are evaluated"
    );
    let fresh = generate(
        &mut common::context(&model, 512, 2, 1),
        &common::greedy(Prompt::Tokens(near.clone()), 12),
    );
    assert_eq!(reused.tokens, fresh.tokens);
    // Cut further back than that: everything is evaluated again.
    common::assert_cut_prompt_is_evaluated_again(&model, &mut ctx, &near, 9);
}

#[test]
fn speculative_decoding_feeds_accepted_drafts_again_and_equals_plain_decoding() {
    common::assert_other_draft_equals_plain(&model(), "qwen35");
}

#[test]
fn a_context_shift_evaluates_the_kept_tokens_again() {
    common::assert_recurrent_context_shift(&model());
}
