//! Causal (optionally sliding-window) grouped-query attention over the KV cache (f16 by
//! default; other types are widened to f32 per row), with llama.cpp's f16 rounding points
//! (queries and probabilities rounded to f16). With a quantized key (value) cache, queries and
//! keys (values, and back the output) are Walsh-Hadamard rotated as llama.cpp does.
//!
//! The new tokens' queries and keys arrive unrotated: a caller-given rotation (RoPE) is
//! applied and the keys and values are stored in the cache first, by each KV head's task when
//! it has all of its sequence's new tokens (decoding), otherwise in one pass before the tasks.
//! Work is split by KV head and token range; each task widens the cached keys and values it
//! needs to f32 once (prefetched ahead: they mostly come from memory). Queries are handled `TILE` at a time (the heads of a KV group, then the
//! next tokens) against the union of their key ranges, so that each key and value row loaded
//! serves several queries. On x86-64 with AVX2 and F16C (`attention_avx2.rs`: 2 queries × 4
//! keys score tiles), and on aarch64 with NEON, the same code is compiled a second time for
//! those features (8-lane vectors or two 4-lane ones, hardware f16 rounding), and on x86-64
//! with AVX-512F a third time (`attention_avx512.rs`: 4 queries × 4 keys score tiles with two
//! queries per 16-lane register, 16-lane weighted sums). Lane sums of several scores are
//! computed together after a transpose, in lane order. The arithmetic and its order are the
//! same, so all versions give identical results.

use std::cell::Cell;
use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};

use half::f16;
use half::slice::HalfFloatSliceExt;

use super::kv_cache::{hadamard, load, store, units, KvTypes};
use super::ops;
use crate::backend::{split_range, SharedMut, Threads};
use crate::quant::GgmlType;
use crate::{fallible, Error, Result};

#[cfg(target_arch = "x86_64")]
#[path = "attention_avx2.rs"]
mod avx2;
#[cfg(target_arch = "x86_64")]
#[path = "attention_avx512.rs"]
mod avx512;

#[cfg(target_arch = "aarch64")]
#[path = "attention_neon.rs"]
mod neon;

#[cfg(target_arch = "x86_64")]
use avx2::Avx2;

/// Shapes and settings of one layer's attention.
pub(crate) struct AttentionShape {
    /// Query heads and KV heads.
    pub n_head: usize,
    pub n_head_kv: usize,
    /// Key (and query) and value head sizes.
    pub head_dim: usize,
    pub head_dim_v: usize,
    /// Multiplier of the query-key dot products.
    pub scale: f32,
    /// Soft-cap of the dot products before that multiplier: `cap · tanh(dot / cap)`.
    pub softcap: Option<f32>,
    /// Sliding window in positions (`None`: full causal attention). Causal: the last `window`
    /// positions up to the token's own; bidirectional: the positions at most `window / 2`
    /// before or after it (llama.cpp's symmetric window, EmbeddingGemma).
    pub window: Option<usize>,
    /// Each token attends to the keys before it (decoders); `false`: to every key of its
    /// sequence, later ones included (encoders, which run a sequence in one pass).
    pub causal: bool,
    /// How the cache stores keys and values.
    pub types: KvTypes,
    /// ALiBi's maximum bias (jina-bert-v2): each score gets `slope(head) · -|query position
    /// - key position|` added after the scale, with ggml's slopes.
    pub alibi: Option<f32>,
    /// Whether the new tokens' keys and values are stored (false: the layer reads a cache
    /// another layer has already written for these positions, and has no keys or values of
    /// its own; Gemma 4).
    pub store: bool,
}

impl AttentionShape {
    /// ALiBi's slope for query head `h` (ggml's `soft_max_ext`: a geometric series over the
    /// largest power of two of heads, interleaved with a second one for the rest); `None`
    /// without ALiBi.
    fn alibi_slope(&self, h: usize) -> Option<f32> {
        let max_bias = self.alibi?;
        let n_log2 = 1u32 << (self.n_head as f32).log2().floor() as u32;
        let m0 = 2f32.powf(-max_bias / n_log2 as f32);
        let m1 = 2f32.powf(-(max_bias / 2.0) / n_log2 as f32);
        let h = h as u32;
        Some(match h < n_log2 {
            true => m0.powf((h + 1) as f32),
            false => m1.powf((2 * (h - n_log2) + 1) as f32),
        })
    }

