//! The compute thread pool: long-lived workers that spin briefly between jobs, so that the many
//! small matmuls of a decoding step do not pay a thread wake-up (or a task spawn) each.
//!
//! A job is a closure over `0..n` cut into chunks; the calling thread works on it too, chunks
//! are claimed dynamically, and the call returns when every worker has finished the job.
//! Workers that find no job for a while stop spinning and sleep on a condition variable.
//!
//! Pools are shared: every context asking for `n` threads uses the same process-wide pool of
//! `n - 1` workers (jobs from different contexts take turns, the waiting callers sleep on a
//! mutex), and a request for more threads than the host has cores gets one thread per core.
//! Waits spin only briefly and then yield the core, so pools that still compete (different
//! sizes, other processes) hand the CPU to whoever has work instead of burning whole time slices.

use std::any::Any;
use std::cell::UnsafeCell;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering};
use std::sync::{Arc, Condvar, Mutex, Weak};
use std::thread::JoinHandle;

use crate::{Error, Result};

/// Busy-wait iterations (each a `spin_loop` hint) before a waiting thread starts yielding its
/// core: a few microseconds, enough for the next job of a decoding step to arrive.
const SPINS: u32 = 1 << 10;

/// `yield_now` calls a worker makes after spinning and before sleeping on the condition
/// variable: on an idle core each returns at once (about 100 µs in all, longer than the gaps
/// between the matmuls of one token); on a busy core each hands the core to a thread with work.
const YIELDS: u32 = 1 << 8;

/// The most threads a pool gets: the host's available parallelism.
pub fn max_threads() -> usize {
    std::thread::available_parallelism().map_or(1, |n| n.get())
}

/// One step of a wait loop: spin first, then yield the core. Returns false once `round` has
/// passed `limit` (the caller should block instead).
fn backoff(round: &mut u32, limit: u32) -> bool {
    if *round < SPINS {
        std::hint::spin_loop();
    } else if *round < SPINS.saturating_add(limit) {
        std::thread::yield_now();
    } else {
        return false;
    }
    *round = round.saturating_add(1);
    true
}

/// The closure of the running job, borrowed for the duration of [`Threads::for_each_chunk`].
type JobFn<'a> = &'a (dyn Fn(Range<usize>) + Sync);

/// What the workers read when the epoch changes.
#[derive(Clone, Copy)]
struct Job {
    f: JobFn<'static>,
    n: usize,
    chunk: usize,
}

struct Shared {
    /// Incremented (SeqCst) to publish a new job in `job`.
    epoch: AtomicU64,
    /// Written only by the dispatching thread while no worker runs a job.
    job: UnsafeCell<Option<Job>>,
    /// Next chunk index to claim.
    next: AtomicUsize,
    /// Workers that have not finished the current job.
    running: AtomicUsize,
    /// Workers asleep (or about to sleep) on `wake`.
    sleepers: AtomicUsize,
    shutdown: AtomicBool,
    lock: Mutex<()>,
    wake: Condvar,
    /// The first panic of a worker during the current job, re-raised by the dispatcher.
    panic: Mutex<Option<Box<dyn Any + Send>>>,
}

// SAFETY: `job` is written only by the dispatcher (serialized by `Pool::dispatch`) before the
// epoch is published and while `running == 0`, and read by workers only after they observe the
// new epoch and before they decrement `running`.
unsafe impl Sync for Shared {}
// SAFETY: as above; the closure behind `Job::f` is `Sync`.
unsafe impl Send for Shared {}

impl Shared {
    /// Claim and run chunks of the current job until none are left.
    fn work(&self, job: Job) {
        let chunks = job.n.div_ceil(job.chunk);
        loop {
            let i = self.next.fetch_add(1, Ordering::Relaxed);
            if i >= chunks {
                break;
            }
            let start = i * job.chunk;
            (job.f)(start..(start + job.chunk).min(job.n));
        }
    }

    fn worker(&self) {
        let mut seen = 0u64;
        loop {
            let mut spins = 0u32;
            loop {
                let epoch = self.epoch.load(Ordering::SeqCst);
                if epoch != seen {
                    seen = epoch;
                    break;
                }
                if self.shutdown.load(Ordering::SeqCst) {
                    return;
                }
                if backoff(&mut spins, YIELDS) {
                    continue;
                }
                let guard = self.lock.lock().unwrap_or_else(|e| e.into_inner());
                self.sleepers.fetch_add(1, Ordering::SeqCst);
                let guard = self
                    .wake
                    .wait_while(guard, |_| {
                        self.epoch.load(Ordering::SeqCst) == seen
                            && !self.shutdown.load(Ordering::SeqCst)
                    })
                    .unwrap_or_else(|e| e.into_inner());
                self.sleepers.fetch_sub(1, Ordering::SeqCst);
                drop(guard);
                spins = 0;
            }
            // SAFETY: the job was written before the epoch we observed and stays valid until
            // we decrement `running` (the dispatcher waits for that).
            let job = unsafe { *self.job.get() };
            if let Some(job) = job {
                let result =
                    std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| self.work(job)));
                if let Err(payload) = result {
                    // Stop handing out chunks; keep the first panic for the dispatcher.
                    self.next.store(usize::MAX / 2, Ordering::Relaxed);
                    let mut slot = self.panic.lock().unwrap_or_else(|e| e.into_inner());
                    slot.get_or_insert(payload);
                }
            }
            self.running.fetch_sub(1, Ordering::Release);
        }
    }
}

