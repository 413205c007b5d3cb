//! Gemma 3n through the runtime, on the synthetic `gemma3n` model (`tools/synth/gemma3n.py`:
//! 25 layers, local on four of five, the last five reading layers 18 (local) and 19 (global)'s
//! caches; four AltUp streams, LAuReL, activation sparsity in layers 0-9, per-layer inputs):
//! the KV cache holds only the first 20 layers; the hidden state's four streams carry over
//! from token to token exactly (token by token equals one batch); a batch of four sequences
//! equals each sequence alone; a saved and restored state continues as the context it came
//! from. (The logits themselves are compared with llama.cpp's by
//! `rust/cli/tests/architectures.rs`.)

mod common;

use std::sync::Arc;

use local_llm_engine::model::KvTypes;
use local_llm_engine::session::{inspect, LoadOptions, LoadedModel};

fn model() -> Arc<LoadedModel> {
    let path = common::synth_model("gemma3n");
    LoadedModel::load(&path, &LoadOptions::default()).expect("gemma3n loads")
}

#[test]
fn the_cache_holds_the_first_twenty_layers() {
    let model = model();
    let config = model.model().config();
    let kv: Vec<usize> = config.layers.iter().map(|l| l.kv_layer).collect();
    let mut want: Vec<usize> = (0..20).collect();
    want.extend([18, 18, 18, 18, 19]);
    assert_eq!(kv, want);
    // 20 layers of 2 KV heads of 16, keys and values in f16.
    let bytes = 20 * 2 * (2 * 16) * 2 * 100;
    assert_eq!(config.kv_cache_bytes(100, KvTypes::default()), bytes as u64);
    let cache = model.model().new_cache(100, KvTypes::default()).unwrap();
    assert_eq!(cache.size_bytes(), bytes);
    let info = inspect(common::synth_model("gemma3n"), 100).unwrap();
    assert_eq!(info.memory.unwrap().kv_cache_bytes, bytes as u64);
}

#[test]
fn token_by_token_gives_the_logits_of_one_batch() {
    let model = model();
    // Longer than the 32-position window.
    let tokens = model
        .tokenize(
            &"The sea was calm and the sky was grey over the harbour. ".repeat(4),
            true,
            false,
        )
        .unwrap();
    assert!(tokens.len() > 40, "{}", tokens.len());
    common::assert_token_by_token_equals_one_batch(&model, &tokens, 128);
}

#[test]
fn a_batch_of_four_equals_each_sequence_alone() {
    common::assert_batch_of_four_equals_alone(&model(), "gemma3n");
}

#[test]
fn a_restored_state_continues_as_the_context_it_came_from() {
    common::assert_restored_state_continues(&model(), "gemma3n");
}
