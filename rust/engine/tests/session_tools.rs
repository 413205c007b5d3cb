//! Generation with tools on SmolLM2 (its template has no tool support: the fallback prompt):
//! what streams equals the result's text and never holds call markup, `required` and a named
//! function always yield a call (decoding is constrained to one), `none` generates exactly what no tools do, and bad requests are refused.

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
        r.tools = vec![
            Tool {
                name: "get_weather".into(),
                description: Some("Current weather in a city".into()),
                parameters: Some(
                    r#"{"type": "object", "properties": {"city": {"type": "string"}}}"#.into(),
                ),
            },
            Tool {
                name: "get_time".into(),
                description: Some("Current time in a time zone".into()),
                parameters: Some(
                    r#"{"type": "object", "properties": {"zone": {"type": "string"}}}"#.into(),
                ),
            },
        ];
    }
    r.tool_choice = choice;
    r
}

#[test]
fn smollm2_generation_with_tools() {
    let Some(mut ctx) = context() else {
        return;
    };
    let named = ToolChoice::Function {
        name: "get_time".into(),
    };
    for choice in [ToolChoice::Auto, ToolChoice::Required, named] {
        let mut streamed = String::new();
        let gen = ctx
            .generate(
                &request(choice.clone(), true),
                &mut |p| streamed.push_str(p),
                None,
            )
            .unwrap_or_else(|e| panic!("{choice:?}: {e}"));
        assert_eq!(streamed, gen.text, "{choice:?}");
        assert!(
            !streamed.contains("<tool_call>"),
            "{choice:?}: {streamed:?}"
        );
        eprintln!("{choice:?}: {:?}, text {:?}", gen.tool_calls, gen.text);
        if choice == ToolChoice::Auto && gen.tool_calls.is_empty() {
            assert_ne!(gen.finish_reason, FinishReason::ToolCalls);
            continue;
        }
        // `required` and a named function constrain decoding to a call, so one always parses.
        assert_eq!(gen.tool_calls.len(), 1, "{choice:?}");
        assert_eq!(gen.finish_reason, FinishReason::ToolCalls);
        assert_eq!(gen.finish_reason.openai_name(), "tool_calls");
        let call = &gen.tool_calls[0];
        let args: serde_json::Value =
            serde_json::from_str(&call.arguments).expect("arguments are JSON");
        let args = args.as_object().expect("arguments are an object");
        match &choice {
            ToolChoice::Function { name } => assert_eq!(&call.name, name),
            _ => assert!(["get_weather", "get_time"].contains(&call.name.as_str())),
        }
        // The parameters schemas allow only their own string property.
        let key = if call.name == "get_weather" {
            "city"
        } else {
            "zone"
        };
        assert!(args.keys().all(|k| k == key), "{args:?}");
        assert!(args.values().all(|v| v.is_string()), "{args:?}");
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