/// The workers of one pool size, shared by every [`Threads`] of that size.
struct Pool {
    shared: Arc<Shared>,
    workers: Vec<JoinHandle<()>>,
    /// Serializes jobs (from one or several contexts); a waiting caller sleeps here.
    dispatch: Mutex<()>,
}

/// The live pools, by total thread count (caller included).
static POOLS: Mutex<Vec<(usize, Weak<Pool>)>> = Mutex::new(Vec::new());

impl Pool {
    /// The pool of `count` threads (`count - 1` workers), started if no context holds one.
    fn shared(count: usize) -> Result<Arc<Pool>> {
        let mut pools = POOLS.lock().unwrap_or_else(|e| e.into_inner());
        pools.retain(|(_, pool)| pool.strong_count() > 0);
        if let Some(pool) = pools
            .iter()
            .find(|(n, _)| *n == count)
            .and_then(|(_, pool)| pool.upgrade())
        {
            return Ok(pool);
        }
        let pool = Arc::new(Pool::start(count)?);
        pools.push((count, Arc::downgrade(&pool)));
        Ok(pool)
    }

    fn start(count: usize) -> Result<Pool> {
        let shared = Arc::new(Shared {
            epoch: AtomicU64::new(0),
            job: UnsafeCell::new(None),
            next: AtomicUsize::new(0),
            running: AtomicUsize::new(0),
            sleepers: AtomicUsize::new(0),
            shutdown: AtomicBool::new(false),
            lock: Mutex::new(()),
            wake: Condvar::new(),
            panic: Mutex::new(None),
        });
        let mut pool = Pool {
            shared,
            workers: Vec::with_capacity(count - 1),
            dispatch: Mutex::new(()),
        };
        for i in 1..count {
            let shared = Arc::clone(&pool.shared);
            let handle = std::thread::Builder::new()
                .name(format!("local-llm-worker-{i}"))
                .spawn(move || shared.worker())
                .map_err(|e| Error::Backend(format!("cannot start {count} threads: {e}")))?;
            pool.workers.push(handle);
        }
        Ok(pool)
    }

    fn dispatch(&self, f: &(dyn Fn(Range<usize>) + Sync), n: usize, chunk: usize) {
        let _serial = self.dispatch.lock().unwrap_or_else(|e| e.into_inner());
        let s = &*self.shared;
        // SAFETY: the lifetime is erased only for the duration of this call: we return after
        // every worker has decremented `running`, after which none reads the job again.
        let f: JobFn<'static> = unsafe { std::mem::transmute::<JobFn<'_>, JobFn<'static>>(f) };
        let job = Job { f, n, chunk };
        // SAFETY: no worker reads `job` now: `running` is 0 and the epoch is not yet published.
        unsafe { *s.job.get() = Some(job) };
        s.next.store(0, Ordering::Relaxed);
        s.running.store(self.workers.len(), Ordering::Relaxed);
        s.epoch.fetch_add(1, Ordering::SeqCst);
        if s.sleepers.load(Ordering::SeqCst) > 0 {
            let _guard = s.lock.lock().unwrap_or_else(|e| e.into_inner());
            s.wake.notify_all();
        }
        let mine = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| s.work(job)));
        if mine.is_err() {
            s.next.store(usize::MAX / 2, Ordering::Relaxed);
        }
        let mut round = 0;
        while s.running.load(Ordering::Acquire) != 0 {
            // A worker still on its chunk may be waiting for this core: yield after spinning.
            if !backoff(&mut round, u32::MAX) {
                std::thread::yield_now();
            }
        }
        // SAFETY: every worker is done with the job.
        unsafe { *s.job.get() = None };
        let theirs = s.panic.lock().unwrap_or_else(|e| e.into_inner()).take();
        if let Err(payload) = mine {
            std::panic::resume_unwind(payload);
        }
        if let Some(payload) = theirs {
            std::panic::resume_unwind(payload);
        }
    }
}

impl Drop for Pool {
    fn drop(&mut self) {
        self.shared.shutdown.store(true, Ordering::SeqCst);
        {
            let _guard = self.shared.lock.lock().unwrap_or_else(|e| e.into_inner());
            self.shared.wake.notify_all();
        }
        for handle in self.workers.drain(..) {
            let _ = handle.join();
        }
    }
}

