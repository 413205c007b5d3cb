//! Pull-style streaming: the scheduler's loop generates while JavaScript awaits
//! [`TokenStream::next`]. It steps the stream's sequence only while its reader asks for more
//! (`StreamSink`), so when JavaScript stops reading (a `break`, an abort) and cancels, no
//! token is decoded that nobody asked for. Rust never calls into JavaScript.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc as std_mpsc, Arc, Mutex};

use local_llm_engine::sampling::TokenLogprob;
use local_llm_engine::session::{GenerateEvent, Generation, JobSink};
use tokio::sync::mpsc;

use crate::error::{LlmError, Stage};
use crate::records::{GenerateParams, GenerationResult};
use crate::scheduled::{request, submit};
use crate::shared::Shared;

/// What a generation hands its stream.
enum Event {
    Progress(PromptProgress),
    Text(String),
    Reasoning(String),
    Logprob(TokenLogprob),
    Done(Result<GenerationResult, LlmError>),
}

/// How far the prompt's evaluation is: `evaluated` of the `total` prompt tokens that were not
/// reused from the cache (reported after each batch).
#[derive(Debug, Clone, Copy, PartialEq, Eq, uniffi::Record)]
pub struct PromptProgress {
    /// Prompt tokens evaluated so far.
    pub evaluated: u32,
    /// Prompt tokens to evaluate.
    pub total: u32,
}

/// The next part of a stream.
#[derive(Debug, Clone, uniffi::Record)]
pub struct StreamChunk {
    /// New text pieces, in order (may be empty on the last chunk).
    pub pieces: Vec<String>,
    /// New pieces of the reasoning block, when the request splits it from the answer (they
    /// come before any of the answer's pieces).
    pub reasoning_pieces: Vec<String>,
    /// Log-probabilities of the tokens generated since the previous chunk (when asked for;
    /// a token's entry may come a chunk before its text, which can be held back).
    pub logprobs: Vec<TokenLogprob>,
    /// Whether the generation has ended; `result` is then set.
    pub done: bool,
    /// The whole generation (text, tokens, finish reason, timings), on the last chunk.
    pub result: Option<GenerationResult>,
    /// The latest prompt progress since the previous chunk (a chunk may carry only this).
    pub prompt_progress: Option<PromptProgress>,
}

/// A streamed generation started by `LlmContext::stream`.
#[derive(uniffi::Object)]
pub struct TokenStream {
    events: tokio::sync::Mutex<mpsc::UnboundedReceiver<Event>>,
    /// Lets the worker decode the next token; dropped on cancel so the worker runs free.
    demand: Mutex<Option<std_mpsc::Sender<()>>>,
    /// Whether the last chunk handed out text or prompt progress, so that the next `next` asks
    /// the worker for the next piece or batch.
    ask_next: AtomicBool,
    cancel: Arc<AtomicBool>,
    outcome: Mutex<Option<Result<GenerationResult, LlmError>>>,
    /// The stream's context, whose scheduler's loop is woken when the reader wants more or
    /// cancels.
    shared: Arc<Shared>,
}

impl TokenStream {
    /// `params` on the context's scheduler (see `scheduled.rs`).
    pub(crate) fn start(
        shared: Arc<Shared>,
        params: GenerateParams,
    ) -> Result<Arc<Self>, LlmError> {
        let request = request(&params, Stage::Stream)?;
        let (tx, rx) = mpsc::unbounded_channel();
        let (demand_tx, demand_rx) = std_mpsc::channel::<()>();
        let cancel = Arc::new(AtomicBool::new(false));
        let sink = StreamSink {
            shared: shared.clone(),
            events: tx,
            demand: demand_rx,
            wanted: true,
            progress: params.prompt_progress,
        };
        submit(&shared, request, &cancel, Box::new(sink), Stage::Stream)?;
        Ok(Self::new(rx, demand_tx, cancel, shared))
    }

    /// The stream reading `events`, asking for each piece after the first on `demand`;
    /// `cancel` stops the generation; the scheduler of `shared` is woken after either.
    fn new(
        events: mpsc::UnboundedReceiver<Event>,
        demand: std_mpsc::Sender<()>,
        cancel: Arc<AtomicBool>,
        shared: Arc<Shared>,
    ) -> Arc<Self> {
        Arc::new(TokenStream {
            events: tokio::sync::Mutex::new(events),
            demand: Mutex::new(Some(demand)),
            ask_next: AtomicBool::new(false),
            cancel,
            outcome: Mutex::new(None),
            shared,
        })
    }

    fn wake(&self) {
        self.shared.scheduler.wake();
    }

    fn lock_outcome(
        &self,
    ) -> std::sync::MutexGuard<'_, Option<Result<GenerationResult, LlmError>>> {
        self.outcome.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn finished_chunk(&self) -> Option<Result<StreamChunk, LlmError>> {
        self.lock_outcome().as_ref().map(|outcome| match outcome {
            Ok(result) => Ok(StreamChunk {
                pieces: Vec::new(),
                reasoning_pieces: Vec::new(),
                logprobs: Vec::new(),
                done: true,
                result: Some(result.clone()),
                prompt_progress: None,
            }),
            Err(e) => Err(e.clone()),
        })
    }
}

