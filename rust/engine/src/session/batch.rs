//! Several generations on one context at once. A context created with `max_sequences` N holds
//! N sequences, each with its own KV cache of `n_ctx` positions (memory N × one sequence's
//! cache) and its own cached tokens. [`Context::generate_batch`] runs a list of requests on
//! them through the one decoding loop (see `step.rs`), so each request's output equals what
//! [`Context::generate`] gives it alone.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use super::request::{GenerateRequest, Generation};
use super::{check_prompt, Context, ContextOptions};
use crate::{Error, Result};

/// The most sequences a context may hold.
pub const MAX_SEQUENCES: u32 = 64;

/// How many sequences `options` ask for ([`Error::InvalidOption`] outside
/// 1..=[`MAX_SEQUENCES`]).
pub(super) fn sequence_count(options: &ContextOptions) -> Result<usize> {
    match options.max_sequences {
        1..=MAX_SEQUENCES => Ok(options.max_sequences as usize),
        n => Err(Error::InvalidOption(format!(
            "max_sequences must be between 1 and {MAX_SEQUENCES} (got {n})"
        ))),
    }
}

impl Context {
    /// Generate every request, up to `max_sequences` at a time (the others wait for a free
    /// sequence), and return each one's result in request order: its generation, or its own
    /// error (e.g. a required tool call the model did not make). Each generation equals what
    /// [`Context::generate`] gives its request alone (with greedy sampling, token for token).
    /// `cancel` ends all of them with
    /// [`FinishReason::Cancelled`](super::FinishReason::Cancelled). A request that cannot
    /// start (a bad option, a prompt too long) fails the call before any generation runs, as
    /// does a failing forward pass. Not while other generations run
    /// ([`Error::InvalidOption`]).
    pub fn generate_batch(
        &mut self,
        requests: &[GenerateRequest],
        cancel: Option<&AtomicBool>,
    ) -> Result<Vec<Result<Generation>>> {
        self.check_idle()?;
        for request in requests {
            request.validate()?;
            check_prompt(&self.request_tokens(request)?, self.n_ctx())?;
        }
        let flags: Vec<Arc<AtomicBool>> = requests.iter().map(|_| Arc::default()).collect();
        let mut owner = vec![0; self.max_sequences()];
        let mut results: Vec<Option<Result<Generation>>> = requests.iter().map(|_| None).collect();
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
        self.seqs.iter_mut().for_each(|s| s.running = None);
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
            let cancel = Some(flags[*next].clone());
            let id = self.start_sequence(&requests[*next], cancel, &mut |_| {})?;
            owner[id] = *next;
            *next += 1;
        }
        Ok(())
    }
}
