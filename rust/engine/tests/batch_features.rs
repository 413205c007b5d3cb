//! Every generation feature works per sequence, through the one decoding loop: in a batch of
//! four on the real SmolLM2 model, a request with tools (a required call), one with a JSON
//! schema grammar, one with log-probabilities and a plain one each give what they give alone
//! on a single-sequence context, also with speculative decoding (prompt lookup and a draft
//! model) on the batch's context; a generation cancelled during its prompt counts the prompt
//! tokens it evaluated, alone and in a batch.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use local_llm_engine::chat::{Tool, ToolChoice};
use local_llm_engine::grammar::GrammarRequest;
use local_llm_engine::session::{
    Context, ContextOptions, FinishReason, GenerateEvent, GenerateRequest, Generation, LoadedModel,
    Prompt, SpeculativeOptions,
};

/// A paragraph the answers copy from (prompt lookup finds drafts in it).
const PARAGRAPH: &str = "The old lighthouse stood at the edge of the cliff for more than a \
hundred years. Every night its keeper climbed the narrow stairs, cleaned the great lens and lit \
the lamp, so that the fishing boats could find their way home through the fog.";

/// Four requests using different features.
fn requests() -> Vec<GenerateRequest> {
    let mut tools = common::greedy_chat("What is the weather in Paris? Use the tool.", 48);
    tools.tools = vec![Tool {
        name: "get_weather".into(),
        description: Some("Current weather in a city".into()),
        parameters: Some(
            r#"{"type": "object", "properties": {"city": {"type": "string"}}}"#.into(),
        ),
    }];
    tools.tool_choice = ToolChoice::Required;
    let schema = r#"{"type":"object","properties":{"title":{"type":"string"},
        "mood":{"enum":["calm","stormy"]}},"required":["title","mood"]}"#;
    let mut grammar = common::greedy_chat(
        &format!("Give this paragraph a short title and its mood, in JSON:\n\n{PARAGRAPH}"),
        120,
    );
    grammar.grammar = Some(GrammarRequest::json_schema(schema).expect("schema"));
    let mut logprobs = common::greedy_chat(
        &format!("Write this paragraph out again:\n\n{PARAGRAPH}"),
        40,
    );
    logprobs.logprobs = Some(3);
    let plain = common::greedy_chat("Name three rivers.", 24);
    vec![tools, grammar, logprobs, plain]
}

/// Each request alone on a fresh single-sequence context, without speculation.
fn solo(model: &Arc<LoadedModel>, requests: &[GenerateRequest]) -> Vec<Generation> {
    requests
        .iter()
        .map(|r| {
            common::context(model, 1024, 2, 1)
                .generate(r, &mut |_| {}, None)
                .expect("solo generation")
        })
        .collect()
}

fn assert_same(batch: Vec<local_llm_engine::Result<Generation>>, alone: &[Generation]) {
    assert_eq!(batch.len(), alone.len());
    for (i, (b, a)) in batch.into_iter().zip(alone).enumerate() {
        let b = b.unwrap_or_else(|e| panic!("request {i}: {e}"));
        assert_eq!(b.tokens, a.tokens, "request {i}");
        assert_eq!(b.text, a.text, "request {i}");
        assert_eq!(b.finish_reason, a.finish_reason, "request {i}");
        // The same calls; each has an id of its own.
        let calls = |g: &Generation| -> Vec<(String, String)> {
            g.tool_calls
                .iter()
                .map(|c| (c.name.clone(), c.arguments.clone()))
                .collect()
        };
        assert_eq!(calls(&b), calls(a), "request {i}");
        for (x, y) in b.tool_calls.iter().zip(&a.tool_calls) {
            assert_ne!(x.id, y.id, "request {i}: a repeated tool-call id");
        }
        assert_eq!(b.logprobs, a.logprobs, "request {i}");
    }
}

