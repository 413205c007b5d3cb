//! LFM2's recurrent state through the runtime, on the synthetic `lfm2` model
//! (`tools/synth/lfm2.py`: short-convolution layers 0, 1, 3 and 5, attention layers 2 and 4).
//! Part of each sequence's memory is the convolutions' recent inputs, not a KV cache: the
//! memory estimate counts it; a batch of four sequences equals each sequence alone; a saved
//! and restored state continues as the context it came from; a later prompt reuses the cached
//! prefix, going back a few positions exactly and re-evaluating when the state cannot go back
//! that far; speculative decoding (prompt lookup, and the model as its own draft) rolls back
//! rejected drafts and equals plain decoding; a context shift evaluates the kept tokens again
//! and keeps generating. (The logits themselves are compared with llama.cpp's by
//! `rust/cli/tests/architectures.rs`.)

mod common;

use std::sync::Arc;

use local_llm_engine::session::{
    Context, GenerateRequest, Generation, LoadOptions, LoadedModel, Prompt, SpeculativeOptions,
};

fn model() -> Arc<LoadedModel> {
    let path = common::synth_model("lfm2");
    LoadedModel::load(&path, &LoadOptions::default()).expect("lfm2 loads")
}

fn generate(ctx: &mut Context, r: &GenerateRequest) -> Generation {
    ctx.generate(r, &mut |_| {}, None).expect("generation")
}

#[test]
fn the_memory_is_the_attention_layers_cache_and_the_convolutions_state() {
    let model = model();
    let config = model.model().config();
    let conv: Vec<bool> = config
        .layers
        .iter()
        .map(|l| l.short_conv.is_some())
        .collect();
    assert_eq!(conv, [true, true, false, true, false, true]);
    // Layers 2 and 4: 2 KV heads of 16, keys and values in f16.
    let kv = 2 * (2 * 16 + 2 * 16) * 2 * 100;
    // Four convolution layers of 64 channels: kernel 3 reads 2 earlier inputs, and 65 more
    // positions are kept for rollbacks, in f32.
    let state = 4 * 64 * (2 + 65) * 4;
    assert_eq!(config.conv_state_bytes(), state as u64);
    common::assert_recurrent_memory(&model, "lfm2", kv + state);
}

#[test]
fn a_batch_of_four_equals_each_sequence_alone() {
    common::assert_batch_of_four_equals_alone(&model(), "lfm2");
}

#[test]
fn a_restored_state_continues_as_the_context_it_came_from() {
    common::assert_restored_state_continues(&model(), "lfm2");
}

#[test]
fn a_later_prompt_reuses_what_the_state_can_go_back_to() {
    let model = model();
    let base = model
        .tokenize(
            &"the quick brown fox jumps over the lazy dog ".repeat(12),
            true,
            false,
        )
        .unwrap();
    assert!(base.len() > 100, "{}", base.len());
    let mut ctx = common::context(&model, 512, 2, 1);
    generate(&mut ctx, &common::greedy(Prompt::Tokens(base.clone()), 8));
    // The same start with its last 5 tokens changed: the state goes back 5 positions.
    let mut near = base[..base.len() - 5].to_vec();
    near.extend(
        model
            .tokenize(" and then the cat sat", false, false)
            .unwrap(),
    );
    let reused = generate(&mut ctx, &common::greedy(Prompt::Tokens(near.clone()), 12));
    assert_eq!(
        reused.timings.prompt_tokens,
        near.len() - (base.len() - 5),
        "only the new tokens are evaluated"
    );
    let fresh = generate(
        &mut common::context(&model, 512, 2, 1),
        &common::greedy(Prompt::Tokens(near.clone()), 12),
    );
    assert_eq!(reused.tokens, fresh.tokens);
    // Cut 90 positions back, further than the state keeps: everything is evaluated again.
    common::assert_cut_prompt_is_evaluated_again(&model, &mut ctx, &near, 90);
}

#[test]
fn speculative_decoding_rolls_the_state_back_and_equals_plain_decoding() {
    let model = model();
    // A prompt that repeats itself, so that prompt lookup drafts (and the random model
    // rejects most of them).
    let r = common::greedy_text(&"one two three four five six seven eight ".repeat(4), 48);
    let plain = generate(&mut common::context(&model, 256, 2, 1), &r);
    let lookup = SpeculativeOptions {
        lookup_ngram_max: 3,
        ..SpeculativeOptions::default()
    };
    let self_draft = SpeculativeOptions {
        draft_n_max: 8,
        ..SpeculativeOptions::default()
    };
    for (spec, draft) in [(lookup, None), (self_draft, Some(model.clone()))] {
        let mut ctx = common::context(&model, 256, 2, 1);
        ctx.set_speculative(&spec, draft.clone())
            .expect("speculation");
        let fast = generate(&mut ctx, &r);
        assert_eq!(
            fast.tokens,
            plain.tokens,
            "draft model: {}",
            draft.is_some()
        );
        let t = &fast.timings;
        assert!(t.draft_tokens > 0, "nothing drafted");
        if draft.is_none() {
            assert!(
                t.draft_accepted < t.draft_tokens,
                "no draft rejected: no rollback"
            );
        }
    }
}

#[test]
fn a_context_shift_evaluates_the_kept_tokens_again() {
    common::assert_recurrent_context_shift(&model());
}

#[test]
fn token_by_token_gives_the_logits_of_one_batch() {
    common::assert_sentence_token_by_token_equals_one_batch(&model());
}

#[test]
fn logits_do_not_depend_on_the_thread_count() {
    common::assert_sentence_logits_do_not_depend_on_threads(&model());
}
