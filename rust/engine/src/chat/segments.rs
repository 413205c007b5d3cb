//! Splitting a rendered prompt into template text and message content.
//!
//! Method:
//! 1. Render normally (the reference output `R`).
//! 2. Render again with every non-empty message content replaced by a unique sentinel
//!    `U+F8FF <nonce> '#' <index> U+F8FF`, where the nonce is random and checked not to occur in
//!    any message, the template source or the bos/eos texts. Splitting that output at the
//!    sentinels gives the template's own text pieces and, between them, the message slots.
//! 3. Exact path: substituting each slot with its message content must reproduce `R`; then the
//!    slots are the content segments.
//! 4. Transforming templates (e.g. `content | trim`, `content.strip()`, slicing, `content |
//!    tojson`): the template pieces are aligned against `R` in order; each slot must be filled
//!    by a substring of its message's content or by the whole content escaped as a JSON string
//!    body (so text the template never wrote can never be labelled template text).
//!    When several alignments exist the one giving content the longest text is chosen.
//! 5. If neither works (the template rewrites the content beyond substrings, e.g.
//!    `content | replace('\r\n', '\n')`, or branches on it), the sentinel rendering itself is
//!    used: its template pieces stay template text and each slot becomes the message's content
//!    as written. The prompt then differs from `R` where the template would have rewritten
//!    content, but no content text is ever labelled template text.
//! 6. If the sentinels do not survive the template intact (it slices, cases or otherwise
//!    mangles them) or the sentinel rendering fails, an error is returned: content and template
//!    text cannot be told apart, and guessing could turn content into control tokens.

use super::{ChatMessage, ChatTemplate, PromptSegment, TemplateVars, Tool, ToolChoice};
use std::hash::{BuildHasher, Hasher};

/// Bound on alignment steps for the transforming-template path.
const MAX_ALIGN_STEPS: usize = 100_000;

#[derive(Debug)]
enum Piece {
    Text(String),
    Slot(usize),
}

fn fresh_marker(template: &ChatTemplate, messages: &[ChatMessage]) -> crate::Result<String> {
    for attempt in 0u64..16 {
        let mut hasher = std::collections::hash_map::RandomState::new().build_hasher();
        hasher.write_u64(attempt);
        if let Ok(t) = std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH) {
            hasher.write_u128(t.as_nanos());
        }
        let marker = format!("\u{F8FF}{:016x}#", hasher.finish());
        let clash = template.source.contains(&marker)
            || template.bos_token.contains(&marker)
            || template.eos_token.contains(&marker)
            || messages
                .iter()
                .any(|m| m.content.contains(&marker) || m.role.contains(&marker));
        if !clash {
            return Ok(marker);
        }
    }
    Err(crate::Error::ChatTemplate(
        "could not choose a content sentinel absent from the input".to_string(),
    ))
}

/// Split `text` at sentinels `<marker><index>U+F8FF`.
fn parse_pieces(text: &str, marker: &str, slots: usize) -> Vec<Piece> {
    let mut pieces = Vec::new();
    let mut rest = text;
    let mut pending = String::new();
    while let Some(at) = rest.find(marker) {
        pending.push_str(&rest[..at]);
        let after = &rest[at + marker.len()..];
        let digits = after.bytes().take_while(u8::is_ascii_digit).count();
        let index = after[..digits].parse::<usize>().ok();
        match (index, after[digits..].strip_prefix('\u{F8FF}')) {
            (Some(i), Some(tail)) if i < slots => {
                if !pending.is_empty() {
                    pieces.push(Piece::Text(std::mem::take(&mut pending)));
                }
                pieces.push(Piece::Slot(i));
                rest = tail;
            }
            _ => {
                // A mangled sentinel: keep it as text; the alignment below will then fail.
                pending.push_str(marker);
                rest = after;
            }
        }
    }
    pending.push_str(rest);
    if !pending.is_empty() {
        pieces.push(Piece::Text(pending));
    }
    pieces
}

fn push_segment(out: &mut Vec<PromptSegment>, text: &str, from_template: bool) {
    if text.is_empty() {
        return;
    }
    match out.last_mut() {
        Some(last) if last.from_template == from_template => last.text.push_str(text),
        _ => out.push(PromptSegment {
            text: text.to_string(),
            from_template,
        }),
    }
}

/// The sentinel rendering with each slot replaced by its message's content as written.
fn as_written(pieces: &[Piece], messages: &[ChatMessage]) -> Vec<PromptSegment> {
    let mut out = Vec::new();
    for piece in pieces {
        match piece {
            Piece::Text(t) => push_segment(&mut out, t, true),
            Piece::Slot(i) => push_segment(&mut out, &messages[*i].content, false),
        }
    }
    out
}

/// A slot whose length is being tried: the slot is piece `k`, starting at byte `pos` of the
/// reference; `lengths[next - 1]` is the length currently tried.
struct Choice {
    k: usize,
    pos: usize,
    lengths: Vec<usize>,
    next: usize,
}