    /// The cache's 2-byte units of one head's key and of one head's value.
    fn units(&self) -> (usize, usize) {
        (
            units(self.types.k, self.head_dim),
            units(self.types.v, self.head_dim_v),
        )
    }
}

/// Rotates one new token's queries and key in place before attention uses them: `(sequence,
/// token within it, the queries of one KV head's group, that head's key)`.
pub(crate) type Rotate<'r> = &'r (dyn Fn(usize, usize, &mut [f32], &mut [f32]) + Sync);

/// A buffer the tasks share, each reading and writing only its own heads' parts of it (the
/// slices handed out never overlap a part another task writes).
struct Parts<'a, T> {
    ptr: SharedMut<T>,
    len: usize,
    _borrow: std::marker::PhantomData<&'a mut [T]>,
}

impl<'a, T> Parts<'a, T> {
    fn new(buf: &'a mut [T]) -> Self {
        Parts {
            ptr: SharedMut(buf.as_mut_ptr()),
            len: buf.len(),
            _borrow: std::marker::PhantomData,
        }
    }

    /// Elements `at..at + len`, read-only.
    ///
    /// # Safety
    /// No task writes them while the slice lives.
    #[inline(always)]
    unsafe fn get(&self, at: usize, len: usize) -> &[T] {
        assert!(at + len <= self.len);
        std::slice::from_raw_parts(self.ptr.get().add(at), len)
    }

    /// Elements `at..at + len`, writable.
    ///
    /// # Safety
    /// No other slice of them lives meanwhile (on any thread).
    #[inline(always)]
    #[allow(clippy::mut_from_ref)]
    unsafe fn get_mut(&self, at: usize, len: usize) -> &mut [T] {
        assert!(at + len <= self.len);
        std::slice::from_raw_parts_mut(self.ptr.get().add(at), len)
    }
}

/// One attention call's operands, shared by the tasks.
struct Job<'a> {
    s: &'a AttentionShape,
    /// This sequence's index for `rotate`.
    seq: usize,
    rotate: Rotate<'a>,
    q: Parts<'a, f32>,
    k: Parts<'a, f32>,
    v: &'a [f32],
    keys: Parts<'a, f16>,
    values: Parts<'a, f16>,
    /// Whether each task prepares its own head's new tokens ([`Job::prepare`]); otherwise
    /// that is done for every head before the tasks run.
    prepare_in_task: bool,
    out: SharedMut<f32>,
    out_len: usize,
    n: usize,
    pos0: usize,
    token_block: usize,
    n_blocks: usize,
    /// Set by a task that could not allocate its buffers (it then does nothing).
    out_of_memory: AtomicBool,
}

thread_local! {
    /// Each thread's widened keys, widened values and scores, kept between calls (up to
    /// [`KEPT_BYTES`]): allocated per call, they were fresh zeroed pages every layer and token.
    static BUFFERS: Cell<[Vec<f32>; 3]> = const { Cell::new([Vec::new(), Vec::new(), Vec::new()]) };
    /// Each thread's copy of a value head being rotated before a quantized value cache stores
    /// it (one head: kept, rather than allocated per token and head).
    static ROTATED: Cell<Vec<f32>> = const { Cell::new(Vec::new()) };
}

/// The most buffer memory a thread keeps between attention calls (a window of about 4,000
/// positions of 256-wide keys and values): longer windows allocate per call, so that many
/// threads do not each hold a long context's buffers after it is done.
const KEPT_BYTES: usize = 8 << 20;

/// Queries scored together against each block of keys (one register tile).
const TILE: usize = 4;

/// How many cache rows ahead of the widening loop their keys and values are prefetched (the
/// first ones at the start of a task).
const PREFETCH_ROWS: usize = 32;

