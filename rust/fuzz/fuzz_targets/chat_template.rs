//! Fuzz target: chat-template parsing and rendering with hostile templates and messages.
//! Input: a mode byte, then NUL-separated parts. Mode bit 0 clear: the first part is the
//! template source; set: a built-in template (ChatML, or Gemma with bit 1). The other parts are
//! messages, each starting with a role byte. Rendering must end in a value or a typed error
//! (fuel, recursion and output limits; minijinja's internal panics, caught by the engine, are
//! typed errors too); for the built-in ChatML template, which writes
//! contents verbatim, the split into template text and message content must be the rendered
//! prompt exactly.
#![no_main]

use libfuzzer_sys::fuzz_target;
use local_llm_engine::chat::{ChatMessage, ChatTemplate, ROLES};

fuzz_target!(|data: &[u8]| {
    // The engine catches minijinja's own panics (they become typed errors), so a panic is a
    // crash only when it escapes: libfuzzer-sys aborts on those after unwinding. Its hook, which
    // aborts on every panic, caught or not, gives way to the default one (which prints).
    static QUIET: std::sync::Once = std::sync::Once::new();
    QUIET.call_once(|| drop(std::panic::take_hook()));
    let Some((&mode, rest)) = data.split_first() else {
        return;
    };
    let mut parts = rest.split(|&b| b == 0);
    let source = if mode & 1 == 0 {
        String::from_utf8_lossy(parts.next().unwrap_or_default()).into_owned()
    } else {
        let arch = if mode & 2 == 0 { "llama" } else { "gemma3" };
        ChatTemplate::builtin_source(arch).to_string()
    };
    let messages: Vec<ChatMessage> = parts
        .filter_map(|p| p.split_first())
        .map(|(&role, content)| {
            let role = ROLES[usize::from(role) % ROLES.len()];
            ChatMessage::new(role, String::from_utf8_lossy(content))
        })
        .collect();
    let Ok(template) = ChatTemplate::new(&source, "<s>", "</s>") else {
        return;
    };
    let add_generation_prompt = mode & 4 != 0;
    let rendered = template.render(&messages, add_generation_prompt);
    let Ok(segments) = template.render_segments(&messages, add_generation_prompt) else {
        return;
    };
    // With the built-in ChatML template (which writes content verbatim) the segments are the
    // rendered prompt exactly.
    if mode & 3 == 1 {
        let joined: String = segments.iter().map(|s| s.text.as_str()).collect();
        assert_eq!(Some(joined), rendered.ok());
    }
});
