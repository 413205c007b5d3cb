//! The scheduler: independent requests queued on one context's sequences run together (one
//! forward pass per token for all of them), each with the greedy output it has alone on a
//! fresh context; beyond `max_sequences` they wait and start in order; a cancelled request
//! (waiting or running) ends without disturbing the others; a request that cannot start
//! ends with its typed error; requests that arrive after exclusive work wait for its turn to
//! end; and every job ends exactly once. Real SmolLM2.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{mpsc, Arc};
use std::thread;

use local_llm_engine::session::{
    Context, FinishReason, GenerateEvent, GenerateRequest, Generation, Job, JobSink, LoadedModel,
    Prompt, Scheduler,
};
use local_llm_engine::{Error, Result};

/// What a job reports: (job number, its text pieces, its end).
type Report = (usize, String, Result<Generation>);

/// Collects a job's text and sends it with the end; with `cancel_after`, sets the flag after
/// that many pieces of text.
struct Collect {
    n: usize,
    text: String,
    out: mpsc::Sender<Report>,
    cancel_after: Option<(usize, Arc<AtomicBool>)>,
}

impl JobSink for Collect {
    fn event(&mut self, event: GenerateEvent) {
        if let GenerateEvent::Text(t) = event {
            self.text.push_str(t);
            if let Some((left, flag)) = &mut self.cancel_after {
                *left = left.saturating_sub(1);
                if *left == 0 {
                    flag.store(true, Ordering::Relaxed);
                }
            }
        }
    }

    fn done(self: Box<Self>, result: Result<Generation>) {
        let _ = self.out.send((self.n, self.text, result));
    }
}

/// Submit `requests` (with their cancel flags) to a new scheduler, run its loop on `ctx`,
/// and return the reports in the order the jobs ended, with the largest batch stepped.
/// `cancel` = (job, pieces): that job cancels itself after that many pieces of text.
fn run(
    ctx: &mut Context,
    requests: &[GenerateRequest],
    flags: &[Arc<AtomicBool>],
    cancel: Option<(usize, usize)>,
) -> (Vec<Report>, usize) {
    let scheduler = Scheduler::new();
    let (tx, rx) = mpsc::channel();
    for (n, (request, flag)) in requests.iter().zip(flags).enumerate() {
        let sink = Collect {
            n,
            text: String::new(),
            out: tx.clone(),
            cancel_after: cancel
                .filter(|(job, _)| *job == n)
                .map(|(_, pieces)| (pieces, flag.clone())),
        };
        // Only the first submission starts a loop.
        assert_eq!(
            scheduler.submit(Job::new(request.clone(), flag.clone(), Box::new(sink))),
            n == 0
        );
    }
    drop(tx);
    scheduler.run(ctx);
    let reports: Vec<Report> = rx.iter().collect();
    assert_eq!(reports.len(), requests.len(), "every job ends exactly once");
    (reports, scheduler.peak_batch())
}

fn flags(n: usize) -> Vec<Arc<AtomicBool>> {
    (0..n).map(|_| Arc::default()).collect()
}

fn solo(model: &Arc<LoadedModel>, request: &GenerateRequest) -> Generation {
    common::context(model, 512, 2, 1)
        .generate(request, &mut |_| {}, None)
        .expect("solo generation")
}

#[test]
fn concurrent_requests_equal_their_solo_outputs_and_share_steps() {
    let Some(model) = common::load_real_model("smollm2") else {
        return;
    };
    let requests = vec![
        common::greedy_chat("What is the capital of France?", 24),
        common::greedy_chat("Write a haiku about the sea.", 32),
        common::greedy_chat("List three colours.", 16),
        common::greedy_chat("Explain in one sentence why the sky is blue.", 28),
    ];
    let alone: Vec<Generation> = requests.iter().map(|r| solo(&model, r)).collect();
    let mut ctx = common::context(&model, 512, 2, 4);
    let (reports, peak) = run(&mut ctx, &requests, &flags(4), None);
    assert_eq!(peak, 4, "all four requests were stepped together");
    for (n, text, result) in reports {
        let g = result.expect("generation");
        assert_eq!(
            g.tokens, alone[n].tokens,
            "request {n}: tokens differ from solo"
        );
        assert_eq!(g.text, alone[n].text, "request {n}");
        assert_eq!(text, alone[n].text, "request {n}: streamed text");
        assert_eq!(g.finish_reason, alone[n].finish_reason, "request {n}");
    }
    assert_eq!(ctx.free_sequences(), 4, "every sequence is free again");
}