/// Why the cache rows are prefetched ([`ops::prefetch`]): the cache mostly comes from memory,
/// the weights having streamed through the last-level cache since the previous token used it.
/// Profiled with four sequences, the loads of the widening loop took about half of the
/// attention time, and a task's rows (one head's slice of each position) are short strided
/// streams.
#[inline(always)]
fn prefetch_row(row: &[f16]) {
    ops::prefetch(row)
}

/// The primitives that differ between the portable and the SIMD builds.
trait Kernels {
    /// Scratch memory of [`Kernels::scores`], kept across calls.
    type Scratch: Default;

    /// Round every element of `x` to f16 precision in place.
    fn round(x: &mut [f32]);

    /// Widen the cached f16 values `src` into `dst` (same length; exact).
    #[inline(always)]
    fn widen(src: &[f16], dst: &mut [f32]) {
        src.convert_to_f32_slice(dst)
    }
    /// [`ops::dot`] of `a` with four rows (bit-identical to four calls); used by the default
    /// [`Kernels::scores`].
    #[inline(always)]
    fn dot4(a: &[f32], rows: [&[f32]; 4]) -> [f32; 4] {
        rows.map(|r| ops::dot(a, r))
    }

    /// `out[i * n_keys + j] = ops::dot(query i, key j)` (bit-identical) for the `1..=TILE`
    /// queries of `q` and the `n_keys` keys of `keys`, both rows of `hd` elements.
    #[inline(always)]
    fn scores(q: &[f32], keys: &[f32], hd: usize, out: &mut [f32], _: &mut Self::Scratch) {
        let n_keys = keys.len() / hd;
        for (qi, out) in q.chunks_exact(hd).zip(out.chunks_exact_mut(n_keys)) {
            let key = |j: usize| &keys[j * hd..(j + 1) * hd];
            let mut j = 0;
            while j + 4 <= n_keys {
                let d = Self::dot4(qi, [key(j), key(j + 1), key(j + 2), key(j + 3)]);
                out[j..j + 4].copy_from_slice(&d);
                j += 4;
            }
            for (j, out) in out.iter_mut().enumerate().skip(j) {
                *out = ops::dot(qi, key(j));
            }
        }
    }

    /// [`ops::weighted_sum`] (bit-identical).
    #[inline(always)]
    fn weighted_sum(p: &[f32], rows: &[f32], out: &mut [f32]) {
        ops::weighted_sum(p, rows, out)
    }

    /// For the queries of a tile, `outs[i]` = [`Kernels::weighted_sum`] of `p`'s row `i`
    /// (`n_keys` probabilities, zero outside `ranges[i]`) and the value `rows` over
    /// `ranges[i]`.
    #[inline(always)]
    fn weighted_sums(p: &[f32], rows: &[f32], ranges: &[Range<usize>], outs: &mut [&mut [f32]]) {
        let n_keys = p.len() / ranges.len();
        let width = rows.len() / n_keys;
        for (i, (r, out)) in ranges.iter().zip(outs.iter_mut()).enumerate() {
            let rows = &rows[r.start * width..r.end * width];
            Self::weighted_sum(&p[i * n_keys + r.start..i * n_keys + r.end], rows, out);
        }
    }
}

/// Portable versions (the `half` crate, [`ops::dot`]).
struct Portable;

impl Kernels for Portable {
    type Scratch = ();

    #[inline(always)]
    fn round(x: &mut [f32]) {
        x.iter_mut().for_each(|v| *v = ops::round_f16(*v));
    }
}

