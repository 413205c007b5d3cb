//! Generations on one context. Every `generate`, `stream` and `generate_batch` request goes to
//! the context's `Scheduler`: requests wait in order for a free sequence (a context has
//! `max_sequences` of them, one by default), and one loop on a worker thread advances all
//! running ones together, one forward pass per step (streams: see
//! `TokenStream::start`). Work that needs the whole context (clear, warm-up, embeddings,
//! session files, benchmarks) takes its turn in the arrival order (`Shared::with_engine`), so
//! requests that arrive after it wait until it has run and a busy loop cannot starve it.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

use local_llm_engine::session::{GenerateEvent, GenerateRequest, Generation, Job, JobSink};
use tokio::sync::oneshot;

use crate::error::{LlmError, Stage};
use crate::records::{GenerateParams, GenerationResult};
use crate::shared::Shared;

/// The engine request `params` make (a typed error for invalid params).
pub(crate) fn request(params: &GenerateParams, stage: Stage) -> Result<GenerateRequest, LlmError> {
    params
        .to_request()
        .map_err(|e| LlmError::from_engine(e, stage))
}

/// Queue `request` on `shared`'s scheduler, starting its loop on a worker thread if none runs.
pub(crate) fn submit(
    shared: &Arc<Shared>,
    request: GenerateRequest,
    cancel: &Arc<AtomicBool>,
    sink: Box<dyn JobSink>,
    stage: Stage,
) -> Result<(), LlmError> {
    if shared.is_disposed() {
        return Err(LlmError::disposed("context"));
    }
    if crate::runtime().is_none() {
        return Err(LlmError::worker_failed(stage));
    }
    shared.track(cancel);
    if shared
        .scheduler
        .submit(Job::new(request, cancel.clone(), sink))
    {
        shared.start_loop();
    }
    Ok(())
}

/// Sends a whole generation's end to the awaiting `generate`.
struct Reply(oneshot::Sender<local_llm_engine::Result<Generation>>);

impl JobSink for Reply {
    fn event(&mut self, _: GenerateEvent) {}

    fn done(self: Box<Self>, result: local_llm_engine::Result<Generation>) {
        let _ = self.0.send(result);
    }
}

/// Queue `request` and return where its end arrives.
fn reply(
    shared: &Arc<Shared>,
    request: GenerateRequest,
    cancel: &Arc<AtomicBool>,
) -> Result<oneshot::Receiver<local_llm_engine::Result<Generation>>, LlmError> {
    let (tx, rx) = oneshot::channel();
    submit(
        shared,
        request,
        cancel,
        Box::new(Reply(tx)),
        Stage::Generate,
    )?;
    Ok(rx)
}

/// The result of a generation whose end arrives on `rx`.
async fn settle(
    shared: &Shared,
    rx: oneshot::Receiver<local_llm_engine::Result<Generation>>,
) -> Result<GenerationResult, LlmError> {
    match rx.await {
        Ok(outcome) => shared.settle(outcome, Stage::Generate),
        Err(_) => Err(LlmError::worker_failed(Stage::Generate)),
    }
}

/// `LlmContext::generate`: `params` on the scheduler.
pub(crate) async fn generate(
    shared: &Arc<Shared>,
    params: &GenerateParams,
    cancel: &Arc<AtomicBool>,
) -> Result<GenerationResult, LlmError> {
    let rx = reply(shared, request(params, Stage::Generate)?, cancel)?;
    settle(shared, rx).await
}

/// `LlmContext::generate_batch`: every request on the scheduler (all checked before any is
/// queued), the results in request order. The first request that fails cancels the others
/// and fails the call with its error.
pub(crate) async fn generate_batch(
    shared: &Arc<Shared>,
    params: &[GenerateParams],
    cancel: &Arc<AtomicBool>,
) -> Result<Vec<GenerationResult>, LlmError> {
    let requests = params
        .iter()
        .map(|p| request(p, Stage::Generate))
        .collect::<Result<Vec<_>, _>>()?;
    let mut replies = Vec::with_capacity(requests.len());
    for request in requests {
        match reply(shared, request, cancel) {
            Ok(rx) => replies.push(rx),
            Err(e) => {
                cancel.store(true, Ordering::Relaxed);
                shared.scheduler.wake();
                return Err(e);
            }
        }
    }
    let mut results = Vec::with_capacity(replies.len());
    for rx in replies {
        match settle(shared, rx).await {
            Ok(result) => results.push(result),
            Err(e) => {
                cancel.store(true, Ordering::Relaxed);
                shared.scheduler.wake();
                return Err(e);
            }
        }
    }
    Ok(results)
}
