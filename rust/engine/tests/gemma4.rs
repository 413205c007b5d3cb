//! Gemma 4's layer plan through the runtime, on the synthetic `gemma4` model
//! (`tools/synth/gemma4.py`: local and global layers with different head sizes and KV heads,
//! the last two layers reading layers 2 and 3's caches): the KV cache holds only the layers
//! with keys and values of their own; a batch of four sequences equals each sequence alone
//! (with prompts longer than the 32-position window; also with `gemma4-moe`'s experts); a saved and restored state continues as
//! the context it came from; a context shift keeps generating. (The logits themselves are
//! compared with llama.cpp's by `rust/cli/tests/architectures.rs`.)

mod common;

use std::sync::Arc;

use local_llm_engine::model::KvTypes;
use local_llm_engine::session::{inspect, ContextShift, FinishReason, LoadOptions, LoadedModel};

fn model() -> Arc<LoadedModel> {
    let path = common::synth_model("gemma4");
    LoadedModel::load(&path, &LoadOptions::default()).expect("gemma4 loads")
}

#[test]
fn the_cache_holds_only_the_layers_with_keys_and_values_of_their_own() {
    let model = model();
    let config = model.model().config();
    // Layers 0 and 2: 2 KV heads of 16; layers 1 and 3: 1 KV head of 32; keys and values in
    // f16; layers 4 and 5 read layers 2 and 3's.
    let per_position = 2 * (2 * 16 + 2 * 16) + 2 * (32 + 32);
    let kv: Vec<usize> = config.layers.iter().map(|l| l.kv_layer).collect();
    assert_eq!(kv, [0, 1, 2, 3, 2, 3]);
    let bytes = 2 * per_position * 100;
    assert_eq!(config.kv_cache_bytes(100, KvTypes::default()), bytes as u64);
    let cache = model.model().new_cache(100, KvTypes::default()).unwrap();
    assert_eq!(cache.size_bytes(), bytes);
    // Reading only the header says the same, and the most KV heads any layer has.
    let info = inspect(common::synth_model("gemma4"), 100).unwrap();
    assert_eq!(info.memory.unwrap().kv_cache_bytes, bytes as u64);
    assert_eq!((info.n_head, info.n_head_kv), (Some(4), Some(2)));
}

#[test]
fn a_batch_of_four_equals_each_sequence_alone() {
    batch_equals_solo("gemma4");
    batch_equals_solo("gemma4-moe");
}

fn batch_equals_solo(kind: &str) {
    let path = common::synth_model(kind);
    let model = LoadedModel::load(&path, &LoadOptions::default()).expect("loads");
    common::assert_batch_of_four_equals_alone(&model, kind);
}

#[test]
fn a_restored_state_continues_as_the_context_it_came_from() {
    common::assert_restored_state_continues(&model(), "gemma4");
}

#[test]
fn a_context_shift_keeps_generating_past_the_context() {
    let model = model();
    let mut ctx = common::context(&model, 64, 2, 1);
    let mut r = common::greedy_text("The sea was calm and the sky was grey", 100);
    r.context_shift = Some(ContextShift { n_keep: Some(4) });
    let g = ctx.generate(&r, &mut |_| {}, None).unwrap();
    assert_eq!(g.tokens.len(), 100);
    assert_eq!(g.finish_reason, FinishReason::MaxTokens);
}
