//! The one decoding loop. A generation runs on a sequence of its context:
//! [`Context::start_sequence`] evaluates its prompt, and each [`Context::step_sequences`]
//! advances every running sequence in a single forward pass ([`Model::forward_batch`]: the
//! weights are read once for all of them). A sequence feeds the token it chose, and with
//! speculative decoding the tokens drafted after it, whose logits are then checked one after
//! the other (see `speculative.rs`). [`Context::generate`] is one sequence started and stepped
//! to its end, so every request decodes the same tokens alone or in a batch, with the same
//! grammar, tool calls, log-probabilities, context shift and speculation.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use super::decode::{Decoding, Next};
use super::overflow::shift_sequence;
use super::request::{FinishReason, GenerateEvent, GenerateRequest, Generation, Timings};
use super::speculative::{Drafting, Speculation};
use super::{check_prompt, common_prefix, Context, ContextShift, Runner, SeqState, Sequence};
use crate::backend::Threads;
use crate::model::{ActiveLora, Model, Output, SeqTokens};
use crate::{Error, Result};

/// What a running generation does next.
enum Ahead {
    /// Choose a token from these logits (after the prompt, or after a step that fed one
    /// token).
    Logits(Vec<f32>),
    /// Feed this token, already chosen (after a step that checked drafted tokens).
    Token(u32),
}

/// A generation running on a sequence.
pub(super) struct Running {
    decoding: Decoding,
    next: Ahead,
    /// The tokens the current step feeds: the `pending` ones, the chosen one, then the
    /// drafted ones.
    fed: Vec<u32>,
    /// Tokens fed again at the start of `fed`: a matrix state (Qwen 3.5, Granite 4 hybrid)
    /// goes back only to where the last step started, so after a rejected draft the step's
    /// chosen token and accepted drafts are in `cached` but not in the cache.
    pending: usize,
    prompt_tokens: usize,
    /// How it shifts its sequence's cache when full (none: it ends there).
    shift: Option<ContextShift>,
    timings: Timings,
    cancel: Option<Arc<AtomicBool>>,
    /// Set when it ended before its first step (cancelled during the prompt).
    ended: Option<FinishReason>,
    /// Its drafting state (speculative decoding only).
    drafting: Option<Drafting>,
}

impl Running {
    fn cancelled(&self) -> bool {
        self.cancel
            .as_ref()
            .is_some_and(|c| c.load(Ordering::Relaxed))
    }

    /// End the generation for `reason`.
    fn finish(
        mut self,
        reason: FinishReason,
        on_event: &mut dyn FnMut(GenerateEvent),
    ) -> Result<Generation> {
        if let Some(drafting) = &self.drafting {
            self.timings.draft_tokens = drafting.drafted;
            self.timings.draft_accepted = drafting.accepted;
        }
        self.decoding
            .finish(reason, self.prompt_tokens, self.timings, on_event)
    }
}

/// What stepping a sequence needs from its context besides the sequence.
struct StepEnv<'a> {
    model: &'a Model,
    bos: Option<u32>,
    threads: &'a Threads,
    n_batch: usize,
    speculation: Option<&'a Speculation>,
    lora: &'a [ActiveLora],
}

impl Context {
    /// Sequences this context holds (`max_sequences`).
    pub fn max_sequences(&self) -> usize {
        self.seqs.len()
    }

    /// Sequences with no generation running.
    pub fn free_sequences(&self) -> usize {
        self.seqs.iter().filter(|s| s.running.is_none()).count()
    }

    /// Start `request` on a free sequence (the one whose cache shares the longest prefix with
    /// its prompt), evaluating its prompt now (reporting
    /// [`GenerateEvent::PromptProgress`] to `on_event` after each batch), and return the
    /// sequence's index. Its tokens then come from [`Context::step_sequences`]; `cancel` ends
    /// it there with [`FinishReason::Cancelled`] (also when set during the prompt, which then
    /// counts the prompt tokens evaluated until then). [`Error::InvalidOption`] while no
    /// sequence is free.
    pub fn start_sequence(
        &mut self,
        request: &GenerateRequest,
        cancel: Option<Arc<AtomicBool>>,
        on_event: &mut dyn FnMut(GenerateEvent),
    ) -> Result<usize> {
        let prompt_cancel = cancel.clone();
        self.start(request, cancel, prompt_cancel.as_deref(), on_event)
    }