#[uniffi::export]
impl TokenStream {
    /// Wait for the next text pieces (or prompt progress). After the last chunk (`done`),
    /// returns it again.
    pub async fn next(&self) -> Result<StreamChunk, LlmError> {
        if let Some(chunk) = self.finished_chunk() {
            return chunk;
        }
        if self.ask_next.swap(false, Ordering::Relaxed) {
            if let Some(demand) = self
                .demand
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .as_ref()
            {
                let _ = demand.send(());
            }
            self.wake();
        }
        let mut events = self.events.lock().await;
        let mut pieces = Vec::new();
        let mut reasoning_pieces = Vec::new();
        let mut logprobs = Vec::new();
        let mut progress = None;
        let mut event = events.recv().await;
        loop {
            match event {
                Some(Event::Progress(p)) => progress = Some(p),
                Some(Event::Text(piece)) => pieces.push(piece),
                Some(Event::Reasoning(piece)) => reasoning_pieces.push(piece),
                Some(Event::Logprob(lp)) => {
                    logprobs.push(lp);
                    // Its text follows; wait for it rather than return a chunk without text.
                    event = events.recv().await;
                    continue;
                }
                Some(Event::Done(outcome)) => {
                    *self.lock_outcome() = Some(outcome);
                    break;
                }
                None => {
                    *self.lock_outcome() = Some(Err(LlmError::worker_failed(Stage::Stream)));
                    break;
                }
            }
            match events.try_recv() {
                Ok(e) => event = Some(e),
                Err(mpsc::error::TryRecvError::Empty) => {
                    let handed = !pieces.is_empty() || !reasoning_pieces.is_empty();
                    self.ask_next
                        .store(handed || progress.is_some(), Ordering::Relaxed);
                    return Ok(StreamChunk {
                        pieces,
                        reasoning_pieces,
                        logprobs,
                        done: false,
                        result: None,
                        prompt_progress: progress,
                    });
                }
                Err(mpsc::error::TryRecvError::Disconnected) => event = None,
            }
        }
        match self.finished_chunk() {
            Some(Ok(mut chunk)) => {
                chunk.pieces = pieces;
                chunk.reasoning_pieces = reasoning_pieces;
                chunk.logprobs = logprobs;
                chunk.prompt_progress = progress;
                Ok(chunk)
            }
            Some(Err(e)) => Err(e),
            None => Err(LlmError::worker_failed(Stage::Stream)),
        }
    }

    /// Stop decoding (between tokens). The stream then ends with finish reason `Cancelled`.
    pub fn cancel(&self) {
        self.cancel.store(true, Ordering::Relaxed);
        self.demand.lock().unwrap_or_else(|p| p.into_inner()).take();
        self.wake();
    }

    /// Cancel and wait for the generation to end; returns its result (text generated so far,
    /// tokens, finish reason, timings).
    pub async fn finish(&self) -> Result<GenerationResult, LlmError> {
        self.cancel();
        loop {
            let chunk = self.next().await?;
            if let Some(result) = chunk.result {
                return Ok(result);
            }
        }
    }
}

impl Drop for TokenStream {
    fn drop(&mut self) {
        self.cancel.store(true, Ordering::Relaxed);
        self.wake();
    }
}

/// Hands a stream's pieces to its reader, one piece per demand: the scheduler's
/// loop steps its sequence only while the reader has asked for more (or cancelled).
struct StreamSink {
    shared: Arc<Shared>,
    events: mpsc::UnboundedSender<Event>,
    demand: std_mpsc::Receiver<()>,
    /// Whether the reader asked for the next piece.
    wanted: bool,
    /// Hand over prompt progress, one batch per demand (`GenerateParams::prompt_progress`).
    progress: bool,
}

impl JobSink for StreamSink {
    fn ready(&mut self) -> bool {
        // A closed channel means the reader cancelled: let the step end the generation.
        if !self.wanted && !matches!(self.demand.try_recv(), Err(std_mpsc::TryRecvError::Empty)) {
            self.wanted = true;
        }
        self.wanted
    }

    fn event(&mut self, event: GenerateEvent) {
        match event {
            GenerateEvent::Logprob(lp) => {
                let _ = self.events.send(Event::Logprob(lp.clone()));
            }
            GenerateEvent::Text(piece) => {
                let _ = self.events.send(Event::Text(piece.to_string()));
                self.wanted = false;
            }
            GenerateEvent::Reasoning(piece) => {
                let _ = self.events.send(Event::Reasoning(piece.to_string()));
                self.wanted = false;
            }
            GenerateEvent::PromptProgress { evaluated, total } if self.progress => {
                let count = |n: usize| u32::try_from(n).unwrap_or(u32::MAX);
                let sent = self.events.send(Event::Progress(PromptProgress {
                    evaluated: count(evaluated),
                    total: count(total),
                }));
                // The next batch waits for the reader's next `next` (or its cancel, which
                // closes the channel; the prompt's evaluation then stops before that batch).
                if sent.is_ok() {
                    let _ = self.demand.recv();
                }
            }
            GenerateEvent::PromptProgress { .. } => {}
        }
    }

    fn done(self: Box<Self>, result: local_llm_engine::Result<Generation>) {
        let outcome = self.shared.settle(result, Stage::Stream);
        let _ = self.events.send(Event::Done(outcome));
    }
}
