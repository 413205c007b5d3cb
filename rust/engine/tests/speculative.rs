//! Speculative decoding on the real models: with prompt lookup, with an identical draft model
//! and with a different one (SmolLM2 re-quantized to Q2_K at test time by the engine's own
//! quantizer, so only part of the drafts is accepted), the output equals plain decoding token
//! for token, greedy and seeded sampling, with a JSON-schema grammar, across context shifts
//! and on Gemma 3; a draft model with another vocabulary is a typed error.

mod common;

use std::path::PathBuf;
use std::sync::Arc;

use local_llm_engine::convert::{quantize_file, FileType, QuantizeOptions};
use local_llm_engine::grammar::GrammarRequest;
use local_llm_engine::sampling::SamplingParams;
use local_llm_engine::session::{
    Context, ContextShift, GenerateRequest, Generation, LoadOptions, LoadedModel, Prompt,
    SpeculativeOptions,
};
use local_llm_engine::Error;

/// A paragraph to copy with small changes: most of the answer is in the prompt.
const PARAGRAPH: &str = "The old lighthouse stood at the edge of the cliff for more than a \
hundred years. Every night its keeper climbed the narrow stairs, cleaned the great lens and lit \
the lamp, so that the fishing boats could find their way home through the fog and the storms of \
the northern sea.";

fn rewrite(max_tokens: usize) -> GenerateRequest {
    common::greedy_chat(
        &format!("Fix the punctuation of this paragraph and write it out in full:\n\n{PARAGRAPH}"),
        max_tokens,
    )
}

fn open(max_tokens: usize) -> GenerateRequest {
    common::greedy_chat("Tell me about the history of bread.", max_tokens)
}

fn lookup(n: u32) -> SpeculativeOptions {
    SpeculativeOptions {
        lookup_ngram_max: n,
        ..SpeculativeOptions::default()
    }
}

fn generate(ctx: &mut Context, request: &GenerateRequest) -> Generation {
    ctx.generate(request, &mut |_| {}, None)
        .expect("generation")
}

/// Generate `request` plainly and with `spec` (and `draft`) on fresh contexts; assert the
/// same tokens, text and finish reason, and return the speculative generation.
fn same_as_plain(
    model: &Arc<LoadedModel>,
    request: &GenerateRequest,
    spec: &SpeculativeOptions,
    draft: Option<Arc<LoadedModel>>,
    n_ctx: u32,
) -> Generation {
    let plain = generate(&mut common::context(model, n_ctx, 2, 1), request);
    assert_eq!(plain.timings.draft_tokens, 0);
    let mut ctx = common::context(model, n_ctx, 2, 1);
    ctx.set_speculative(spec, draft).expect("speculation");
    let fast = generate(&mut ctx, request);
    assert_eq!(
        fast.tokens, plain.tokens,
        "{:?}\nvs plain\n{:?}",
        fast.text, plain.text
    );
    assert_eq!(fast.text, plain.text);
    assert_eq!(fast.finish_reason, plain.finish_reason);
    assert!(fast.timings.draft_accepted <= fast.timings.draft_tokens);
    eprintln!(
        "{} tokens, drafted {}, accepted {} ({:.0}%), {:.1} tok/s (plain {:.1})",
        fast.tokens.len(),
        fast.timings.draft_tokens,
        fast.timings.draft_accepted,
        fast.timings.draft_acceptance_rate() * 100.0,
        fast.timings.generation_tokens_per_second(),
        plain.timings.generation_tokens_per_second()
    );
    fast
}

#[test]
fn prompt_lookup_gives_the_plain_greedy_output() {
    let Some(model) = common::load_real_model("smollm2") else {
        return;
    };
    let g = same_as_plain(&model, &rewrite(96), &lookup(3), None, 1024);
    // Copying a paragraph: lookup drafts much of it and most drafts are right.
    assert!(g.timings.draft_accepted >= 20, "{:?}", g.timings);
    same_as_plain(&model, &open(96), &lookup(3), None, 1024);
    same_as_plain(&model, &open(64), &lookup(1), None, 1024);
}

#[test]
fn prompt_lookup_keeps_seeded_sampling_and_penalties() {
    let Some(model) = common::load_real_model("smollm2") else {
        return;
    };
    let mut request = rewrite(80);
    request.sampling = SamplingParams {
        temperature: 0.8,
        top_k: 40,
        top_p: 0.95,
        repeat_penalty: 1.1,
        penalty_last_n: 64,
        seed: Some(1234),
        ..SamplingParams::default()
    };
    request.logprobs = Some(2);
    let g = same_as_plain(&model, &request, &lookup(3), None, 1024);
    assert_eq!(g.logprobs.len(), g.tokens.len());
    assert!(g.timings.draft_accepted > 0, "{:?}", g.timings);
}

#[test]
fn prompt_lookup_keeps_a_json_schema_grammar() {
    let Some(model) = common::load_real_model("smollm2") else {
        return;
    };
    let schema = r#"{"type":"object","properties":{"title":{"type":"string"},
        "sentences":{"type":"array","items":{"type":"string"}}},"required":["title","sentences"]}"#;
    let mut request = common::greedy_chat(
        &format!("Put this paragraph into JSON with a title and its sentences:\n\n{PARAGRAPH}"),
        120,
    );
    request.grammar = Some(GrammarRequest::json_schema(schema).expect("schema"));
    same_as_plain(&model, &request, &lookup(3), None, 1024);
}

