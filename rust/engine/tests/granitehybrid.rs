//! Granite 4 hybrid's recurrent state through the runtime, on the synthetic `granitehybrid`
//! model (`tools/synth/granitehybrid.py`: Mamba-2 layers 0, 1, 3 and 4, attention in 2 and 5).
//! Part of each sequence's memory is the Mamba-2 states and their convolutions' recent
//! inputs: the memory estimate counts them; a batch of four sequences equals each sequence
//! alone; feeding tokens one by one equals one batch; a saved and restored state continues as
//! the context it came from; speculative decoding with another draft model equals plain
//! decoding; a context shift evaluates the kept tokens again. (The logits themselves are
//! compared with llama.cpp's by `rust/cli/tests/architectures.rs`; prefix reuse goes through
//! the same state as Qwen 3.5's, tested in `qwen35.rs`.)

mod common;

use std::sync::Arc;

use local_llm_engine::session::{LoadOptions, LoadedModel};

fn model() -> Arc<LoadedModel> {
    let path = common::synth_model("granitehybrid");
    LoadedModel::load(&path, &LoadOptions::default()).expect("granitehybrid loads")
}

#[test]
fn the_memory_is_the_attention_layers_cache_and_the_mamba_state() {
    let model = model();
    let config = model.model().config();
    let mamba: Vec<bool> = config.layers.iter().map(|l| l.mamba2.is_some()).collect();
    assert_eq!(mamba, [true, true, false, true, true, false]);
    // Layers 2 and 5: 2 KV heads of 16, keys and values in f16.
    let kv = 2 * (2 * 16 + 2 * 16) * 2 * 100;
    // Four Mamba-2 layers: a convolution of 4 taps over x (128) and B, C (2 groups of 16
    // each) reads 3 earlier inputs, 65 more positions are kept for rollbacks; 128 channels
    // of 16 state values, twice.
    let conv = 4 * 192 * (3 + 65) * 4;
    let states = 4 * 128 * 16 * 4 * 2;
    assert_eq!(config.conv_state_bytes(), conv as u64);
    assert_eq!(config.matrix_state_bytes(), states as u64);
    let total = kv + conv + states;
    common::assert_recurrent_memory(&model, "granitehybrid", total);
}

#[test]
fn a_batch_of_four_equals_each_sequence_alone() {
    common::assert_batch_of_four_equals_alone(&model(), "granitehybrid");
}

#[test]
fn a_restored_state_continues_as_the_context_it_came_from() {
    common::assert_restored_state_continues(&model(), "granitehybrid");
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
fn speculative_decoding_with_another_draft_equals_plain_decoding() {
    common::assert_other_draft_equals_plain(&model(), "granitehybrid");
}

#[test]
fn a_context_shift_evaluates_the_kept_tokens_again() {
    common::assert_recurrent_context_shift(&model());
}
