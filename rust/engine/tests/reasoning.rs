//! Reasoning blocks (issue 31): `<think>` … `</think>` (and Gemma 4's `<|channel>thought` …
//! `<channel|>`) split from the answer as llama.cpp's `--reasoning-format deepseek` does,
//! streamed apart, capped by a token budget, and
//! `chat_template_kwargs` (`enable_thinking`) reaching the template. The model is a synthetic
//! qwen3 (`tools/synth/make_model.py`) carrying real templates from llama.cpp's
//! `models/templates` (Qwen3 0.6B's, DeepSeek-R1-Distill-Qwen-32B's, Gemma 4 31B's); a grammar
//! makes its random weights write a block.

mod common;
mod tokenizer_support;

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use local_llm_engine::chat::{ChatMessage, ReasoningOptions, TemplateVars};
use local_llm_engine::grammar::GrammarRequest;
use local_llm_engine::sampling::SamplingParams;
use local_llm_engine::session::{
    Context, ContextOptions, GenerateEvent, GenerateRequest, Generation, LoadOptions, LoadedModel,
    Prompt,
};

/// A synthetic qwen3 model whose chat template is llama.cpp's `models/templates/{name}.jinja`.
fn model_with_template(name: &str) -> Arc<LoadedModel> {
    let dir = std::env::temp_dir().join(format!("local-llm-reasoning-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    // One file per call: the tests run in parallel and may want the same template.
    static CALLS: AtomicUsize = AtomicUsize::new(0);
    let n = CALLS.fetch_add(1, Ordering::Relaxed);
    let template = dir.join(format!("{name}-{n}.jinja"));
    let source = tokenizer_support::llama_cpp_file(&format!("models/templates/{name}.jinja"));
    std::fs::write(&template, source).unwrap();
    let path: PathBuf = dir.join(format!("{name}-{n}.gguf"));
    let script = common::repo_root().join("tools/synth/make_model.py");
    common::run_python(
        &script,
        &[
            "qwen3".as_ref(),
            path.as_os_str(),
            "--chat-template".as_ref(),
            template.as_os_str(),
        ],
    );
    LoadedModel::load(&path, &LoadOptions::default()).unwrap()
}

fn context(model: &Arc<LoadedModel>) -> Context {
    let options = ContextOptions {
        n_ctx: 1024,
        threads: 2,
        ..ContextOptions::default()
    };
    Context::new(Arc::clone(model), &options).unwrap()
}

fn request(reasoning: Option<ReasoningOptions>, grammar: Option<&str>) -> GenerateRequest {
    GenerateRequest {
        sampling: SamplingParams::greedy(),
        max_tokens: 40,
        stop_at_eog: false,
        grammar: grammar.map(GrammarRequest::new),
        reasoning,
        ..GenerateRequest::new(Prompt::Chat(vec![ChatMessage::new("user", "What is 2+2?")]))
    }
}

/// Runs `request`, returning the result and the streamed reasoning and text.
fn run(ctx: &mut Context, request: &GenerateRequest) -> (Generation, String, String) {
    let (mut reasoning, mut text) = (String::new(), String::new());
    let mut on_event = |e: GenerateEvent| match e {
        GenerateEvent::Reasoning(r) => reasoning.push_str(r),
        GenerateEvent::Text(t) => text.push_str(t),
        _ => {}
    };
    let g = ctx.generate_events(request, &mut on_event, None).unwrap();
    (g, reasoning, text)
}

const SPLIT: ReasoningOptions = ReasoningOptions {
    split: true,
    budget: None,
    budget_message: String::new(),
};

/// The model writes a block (forced by a grammar); split, it is the reasoning and the rest is
/// the answer, streamed apart; not split, the text is the whole output.
#[test]
fn a_thinking_block_is_split_from_the_answer() {
    let model = model_with_template("Qwen-Qwen3-0.6B");
    assert!(model.thinks());
    let mut ctx = context(&model);
    let grammar = r#"root ::= "<think>\n" [a-z ]{4,30} "\n</think>\n\n" [a-z ]{1,20}"#;
    let (whole, _, streamed) = run(&mut ctx, &request(None, Some(grammar)));
    let (open, rest) = whole.text.split_once("<think>\n").expect("a block");
    assert_eq!(open, "");
    let (thought, answer) = rest.split_once("\n</think>\n\n").expect("closed");
    assert_eq!(streamed, whole.text);
    assert!(whole.reasoning.is_empty());

    let (split, reasoning, text) = run(&mut ctx, &request(Some(SPLIT), Some(grammar)));
    assert_eq!(split.tokens, whole.tokens, "the same generation");
    assert_eq!(split.reasoning, thought);
    assert_eq!(split.text, answer);
    assert_eq!((reasoning.as_str(), text.as_str()), (thought, answer));
    // Inline (split off) with a budget: the text stays whole.
    let inline = ReasoningOptions {
        split: false,
        ..SPLIT
    };
    let (same, _, _) = run(&mut ctx, &request(Some(inline), Some(grammar)));
    assert_eq!(same.text, whole.text);
}

/// Gemma 4's template writes its thoughts in a channel (`<|channel>thought` … `<channel|>`,
/// llama.cpp's thinking tags for it): split as a `<think>` block is.
#[test]
fn a_gemma4_thought_channel_is_split_from_the_answer() {
    let model = model_with_template("google-gemma-4-31B-it");
    assert!(model.thinks());
    let mut ctx = context(&model);
    let grammar = r#"root ::= "<|channel>thought\n" [a-z ]{4,30} "<channel|>" [a-z ]{1,20}"#;
    let request = |reasoning| GenerateRequest {
        max_tokens: 120,
        ..request(reasoning, Some(grammar))
    };
    let (whole, _, _) = run(&mut ctx, &request(None));
    let rest = whole
        .text
        .strip_prefix("<|channel>thought\n")
        .expect("a channel");
    let (thought, answer) = rest.split_once("<channel|>").expect("closed");
    let (split, reasoning, text) = run(&mut ctx, &request(Some(SPLIT)));
    assert_eq!(split.tokens, whole.tokens, "the same generation");
    assert_eq!(split.reasoning, thought.trim_end());
    assert_eq!(split.text, answer.trim_start());
    assert_eq!(
        (reasoning, text),
        (split.reasoning.clone(), split.text.clone())
    );
}

/// `enable_thinking: false` reaches Qwen 3's template, which then writes an empty block into
/// the prompt; a model whose template has no blocks ignores reasoning options.
#[test]
fn template_variables_reach_the_template() {
    let model = model_with_template("Qwen-Qwen3-0.6B");
    let messages = [ChatMessage::new("user", "Hi")];
    let render = |vars: &TemplateVars| {
        let tokens = model
            .chat_tokens_with_vars(&messages, &[], &Default::default(), vars)
            .unwrap();
        model.detokenize(&tokens, true)
    };
    let plain = render(&TemplateVars::new());
    let mut vars = TemplateVars::new();
    vars.insert("enable_thinking".into(), false.into());
    let off = render(&vars);
    assert!(!plain.contains("<think>"), "{plain:?}");
    assert_eq!(off, format!("{plain}<think>\n\n</think>\n\n"));
    // The template's own variables cannot be replaced.
    vars.insert("add_generation_prompt".into(), false.into());
    assert!(render(&vars).ends_with("</think>\n\n"));
}

/// DeepSeek-R1's template (llama.cpp's copy) leaves the block open in the prompt when
/// `enable_thinking` is true: the output starts inside it. A budget of 6 tokens then forces the
/// close tag, and the answer follows.
#[test]
fn a_prompt_opened_block_is_reasoning_and_the_budget_closes_it() {
    let model = model_with_template("deepseek-ai-DeepSeek-R1-Distill-Qwen-32B");
    let mut ctx = context(&model);
    let mut with_budget = request(
        Some(ReasoningOptions {
            budget: Some(6),
            budget_message: " Enough.".into(),
            ..SPLIT
        }),
        None,
    );
    with_budget
        .template_vars
        .insert("enable_thinking".into(), true.into());
    let (g, reasoning, text) = run(&mut ctx, &with_budget);
    assert!(!g.reasoning.is_empty() && !g.text.is_empty(), "{g:?}");
    assert!(g.reasoning.ends_with(" Enough."), "{:?}", g.reasoning);
    assert!(!g.text.contains("</think>"), "{:?}", g.text);
    assert_eq!((reasoning, text), (g.reasoning.clone(), g.text.clone()));
    // The block took the budget's 6 tokens plus the message and the close tag.
    let forced = model.tokenize(" Enough.</think>\n\n", false, true).unwrap();
    let think = &g.tokens[..6 + forced.len()];
    assert_eq!(&think[6..], forced.as_slice());
    // Without the variable the template closes the block itself: all answer.
    let mut closed = with_budget.clone();
    closed.template_vars.clear();
    let (g, _, _) = run(&mut ctx, &closed);
    assert!(g.reasoning.is_empty() && !g.text.is_empty(), "{g:?}");
}

/// A tool call after a thinking block: the call is parsed from the answer, the block is the
/// reasoning, the content is empty (Qwen 3's template writes `<tool_call>` blocks).
#[test]
fn a_tool_call_after_a_thinking_block_is_a_call() {
    let model = model_with_template("Qwen-Qwen3-0.6B");
    let mut ctx = context(&model);
    let grammar = r#"root ::= "<think>\nthe user wants the weather\n</think>\n\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"" [a-z]{2,8} "\"}}\n</tool_call>""#;
    let mut with_tools = request(Some(SPLIT), Some(grammar));
    with_tools.max_tokens = 120;
    with_tools.tools = vec![weather_tool()];
    let (g, reasoning, text) = run(&mut ctx, &with_tools);
    assert_weather_call_after_reasoning(&g, &reasoning);
    assert!(g.tool_calls[0].arguments.contains("city"), "{g:?}");
    assert_eq!(g.text, "");
    assert_eq!(text, "", "call markup never streams as content");
}

/// Gemma 4's own call syntax after its thought channel: the call is parsed (its `<|"|>`
/// strings and bare keys become JSON), the channel is the reasoning, the content is empty.
#[test]
fn a_gemma4_tool_call_after_its_thought_channel_is_a_call() {
    let model = model_with_template("google-gemma-4-31B-it");
    let mut ctx = context(&model);
    let grammar = r#"root ::= "<|channel>thought\nthe user wants the weather<channel|><|tool_call>call:get_weather{city:<|\"|>" [a-z]{2,8} "<|\"|>,days:2}<tool_call|>""#;
    let mut with_tools = request(Some(SPLIT), Some(grammar));
    with_tools.max_tokens = 200;
    with_tools.tools = vec![weather_tool()];
    let (g, reasoning, text) = run(&mut ctx, &with_tools);
    assert_weather_call_after_reasoning(&g, &reasoning);
    let args: serde_json::Value = serde_json::from_str(&g.tool_calls[0].arguments).unwrap();
    assert!(
        args["city"].as_str().is_some_and(|c| c.len() >= 2),
        "{args}"
    );
    assert_eq!(args["days"], 2);
    assert_eq!(g.text, "");
    assert_eq!(text, "", "call markup never streams as content");
}

/// The tool the tool-call tests offer.
fn weather_tool() -> local_llm_engine::chat::Tool {
    local_llm_engine::chat::Tool {
        name: "get_weather".into(),
        description: Some("The weather in a city".into()),
        parameters: Some(r#"{"type":"object","properties":{"city":{"type":"string"}}}"#.into()),
    }
}

/// The reasoning of both tool-call tests, streamed as returned, and one `get_weather` call.
fn assert_weather_call_after_reasoning(g: &Generation, streamed_reasoning: &str) {
    assert_eq!(g.reasoning, "the user wants the weather");
    assert_eq!(streamed_reasoning, g.reasoning);
    assert_eq!(g.tool_calls.len(), 1, "{g:?}");
    assert_eq!(g.tool_calls[0].name, "get_weather");
}