/// A context's compute threads: the caller plus the workers of the shared pool of its size
/// (`1` runs everything inline on the caller).
pub struct Threads {
    pool: Option<Arc<Pool>>,
    count: usize,
}

impl Threads {
    /// `count` threads in all (at least 1, at most [`max_threads`]): the caller and the
    /// `count - 1` workers of the process-wide pool of that size, started if needed.
    pub fn new(count: usize) -> Result<Self> {
        let count = count.clamp(1, max_threads().max(1));
        let pool = if count > 1 {
            Some(Pool::shared(count)?)
        } else {
            None
        };
        Ok(Threads { pool, count })
    }

    /// Number of threads, the caller included.
    pub fn count(&self) -> usize {
        self.count
    }

    /// Run `f` over `0..n` split into contiguous chunks (multiples of `granularity`), several
    /// per thread, claimed dynamically by the caller and the workers. `f` must only touch data
    /// belonging to its range. A panic inside `f` is re-raised here after all threads stopped.
    pub fn for_each_chunk(&self, n: usize, granularity: usize, f: impl Fn(Range<usize>) + Sync) {
        let granularity = granularity.max(1);
        match &self.pool {
            Some(pool) if n > granularity => {
                let tasks = (self.count * 4).min(n.div_ceil(granularity));
                let chunk = n.div_ceil(tasks).div_ceil(granularity) * granularity;
                pool.dispatch(&f, n, chunk);
            }
            _ if n > 0 => f(0..n),
            _ => {}
        }
    }

    /// Run `f(first_row, a_rows, b_rows)` over two buffers cut into the same number of rows
    /// (`a` rows of `a_width` values, `b` rows of `b_width`), several rows per call. Element-
    /// wise work this small (`a` under 128 KiB) runs inline on the caller: a hand-off to the
    /// workers would cost more than it saves.
    pub fn for_each_rows2<A: Send, B: Send>(
        &self,
        a: &mut [A],
        a_width: usize,
        b: &mut [B],
        b_width: usize,
        f: impl Fn(usize, &mut [A], &mut [B]) + Sync,
    ) {
        let n = a.len().checked_div(a_width).unwrap_or(0);
        assert!(
            a.len() == n * a_width && b.len() == n * b_width,
            "row counts differ"
        );
        if std::mem::size_of_val(a) < ROWS_PARALLEL_MIN || self.count == 1 {
            f(0, a, b);
            return;
        }
        let (pa, pb) = (SharedMut(a.as_mut_ptr()), SharedMut(b.as_mut_ptr()));
        self.for_each_chunk(n, 1, |r| {
            // SAFETY: the chunks of `0..n` are disjoint, so are these rows of `a` and `b`
            // (inside them: r.end <= n and both hold n rows), and they outlive the job.
            let (ra, rb) = unsafe {
                (
                    std::slice::from_raw_parts_mut(
                        pa.get().add(r.start * a_width),
                        r.len() * a_width,
                    ),
                    std::slice::from_raw_parts_mut(
                        pb.get().add(r.start * b_width),
                        r.len() * b_width,
                    ),
                )
            };
            f(r.start, ra, rb);
        });
    }

    /// [`Threads::for_each_rows2`] over one buffer of rows of `width` values.
    pub fn for_each_rows<A: Send>(
        &self,
        a: &mut [A],
        width: usize,
        f: impl Fn(usize, &mut [A]) + Sync,
    ) {
        self.for_each_rows2(a, width, &mut [] as &mut [u8], 0, |r, a, _| f(r, a));
    }
}

/// For a chunk `range` of indices into consecutive segments of lengths `lens` (one job over
/// several matrices or sequences), call `f(segment, range within it)` for every segment the
/// chunk overlaps.
pub(crate) fn split_range(
    range: Range<usize>,
    lens: impl IntoIterator<Item = usize>,
    mut f: impl FnMut(usize, Range<usize>),
) {
    let mut first = 0;
    for (i, len) in lens.into_iter().enumerate() {
        let (lo, hi) = (range.start.max(first), range.end.min(first + len));
        if lo < hi {
            f(i, lo - first..hi - first);
        }
        first += len;
    }
}

/// The fewest bytes [`Threads::for_each_rows2`] hands to the workers (a prompt's activations;
/// one token's, or a few sequences', stay on the caller).
const ROWS_PARALLEL_MIN: usize = 1 << 17;

/// A raw pointer that may be shared across the pool's threads; users write disjoint elements.
#[derive(Clone, Copy)]
pub struct SharedMut<T>(pub *mut T);

