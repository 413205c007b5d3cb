//! Generation with tools on SmolLM2 (its template has no tool support: the fallback prompt):
//! what streams equals the result's text and never holds call markup, `required` yields calls
//! or a typed error, `none` generates exactly what no tools do, and bad requests are refused.

mod common;

use local_llm_engine::chat::{ChatMessage, Tool, ToolChoice};
use local_llm_engine::sampling::SamplingParams;
use local_llm_engine::session::{
    Context, ContextOptions, FinishReason, GenerateRequest, LoadOptions, LoadedModel, Prompt,
};
use local_llm_engine::Error;

fn context() -> Option<Context> {
    let path = common::real_model("smollm2")?;
    let model = LoadedModel::load(&path, &LoadOptions::default()).expect("load");
    let options = ContextOptions {
        n_ctx: 1024,
        threads: 2,
        ..ContextOptions::default()
    };
    Some(Context::new(model, &options).expect("context"))
}

fn request(choice: ToolChoice, with_tools: bool) -> GenerateRequest {
    let mut r = GenerateRequest::new(Prompt::Chat(vec![ChatMessage::new(
        "user",
        "What is the weather in Paris? Use the tool.",
    )]));
    r.sampling = SamplingParams::greedy();
    r.max_tokens = 48;
    if with_tools {
        r.tools = vec![Tool {
            name: "get_weather".into(),
            description: Some("Current weather in a city".into()),
            parameters: Some(
                r#"{"type": "object", "properties": {"city": {"type": "string"}}}"#.into(),
            ),
        }];
    }
    r.tool_choice = choice;
    r
}

#[test]
fn smollm2_generation_with_tools() {
    let Some(mut ctx) = context() else {
        return;
    };
    for choice in [ToolChoice::Auto, ToolChoice::Required] {
        let mut streamed = String::new();
        let result = ctx.generate(
            &request(choice.clone(), true),
            &mut |p| streamed.push_str(p),
            None,
        );
        match result {
            Ok(gen) => {
                assert_eq!(streamed, gen.text, "{choice:?}");
                assert!(
                    !streamed.contains("<tool_call>"),
                    "{choice:?}: {streamed:?}"
                );
                if gen.tool_calls.is_empty() {
                    assert_eq!(choice, ToolChoice::Auto);
                    assert_ne!(gen.finish_reason, FinishReason::ToolCalls);
                } else {
                    assert_eq!(gen.finish_reason, FinishReason::ToolCalls);
                    assert_eq!(gen.finish_reason.openai_name(), "tool_calls");
                    for call in &gen.tool_calls {
                        assert_eq!(call.name, "get_weather");
                        assert!(call.arguments.starts_with('{'));
                    }
                }
                eprintln!(
                    "{choice:?}: {} call(s), text {:?}",
                    gen.tool_calls.len(),
                    gen.text
                );
            }
            Err(Error::ToolCall(msg)) => {
                assert_eq!(choice, ToolChoice::Required, "{msg}");
                eprintln!("{choice:?}: no call ({msg})");
            }
            Err(e) => panic!("{choice:?}: {e}"),
        }
    }
    // `none` neither offers nor parses: the same tokens as without tools.
    let none = ctx
        .generate(&request(ToolChoice::None, true), &mut |_| {}, None)
        .expect("none");
    let plain = ctx
        .generate(&request(ToolChoice::Auto, false), &mut |_| {}, None)
        .expect("plain");
    assert_eq!(none.tokens, plain.tokens);
    assert_eq!(none.prompt_tokens, plain.prompt_tokens);

    // Bad requests.
    let mut text_prompt = request(ToolChoice::Auto, true);
    text_prompt.prompt = Prompt::Text("hi".into());
    let mut unknown = request(
        ToolChoice::Function {
            name: "nope".into(),
        },
        true,
    );
    let mut too_many = request(ToolChoice::Auto, false);
    too_many.logprobs = Some(21);
    let mut bad_schema = request(ToolChoice::Auto, true);
    bad_schema.tools[0].parameters = Some("[1, 2".into());
    unknown.max_tokens = 1;
    for bad in [text_prompt, unknown, too_many, bad_schema] {
        match ctx.generate(&bad, &mut |_| {}, None) {
            Err(Error::InvalidOption(_)) => {}
            other => panic!("expected InvalidOption, got {other:?}"),
        }
    }
}