#[test]
fn beyond_max_sequences_requests_start_in_order() {
    let Some(model) = common::load_real_model("smollm2") else {
        return;
    };
    // Same length for all (no end of generation), so they end in pairs of admission.
    let requests: Vec<GenerateRequest> = (1..=6)
        .map(|i| {
            let mut r = common::greedy_chat(&format!("Count from {i} to {}.", i + 30), 8);
            r.stop_at_eog = false;
            r
        })
        .collect();
    let mut ctx = common::context(&model, 512, 2, 2);
    let (reports, peak) = run(&mut ctx, &requests, &flags(6), None);
    assert_eq!(peak, 2);
    let order: Vec<usize> = reports.iter().map(|(n, _, _)| *n).collect();
    for pair in order.chunks(2) {
        let mut pair = pair.to_vec();
        pair.sort_unstable();
        assert_eq!(pair[1], pair[0] + 1, "end order {order:?}");
        assert_eq!(pair[0] % 2, 0, "end order {order:?}");
    }
    assert!(order.windows(2).all(|w| w[0] / 2 <= w[1] / 2), "{order:?}");
    for (n, _, result) in reports {
        let g = result.expect("generation");
        assert_eq!(g.finish_reason, FinishReason::MaxTokens);
        assert_eq!(g.tokens, solo(&model, &requests[n]).tokens, "request {n}");
    }
}

#[test]
fn cancel_ends_one_request_and_bad_requests_fail_alone() {
    let Some(model) = common::load_real_model("smollm2") else {
        return;
    };
    let mut requests = vec![
        common::greedy_chat("What is the capital of France?", 24),
        common::greedy_chat("Write a haiku about the sea.", 64),
        common::greedy_chat("List three colours.", 16),
        // Waits (two sequences), cancelled before it gets one.
        common::greedy_chat("Explain why the sky is blue.", 16),
    ];
    // Cannot start: the prompt is empty.
    requests.push(GenerateRequest::new(Prompt::Tokens(Vec::new())));
    let flags = flags(requests.len());
    flags[3].store(true, Ordering::Relaxed);
    // Request 1 is cancelled after its third piece of text.
    let mut ctx = common::context(&model, 512, 2, 2);
    let (reports, _) = run(&mut ctx, &requests, &flags, Some((1, 3)));
    for (n, _, result) in reports {
        match n {
            0 | 2 => {
                let g = result.expect("generation");
                assert_eq!(g.tokens, solo(&model, &requests[n]).tokens, "request {n}");
            }
            1 => {
                let g = result.expect("cancelled generation");
                assert_eq!(g.finish_reason, FinishReason::Cancelled);
                let alone = solo(&model, &requests[1]);
                assert!(g.tokens.len() >= 3 && g.tokens.len() < alone.tokens.len());
                assert_eq!(
                    g.tokens[..],
                    alone.tokens[..g.tokens.len()],
                    "a prefix of solo"
                );
            }
            3 => assert!(matches!(result, Err(Error::Cancelled)), "{result:?}"),
            _ => assert!(matches!(result, Err(Error::InvalidOption(_))), "{result:?}"),
        }
    }
    assert_eq!(ctx.free_sequences(), 2);
}

#[test]
fn a_request_that_is_not_ready_does_not_hold_up_the_others() {
    let Some(model) = common::load_real_model("smollm2") else {
        return;
    };

    /// Never ready (a stream nobody reads); its cancel flag ends it.
    struct Paused(mpsc::Sender<Report>);
    impl JobSink for Paused {
        fn ready(&mut self) -> bool {
            false
        }
        fn event(&mut self, _: GenerateEvent) {}
        fn done(self: Box<Self>, result: Result<Generation>) {
            let _ = self.0.send((0, String::new(), result));
        }
    }

    let scheduler = Arc::new(Scheduler::new());
    let (tx, rx) = mpsc::channel();
    let stop = Arc::new(AtomicBool::new(false));
    let paused = Job::new(
        common::greedy_chat("Write a haiku about the sea.", 32),
        stop.clone(),
        Box::new(Paused(tx.clone())),
    );
    assert!(scheduler.submit(paused));
    let request = common::greedy_chat("List three colours.", 16);
    let sink = Collect {
        n: 1,
        text: String::new(),
        out: tx,
        cancel_after: None,
    };
    assert!(!scheduler.submit(Job::new(request.clone(), Arc::default(), Box::new(sink))));
    let expected = solo(&model, &request);
    let runner = {
        let scheduler = scheduler.clone();
        thread::spawn(move || {
            let mut ctx = common::context(&model, 512, 2, 2);
            scheduler.run(&mut ctx);
        })
    };
    let (n, _, result) = rx
        .recv_timeout(std::time::Duration::from_secs(60))
        .expect("the ready request ends while the other one waits");
    assert_eq!(n, 1);
    assert_eq!(result.expect("generation").tokens, expected.tokens);
    stop.store(true, Ordering::Relaxed);
    scheduler.wake();
    let (n, _, result) = rx
        .recv_timeout(std::time::Duration::from_secs(60))
        .expect("the cancelled request ends");
    assert_eq!(n, 0);
    assert_eq!(
        result.expect("generation").finish_reason,
        FinishReason::Cancelled
    );
    runner.join().expect("the loop ends when no job is left");
}

