//! Independent requests sharing one context's sequences. A [`Scheduler`] queues requests
//! (first in, first out) and one loop ([`Scheduler::run`]) admits them onto free sequences
//! ([`Context::start_sequence`]) and advances every running one by a token per batched forward
//! pass ([`Context::step_sequences`]), handing each request's text, log-probabilities and end
//! to its own [`JobSink`]. A sink that is not ready (a stream whose reader has not asked for
//! more) keeps its sequence without holding up the others.
//!
//! Every generation feature works per sequence (tools, grammars, stop strings,
//! log-probabilities, context shifts, speculative decoding), so every request shares the
//! step. Work that needs the whole context while no loop runs (clearing it, session files,
//! embeddings, benchmarks) takes a turn in the arrival order ([`Scheduler::enter_exclusive`])
//! so that a stream of new requests cannot starve it: from then on the loop admits only
//! requests that arrived before it, and stops when they are done; requests that arrived later
//! wait until the exclusive work has run ([`Scheduler::leave_exclusive`]).

use std::collections::VecDeque;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Condvar, Mutex, MutexGuard};
use std::time::Duration;

use super::request::{GenerateEvent, GenerateRequest, Generation};
use super::Context;
use crate::{Error, Result};

/// How long the loop sleeps, when no running request is ready, before it looks at the
/// cancellation flags again (a wake-up ends the sleep sooner).
const IDLE_POLL: Duration = Duration::from_millis(50);

/// Where a scheduled request's output goes. Its methods are called on the loop's thread.
pub trait JobSink: Send {
    /// Whether the request wants its next token now. A request that is not ready keeps its
    /// sequence and is skipped by the step; call [`Scheduler::wake`] when it becomes ready.
    fn ready(&mut self) -> bool {
        true
    }

    /// Prompt progress, a piece of text or a log-probability, as
    /// [`Context::generate_events`] reports them.
    fn event(&mut self, event: GenerateEvent);

    /// The end: the generation, or why it could not run (its request was invalid, the step
    /// failed, or [`Error::Cancelled`] when it was cancelled before it got a sequence or the
    /// loop was abandoned). Called exactly once.
    fn done(self: Box<Self>, result: Result<Generation>);
}

/// A request for the [`Scheduler`].
pub struct Job {
    /// Its place in the arrival order (set by [`Scheduler::submit`]).
    arrival: u64,
    request: GenerateRequest,
    cancel: Arc<AtomicBool>,
    sink: Box<dyn JobSink>,
}

impl Job {
    /// `request`, cancelled when `cancel` becomes true (it then ends with finish reason
    /// `Cancelled`, or with [`Error::Cancelled`] if it was still waiting), reporting to `sink`.
    pub fn new(request: GenerateRequest, cancel: Arc<AtomicBool>, sink: Box<dyn JobSink>) -> Self {
        Job {
            arrival: 0,
            request,
            cancel,
            sink,
        }
    }

    fn cancelled(&self) -> bool {
        self.cancel.load(Ordering::Relaxed)
    }
}

struct State {
    waiting: VecDeque<Job>,
    /// Whether a loop runs (or was asked to run) for these jobs.
    driving: bool,
    /// Counts wake-ups, so that the loop never sleeps through one.
    wakes: u64,
    /// The most requests one step has served.
    peak: usize,
    /// Arrival numbers handed out so far (jobs and exclusive turns share them).
    arrivals: u64,
    /// The arrival numbers of exclusive work waiting for (or holding) the context.
    exclusive: Vec<u64>,
}

impl State {
    /// The arrival number of the earliest exclusive work waiting: jobs that arrived after it
    /// are not admitted.
    fn barrier(&self) -> u64 {
        self.exclusive.iter().min().copied().unwrap_or(u64::MAX)
    }

    /// Whether a loop must be started: none runs and the first waiting job may start. Marks
    /// the loop as running if so.
    fn claim_loop(&mut self) -> bool {
        let barrier = self.barrier();
        let start = !self.driving && self.waiting.front().is_some_and(|j| j.arrival < barrier);
        self.driving |= start;
        start
    }
}

/// A place in the arrival order taken by exclusive work (see [`Scheduler::enter_exclusive`]).
#[derive(Debug)]
#[must_use = "leave the turn with Scheduler::leave_exclusive"]
pub struct ExclusiveTurn(u64);

/// A first-in-first-out queue of requests and the loop that runs them on a context's
/// sequences (see the module documentation).
pub struct Scheduler {
    state: Mutex<State>,
    woken: Condvar,
}

impl Default for Scheduler {
    fn default() -> Self {
        Scheduler::new()
    }
}

fn lock(m: &Mutex<State>) -> MutexGuard<'_, State> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

/// Ends the waiting jobs if the loop unwinds, so that no caller waits forever.
struct Unwinding<'a>(&'a Scheduler);

impl Drop for Unwinding<'_> {
    fn drop(&mut self) {
        if std::thread::panicking() {
            self.0.abandon();
        }
    }
}

impl Scheduler {
    /// An empty queue with no loop running.
    pub fn new() -> Self {
        Scheduler {
            state: Mutex::new(State {
                waiting: VecDeque::new(),
                driving: false,
                wakes: 0,
                peak: 0,
                arrivals: 0,
                exclusive: Vec::new(),
            }),
            woken: Condvar::new(),
        }
    }

    /// Queue `job` behind the waiting ones. Returns true when no loop runs (and no exclusive
    /// work waits): the caller must then call [`Scheduler::run`] with the context (or
    /// [`Scheduler::abandon`] if it has none); otherwise the running loop takes the job, or
    /// the end of the exclusive turn starts one.
    pub fn submit(&self, mut job: Job) -> bool {
        let mut st = lock(&self.state);
        job.arrival = st.arrivals;
        st.arrivals += 1;
        st.waiting.push_back(job);
        st.wakes += 1;
        self.woken.notify_all();
        // Behind exclusive work the job waits for the end of its turn, which starts the loop.
        st.claim_loop()
    }

