//! Several generations on one context at once. A context created with `max_sequences` N holds
//! N sequences, each with its own KV cache of `n_ctx` positions (memory N × one sequence's
//! cache) and its own cached tokens; sequence 0 is the cache single generations use. A
//! sequence's prompt is evaluated in a pass of its own ([`Context::start_sequence`]); after
//! that, each [`Context::step_sequences`] decodes one token for every running sequence in a
//! single forward pass ([`Model::forward_batch`]: the weights are read once for all of them).
//! Every sequence samples with its own state ([`Decoding`]), so its output equals what
//! [`Context::generate`] gives it alone.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::time::Instant;

use super::decode::{Decoding, Next};
use super::overflow::shift_sequence;
use super::request::{FinishReason, GenerateEvent, GenerateRequest, Generation, Timings};
use super::{check_prompt, common_prefix, Context, ContextOptions, ContextShift, Runner, SeqState};
use crate::model::{KvCache, Model, Output, SeqTokens};
use crate::{Error, Result};

/// The most sequences a context may hold.
pub const MAX_SEQUENCES: u32 = 64;

/// A sequence beyond the first: its cache and the tokens it holds.
struct Sequence {
    cache: KvCache,
    cached: Vec<u32>,
    /// How many cached positions a prompt may reuse (see the context's own).
    reusable: usize,
}

/// A generation running on a sequence.
struct Running {
    decoding: Decoding,
    /// Logits its next token is sampled from.
    logits: Vec<f32>,
    prompt_tokens: usize,
    /// How it shifts its sequence's cache when full (none: it ends there).
    shift: Option<ContextShift>,
    timings: Timings,
    cancel: Option<Arc<AtomicBool>>,
    /// Set when it ended before its first step (cancelled during the prompt).
    ended: Option<FinishReason>,
}

/// The sequences beyond the first, and the generation running on each sequence.
pub(super) struct Sequences {
    extra: Vec<Sequence>,
    /// One slot per sequence (index 0: the context's own cache).
    running: Vec<Option<Running>>,
    /// The last step's logits, kept so that each step reuses their memory.
    logits: Vec<f32>,
}

impl Sequences {
    /// How many sequences `options` ask for ([`Error::InvalidOption`] outside
    /// 1..=[`MAX_SEQUENCES`]).
    pub(super) fn count(options: &ContextOptions) -> Result<usize> {
        match options.max_sequences {
            1..=MAX_SEQUENCES => Ok(options.max_sequences as usize),
            n => Err(Error::InvalidOption(format!(
                "max_sequences must be between 1 and {MAX_SEQUENCES} (got {n})"
            ))),
        }
    }