/// The jobs that ended since the last call, in order (each must have succeeded).
fn ended(rx: &mpsc::Receiver<Report>) -> Vec<usize> {
    rx.try_iter()
        .map(|(n, _, r)| r.map(|_| n).expect("generation"))
        .collect()
}

#[test]
fn requests_after_an_exclusive_turn_wait_for_its_end() {
    let Some(model) = common::load_real_model("smollm2") else {
        return;
    };
    let mut ctx = common::context(&model, 256, 2, 2);
    let scheduler = Scheduler::new();
    let (tx, rx) = mpsc::channel();
    let job = |n: usize, tx: &mpsc::Sender<Report>| {
        let sink = Collect {
            n,
            text: String::new(),
            out: tx.clone(),
            cancel_after: None,
        };
        let request = common::greedy_chat("Name a colour.", 4);
        Job::new(request, Arc::default(), Box::new(sink))
    };
    // Job 0 arrives before the exclusive work, job 1 after it: the loop runs job 0 only and
    // ends, though a sequence is free for job 1.
    assert!(scheduler.submit(job(0, &tx)));
    let turn = scheduler.enter_exclusive();
    assert!(
        !scheduler.submit(job(1, &tx)),
        "a loop is already asked for"
    );
    scheduler.run(&mut ctx);
    assert_eq!(ended(&rx), [0]);
    // A second turn after job 1, then job 2: ending the first turn starts a loop for job 1
    // only; job 2 waits for the end of the second turn.
    let second = scheduler.enter_exclusive();
    assert!(!scheduler.submit(job(2, &tx)));
    assert!(scheduler.leave_exclusive(turn));
    scheduler.run(&mut ctx);
    assert_eq!(ended(&rx), [1]);
    assert!(scheduler.leave_exclusive(second));
    scheduler.run(&mut ctx);
    assert_eq!(ended(&rx), [2]);
}

#[test]
fn behind_an_exclusive_turn_a_new_request_still_starts_while_only_paused_ones_run() {
    let Some(model) = common::load_real_model("smollm2") else {
        return;
    };

    /// Not ready until `go` is set (a stream whose reader waits for the next request first).
    struct Gated(mpsc::Sender<Report>, Arc<AtomicBool>);
    impl JobSink for Gated {
        fn ready(&mut self) -> bool {
            self.1.load(Ordering::Relaxed)
        }
        fn event(&mut self, _: GenerateEvent) {}
        fn done(self: Box<Self>, result: Result<Generation>) {
            let _ = self.0.send((0, String::new(), result));
        }
    }

    let scheduler = Arc::new(Scheduler::new());
    let (tx, rx) = mpsc::channel();
    let go = Arc::new(AtomicBool::new(false));
    let gated = Gated(tx.clone(), go.clone());
    let request = common::greedy_chat("Name a colour.", 4);
    assert!(scheduler.submit(Job::new(request.clone(), Arc::default(), Box::new(gated))));
    // Exclusive work arrives, then the request the paused one's reader waits for: the
    // exclusive work cannot run before the paused request ends, so the new one must start.
    let turn = scheduler.enter_exclusive();
    let sink = Collect {
        n: 1,
        text: String::new(),
        out: tx,
        cancel_after: None,
    };
    assert!(!scheduler.submit(Job::new(request, Arc::default(), Box::new(sink))));
    let runner = {
        let scheduler = scheduler.clone();
        thread::spawn(move || scheduler.run(&mut common::context(&model, 256, 2, 2)))
    };
    let (n, _, result) = rx
        .recv_timeout(std::time::Duration::from_secs(30))
        .expect("the new request ends while the paused one waits");
    assert_eq!((n, result.is_ok()), (1, true));
    go.store(true, Ordering::Relaxed);
    scheduler.wake();
    let (n, _, result) = rx
        .recv_timeout(std::time::Duration::from_secs(30))
        .expect("the paused request ends once ready");
    assert_eq!((n, result.is_ok()), (0, true));
    runner.join().expect("the loop ends");
    assert!(!scheduler.leave_exclusive(turn), "nothing waits");
}