#[test]
fn tools_grammar_and_logprobs_work_in_a_batch_and_with_speculation() {
    let Some(model) = common::load_real_model("smollm2") else {
        return;
    };
    let requests = requests();
    let alone = solo(&model, &requests);
    // The features did what they are for, so that the comparison means something.
    assert_eq!(alone[0].finish_reason, FinishReason::ToolCalls);
    assert_eq!(alone[0].tool_calls.len(), 1);
    let json: serde_json::Value = serde_json::from_str(&alone[1].text)
        .unwrap_or_else(|e| panic!("{e}: {:?} {:?}", alone[1].finish_reason, alone[1].text));
    assert!(
        json["title"].is_string() && json["mood"].is_string(),
        "{json}"
    );
    assert_eq!(alone[2].logprobs.len(), alone[2].tokens.len());
    assert!(alone[2].logprobs.iter().all(|lp| lp.top.len() == 3));

    let mut ctx = common::context(&model, 1024, 2, 4);
    assert_same(ctx.generate_batch(&requests, None).expect("batch"), &alone);

    // Speculation per sequence: prompt lookup, then a draft model (an identical one, so
    // that its drafts are mostly accepted) where lookup finds nothing.
    let spec = SpeculativeOptions {
        draft_n_max: 4,
        lookup_ngram_max: 3,
        ..SpeculativeOptions::default()
    };
    ctx.set_speculative(&spec, common::load_real_model("smollm2"))
        .expect("speculation");
    let batch = ctx.generate_batch(&requests, None).expect("batch");
    let drafted: Vec<usize> = batch
        .iter()
        .map(|g| g.as_ref().map_or(0, |g| g.timings.draft_tokens))
        .collect();
    assert!(drafted.iter().all(|&n| n > 0), "drafted {drafted:?}");
    assert_same(batch, &alone);
}

/// Generate `request` on `ctx`, cancelling once the first prompt batch was evaluated.
fn cancel_after_first_batch(ctx: &mut Context, request: &GenerateRequest) -> Generation {
    let cancel = AtomicBool::new(false);
    let mut on_event = |event: GenerateEvent| {
        if let GenerateEvent::PromptProgress { evaluated, .. } = event {
            cancel.store(evaluated > 0, Ordering::Relaxed);
        }
    };
    ctx.generate_events(request, &mut on_event, Some(&cancel))
        .expect("cancelled generation")
}

#[test]
fn a_generation_cancelled_during_its_prompt_counts_what_it_evaluated() {
    let Some(model) = common::load_real_model("smollm2") else {
        return;
    };
    let options = |max_sequences| ContextOptions {
        n_ctx: 256,
        n_batch: 16,
        threads: 2,
        max_sequences,
        ..ContextOptions::default()
    };
    let mut request = GenerateRequest::new(Prompt::Tokens((1..=100).collect()));
    request.max_tokens = 8;
    for n_seq in [1, 3] {
        let mut ctx = Context::new(model.clone(), &options(n_seq)).expect("context");
        let g = cancel_after_first_batch(&mut ctx, &request);
        assert_eq!(
            g.finish_reason,
            FinishReason::Cancelled,
            "{n_seq} sequences"
        );
        assert_eq!(g.prompt_tokens, 100, "{n_seq} sequences");
        assert_eq!(g.timings.prompt_tokens, 16, "{n_seq} sequences");
        assert!(g.tokens.is_empty());
        // Started on a sequence directly (as the scheduler does): the same count.
        let flag = Arc::new(AtomicBool::new(false));
        ctx.clear();
        let f = flag.clone();
        let mut on_event = move |event: GenerateEvent| {
            if let GenerateEvent::PromptProgress { evaluated, .. } = event {
                f.store(evaluated > 0, Ordering::Relaxed);
            }
        };
        let id = ctx
            .start_sequence(&request, Some(flag), &mut on_event)
            .expect("started");
        let mut ended = ctx.step_sequences(&|_| true, &mut |_, _| {}).unwrap();
        let (ended_id, g) = ended.pop().expect("it ended at its first step");
        let g = g.expect("generation");
        assert_eq!(ended_id, id);
        assert_eq!(g.finish_reason, FinishReason::Cancelled);
        assert_eq!(g.timings.prompt_tokens, 16, "{n_seq} sequences");
    }
}
