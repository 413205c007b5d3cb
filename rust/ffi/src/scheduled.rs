//! Concurrent generations on one context. On a context with `max_sequences` above 1, `generate`
//! and `stream` requests that can share the batched step (see
//! `GenerateRequest::shares_steps`: no tool calls) go to the context's
//! `Scheduler`: they wait in order for a free sequence, and one loop on a worker thread
//! advances all running ones together, one forward pass per token (streams: see
//! `TokenStream::start_scheduled`). Other requests, and every request on a context with one
//! sequence, run exclusively as before (after the loop has finished the scheduled ones); an
//! exclusive call takes its turn in the arrival order (`Shared::with_engine`), so scheduled
//! requests that arrive after it wait until it has run and a busy loop cannot starve it.

use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use local_llm_engine::session::{GenerateEvent, GenerateRequest, Generation, Job, JobSink};
use tokio::sync::oneshot;

use crate::error::{LlmError, Stage};
use crate::records::{GenerateParams, GenerationResult};
use crate::shared::Shared;

/// The request `params` make if it goes to the scheduler: `None` when it runs exclusively
/// (one sequence, tools, or invalid params, whose error the exclusive path
/// reports as before).
pub(crate) fn scheduled_request(
    shared: &Shared,
    params: &GenerateParams,
) -> Option<GenerateRequest> {
    if shared.max_sequences < 2 {
        return None;
    }
    params
        .to_request()
        .ok()
        .filter(GenerateRequest::shares_steps)
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

/// `LlmContext::generate` on the scheduler, or `None` if `params` run exclusively.
pub(crate) async fn generate(
    shared: &Arc<Shared>,
    params: &GenerateParams,
    cancel: &Arc<AtomicBool>,
) -> Option<Result<GenerationResult, LlmError>> {
    let request = scheduled_request(shared, params)?;
    let (tx, rx) = oneshot::channel();
    if let Err(e) = submit(
        shared,
        request,
        cancel,
        Box::new(Reply(tx)),
        Stage::Generate,
    ) {
        return Some(Err(e));
    }
    Some(match rx.await {
        Ok(outcome) => shared.settle(outcome, Stage::Generate),
        Err(_) => Err(LlmError::worker_failed(Stage::Generate)),
    })
}