/// [`Kernels::weighted_sums`] with every value row loaded once for all `TILE` queries when
/// that is exact: `blocks` computes the outputs from element 0 on, in blocks of its choice,
/// and returns where it stopped; the rest is summed here. A zero probability adds ±0 to a sum
/// that starts at +0 (which never becomes -0): no change, unless the row holds an infinity or
/// NaN; then (and for a single query) each query is summed on its own. `blocks` gets one
/// slice of `outs` per query, 2 to `TILE` of them.
#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn joint_weighted_sums<K: Kernels>(
    p: &[f32],
    rows: &[f32],
    ranges: &[Range<usize>],
    outs: &mut [&mut [f32]],
    blocks: impl FnOnce(&mut [&mut [f32]]) -> usize,
) {
    let (nq, nk) = (ranges.len(), p.len() / ranges.len());
    let width = rows.len() / nk;
    assert!(rows.len() == nk * width && outs.iter().all(|o| o.len() == width));
    let start = ranges.iter().map(|r| r.start).max().unwrap_or(0);
    let end = ranges.iter().map(|r| r.end).min().unwrap_or(0);
    let finite = |j: usize| {
        rows[j * width..(j + 1) * width]
            .iter()
            .all(|v| v.is_finite())
    };
    if nq < 2 || !(0..start).chain(end..nk).all(finite) {
        for (i, (r, out)) in ranges.iter().zip(outs.iter_mut()).enumerate() {
            let rows = &rows[r.start * width..r.end * width];
            K::weighted_sum(&p[i * nk + r.start..i * nk + r.end], rows, out);
        }
        return;
    }
    let at = blocks(outs);
    if at == width {
        return;
    }
    for (i, (r, out)) in ranges.iter().zip(outs.iter_mut()).enumerate() {
        let dst = &mut out[at..];
        dst.fill(0.0);
        for j in r.clone() {
            let pj = p[i * nk + j];
            for (a, b) in dst.iter_mut().zip(&rows[j * width + at..(j + 1) * width]) {
                *a += pj * b;
            }
        }
    }
}

