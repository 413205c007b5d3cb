//! One generation's token-by-token state: sampling (optionally grammar-constrained), stop
//! strings, text decoding, log-probabilities, reasoning blocks (split from the answer, with a
//! token budget) and tool calls. Every running sequence has one
//! (see `step.rs`), so a request decodes the same tokens alone or in a batch.

use std::collections::VecDeque;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Instant;

use super::request::{FinishReason, GenerateEvent, GenerateRequest, Generation, Timings};
use super::LoadedModel;
use crate::chat::{
    offered_tools, parse_tool_calls, tool_call_grammar, ReasoningOptions, ReasoningSplitter,
    ToolCallStream, ToolChoice,
};
use crate::grammar::{Constraint, GrammarRequest, Step};
use crate::sampling::{token_logprob, Sampler, StopMatcher, TokenLogprob};
use crate::tokenizer::StreamDecoder;
use crate::{Error, Result};

/// What [`Decoding::step`] decided.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Next {
    /// Feed this token to the model and call `step` again with the logits that follow it.
    Token(u32),
    /// Generation ended.
    Done(FinishReason),
}

/// A generation between its prompt and its end.
pub(super) struct Decoding {
    model: Arc<LoadedModel>,
    request: GenerateRequest,
    sampler: Sampler,
    constraint: Option<Constraint>,
    decoder: StreamDecoder,
    stops: StopMatcher,
    text: String,
    tokens: Vec<u32>,
    logprobs: Vec<TokenLogprob>,
    /// Holds back text that may be a tool call (requests that parse tool calls only).
    tool_filter: Option<ToolCallStream>,
    /// The reasoning block's state, for requests with reasoning options on a model whose
    /// template writes blocks.
    reasoning: Option<(ReasoningSplitter, ReasoningOptions)>,
    /// The reasoning text (when split from the answer).
    reasoning_text: String,
    /// Tokens generated inside the block.
    reasoning_tokens: usize,
    /// Tokens to emit before sampling again (the budget's close tag).
    forced: VecDeque<u32>,
    start: Instant,
}

/// The grammar `request` decodes under: its own, else (when it parses tool calls) the one that
/// constrains the call — all of the output under `required`/named, from `<tool_call>` on under
/// `auto` where the template writes calls as such blocks.
fn effective_grammar(
    model: &LoadedModel,
    request: &GenerateRequest,
) -> Result<Option<GrammarRequest>> {
    if request.grammar.is_some() || !request.parses_tools() {
        return Ok(request.grammar.clone());
    }
    let blocks = model.chat_template().writes_tool_call_blocks();
    tool_call_grammar(&request.tools, &request.tool_choice, blocks)
}

impl Decoding {
    /// The state for `request` (its grammar, or the grammar of its tool calls, compiled)
    /// before its first token.
    /// `cancel` also interrupts masking the vocabulary for a grammar.
    /// `opened`: the prompt ends inside a reasoning block (the template forced thinking).
    pub(super) fn new(
        model: &Arc<LoadedModel>,
        request: &GenerateRequest,
        cancel: Option<Arc<AtomicBool>>,
        opened: bool,
    ) -> Result<Self> {
        let sampler = Sampler::for_vocabulary(request.sampling.clone(), model.tokenizer())?;
        let constraint = match &effective_grammar(model, request)? {
            Some(g) => {
                let mut c =
                    Constraint::new(g.compile()?, model.token_table(), g.lazy_trigger.as_deref());
                c.set_cancel(cancel);
                Some(c)
            }
            None => None,
        };
        Ok(Decoding {
            model: model.clone(),
            stops: StopMatcher::new(&request.stop),
            request: request.clone(),
            sampler,
            constraint,
            decoder: StreamDecoder::new(),
            text: String::new(),
            tokens: Vec::new(),
            logprobs: Vec::new(),
            tool_filter: request.parses_tools().then(ToolCallStream::new),
            reasoning: request
                .reasoning
                .clone()
                .filter(|_| model.thinks())
                .map(|o| (model.reasoning_splitter(opened), o)),
            reasoning_text: String::new(),
            reasoning_tokens: 0,
            forced: VecDeque::new(),
            start: Instant::now(),
        })
    }

