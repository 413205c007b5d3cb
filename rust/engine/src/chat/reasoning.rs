//! Reasoning ("thinking") output: a block between an open and a close tag (`<think>` …
//! `</think>` for Qwen 3, SmolLM3, DeepSeek-R1 distills and the other templates that write
//! them; Gemma 4's thought channel `<|channel>thought` … `<channel|>`) at the start of the
//! answer, split from the answer as llama.cpp's `--reasoning-format deepseek` does, as the
//! text streams.
//!
//! Only a block at the start counts (after white space); when the prompt already opened it
//! (a template that forces thinking, e.g. DeepSeek-R1's generation prompt ends with
//! `<think>\n`), the output starts inside it. White space around the reasoning and before the
//! answer is dropped. An output that ends inside the block is all reasoning.

/// A reasoning block's open and close tags.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ReasoningTags {
    pub open: &'static str,
    pub close: &'static str,
}

/// `<think>` … `</think>`.
pub const THINK: ReasoningTags = ReasoningTags {
    open: "<think>",
    close: "</think>",
};

/// Gemma 4's thought channel (llama.cpp's `thinking_start_tag` and end tag for it).
pub const GEMMA4_THOUGHT: ReasoningTags = ReasoningTags {
    open: "<|channel>thought",
    close: "<channel|>",
};

/// How a request treats reasoning blocks.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ReasoningOptions {
    /// Return the block apart from the answer (`reasoning_content`); `false` keeps it inline
    /// in the text (llama.cpp's `--reasoning-format none`).
    pub split: bool,
    /// Most tokens the model may spend inside the block before the close tag is forced
    /// (`None`: no limit).
    pub budget: Option<usize>,
    /// Text inserted before the forced close tag when the budget runs out.
    pub budget_message: String,
}

/// Where the output is relative to the block.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum State {
    /// Nothing but white space yet: a block may still open.
    Start,
    /// Inside the block, before any non-white-space reasoning.
    Opened,
    /// Inside the block.
    Inside,
    /// The block closed; white space before the answer is dropped.
    Closed,
    /// The answer (or an output without a block).
    Answer,
}

/// Splits streamed text into reasoning and answer (see the module docs).
#[derive(Clone, Debug)]
pub struct ReasoningSplitter {
    open: String,
    close: String,
    state: State,
    /// Text not yet released (a possible tag's beginning).
    held: String,
}

/// Text released by one [`ReasoningSplitter::push`]: what is certainly reasoning and what is
/// certainly answer.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Split {
    pub reasoning: String,
    pub answer: String,
}

/// The longest suffix of `text` that is a proper prefix of `tag`.
fn partial_tag(text: &str, tag: &str) -> usize {
    (1..tag.len())
        .rev()
        .find(|&n| text.ends_with(&tag[..n]))
        .unwrap_or(0)
}

impl ReasoningSplitter {
    /// A splitter for blocks between `open` and `close`; `inside`: the prompt opened the block.
    pub fn new(open: &str, close: &str, inside: bool) -> Self {
        ReasoningSplitter {
            open: open.to_string(),
            close: close.to_string(),
            state: if inside { State::Opened } else { State::Start },
            held: String::new(),
        }
    }

    /// Whether the output is inside the block (its tokens count towards a budget).
    pub fn in_reasoning(&self) -> bool {
        matches!(self.state, State::Opened | State::Inside)
    }

    /// The close tag.
    pub fn close_tag(&self) -> &str {
        &self.close
    }

    /// Add generated text; returns what is certainly reasoning and what is certainly answer.
    pub fn push(&mut self, piece: &str) -> Split {
        self.held.push_str(piece);
        let mut out = Split::default();
        loop {
            match self.state {
                State::Start => {
                    let t = self.held.trim_start();
                    if let Some(rest) = t.strip_prefix(self.open.as_str()) {
                        self.held = rest.to_string();
                        self.state = State::Opened;
                    } else if t.is_empty() || self.open.starts_with(t) {
                        return out; // White space, or maybe the open tag's beginning.
                    } else {
                        self.state = State::Answer;
                    }
                }
                State::Opened => {
                    let t = self.held.trim_start();
                    if t.is_empty() {
                        self.held.clear();
                        return out;
                    }
                    self.held = t.to_string();
                    self.state = State::Inside;
                }
                State::Inside => {
                    if let Some(at) = self.held.find(self.close.as_str()) {
                        out.reasoning.push_str(self.held[..at].trim_end());
                        self.held.drain(..at + self.close.len());
                        self.state = State::Closed;
                        continue;
                    }
                    // Keep back a possible close tag's beginning and the white space before
                    // it (trimmed if the tag follows).
                    let tag = partial_tag(&self.held, &self.close);
                    let text = self.held[..self.held.len() - tag].trim_end().len();
                    out.reasoning.extend(self.held.drain(..text));
                    return out;
                }
                State::Closed => {
                    let t = self.held.trim_start();
                    if t.is_empty() {
                        self.held.clear();
                        return out;
                    }
                    self.held = t.to_string();
                    self.state = State::Answer;
                }
                State::Answer => {
                    out.answer.push_str(&self.held);
                    self.held.clear();
                    return out;
                }
            }
        }
    }