impl Job<'_> {
    /// The first key position the token at position `p` attends to.
    fn window_start(&self, p: usize) -> usize {
        match (self.s.window, self.s.causal) {
            (None, _) => 0,
            (Some(w), true) => (p + 1).saturating_sub(w),
            (Some(w), false) => p.saturating_sub(w / 2),
        }
    }

    /// One past the last key position the token at position `p` attends to.
    fn key_end(&self, p: usize) -> usize {
        match (self.s.window, self.s.causal) {
            (_, true) => p + 1,
            (None, false) => self.pos0 + self.n,
            (Some(w), false) => (p + w / 2 + 1).min(self.pos0 + self.n),
        }
    }

    /// Cache row `j`'s key and value of KV head `g`.
    ///
    /// # Safety
    /// No task writes them meanwhile: rows before `pos0` are never written, and a new row's
    /// head `g` only by [`Job::prepare`] for `g`, before any task reads it.
    #[inline(always)]
    unsafe fn cached(&self, j: usize, g: usize) -> (&[f16], &[f16]) {
        let s = self.s;
        let (ku, vu) = s.units();
        let (kw, vw) = (s.n_head_kv * ku, s.n_head_kv * vu);
        (
            self.keys.get(j * kw + g * ku, ku),
            self.values.get(j * vw + g * vu, vu),
        )
    }

    /// Make new token `t` ready for KV head `g`: rotate its queries of `g`'s group and its key
    /// of head `g` ([`Job::rotate`]), and store that key and value in the cache (as its
    /// [`KvTypes`]).
    ///
    /// # Safety
    /// Called once for each `(t, g)` of the job, before any task reads token `t`'s queries of
    /// `g`'s group or cache row `pos0 + t`'s head `g`, and never for the same `(t, g)` on two
    /// threads.
    unsafe fn prepare(&self, t: usize, g: usize) {
        let s = self.s;
        let (hd, hdv, group) = (s.head_dim, s.head_dim_v, s.n_head / s.n_head_kv);
        let (kw, vw) = (s.n_head_kv * hd, s.n_head_kv * hdv);
        let q = self
            .q
            .get_mut(t * s.n_head * hd + g * group * hd, group * hd);
        if !s.store {
            (self.rotate)(self.seq, t, q, &mut []);
            if let Some(n) = s.types.key_rotation(hd) {
                hadamard(q, n);
            }
            return;
        }
        let k = self.k.get_mut(t * kw + g * hd, hd);
        (self.rotate)(self.seq, t, q, k);
        if let Some(n) = s.types.key_rotation(hd) {
            hadamard(q, n);
            hadamard(k, n);
        }
        let p = self.pos0 + t;
        let (ku, vu) = s.units();
        let (kwu, vwu) = (s.n_head_kv * ku, s.n_head_kv * vu);
        store(s.types.k, k, self.keys.get_mut(p * kwu + g * ku, ku));
        let v = &self.v[t * vw + g * hdv..][..hdv];
        let vd = self.values.get_mut(p * vwu + g * vu, vu);
        match s.types.value_rotation(hdv) {
            Some(n) => {
                let mut rotated = ROTATED.take();
                rotated.clear();
                rotated.extend_from_slice(v);
                hadamard(&mut rotated, n);
                store(s.types.v, &rotated, vd);
                ROTATED.set(rotated);
            }
            None => store(s.types.v, v, vd),
        }
    }

    /// [`prefetch_row`] for cache row `j`'s key and value of KV head `g`.
    ///
    /// # Safety
    /// As [`Job::cached`].
    #[inline(always)]
    unsafe fn prefetch(&self, j: usize, g: usize) {
        let (key, value) = self.cached(j, g);
        prefetch_row(key);
        prefetch_row(value);
    }

    /// Run tasks `range` (each one KV head × one block of tokens).
    #[inline(always)]
    fn run<K: Kernels>(&self, range: Range<usize>) {
        let s = self.s;
        let (hd, hdv) = (s.head_dim, s.head_dim_v);
        let (qw, ow) = (s.n_head * hd, s.n_head * hdv);
        let group = s.n_head / s.n_head_kv;
        let [mut k32, mut v32, mut scores] = BUFFERS.take();
        let mut qt = vec![0.0f32; TILE * hd];
        let mut scratch = K::Scratch::default();
        for task in range {
            // Later token blocks attend to more keys: hand them out first, for balance.
            let (g, blk) = (
                task / self.n_blocks,
                self.n_blocks - 1 - task % self.n_blocks,
            );
            let t0 = blk * self.token_block;
            let t1 = ((blk + 1) * self.token_block).min(self.n);
            let (lo, hi) = (
                self.window_start(self.pos0 + t0),
                self.key_end(self.pos0 + t1 - 1),
            );
            // The window is as long as the context (an option): allocate fallibly.
            let fits = fallible::resize(&mut k32, (hi - lo) * hd, 0.0, "")
                .and_then(|()| fallible::resize(&mut v32, (hi - lo) * hdv, 0.0, ""))
                .and_then(|()| fallible::resize(&mut scores, TILE * (hi - lo), 0.0, ""));
            if fits.is_err() {
                self.out_of_memory.store(true, Ordering::Relaxed);
                return;
            }
            if self.prepare_in_task {
                // SAFETY: with `prepare_in_task` each head has one task (one token block),
                // this one, which prepares its tokens before reading them.
                (t0..t1).for_each(|t| unsafe { self.prepare(t, g) });
            }
            // SAFETY (`cached`, `prefetch`): the new rows' head `g` was prepared, by this task
            // or before the tasks ran, and no task writes it any more.
            let prefetch = |j: usize| unsafe { self.prefetch(j, g) };
            (lo..hi.min(lo + PREFETCH_ROWS)).for_each(prefetch);
            for j in lo..hi {
                if j + PREFETCH_ROWS < hi {
                    prefetch(j + PREFETCH_ROWS);
                }
                let r = j - lo;
                let (key, value) = unsafe { self.cached(j, g) };
                let (k_out, v_out) = (&mut k32[r * hd..(r + 1) * hd], &mut v32[r * hdv..][..hdv]);
                match s.types.k {
                    GgmlType::F16 => K::widen(key, k_out),
                    ty => load(ty, key, k_out),
                }
                match s.types.v {
                    GgmlType::F16 => K::widen(value, v_out),
                    ty => load(ty, value, v_out),
                }
            }
            // The (token, head) queries of the task in order, TILE at a time against the
            // union of their key ranges (every score is computed as on its own).
            let total = (t1 - t0) * group;
            let query = |i: usize| (t0 + i / group, g * group + i % group);
            for c in (0..total).step_by(TILE) {
                let nq = TILE.min(total - c);
                let (mut ulo, mut uhi) = (usize::MAX, 0);
                for i in 0..nq {
                    let (t, h) = query(c + i);
                    let p = self.pos0 + t;
                    (ulo, uhi) = (ulo.min(self.window_start(p)), uhi.max(self.key_end(p)));
                    let qh = &mut qt[i * hd..(i + 1) * hd];
                    // SAFETY: token `t`'s queries of this head's group were prepared and
                    // only this task uses them now.
                    qh.copy_from_slice(unsafe { self.q.get(t * qw + h * hd, hd) });
                    K::round(qh);
                }
                let nk = uhi - ulo;
                let keys = &k32[(ulo - lo) * hd..(uhi - lo) * hd];
                K::scores(
                    &qt[..nq * hd],
                    keys,
                    hd,
                    &mut scores[..nq * nk],
                    &mut scratch,
                );
                let mut ranges = [0..0, 0..0, 0..0, 0..0];
                let mut outs: [&mut [f32]; TILE] = [&mut [], &mut [], &mut [], &mut []];
                for i in 0..nq {
                    let (t, h) = query(c + i);
                    let p = self.pos0 + t;
                    ranges[i] = self.window_start(p) - ulo..self.key_end(p) - ulo;
                    let row = &mut scores[i * nk..(i + 1) * nk];
                    let (before, rest) = row.split_at_mut(ranges[i].start);
                    let (probs, after) = rest.split_at_mut(ranges[i].len());
                    if let Some(cap) = s.softcap {
                        probs.iter_mut().for_each(|d| *d = cap * (*d / cap).tanh());
                    }
                    probs.iter_mut().for_each(|d| *d *= s.scale);
                    if let Some(slope) = s.alibi_slope(h) {
                        let first = ulo + ranges[i].start;
                        for (j, d) in probs.iter_mut().enumerate() {
                            *d += slope * -((first + j).abs_diff(p) as f32);
                        }
                    }
                    ops::softmax(probs);
                    K::round(probs);
                    before.fill(0.0);
                    after.fill(0.0);
                    let at = t * ow + h * hdv;
                    assert!(at + hdv <= self.out_len);
                    // SAFETY: in bounds (checked); each (t, h) slice belongs to one task.
                    outs[i] =
                        unsafe { std::slice::from_raw_parts_mut(self.out.get().add(at), hdv) };
                }
                let rows = &v32[(ulo - lo) * hdv..(uhi - lo) * hdv];
                K::weighted_sums(&scores[..nq * nk], rows, &ranges[..nq], &mut outs[..nq]);
                if let Some(n) = s.types.value_rotation(hdv) {
                    // Back from the rotated values (the rotation is its own inverse).
                    outs[..nq].iter_mut().for_each(|o| hadamard(o, n));
                }
            }
        }
        let held = k32.capacity() + v32.capacity() + scores.capacity();
        if held * std::mem::size_of::<f32>() <= KEPT_BYTES {
            BUFFERS.set([k32, v32, scores]);
        }
    }

    /// [`Job::run`] compiled for AVX2 and F16C.
    ///
    /// # Safety
    /// The CPU must have AVX2 and F16C.
    #[cfg(target_arch = "x86_64")]
    #[target_feature(enable = "avx2,f16c")]
    unsafe fn run_avx2(&self, range: Range<usize>) {
        self.run::<Avx2>(range)
    }

    fn dispatch(&self, range: Range<usize>) {
        #[cfg(target_arch = "aarch64")]
        if std::arch::is_aarch64_feature_detected!("neon") {
            // SAFETY: the feature was just detected.
            return unsafe { self.run_neon(range) };
        }
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("avx2")
            && std::arch::is_x86_feature_detected!("f16c")
        {
            // SAFETY: the features were just detected.
            return unsafe { self.run_avx512(range) };
        }
        #[cfg(target_arch = "x86_64")]
        if std::arch::is_x86_feature_detected!("avx2")
            && std::arch::is_x86_feature_detected!("f16c")
        {
            // SAFETY: the features were just detected.
            return unsafe { self.run_avx2(range) };
        }
        self.run::<Portable>(range)
    }
}