    /// Tokens the generation may still produce before `max_tokens`.
    pub(super) fn remaining(&self) -> usize {
        self.request.max_tokens.saturating_sub(self.tokens.len())
    }

    /// Start the generation clock (after the prompt).
    pub(super) fn start_clock(&mut self) {
        self.start = Instant::now();
    }

    /// Route `piece` through the reasoning split (when the request splits) and pass on the
    /// answer's part with [`Decoding::emit_answer`].
    fn emit(&mut self, piece: String, on_event: &mut dyn FnMut(GenerateEvent)) {
        let Some((splitter, options)) = &mut self.reasoning else {
            return self.emit_answer(piece, on_event);
        };
        let split = splitter.push(&piece);
        if !options.split {
            return self.emit_answer(piece, on_event);
        }
        self.emit_reasoning(split.reasoning, on_event);
        self.emit_answer(split.answer, on_event);
    }

    /// The rest of the reasoning split at the end of the output.
    fn finish_reasoning(&mut self, on_event: &mut dyn FnMut(GenerateEvent)) {
        let Some((splitter, options)) = &mut self.reasoning else {
            return;
        };
        let split = splitter.finish();
        if options.split {
            self.emit_reasoning(split.reasoning, on_event);
            self.emit_answer(split.answer, on_event);
        }
    }

    fn emit_reasoning(&mut self, piece: String, on_event: &mut dyn FnMut(GenerateEvent)) {
        if !piece.is_empty() {
            self.reasoning_text.push_str(&piece);
            on_event(GenerateEvent::Reasoning(&piece));
        }
    }

    /// Add `piece` to the answer and pass on what of it is certainly not a tool call.
    fn emit_answer(&mut self, piece: String, on_event: &mut dyn FnMut(GenerateEvent)) {
        if piece.is_empty() {
            return;
        }
        self.text.push_str(&piece);
        let safe = match &mut self.tool_filter {
            Some(filter) => filter.push(&piece),
            None => piece,
        };
        if !safe.is_empty() {
            on_event(GenerateEvent::Text(&safe));
        }
    }

    /// Choose the next token from `logits` (the cache holding `history`), report its
    /// log-probabilities and text, and say whether to go on.
    pub(super) fn step(
        &mut self,
        logits: &[f32],
        history: &[u32],
        cancelled: bool,
        on_event: &mut dyn FnMut(GenerateEvent),
    ) -> Next {
        let request = &self.request;
        if self.tokens.len() >= request.max_tokens {
            return Next::Done(FinishReason::MaxTokens);
        }
        if cancelled {
            return Next::Done(FinishReason::Cancelled);
        }
        let tokenizer = self.model.tokenizer();
        let forced = self.forced.pop_front();
        let token = match &mut self.constraint {
            _ if forced.is_some() => forced.unwrap_or_default(),
            None => self.sampler.sample(logits, history),
            Some(c) => {
                let is_eog = |t| request.stop_at_eog && tokenizer.is_eog(t);
                match c.pick(&mut self.sampler, logits, history, &is_eog) {
                    Step::Token(t) => t,
                    Step::Complete => return Next::Done(FinishReason::GrammarComplete),
                    Step::DeadEnd => return Next::Done(FinishReason::GrammarDeadEnd),
                    Step::Cancelled => return Next::Done(FinishReason::Cancelled),
                }
            }
        };
        if forced.is_none() && request.stop_at_eog && tokenizer.is_eog(token) {
            return Next::Done(FinishReason::EndOfGeneration);
        }
        let dead = self.constraint.as_mut().is_some_and(|c| !c.accept(token));
        self.tokens.push(token);
        if let Some(n_top) = request.logprobs {
            let lp = token_logprob(logits, token, n_top, &|id| tokenizer.token_bytes(id, true));
            on_event(GenerateEvent::Logprob(&lp));
            self.logprobs.push(lp);
        }
        let piece = self.decoder.push(tokenizer, token);
        let (safe, stopped) = self.stops.push(&piece);
        let max_tokens = request.max_tokens;
        self.emit(safe, on_event);
        self.spend_reasoning_budget();
        if stopped {
            return Next::Done(FinishReason::StopString);
        }
        if dead {
            return Next::Done(FinishReason::GrammarDeadEnd);
        }
        if self.tokens.len() >= max_tokens {
            return Next::Done(FinishReason::MaxTokens);
        }
        Next::Token(token)
    }