#[test]
fn prompt_lookup_continues_across_context_shifts() {
    let Some(model) = common::load_real_model("smollm2") else {
        return;
    };
    let mut request = rewrite(200);
    request.context_shift = Some(ContextShift { n_keep: Some(8) });
    request.stop_at_eog = false;
    // A 160-token context: the prompt takes most of it, so the generation shifts repeatedly.
    let g = same_as_plain(&model, &request, &lookup(3), None, 160);
    assert_eq!(g.tokens.len(), 200);
}

#[test]
fn prompt_lookup_on_gemma3_gives_the_plain_greedy_output() {
    let Some(model) = common::load_real_model("gemma3") else {
        return;
    };
    let mut request = GenerateRequest::new(Prompt::Text(format!(
        "{PARAGRAPH}\n\nThe same paragraph again:\n\n{PARAGRAPH}\n\nAnd once more:\n\n"
    )));
    request.sampling = SamplingParams::greedy();
    request.max_tokens = 64;
    same_as_plain(&model, &request, &lookup(3), None, 1024);
}

#[test]
fn an_identical_draft_model_is_almost_always_right() {
    let Some(model) = common::load_real_model("smollm2") else {
        return;
    };
    let draft = common::load_real_model("smollm2");
    let spec = SpeculativeOptions {
        draft_n_max: 6,
        ..SpeculativeOptions::default()
    };
    let g = same_as_plain(&model, &open(64), &spec, draft, 1024);
    assert!(g.timings.draft_tokens > 0);
    assert!(g.timings.draft_acceptance_rate() > 0.9, "{:?}", g.timings);
}

/// SmolLM2 re-quantized to Q2_K by the engine's quantizer (a worse copy of the model).
fn q2k_draft() -> Option<Arc<LoadedModel>> {
    let src = common::real_model("smollm2")?;
    let dir = std::env::temp_dir().join(format!("local-llm-spec-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let out: PathBuf = dir.join("smollm2-q2k.gguf");
    let options = QuantizeOptions {
        allow_requantize: true,
        ..QuantizeOptions::default()
    };
    quantize_file(&src, &out, FileType::Q2_K, &options).expect("quantize to Q2_K");
    let model = LoadedModel::load(&out, &LoadOptions::default()).expect("draft loads");
    std::fs::remove_dir_all(&dir).ok();
    Some(model)
}

#[test]
fn a_different_draft_model_is_partly_accepted_and_changes_nothing() {
    let (Some(model), Some(draft)) = (common::load_real_model("smollm2"), q2k_draft()) else {
        return;
    };
    let spec = SpeculativeOptions {
        draft_n_max: 4,
        ..SpeculativeOptions::default()
    };
    for request in [rewrite(64), open(64)] {
        let g = same_as_plain(&model, &request, &spec, Some(draft.clone()), 1024);
        let rate = g.timings.draft_acceptance_rate();
        assert!(rate > 0.0 && rate < 1.0, "{:?}", g.timings);
    }
    // Lookup first, the draft model where lookup finds nothing.
    let both = SpeculativeOptions {
        lookup_ngram_max: 2,
        ..spec
    };
    same_as_plain(&model, &rewrite(64), &both, Some(draft), 1024);
}

#[test]
fn a_draft_model_with_another_vocabulary_is_refused() {
    let (Some(model), Some(gemma)) = (
        common::load_real_model("smollm2"),
        common::load_real_model("gemma3"),
    ) else {
        return;
    };
    let mut ctx = common::context(&model, 256, 2, 1);
    match ctx.set_speculative(&SpeculativeOptions::default(), Some(gemma)) {
        Err(Error::InvalidOption(msg)) => assert!(msg.contains("vocabulary"), "{msg}"),
        Err(e) => panic!("unexpected error {e}"),
        Ok(()) => panic!("a draft model with another vocabulary was accepted"),
    }
    assert!(ctx.draft_model().is_none());
    // Out-of-range options are refused too.
    let too_many = SpeculativeOptions {
        draft_n_max: 1000,
        lookup_ngram_max: 3,
        ..SpeculativeOptions::default()
    };
    assert!(matches!(
        ctx.set_speculative(&too_many, None),
        Err(Error::InvalidOption(_))
    ));
}

#[test]
fn the_draft_models_prompt_processing_counts_as_prompt_time() {
    let (Some(model), Some(draft)) = (
        common::load_real_model("smollm2"),
        common::load_real_model("smollm2"),
    ) else {
        return;
    };
    // A long prompt and a short answer: the identical draft model reads the prompt once more
    // (about the target's own prompt time P), while 8 tokens decode in D, a fraction of P.
    // Counted right, prompt time is about 2P and generation D; counted as generation time,
    // prompt time would be P and generation P + D. So generation < prompt time tells them
    // apart whatever the load on the machine (D was 0.54 P under a parallel test run).
    let text = format!("Repeat this text:\n\n{PARAGRAPH} {PARAGRAPH} {PARAGRAPH}");
    let spec = SpeculativeOptions {
        draft_n_max: 4,
        ..SpeculativeOptions::default()
    };
    let mut ctx = common::context(&model, 512, 2, 1);
    ctx.set_speculative(&spec, Some(draft))
        .expect("speculation");
    let t = generate(&mut ctx, &common::greedy_chat(&text, 8)).timings;
    assert!(t.draft_tokens > 0 && t.prompt_tokens > 150, "{t:?}");
    assert!(
        t.generation_ms < t.prompt_ms,
        "the draft's prompt was counted as generation time: {t:?}"
    );
}