    /// [`Context::start_sequence`], with `prompt_cancel` cancelling the prompt's evaluation.
    pub(super) fn start(
        &mut self,
        request: &GenerateRequest,
        cancel: Option<Arc<AtomicBool>>,
        prompt_cancel: Option<&AtomicBool>,
        on_event: &mut dyn FnMut(GenerateEvent),
    ) -> Result<usize> {
        request.validate()?;
        let prompt = self.request_tokens(request)?;
        check_prompt(&prompt, self.n_ctx())?;
        let opened = self.model.prompt_opens_reasoning(&prompt);
        let mut decoding = Decoding::new(&self.model, request, cancel.clone(), opened)?;
        let Some((id, common)) = self
            .seqs
            .iter()
            .enumerate()
            .filter(|(_, s)| s.running.is_none())
            .map(|(i, s)| (i, common_prefix(&s.cached, &prompt).min(s.reusable)))
            .max_by_key(|&(i, common)| (common, std::cmp::Reverse(i)))
        else {
            return Err(Error::InvalidOption(
                "every sequence of the context is busy".into(),
            ));
        };
        let runner = Runner {
            model: self.model.model(),
            threads: &self.threads,
            n_batch: self.n_batch,
            lora: &self.lora,
        };
        let seq = &mut self.seqs[id];
        // A recurrent state may not go back that far: then the whole prompt is evaluated.
        let common = seq.cache.truncate(common);
        seq.cached.truncate(common);
        // What stays in the cache is the kept start and this prompt: all reusable again.
        seq.reusable = usize::MAX;
        let start = Instant::now();
        let state = SeqState {
            cache: &mut seq.cache,
            cached: &mut seq.cached,
        };
        let mut progress = |evaluated, total| {
            on_event(GenerateEvent::PromptProgress { evaluated, total });
        };
        let evaluated = runner.eval(
            state,
            &prompt[common..],
            Output::LastLogits,
            &mut progress,
            prompt_cancel,
        );
        // The draft model reads the prompt now, so that it counts as prompt time.
        let evaluated = evaluated.and_then(|logits| match (&self.speculation, &mut seq.draft) {
            (Some(spec), Some(draft)) => spec
                .prefill(draft, &prompt, &self.threads, self.n_batch, prompt_cancel)
                .map(|()| logits),
            _ => Ok(logits),
        });
        let timings = Timings {
            // Each finished batch extends `cached`: a cancelled prompt counts what it evaluated.
            prompt_tokens: seq.cached.len().saturating_sub(common),
            prompt_ms: start.elapsed().as_secs_f64() * 1e3,
            ..Timings::default()
        };
        let (logits, ended) = match evaluated {
            Ok(logits) => (logits, None),
            Err(Error::Cancelled) => (Vec::new(), Some(FinishReason::Cancelled)),
            Err(e) => return Err(e),
        };
        decoding.start_clock();
        seq.running = Some(Running {
            decoding,
            next: Ahead::Logits(logits),
            fed: Vec::new(),
            pending: 0,
            prompt_tokens: prompt.len(),
            shift: request.context_shift,
            timings,
            cancel,
            ended,
            drafting: self.speculation.as_ref().map(Speculation::drafting),
        });
        Ok(id)
    }