    /// Count a token generated inside the reasoning block; when the budget is spent, queue
    /// the budget message and the close tag as the next tokens.
    fn spend_reasoning_budget(&mut self) {
        let Some((splitter, options)) = &self.reasoning else {
            return;
        };
        if !splitter.in_reasoning() || !self.forced.is_empty() {
            return;
        }
        self.reasoning_tokens += 1;
        if options.budget.is_some_and(|b| self.reasoning_tokens >= b) {
            let text = format!("{}{}\n\n", options.budget_message, splitter.close_tag());
            // Template text: the close tag is a special token where the vocabulary has one.
            if let Ok(tokens) = self.model.tokenize(&text, false, true) {
                self.forced.extend(tokens);
            }
        }
    }

    /// End the generation for `finish_reason`: pass on held-back text (unless a stop string
    /// ended it) and build the result. With tools, calls found in the output are returned in
    /// [`Generation::tool_calls`] with finish reason [`FinishReason::ToolCalls`], and the held
    /// text is passed on when it holds none; under [`ToolChoice::Required`] or a named choice,
    /// output without a call is an [`Error::ToolCall`].
    pub(super) fn finish(
        mut self,
        finish_reason: FinishReason,
        prompt_tokens: usize,
        mut timings: Timings,
        on_event: &mut dyn FnMut(GenerateEvent),
    ) -> Result<Generation> {
        if finish_reason != FinishReason::StopString {
            let rest = self.decoder.finish();
            let (safe, stopped) = self.stops.push(&rest);
            self.emit(safe, on_event);
            if !stopped {
                let held = self.stops.flush();
                self.emit(held, on_event);
            }
        }
        self.finish_reasoning(on_event);
        timings.generated_tokens = self.tokens.len();
        timings.generation_ms = self.start.elapsed().as_secs_f64() * 1e3;
        let mut generation = Generation {
            text: std::mem::take(&mut self.text),
            reasoning: std::mem::take(&mut self.reasoning_text),
            tool_calls: Vec::new(),
            tokens: self.tokens,
            logprobs: self.logprobs,
            prompt_tokens,
            finish_reason,
            timings,
        };
        let Some(mut filter) = self.tool_filter else {
            return Ok(generation);
        };
        let request = &self.request;
        let parsed = parse_tool_calls(
            &generation.text,
            offered_tools(&request.tools, &request.tool_choice),
        );
        let cancelled = finish_reason == FinishReason::Cancelled;
        if parsed.calls.is_empty() {
            let rest = filter.flush();
            if !rest.is_empty() {
                on_event(GenerateEvent::Text(&rest));
            }
            let forced = matches!(
                request.tool_choice,
                ToolChoice::Required | ToolChoice::Function { .. }
            );
            if forced && !cancelled {
                return Err(Error::ToolCall(format!(
                    "tool_choice requires a tool call but the model answered with text: {:?}",
                    generation.text.chars().take(200).collect::<String>()
                )));
            }
            return Ok(generation);
        }
        generation.text = parsed.content.unwrap_or_default();
        generation.tool_calls = parsed.calls;
        if !cancelled {
            generation.finish_reason = FinishReason::ToolCalls;
        }
        Ok(generation)
    }
}
