//! Very long conversations end in a typed "context exhausted" error, never in a crash: the
//! prompt splitting (`chat::segments`) must not recurse once per message, so these run on
//! threads with small stacks where a per-message recursion overflows.

mod common;

use local_llm_engine::chat::ChatMessage;
use local_llm_engine::session::{
    Context, ContextOptions, GenerateRequest, LoadOptions, LoadedModel, Prompt,
};
use local_llm_engine::Error;

/// `n` short alternating user / assistant messages, ending with a user turn.
fn conversation(n: usize) -> Vec<ChatMessage> {
    (0..n)
        .map(|i| {
            let role = ["user", "assistant"][(n - 1 - i) % 2];
            // Trailing spaces: templates that trim content (Gemma) take the alignment path.
            ChatMessage::new(role, format!("message {i} "))
        })
        .collect()
}

/// Generate from an `n`-message chat on a thread with a `stack`-byte stack; the error text.
fn exhaust(model: &str, n: usize, stack: usize) -> Option<String> {
    let path = common::real_model(model)?;
    let handle = std::thread::Builder::new()
        .stack_size(stack)
        .spawn(move || {
            let model = LoadedModel::load(&path, &LoadOptions::default()).unwrap();
            let options = ContextOptions {
                n_ctx: 2048,
                threads: 1,
                ..ContextOptions::default()
            };
            let mut ctx = Context::new(model, &options).unwrap();
            let request = GenerateRequest::new(Prompt::Chat(conversation(n)));
            match ctx.generate(&request, &mut |_| {}, None) {
                Err(e @ Error::ContextExhausted { .. }) => e.to_string(),
                other => panic!("{n} messages: expected ContextExhausted, got {other:?}"),
            }
        })
        .unwrap();
    Some(handle.join().expect("the generating thread crashed"))
}

const SMALL_STACK: usize = 256 << 10;

#[test]
fn ten_thousand_messages_on_a_small_stack_smollm2() {
    if let Some(e) = exhaust("smollm2", 10_000, SMALL_STACK) {
        assert!(e.contains("context exhausted"), "{e}");
    }
}

#[test]
fn ten_thousand_messages_on_a_small_stack_gemma3() {
    if let Some(e) = exhaust("gemma3", 10_000, SMALL_STACK) {
        assert!(e.contains("context exhausted"), "{e}");
    }
}

#[test]
fn a_hundred_thousand_messages_smollm2() {
    if let Some(e) = exhaust("smollm2", 100_000, 2 << 20) {
        assert!(e.contains("context exhausted"), "{e}");
    }
}

#[test]
fn a_hundred_thousand_messages_gemma3() {
    if let Some(e) = exhaust("gemma3", 100_000, 2 << 20) {
        assert!(e.contains("context exhausted"), "{e}");
    }
}