    /// Advance every running sequence `ready` accepts by one step, in one forward pass: it
    /// chooses its next token (plain decoding: one token per step; with speculative decoding,
    /// the drafted tokens it accepts too). Events go to `on_event` with the sequence's index;
    /// generations that ended are returned (their sequences are free again), each with its
    /// result: a generation or its own error (e.g. a required tool call the model did not
    /// make). A sequence whose cache is full shifts it first if its request asks for a context
    /// shift, else it ends with [`FinishReason::ContextFull`]. A failing forward pass (or
    /// shift, or draft model) ends every running generation with its error.
    pub fn step_sequences(
        &mut self,
        ready: &dyn Fn(usize) -> bool,
        on_event: &mut dyn FnMut(usize, GenerateEvent),
    ) -> Result<Vec<(usize, Result<Generation>)>> {
        let stepped = self.step_inner(ready, on_event);
        if stepped.is_err() {
            let running = self.seqs.iter_mut().filter(|s| s.running.is_some());
            running.for_each(|s| drop(end(s)));
        }
        stepped
    }

    fn step_inner(
        &mut self,
        ready: &dyn Fn(usize) -> bool,
        on_event: &mut dyn FnMut(usize, GenerateEvent),
    ) -> Result<Vec<(usize, Result<Generation>)>> {
        let env = StepEnv {
            model: self.model.model(),
            bos: self.model.tokenizer().bos(),
            threads: &self.threads,
            n_batch: self.n_batch,
            speculation: self.speculation.as_ref(),
            lora: &self.lora,
        };
        let mut finished = Vec::new();
        for (id, seq) in self.seqs.iter_mut().enumerate() {
            let Some(run) = seq.running.as_mut() else {
                continue;
            };
            run.fed.clear();
            if run.ended.is_none() && !ready(id) {
                continue;
            }
            let emit = &mut |e: GenerateEvent| on_event(id, e);
            if let Some(reason) = prepare(seq, &env, emit)? {
                finished.push((id, end(seq).finish(reason, emit)));
            }
        }
        let mut batch: Vec<SeqTokens> = self
            .seqs
            .iter_mut()
            .filter_map(|s| {
                let run = s.running.as_ref().filter(|r| !r.fed.is_empty())?;
                Some(SeqTokens {
                    tokens: &run.fed,
                    cache: &mut s.cache,
                })
            })
            .collect();
        if batch.is_empty() {
            return Ok(finished);
        }
        env.model.forward_batch_with(
            &mut batch,
            env.threads,
            Output::AllLogits,
            &mut self.step_logits,
            env.lora,
        )?;
        drop(batch);
        // Row after row: each fed token's logits, sequence after sequence.
        let n_vocab = env.model.config().n_vocab;
        let mut rows = self.step_logits.chunks_exact(n_vocab);
        for (id, seq) in self.seqs.iter_mut().enumerate() {
            let Some(run) = seq.running.as_mut().filter(|r| !r.fed.is_empty()) else {
                continue;
            };
            let base = seq.cached.len();
            seq.cached.extend_from_slice(&run.fed[run.pending..]);
            let emit = &mut |e: GenerateEvent| on_event(id, e);
            if let Some(reason) = take_rows(seq, base, &mut rows, emit) {
                finished.push((id, end(seq).finish(reason, emit)));
            }
        }
        Ok(finished)
    }
}

/// Take sequence `seq`'s running generation, dropping from `cached` the accepted tokens
/// still pending (not in the cache, see [`Running::pending`]).
fn end(seq: &mut Sequence) -> Running {
    seq.cached.truncate(seq.cache.len());
    seq.running.take().expect("running")
}