    /// `n_seq` sequences of `n_ctx` positions (the first one's cache is the context's).
    pub(super) fn new(model: &Model, n_ctx: usize, n_seq: usize) -> Result<Self> {
        let extra = (1..n_seq)
            .map(|_| {
                Ok(Sequence {
                    cache: model.new_cache(n_ctx)?,
                    cached: Vec::new(),
                    reusable: usize::MAX,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Sequences {
            extra,
            running: (0..n_seq).map(|_| None).collect(),
            logits: Vec::new(),
        })
    }

    /// [`Error::InvalidOption`] while batched generations run (single generations and
    /// evaluations use sequence 0's cache).
    pub(super) fn check_idle(&self) -> Result<()> {
        match self.running.iter().filter(|r| r.is_some()).count() {
            0 => Ok(()),
            n => Err(Error::InvalidOption(format!(
                "{n} batched generations are running on this context; finish them first"
            ))),
        }
    }

    /// Drop running generations and forget every extra sequence's cache.
    pub(super) fn clear(&mut self) {
        self.running.iter_mut().for_each(|r| *r = None);
        for s in &mut self.extra {
            s.cache.truncate(0);
            s.cached.clear();
            s.reusable = usize::MAX;
        }
    }
}

impl Context {
    /// Sequences this context holds (`max_sequences`).
    pub fn max_sequences(&self) -> usize {
        self.sequences.running.len()
    }

    /// Sequences with no generation running.
    pub fn free_sequences(&self) -> usize {
        self.sequences
            .running
            .iter()
            .filter(|r| r.is_none())
            .count()
    }

    /// Every sequence's cache and tokens (sequence 0 first), with the running slots and the
    /// steps' logits buffer.
    #[allow(clippy::type_complexity)]
    fn parts(
        &mut self,
    ) -> (
        Vec<SeqState<'_>>,
        &mut [Option<Running>],
        Runner<'_>,
        &mut Vec<f32>,
    ) {
        let mut seqs = vec![SeqState {
            cache: &mut self.cache,
            cached: &mut self.cached,
        }];
        seqs.extend(self.sequences.extra.iter_mut().map(|s| SeqState {
            cache: &mut s.cache,
            cached: &mut s.cached,
        }));
        let runner = Runner {
            model: self.model.model(),
            threads: &self.threads,
            n_batch: self.n_batch,
        };
        (
            seqs,
            &mut self.sequences.running,
            runner,
            &mut self.sequences.logits,
        )
    }

    /// Start `request` on a free sequence (the one whose cache shares the longest prefix with
    /// its prompt), evaluating its prompt now, and return the sequence's index. Its tokens
    /// then come from [`Context::step_sequences`]; `cancel` ends it there with
    /// [`FinishReason::Cancelled`] (also when set during the prompt). Requests that call tools
    /// run with [`Context::generate`] only ([`Error::InvalidOption`] here), as do requests
    /// while no sequence is free.
    pub fn start_sequence(
        &mut self,
        request: &GenerateRequest,
        cancel: Option<Arc<AtomicBool>>,
    ) -> Result<usize> {
        request.validate()?;
        if request.parses_tools() {
            return Err(Error::InvalidOption(
                "requests with tools cannot run in a batch".into(),
            ));
        }
        let prompt = self.request_tokens(request)?;
        check_prompt(&prompt, self.n_ctx())?;
        let mut decoding = Decoding::new(&self.model, request)?;
        // After a context shift, a sequence may reuse only the kept start of its cache.
        let reusable: Vec<usize> = std::iter::once(self.reusable)
            .chain(self.sequences.extra.iter().map(|s| s.reusable))
            .collect();
        let (seqs, running, runner, _) = self.parts();
        let Some((id, common)) = seqs
            .iter()
            .enumerate()
            .filter(|(i, _)| running[*i].is_none())
            .map(|(i, s)| (i, common_prefix(s.cached, &prompt).min(reusable[i])))
            .max_by_key(|&(i, common)| (common, std::cmp::Reverse(i)))
        else {
            return Err(Error::InvalidOption(
                "every sequence of the context is busy".into(),
            ));
        };
        let seq = seqs.into_iter().nth(id).expect("the sequence exists");
        seq.cache.truncate(common);
        seq.cached.truncate(common);
        let start = Instant::now();
        let flag = cancel.as_deref();
        let evaluated = runner.eval(
            seq,
            &prompt[common..],
            Output::LastLogits,
            &mut |_, _| {},
            flag,
        );
        let mut timings = Timings {
            prompt_tokens: prompt.len() - common,
            prompt_ms: start.elapsed().as_secs_f64() * 1e3,
            ..Timings::default()
        };
        let (logits, ended) = match evaluated {
            Ok(logits) => (logits, None),
            Err(Error::Cancelled) => {
                timings.prompt_tokens = 0;
                (Vec::new(), Some(FinishReason::Cancelled))
            }
            Err(e) => return Err(e),
        };
        decoding.start_clock();
        running[id] = Some(Running {
            decoding,
            logits,
            prompt_tokens: prompt.len(),
            shift: request.context_shift,
            timings,
            cancel,
            ended,
        });
        // What stays in the cache is the kept start and this prompt: all reusable again.
        *self.reusable_mut(id) = usize::MAX;
        Ok(id)
    }

    /// How many of sequence `id`'s cached positions a prompt may reuse.
    fn reusable_mut(&mut self, id: usize) -> &mut usize {
        match id {
            0 => &mut self.reusable,
            _ => &mut self.sequences.extra[id - 1].reusable,
        }
    }

    /// Decode one token for every running sequence `ready` accepts, in one forward pass.
    /// Events go to `on_event` with the sequence's index; generations that ended are
    /// returned (their sequences are free again). A sequence whose cache is full shifts it
    /// first if its request asks for a context shift (as [`Context::generate`] does), else it
    /// ends with [`FinishReason::ContextFull`]. A failing forward pass (or shift) ends every
    /// running generation with its error.
    pub fn step_sequences(
        &mut self,
        ready: &dyn Fn(usize) -> bool,
        on_event: &mut dyn FnMut(usize, GenerateEvent),
    ) -> Result<Vec<(usize, Generation)>> {
        let mut shifted = Vec::new();
        let stepped = self.step_inner(ready, on_event, &mut shifted);
        // The moved positions were computed with the dropped tokens in view.
        for (id, n_keep) in shifted {
            let reusable = self.reusable_mut(id);
            *reusable = (*reusable).min(n_keep);
        }
        if stepped.is_err() {
            self.sequences.running.iter_mut().for_each(|r| *r = None);
        }
        stepped
    }

    /// [`Context::step_sequences`], noting each shifted sequence and what it kept in `shifted`.
    fn step_inner(
        &mut self,
        ready: &dyn Fn(usize) -> bool,
        on_event: &mut dyn FnMut(usize, GenerateEvent),
        shifted: &mut Vec<(usize, usize)>,
    ) -> Result<Vec<(usize, Generation)>> {
        let bos = self.model.tokenizer().bos();
        let (mut seqs, running, runner, logits) = self.parts();
        let mut finished = Vec::new();
        let mut feed = Vec::new();
        for (id, slot) in running.iter_mut().enumerate() {
            let Some(run) = slot.as_mut() else { continue };
            if run.ended.is_none() && !ready(id) {
                continue;
            }
            let cancelled = run
                .cancel
                .as_ref()
                .is_some_and(|c| c.load(Ordering::Relaxed));
            let next = match run.ended {
                Some(reason) => Next::Done(reason),
                None => {
                    let seq = &mut seqs[id];
                    let next = run
                        .decoding
                        .step(&run.logits, seq.cached, cancelled, &mut |e| on_event(id, e));
                    match next {
                        Next::Token(t) if seq.cache.len() >= seq.cache.capacity() => {
                            let kept = match &run.shift {
                                Some(shift) => shift_sequence(
                                    runner.model,
                                    bos,
                                    seq.cache,
                                    seq.cached,
                                    shift,
                                    run.prompt_tokens,
                                )?,
                                None => None,
                            };
                            match kept {
                                Some(n_keep) => {
                                    shifted.push((id, n_keep));
                                    Next::Token(t)
                                }
                                None => Next::Done(FinishReason::ContextFull),
                            }
                        }
                        next => next,
                    }
                }
            };
            match next {
                Next::Token(t) => feed.push((id, [t])),
                Next::Done(reason) => {
                    let run = slot.take().expect("running");
                    let g = run
                        .decoding
                        .finish(reason, run.prompt_tokens, run.timings, &mut |e| {
                            on_event(id, e)
                        });
                    finished.push((id, g));
                }
            }
        }
        if feed.is_empty() {
            return Ok(finished);
        }
        // `feed` is in sequence order, so one pass over the sequences picks the fed ones.
        let mut batch = Vec::with_capacity(feed.len());
        let mut histories = Vec::with_capacity(feed.len());
        let mut fed = feed.iter().peekable();
        for (id, seq) in seqs.into_iter().enumerate() {
            if let Some((_, token)) = fed.next_if(|(f, _)| *f == id) {
                histories.push(seq.cached);
                batch.push(SeqTokens {
                    tokens: token,
                    cache: seq.cache,
                });
            }
        }
        runner
            .model
            .forward_batch(&mut batch, runner.threads, Output::LastLogits, logits)?;
        let n_vocab = logits.len() / feed.len();
        for (((id, token), cached), row) in
            feed.iter().zip(histories).zip(logits.chunks_exact(n_vocab))
        {
            cached.push(token[0]);
            let run = running[*id].as_mut().expect("running");
            run.logits.clear();
            run.logits.extend_from_slice(row);
        }
        Ok(finished)
    }

    /// Generate every request, up to `max_sequences` at a time (the others wait for a free
    /// sequence), and return the generations in request order. Each generation equals what
    /// [`Context::generate`] gives its request alone (with greedy sampling, token for token).
    /// `cancel` ends all of them with [`FinishReason::Cancelled`]. A request that cannot start
    /// (a bad option, a prompt too long) fails the call before any generation runs.
    pub fn generate_batch(
        &mut self,
        requests: &[GenerateRequest],
        cancel: Option<&AtomicBool>,
    ) -> Result<Vec<Generation>> {
        self.sequences.check_idle()?;
        for request in requests {
            request.validate()?;
            if request.parses_tools() {
                return Err(Error::InvalidOption(
                    "requests with tools cannot run in a batch".into(),
                ));
            }
            check_prompt(&self.request_tokens(request)?, self.n_ctx())?;
        }
        let flags: Vec<Arc<AtomicBool>> = requests.iter().map(|_| Arc::default()).collect();
        let mut owner = vec![0; self.max_sequences()];
        let mut results: Vec<Option<Generation>> = requests.iter().map(|_| None).collect();
        let mut next = 0;
        let outcome = loop {
            if cancel.is_some_and(|c| c.load(Ordering::Relaxed)) {
                flags.iter().for_each(|f| f.store(true, Ordering::Relaxed));
            }
            if let Err(e) = self.start_waiting(requests, &flags, &mut next, &mut owner) {
                break Err(e);
            }
            match self.step_sequences(&|_| true, &mut |_, _| {}) {
                Ok(done) => {
                    for (id, g) in done {
                        results[owner[id]] = Some(g);
                    }
                }
                Err(e) => break Err(e),
            }
            if next == requests.len() && self.free_sequences() == self.max_sequences() {
                break Ok(());
            }
        };
        self.sequences.running.iter_mut().for_each(|r| *r = None);
        outcome?;
        Ok(results.into_iter().flatten().collect())
    }

    /// Start requests from `*next` on while sequences are free, noting which request each
    /// sequence runs in `owner`.
    fn start_waiting(
        &mut self,
        requests: &[GenerateRequest],
        flags: &[Arc<AtomicBool>],
        next: &mut usize,
        owner: &mut [usize],
    ) -> Result<()> {
        while *next < requests.len() && self.free_sequences() > 0 {
            let id = self.start_sequence(&requests[*next], Some(flags[*next].clone()))?;
            owner[id] = *next;
            *next += 1;
        }
        Ok(())
    }
}