/// The lengths the slot `pieces[k]` (message `i`) may take at `reference[pos..]`, longest
/// first: substrings of the message's content that let the following piece match (and, first of
/// all, the whole content JSON-escaped when the template wrote it through `tojson`).
fn slot_lengths(
    pieces: &[Piece],
    k: usize,
    i: usize,
    messages: &[ChatMessage],
    rest: &str,
) -> Vec<usize> {
    let content = &messages[i].content;
    let window_end = content.len().min(rest.len());
    let mut lengths: Vec<usize> = match pieces.get(k + 1) {
        None => vec![rest.len()],
        Some(Piece::Text(t)) => {
            let search = &rest[..floor_boundary(rest, window_end + t.len())];
            search.match_indices(t.as_str()).map(|(at, _)| at).collect()
        }
        Some(Piece::Slot(_)) => [
            content.as_str(),
            content.trim(),
            content.trim_start(),
            content.trim_end(),
        ]
        .iter()
        .filter(|c| rest.starts_with(**c))
        .map(|c| c.len())
        .collect(),
    };
    lengths.retain(|&len| len <= content.len() && content.contains(&rest[..len]));
    lengths.sort_unstable_by(|a, b| b.cmp(a));
    lengths.dedup();
    // The content as a JSON string body (templates write `content | tojson`), tried first.
    let escaped = json_escaped(content);
    if escaped != *content && rest.starts_with(escaped.as_str()) {
        lengths.insert(0, escaped.len());
    }
    lengths
}

/// Depth-first alignment of `pieces` against `reference`, with an explicit stack of slot
/// choices (no recursion: a conversation may have any number of messages). Returns the byte
/// ranges of the slots, or `None` when no alignment exists within [`MAX_ALIGN_STEPS`].
fn align(
    pieces: &[Piece],
    messages: &[ChatMessage],
    reference: &str,
) -> Option<Vec<(usize, usize)>> {
    let mut choices: Vec<Choice> = Vec::new();
    let (mut k, mut pos) = (0, 0);
    for _ in 0..MAX_ALIGN_STEPS {
        let rest = &reference[pos..];
        match pieces.get(k) {
            None if rest.is_empty() => {
                let spans = choices
                    .iter()
                    .map(|c| (c.pos, c.pos + c.lengths[c.next - 1]))
                    .collect();
                return Some(spans);
            }
            Some(Piece::Text(t)) if rest.starts_with(t.as_str()) => {
                k += 1;
                pos += t.len();
                continue;
            }
            Some(Piece::Slot(i)) => choices.push(Choice {
                k,
                pos,
                lengths: slot_lengths(pieces, k, *i, messages, rest),
                next: 0,
            }),
            // A mismatch: backtrack.
            _ => {}
        }
        // Take the next untried length of the innermost slot that has one.
        loop {
            let choice = choices.last_mut()?;
            if let Some(&len) = choice.lengths.get(choice.next) {
                choice.next += 1;
                k = choice.k + 1;
                pos = choice.pos + len;
                break;
            }
            choices.pop();
        }
    }
    None
}

/// `text` escaped as the inside of a JSON string the way Python's `json.dumps` (with
/// `ensure_ascii=False`) writes it.
fn json_escaped(text: &str) -> String {
    let quoted = serde_json::Value::from(text).to_string();
    quoted[1..quoted.len() - 1].to_string()
}

fn floor_boundary(s: &str, mut i: usize) -> usize {
    if i >= s.len() {
        return s.len();
    }
    while !s.is_char_boundary(i) {
        i -= 1;
    }
    i
}

/// Split the rendering of `messages` with `tools` (passed to the template as they are).
pub(super) fn render_segments(
    template: &ChatTemplate,
    messages: &[ChatMessage],
    tools: &[Tool],
    add_generation_prompt: bool,
    vars: &TemplateVars,
) -> crate::Result<Vec<PromptSegment>> {
    let render = |msgs: &[ChatMessage]| {
        template.render_with_vars(msgs, tools, &ToolChoice::Auto, add_generation_prompt, vars)
    };
    let reference = render(messages)?;
    let marker = fresh_marker(template, messages)?;
    let marked: Vec<ChatMessage> = messages
        .iter()
        .enumerate()
        .map(|(i, m)| ChatMessage {
            content: if m.content.is_empty() {
                String::new()
            } else {
                format!("{marker}{i}\u{F8FF}")
            },
            ..m.clone()
        })
        .collect();
    let unseparable = |why: &str| {
        crate::Error::ChatTemplate(format!(
            "cannot separate message content from template text: {why}"
        ))
    };
    let with_sentinels = render(&marked)
        .map_err(|e| unseparable(&format!("rendering with placeholders failed ({e})")))?;
    let pieces = parse_pieces(&with_sentinels, &marker, messages.len());
    let written = as_written(&pieces, messages);
    if written.iter().map(|s| s.text.as_str()).collect::<String>() == reference {
        return Ok(written);
    }
    let Some(spans) = align(&pieces, messages, &reference) else {
        // Step 5, unless a template piece still holds sentinel text the template source does
        // not explain (step 6).
        let mangled = |t: &String| t.contains('\u{F8FF}') && !template.source.contains('\u{F8FF}');
        if pieces
            .iter()
            .any(|p| matches!(p, Piece::Text(t) if mangled(t)))
        {
            return Err(unseparable("the template alters the content placeholders"));
        }
        crate::log::warn(
            "the chat template rewrites message content; contents are inserted as written, as \
             plain text",
        );
        return Ok(written);
    };
    let mut out = Vec::new();
    let mut pos = 0;
    for (start, end) in spans {
        push_segment(&mut out, &reference[pos..start], true);
        push_segment(&mut out, &reference[start..end], false);
        pos = end;
    }
    push_segment(&mut out, &reference[pos..], true);
    Ok(out)
}