/// Choose sequence `seq`'s next token, shift its full cache, and draft after the token (with
/// speculation), filling the running generation's `fed`; the finish reason when it ends
/// instead.
fn prepare(
    seq: &mut Sequence,
    env: &StepEnv<'_>,
    on_event: &mut dyn FnMut(GenerateEvent),
) -> Result<Option<FinishReason>> {
    let Sequence {
        cache,
        cached,
        reusable,
        draft,
        running,
    } = seq;
    let run = running.as_mut().expect("running");
    if let Some(reason) = run.ended {
        return Ok(Some(reason));
    }
    let cancelled = run.cancelled();
    let token = match &run.next {
        Ahead::Logits(logits) => match run.decoding.step(logits, cached, cancelled, on_event) {
            Next::Token(t) => {
                if let Some(drafting) = &mut run.drafting {
                    drafting.chose(t);
                }
                t
            }
            Next::Done(reason) => return Ok(Some(reason)),
        },
        Ahead::Token(_) if cancelled => return Ok(Some(FinishReason::Cancelled)),
        Ahead::Token(t) => *t,
    };
    if cached.len() >= cache.capacity() {
        let kept = match &run.shift {
            Some(shift) => {
                let runner = Runner {
                    model: env.model,
                    threads: env.threads,
                    n_batch: env.n_batch,
                    lora: env.lora,
                };
                shift_sequence(&runner, env.bos, cache, cached, shift, run.prompt_tokens)?
            }
            None => None,
        };
        match kept {
            // The moved positions were computed with the dropped tokens in view: a later
            // prompt may reuse only the kept start.
            Some(n_keep) => *reusable = (*reusable).min(n_keep),
            None => return Ok(Some(FinishReason::ContextFull)),
        }
    }
    run.fed.extend_from_slice(&cached[cache.len()..]);
    run.pending = run.fed.len();
    run.fed.push(token);
    if let (Some(spec), Some(drafting)) = (env.speculation, &mut run.drafting) {
        // Room in the cache after `token`, and no draft past the last token to generate.
        let room = cache.capacity() - cached.len() - 1;
        let n_max = drafting.n_max(room, run.decoding.remaining());
        if n_max > 0 && !cancelled {
            let drafts = drafting.propose(
                spec,
                draft.as_mut(),
                cached,
                token,
                n_max,
                env.threads,
                env.n_batch,
            )?;
            run.fed.extend_from_slice(&drafts);
        }
    }
    Ok(None)
}

/// Take sequence `seq`'s rows of logits after a step that fed its `fed` tokens at positions
/// from `base` on: one token fed keeps its logits for the next step; drafted tokens are
/// checked now (each row chooses as plain decoding would, and a draft is accepted while it
/// is the token chosen; the cache is rolled back to the first token not accepted). The finish
/// reason when the generation ends.
fn take_rows<'a>(
    seq: &mut Sequence,
    base: usize,
    rows: &mut impl Iterator<Item = &'a [f32]>,
    on_event: &mut dyn FnMut(GenerateEvent),
) -> Option<FinishReason> {
    let run = seq.running.as_mut().expect("running");
    rows.by_ref().take(run.pending).for_each(drop);
    let n_fed = run.fed.len() - run.pending;
    if n_fed == 1 {
        let row = rows.next().expect("a row per fed token");
        match &mut run.next {
            Ahead::Logits(logits) => {
                logits.clear();
                logits.extend_from_slice(row);
            }
            next => *next = Ahead::Logits(row.to_vec()),
        }
        return None;
    }
    let mut accepted = 0;
    let mut own = rows.by_ref().take(n_fed).enumerate();
    // Row `i` holds the logits after `fed[i]`; the last row's choice never matches a draft.
    let ended = loop {
        let (i, row) = own.next().expect("a row per fed token");
        let cancelled = run.cancelled();
        let history = &seq.cached[..base + 1 + i];
        let ended = match run.decoding.step(row, history, cancelled, on_event) {
            Next::Token(t) if run.fed.get(run.pending + i + 1) == Some(&t) => {
                accepted += 1;
                continue;
            }
            Next::Token(t) => {
                run.next = Ahead::Token(t);
                None
            }
            Next::Done(reason) => Some(reason),
        };
        // LFM2's short convolutions go back this far (drafts are at most `MAX_DRAFT`
        // tokens); a matrix state to `base` at most: the accepted tokens after what the
        // cache keeps are fed again with the next step's.
        seq.cache.truncate(base + 1 + i);
        seq.cached.truncate(base + 1 + i);
        break ended;
    };
    own.for_each(drop);
    if let Some(drafting) = &mut run.drafting {
        drafting.checked(n_fed - 1, accepted);
    }
    ended
}