/// One sequence's part of [`attention`]: `n` new tokens at positions `pos0..pos0 + n`.
pub(crate) struct SeqAttention<'a> {
    /// The new tokens' queries (`n × n_head × head_dim`), not yet rotated.
    pub q: &'a mut [f32],
    /// Their keys (`n × n_head_kv × head_dim`), not yet rotated, and values.
    pub k: &'a mut [f32],
    pub v: &'a [f32],
    /// The layer's cache: rows `pos0..pos0 + n` receive the new keys and values.
    pub keys: &'a mut [f16],
    pub values: &'a mut [f16],
    pub n: usize,
    pub pos0: usize,
    /// Receives `n × n_head × head_dim_v` values.
    pub out: &'a mut [f32],
}

/// Attention of every sequence in `seqs` (each against its own cache), in one dispatch over
/// the threads so that a batch of single tokens still gives every thread work. The new
/// tokens' queries and keys are first rotated by `rotate`, and their keys and values stored in
/// the caches: by each KV head's task when it has all of its sequence's tokens (decoding),
/// otherwise for all heads before. [`Error::InsufficientMemory`] when the per-task buffers
/// (as long as the attended window) cannot be allocated.
pub(crate) fn attention(
    shape: &AttentionShape,
    seqs: &mut [SeqAttention<'_>],
    rotate: Rotate<'_>,
    threads: &Threads,
) -> Result<()> {
    let (qw, kw, vw) = (
        shape.n_head * shape.head_dim,
        shape.n_head_kv * shape.head_dim,
        shape.n_head_kv * shape.head_dim_v,
    );
    let (ku, vu) = shape.units();
    let (kwu, vwu) = (shape.n_head_kv * ku, shape.n_head_kv * vu);
    let mut jobs: Vec<Job> = Vec::with_capacity(seqs.len());
    for (i, seq) in seqs.iter_mut().enumerate() {
        let n = seq.n;
        let end = seq.pos0 + n;
        let stored = usize::from(shape.store);
        if seq.q.len() != n * qw
            || seq.k.len() != stored * n * kw
            || seq.v.len() != stored * n * vw
            || seq.keys.len() < end * kwu
            || seq.values.len() < end * vwu
        {
            return Err(Error::Backend(format!(
                "attention operands do not fit {n} tokens at position {}",
                seq.pos0
            )));
        }
        // Split tokens into blocks so that every KV head gets several tasks.
        let token_block = n
            .div_ceil((threads.count() * 4).div_ceil(shape.n_head_kv))
            .max(1);
        jobs.push(Job {
            s: shape,
            seq: i,
            rotate,
            q: Parts::new(seq.q),
            k: Parts::new(seq.k),
            v: seq.v,
            keys: Parts::new(seq.keys),
            values: Parts::new(seq.values),
            prepare_in_task: false,
            out: SharedMut(seq.out.as_mut_ptr()),
            out_len: seq.out.len(),
            n,
            pos0: seq.pos0,
            token_block,
            n_blocks: n.div_ceil(token_block),
            out_of_memory: AtomicBool::new(false),
        });
    }
    if jobs.iter().all(|j| j.n_blocks == 1) {
        jobs.iter_mut().for_each(|j| j.prepare_in_task = true);
    } else {
        let tokens: Vec<usize> = jobs.iter().map(|j| j.n).collect();
        let total = tokens.iter().sum();
        threads.for_each_chunk(total, 1, |range| {
            split_range(range, tokens.iter().copied(), |i, ts| {
                for t in ts {
                    for g in 0..shape.n_head_kv {
                        // SAFETY: each token of each job is in one chunk; no task runs yet.
                        unsafe { jobs[i].prepare(t, g) };
                    }
                }
            });
        });
    }
    // Task i of the whole batch: the jobs' tasks one after the other.
    let tasks: Vec<usize> = jobs.iter().map(|j| shape.n_head_kv * j.n_blocks).collect();
    let total = tasks.iter().sum();
    threads.for_each_chunk(total, 1, |range| {
        split_range(range, tasks.iter().copied(), |i, part| {
            jobs[i].dispatch(part)
        });
    });
    if let Some(job) = jobs
        .iter()
        .find(|j| j.out_of_memory.load(Ordering::Relaxed))
    {
        return Err(Error::InsufficientMemory(format!(
            "cannot allocate the attention buffers for {} positions",
            job.pos0 + job.n
        )));
    }
    Ok(())
}

#[cfg(test)]
#[path = "attention_tests.rs"]
mod tests;