    /// Take a turn for exclusive work on the context (work that runs alone, outside the loop)
    /// arriving now: the loop admits no request that arrives after this and ends once the
    /// requests before it are done, so the exclusive work gets the context. Call
    /// [`Scheduler::leave_exclusive`] when the work is done (also when it failed).
    pub fn enter_exclusive(&self) -> ExclusiveTurn {
        let mut st = lock(&self.state);
        let turn = st.arrivals;
        st.arrivals += 1;
        st.exclusive.push(turn);
        st.wakes += 1;
        self.woken.notify_all();
        ExclusiveTurn(turn)
    }

    /// End an exclusive turn. Returns true when requests may start (none waits behind another
    /// exclusive turn) and no loop runs: the caller must then call [`Scheduler::run`] (or
    /// [`Scheduler::abandon`]), as after [`Scheduler::submit`].
    pub fn leave_exclusive(&self, turn: ExclusiveTurn) -> bool {
        let mut st = lock(&self.state);
        st.exclusive.retain(|&t| t != turn.0);
        st.claim_loop()
    }

    /// Wake the loop: a sink became ready or a cancellation flag was set.
    pub fn wake(&self) {
        lock(&self.state).wakes += 1;
        self.woken.notify_all();
    }

    /// The most requests one batched step has served so far.
    pub fn peak_batch(&self) -> usize {
        lock(&self.state).peak
    }

    /// End every waiting job with [`Error::Cancelled`] and mark the loop stopped (for the
    /// caller told to run the loop that cannot, e.g. because its context is gone).
    pub fn abandon(&self) {
        let jobs: Vec<Job> = {
            let mut st = lock(&self.state);
            st.driving = false;
            st.waiting.drain(..).collect()
        };
        for job in jobs {
            job.sink.done(Err(Error::Cancelled));
        }
    }

    /// Run the queued jobs on `ctx` until none runs or waits: admit waiting jobs in order
    /// while sequences are free, then decode one token for every ready one in one forward
    /// pass, and again. Jobs that arrived after waiting exclusive work are not admitted (unless
    /// every running job is not ready, which the exclusive work would wait for anyway): the
    /// loop ends when the others are done (see [`Scheduler::enter_exclusive`]). A job whose request cannot start ends with its error; a failing
    /// forward pass ends every running job with it.
    pub fn run(&self, ctx: &mut Context) {
        let _guard = Unwinding(self);
        let mut slots: Vec<Option<Job>> = (0..ctx.max_sequences()).map(|_| None).collect();
        // Whether the last round found every running job not ready (paused streams).
        let mut stalled = false;
        loop {
            let (admit, dropped, seen, idle) = {
                let mut st = lock(&self.state);
                let (dropped, kept): (Vec<Job>, Vec<Job>) =
                    st.waiting.drain(..).partition(Job::cancelled);
                st.waiting.extend(kept);
                // While only paused jobs run, the exclusive work cannot have the context before
                // they end, and their readers may be waiting for a later request (a stream
                // read inside another's loop): the later requests start, so nothing deadlocks.
                let barrier = if stalled { u64::MAX } else { st.barrier() };
                let admissible = st.waiting.iter().take_while(|j| j.arrival < barrier);
                let n = ctx.free_sequences().min(admissible.count());
                let admit: Vec<Job> = st.waiting.drain(..n).collect();
                // Nothing left to run (or only jobs behind exclusive work): the loop stops
                // (under the lock, so a later submit or the exclusive turn's end starts a
                // new one).
                let idle = admit.is_empty() && slots.iter().all(Option::is_none);
                if idle {
                    st.driving = false;
                }
                (admit, dropped, st.wakes, idle)
            };
            for job in dropped {
                job.sink.done(Err(Error::Cancelled));
            }
            if idle {
                return;
            }
            for mut job in admit {
                let cancel = Some(job.cancel.clone());
                let started = ctx.start_sequence(&job.request, cancel, &mut |e| job.sink.event(e));
                match started {
                    Ok(id) => slots[id] = Some(job),
                    Err(e) => job.sink.done(Err(e)),
                }
            }
            let ready: Vec<bool> = slots
                .iter_mut()
                .map(|s| s.as_mut().is_some_and(|j| j.cancelled() || j.sink.ready()))
                .collect();
            let n_ready = ready.iter().filter(|r| **r).count();
            stalled = n_ready == 0;
            if n_ready == 0 {
                let st = lock(&self.state);
                if st.wakes == seen && slots.iter().any(Option::is_some) {
                    drop(self.woken.wait_timeout(st, IDLE_POLL));
                }
                continue;
            }
            {
                let mut st = lock(&self.state);
                st.peak = st.peak.max(n_ready);
            }
            let stepped = ctx.step_sequences(&|id: usize| ready[id], &mut |id, event| {
                if let Some(job) = slots[id].as_mut() {
                    job.sink.event(event);
                }
            });
            match stepped {
                Ok(done) => {
                    for (id, generation) in done {
                        if let Some(job) = slots[id].take() {
                            job.sink.done(generation);
                        }
                    }
                }
                Err(e) => {
                    // The context dropped every running generation: each gets the error.
                    let message = e.to_string();
                    let mut first = Some(e);
                    for job in slots.iter_mut().filter_map(Option::take) {
                        let e = first
                            .take()
                            .unwrap_or_else(|| Error::Backend(message.clone()));
                        job.sink.done(Err(e));
                    }
                }
            }
        }
    }
}