impl<T> SharedMut<T> {
    /// The pointer (a method, so closures capture the whole `Sync` wrapper).
    pub fn get(&self) -> *mut T {
        self.0
    }
}
// SAFETY: only used to write disjoint elements from different threads inside a job.
unsafe impl<T> Send for SharedMut<T> {}
// SAFETY: see above.
unsafe impl<T> Sync for SharedMut<T> {}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_index_runs_once_for_many_jobs() {
        for count in [1, 2, 3] {
            let threads = Threads::new(count).unwrap();
            for n in [0usize, 1, 5, 16, 17, 1000] {
                for gran in [1usize, 4, 16] {
                    let hits: Vec<AtomicUsize> = (0..n).map(|_| AtomicUsize::new(0)).collect();
                    threads.for_each_chunk(n, gran, |r| {
                        assert!(r.start % gran == 0 && r.end <= n);
                        for i in r {
                            hits[i].fetch_add(1, Ordering::Relaxed);
                        }
                    });
                    assert!(hits.iter().all(|h| h.load(Ordering::Relaxed) == 1));
                }
            }
        }
    }

    #[test]
    fn counts_are_capped_at_the_cores_and_pools_are_shared() {
        let cores = max_threads();
        assert_eq!(Threads::new(0).unwrap().count(), 1);
        assert_eq!(Threads::new(1 << 20).unwrap().count(), cores);
        let a = Threads::new(cores).unwrap();
        let b = Threads::new(cores).unwrap();
        match (&a.pool, &b.pool) {
            (Some(x), Some(y)) => assert!(Arc::ptr_eq(x, y), "one pool per size"),
            (None, None) => assert_eq!(cores, 1),
            _ => panic!("pools differ for one size"),
        }
    }

    #[test]
    fn jobs_from_several_callers_on_one_pool_stay_separate() {
        let callers: Vec<_> = (0..4)
            .map(|k| {
                std::thread::spawn(move || {
                    let threads = Threads::new(2).unwrap();
                    for round in 0..200usize {
                        let n = 100 + k * 7 + round % 13;
                        let sum = AtomicUsize::new(0);
                        threads.for_each_chunk(n, 3, |r| {
                            sum.fetch_add(r.map(|i| i + k).sum::<usize>(), Ordering::Relaxed);
                        });
                        assert_eq!(sum.load(Ordering::Relaxed), n * (n - 1) / 2 + n * k);
                    }
                })
            })
            .collect();
        for c in callers {
            c.join().unwrap();
        }
    }

    #[test]
    fn workers_wake_after_sleeping() {
        let threads = Threads::new(2).unwrap();
        std::thread::sleep(std::time::Duration::from_millis(50));
        let sum = AtomicUsize::new(0);
        threads.for_each_chunk(100, 1, |r| {
            sum.fetch_add(r.sum::<usize>(), Ordering::Relaxed);
        });
        assert_eq!(sum.load(Ordering::Relaxed), 4950);
    }

    #[test]
    fn row_jobs_see_every_row_once_with_its_index() {
        let threads = Threads::new(2).unwrap();
        for rows in [0usize, 1, 3, 4096, 5000] {
            let (wa, wb) = (16, 3);
            let mut a = vec![0usize; rows * wa];
            let mut b = vec![0u32; rows * wb];
            threads.for_each_rows2(&mut a, wa, &mut b, wb, |r0, a, b| {
                assert_eq!(a.len() / wa, b.len() / wb);
                for (i, row) in a.chunks_exact_mut(wa).enumerate() {
                    row.iter_mut().for_each(|v| *v += r0 + i + 1);
                }
                b.iter_mut().for_each(|v| *v += 1);
            });
            for (i, row) in a.chunks_exact(wa).enumerate() {
                assert!(row.iter().all(|&v| v == i + 1), "row {i} of {rows}");
            }
            assert!(b.iter().all(|&v| v == 1));
        }
    }

    #[test]
    fn a_range_over_segments_splits_at_their_boundaries() {
        let mut seen = Vec::new();
        split_range(3..12, [4, 0, 5, 10], |i, r| seen.push((i, r)));
        assert_eq!(seen, vec![(0, 3..4), (2, 0..5), (3, 0..3)]);
        seen.clear();
        split_range(0..2, [4, 5], |i, r| seen.push((i, r)));
        assert_eq!(seen, vec![(0, 0..2)]);
    }

    #[test]
    fn a_panic_in_a_chunk_reaches_the_caller_and_the_pool_survives() {
        let threads = Threads::new(2).unwrap();
        let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
            threads.for_each_chunk(64, 1, |r| assert!(!r.contains(&40), "boom"));
        }));
        assert!(result.is_err());
        let sum = AtomicUsize::new(0);
        threads.for_each_chunk(10, 1, |r| {
            sum.fetch_add(r.len(), Ordering::Relaxed);
        });
        assert_eq!(sum.load(Ordering::Relaxed), 10);
    }
}