    /// The held text at the end of the output: reasoning inside an unclosed block, else answer.
    pub fn finish(&mut self) -> Split {
        let held = std::mem::take(&mut self.held);
        match self.state {
            State::Opened | State::Inside => Split {
                reasoning: held.trim_end().to_string(),
                answer: String::new(),
            },
            // A lone open tag's beginning (or white space) was an answer after all.
            State::Start | State::Answer => Split {
                reasoning: String::new(),
                answer: held,
            },
            State::Closed => Split::default(),
        }
    }
}

/// The tags of the reasoning blocks a template writes, if it writes tags this engine
/// recognises.
pub fn template_tags(source: &str) -> Option<ReasoningTags> {
    [THINK, GEMMA4_THOUGHT]
        .into_iter()
        .find(|t| source.contains(t.open) && source.contains(t.close))
}

impl ReasoningTags {
    /// Whether `prompt_tail` (a prompt's end) leaves a block open: the template forced
    /// thinking.
    pub fn prompt_opens(&self, prompt_tail: &str) -> bool {
        prompt_tail.trim_end().ends_with(self.open)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Feeds `pieces` and returns (reasoning, answer).
    fn run(inside: bool, pieces: &[&str]) -> (String, String) {
        let mut s = ReasoningSplitter::new(THINK.open, THINK.close, inside);
        let (mut r, mut a) = (String::new(), String::new());
        for p in pieces {
            let out = s.push(p);
            r += &out.reasoning;
            a += &out.answer;
        }
        let out = s.finish();
        (r + &out.reasoning, a + &out.answer)
    }

    #[test]
    fn a_leading_block_is_reasoning_and_the_rest_the_answer() {
        let pieces = [
            "<th", "ink>\n", "Let me", " think.", "</", "think>", "\n\n", "Paris.",
        ];
        assert_eq!(
            run(false, &pieces),
            ("Let me think.".into(), "Paris.".into())
        );
        // One piece at a time, character by character.
        let text = "  <think>\nstep 1\nstep 2\n</think>\n\nThe answer: 4";
        let chars: Vec<String> = text.chars().map(String::from).collect();
        let refs: Vec<&str> = chars.iter().map(String::as_str).collect();
        assert_eq!(
            run(false, &refs),
            ("step 1\nstep 2".into(), "The answer: 4".into())
        );
    }

    #[test]
    fn without_a_leading_block_everything_is_the_answer() {
        assert_eq!(
            run(false, &["Hello ", "<think>x</think>"]),
            ("".into(), "Hello <think>x</think>".into())
        );
        assert_eq!(run(false, &["<thin"]), ("".into(), "<thin".into()));
        assert_eq!(
            run(false, &["<tool", "_call>"]),
            ("".into(), "<tool_call>".into())
        );
        assert_eq!(run(false, &[]), ("".into(), "".into()));
    }

    #[test]
    fn a_prompt_that_opened_the_block_starts_inside_it() {
        assert_eq!(
            run(true, &["\nhmm", "</think>", "ok"]),
            ("hmm".into(), "ok".into())
        );
        // Never closed: all reasoning; a close tag's beginning at the end included.
        assert_eq!(
            run(true, &["still thinking </th"]),
            ("still thinking </th".into(), "".into())
        );
        assert_eq!(run(true, &["a \n", " b\n\n"]), ("a \n b".into(), "".into()));
        assert!(THINK.prompt_opens("<|im_start|>assistant\n<think>\n"));
        assert!(!THINK.prompt_opens("<|im_start|>assistant\n"));
        assert!(GEMMA4_THOUGHT.prompt_opens("<|turn>model\n<|channel>thought\n"));
        assert!(!GEMMA4_THOUGHT.prompt_opens("<|turn>model\n<|channel>thought\n<channel|>"));
    }

    #[test]
    fn the_splitter_says_when_it_is_inside() {
        let mut s = ReasoningSplitter::new(THINK.open, THINK.close, false);
        assert!(!s.in_reasoning());
        s.push("<think>a");
        assert!(s.in_reasoning());
        s.push("</think>b");
        assert!(!s.in_reasoning());
    }
}
