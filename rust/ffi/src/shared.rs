//! The engine state one context object shares with its workers (async calls and streams).

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};

use local_llm_engine::session::{Context, ExclusiveTurn, FinishReason, Generation, Scheduler};

use crate::error::{LlmError, Stage};
use crate::records::{GenerationResult, Perf};

/// State shared by a context object and its workers.
pub(crate) struct Shared {
    /// The engine context; locked only by workers, so whole-context work runs one at a time
    /// (the scheduler's loop holds it while generations run, see `scheduled.rs`).
    engine: Mutex<Option<Context>>,
    /// The generations sharing the context's sequences.
    pub(crate) scheduler: Scheduler,
    disposed: AtomicBool,
    perf: Mutex<Option<Perf>>,
    active: Mutex<Vec<Weak<AtomicBool>>>,
    /// This state itself, for the scheduler's loop an exclusive turn's end starts.
    me: Weak<Shared>,
}

/// Lock `m`, taking over the data of a poisoned lock.
pub(crate) fn lock<T>(m: &Mutex<T>) -> MutexGuard<'_, T> {
    m.lock().unwrap_or_else(|p| p.into_inner())
}

impl Shared {
    /// Shared state around a new engine context.
    pub(crate) fn new(ctx: Context) -> Arc<Self> {
        Arc::new_cyclic(|me| Shared {
            scheduler: Scheduler::new(),
            engine: Mutex::new(Some(ctx)),
            disposed: AtomicBool::new(false),
            perf: Mutex::new(None),
            active: Mutex::new(Vec::new()),
            me: me.clone(),
        })
    }

    /// Whether the context was disposed.
    pub(crate) fn is_disposed(&self) -> bool {
        self.disposed.load(Ordering::Relaxed)
    }

    /// Numbers of the last generation, if any.
    pub(crate) fn last_perf(&self) -> Option<Perf> {
        *lock(&self.perf)
    }

    /// Mark the context disposed, cancel running generations and drop the engine context
    /// (at once if no worker holds it, else when that worker finishes).
    pub(crate) fn dispose(&self) {
        self.disposed.store(true, Ordering::Relaxed);
        for flag in lock(&self.active).drain(..) {
            if let Some(flag) = flag.upgrade() {
                flag.store(true, Ordering::Relaxed);
            }
        }
        self.scheduler.wake();
        if let Ok(mut slot) = self.engine.try_lock() {
            slot.take();
        }
    }

    /// Register a cancellation flag so that `dispose` can stop the generation.
    pub(crate) fn track(&self, flag: &Arc<AtomicBool>) {
        let mut active = lock(&self.active);
        active.retain(|w| w.strong_count() > 0);
        active.push(Arc::downgrade(flag));
        drop(active);
        // A dispose that drained the list before this push is seen here.
        if self.is_disposed() {
            flag.store(true, Ordering::Relaxed);
        }
    }

    /// Run `work`, which needs the whole engine context (clear, warm-up, embeddings, session
    /// files, benchmarks), once the generations before it are done: it takes its turn in the
    /// scheduler's arrival order, so generations that arrive meanwhile wait until it is done
    /// (see `scheduled.rs`).
    pub(crate) fn with_engine<T>(
        &self,
        work: impl FnOnce(&mut Context) -> Result<T, LlmError>,
    ) -> Result<T, LlmError> {
        let _turn = Turn(self, Some(self.scheduler.enter_exclusive()));
        self.lock_engine(work)
    }

    /// Run the scheduler's loop on a worker thread (after `Scheduler::submit` or
    /// `Scheduler::leave_exclusive` asked for it); without a runtime or a context, the waiting
    /// requests end as cancelled.
    pub(crate) fn start_loop(self: &Arc<Self>) {
        let Some(rt) = crate::runtime() else {
            self.scheduler.abandon();
            return;
        };
        let shared = self.clone();
        rt.spawn_blocking(move || {
            let ran = shared.lock_engine(|ctx| {
                shared.scheduler.run(ctx);
                Ok(())
            });
            if ran.is_err() {
                shared.scheduler.abandon();
            }
        });
    }

    /// [`Shared::with_engine`] without a turn (the scheduler's loop itself).
    fn lock_engine<T>(
        &self,
        work: impl FnOnce(&mut Context) -> Result<T, LlmError>,
    ) -> Result<T, LlmError> {
        if self.is_disposed() {
            return Err(LlmError::disposed("context"));
        }
        let mut slot = lock(&self.engine);
        let result = match slot.as_mut() {
            Some(ctx) => work(ctx),
            None => Err(LlmError::disposed("context")),
        };
        if self.is_disposed() {
            slot.take();
        }
        result
    }

    /// The result of a generation that ended with `outcome`: it becomes the last one's
    /// numbers; one cut short by `dispose` (cancelled, also before it started) is the
    /// disposed-context error, since it did not end as asked.
    pub(crate) fn settle(
        &self,
        outcome: local_llm_engine::Result<Generation>,
        stage: Stage,
    ) -> Result<GenerationResult, LlmError> {
        let result = match outcome {
            Ok(g) => GenerationResult::from(g),
            Err(local_llm_engine::Error::Cancelled) if self.is_disposed() => {
                return Err(LlmError::disposed("context"))
            }
            Err(e) => return Err(LlmError::from_engine(e, stage)),
        };
        *lock(&self.perf) = Some(result.perf);
        if result.finish_reason == FinishReason::Cancelled && self.is_disposed() {
            return Err(LlmError::disposed("context"));
        }
        Ok(result)
    }
}

/// Ends an exclusive turn when dropped (also when the work panicked), starting the scheduler's
/// loop for the requests that waited behind it.
struct Turn<'a>(&'a Shared, Option<ExclusiveTurn>);

impl Drop for Turn<'_> {
    fn drop(&mut self) {
        let Some(turn) = self.1.take() else { return };
        let shared = self.0;
        if shared.scheduler.leave_exclusive(turn) {
            match shared.me.upgrade() {
                Some(me) => me.start_loop(),
                None => shared.scheduler.abandon(),
            }
        }
    }
}
