//! Causal (optionally sliding-window) grouped-query attention over the f16 KV cache, with
//! llama.cpp's f16 rounding points (queries and probabilities rounded to f16).
//!
//! Work is split by KV head and token range; each task widens the cached keys and values it
//! needs to f32 once. On x86-64 with AVX2 and F16C, and on aarch64 with NEON, the same code is
//! compiled a second time for those features (8-lane vectors or two 4-lane ones, hardware f16
//! rounding); the arithmetic and its order are the same, so all versions give identical results.

use std::ops::Range;
use std::sync::atomic::{AtomicBool, Ordering};

use half::f16;
use half::slice::HalfFloatSliceExt;

use super::ops;
use crate::backend::{SharedMut, Threads};
use crate::{fallible, Error, Result};

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
    /// Sliding window in positions (`None`: full causal attention).
    pub window: Option<usize>,
}

/// One attention call's operands, shared by the tasks.
struct Job<'a> {
    s: &'a AttentionShape,
    q: &'a [f32],
    keys: &'a [f16],
    values: &'a [f16],
    out: SharedMut<f32>,
    out_len: usize,
    n: usize,
    pos0: usize,
    token_block: usize,
    n_blocks: usize,
    /// Set by a task that could not allocate its buffers (it then does nothing).
    out_of_memory: AtomicBool,
}

/// The two primitives that differ between the portable and the AVX2 build.
trait Kernels {
    /// Round every element of `x` to f16 precision in place.
    fn round(x: &mut [f32]);
    /// [`ops::dot`] of `a` with four rows (bit-identical to four calls).
    fn dot4(a: &[f32], rows: [&[f32]; 4]) -> [f32; 4];
}

/// Portable versions (the `half` crate, [`ops::dot`]).
struct Portable;

impl Kernels for Portable {
    #[inline(always)]
    fn round(x: &mut [f32]) {
        x.iter_mut().for_each(|v| *v = ops::round_f16(*v));
    }

    #[inline(always)]
    fn dot4(a: &[f32], rows: [&[f32]; 4]) -> [f32; 4] {
        rows.map(|r| ops::dot(a, r))
    }
}

/// F16C rounding (round to nearest even, like `half`) and AVX dot products with the lane
/// layout of [`ops::dot`] (8 partial sums, multiply then add, summed in lane order).
#[cfg(target_arch = "x86_64")]
struct Avx2;

#[cfg(target_arch = "x86_64")]
impl Kernels for Avx2 {
    #[inline(always)]
    fn dot4(a: &[f32], rows: [&[f32]; 4]) -> [f32; 4] {
        use std::arch::x86_64::*;
        let n = a.len();
        assert!(rows.iter().all(|r| r.len() == n));
        let main = n - n % 8;
        let mut out = [0f32; 4];
        // SAFETY: only reached from `run_avx2` (AVX2 present); every load reads 8 elements
        // below `main <= n` of slices of length `n`.
        unsafe {
            let mut acc = [_mm256_setzero_ps(); 4];
            for i in (0..main).step_by(8) {
                let x = _mm256_loadu_ps(a.as_ptr().add(i));
                for (acc, row) in acc.iter_mut().zip(&rows) {
                    let y = _mm256_loadu_ps(row.as_ptr().add(i));
                    *acc = _mm256_add_ps(*acc, _mm256_mul_ps(x, y));
                }
            }
            for (k, row) in rows.iter().enumerate() {
                let mut lanes = [0f32; 8];
                _mm256_storeu_ps(lanes.as_mut_ptr(), acc[k]);
                let tail: f32 = a[main..].iter().zip(&row[main..]).map(|(x, y)| x * y).sum();
                out[k] = lanes.iter().sum::<f32>() + tail;
            }
        }
        out
    }

    #[inline(always)]
    fn round(x: &mut [f32]) {
        use std::arch::x86_64::*;
        let mut chunks = x.chunks_exact_mut(8);
        for c in &mut chunks {
            // SAFETY: only reached from `run_avx2`, which requires F16C; `c` has 8 elements.
            unsafe {
                let v = _mm256_loadu_ps(c.as_ptr());
                let h = _mm256_cvtps_ph::<_MM_FROUND_TO_NEAREST_INT>(v);
                _mm256_storeu_ps(c.as_mut_ptr(), _mm256_cvtph_ps(h));
            }
        }
        chunks
            .into_remainder()
            .iter_mut()
            .for_each(|v| *v = ops::round_f16(*v));
    }
}

/// NEON: f16 rounding by `fcvtn`/`fcvtl` (round to nearest even, like `half`) and dot products
/// with the lane layout of [`ops::dot`] (8 partial sums as two 4-lane vectors, multiply then
/// add, summed in lane order).
#[cfg(target_arch = "aarch64")]
struct Neon;

#[cfg(target_arch = "aarch64")]
impl Kernels for Neon {
    #[inline(always)]
    fn dot4(a: &[f32], rows: [&[f32]; 4]) -> [f32; 4] {
        use std::arch::aarch64::*;
        let n = a.len();
        assert!(rows.iter().all(|r| r.len() == n));
        let main = n - n % 8;
        let mut out = [0f32; 4];
        // SAFETY: NEON is part of the aarch64 targets; every load reads 4 elements below
        // `main <= n` of slices of length `n`.
        unsafe {
            let mut acc = [[vdupq_n_f32(0.0); 2]; 4];
            for i in (0..main).step_by(8) {
                let x = [
                    vld1q_f32(a.as_ptr().add(i)),
                    vld1q_f32(a.as_ptr().add(i + 4)),
                ];
                for (acc, row) in acc.iter_mut().zip(&rows) {
                    for h in 0..2 {
                        let y = vld1q_f32(row.as_ptr().add(i + 4 * h));
                        acc[h] = vaddq_f32(acc[h], vmulq_f32(x[h], y));
                    }
                }
            }
            for (k, row) in rows.iter().enumerate() {
                let mut lanes = [0f32; 8];
                vst1q_f32(lanes.as_mut_ptr(), acc[k][0]);
                vst1q_f32(lanes.as_mut_ptr().add(4), acc[k][1]);
                let tail: f32 = a[main..].iter().zip(&row[main..]).map(|(x, y)| x * y).sum();
                out[k] = lanes.iter().sum::<f32>() + tail;
            }
        }
        out
    }

    #[inline(always)]
    fn round(x: &mut [f32]) {
        use std::arch::aarch64::*;
        let mut chunks = x.chunks_exact_mut(4);
        for c in &mut chunks {
            // SAFETY: NEON is part of the aarch64 targets (`fcvtn`/`fcvtl` are base
            // instructions; their intrinsics take the unstable `float16x4_t`); `c` has 4
            // elements.
            unsafe {
                let mut v = vld1q_f32(c.as_ptr());
                std::arch::asm!(
                    "fcvtn {v:v}.4h, {v:v}.4s",
                    "fcvtl {v:v}.4s, {v:v}.4h",
                    v = inout(vreg) v,
                    options(pure, nomem, nostack, preserves_flags)
                );
                vst1q_f32(c.as_mut_ptr(), v);
            }
        }
        chunks
            .into_remainder()
            .iter_mut()
            .for_each(|v| *v = ops::round_f16(*v));
    }
}

impl Job<'_> {
    fn window_start(&self, p: usize) -> usize {
        self.s.window.map_or(0, |w| (p + 1).saturating_sub(w))
    }

    /// Run tasks `range` (each one KV head × one block of tokens).
    #[inline(always)]
    fn run<K: Kernels>(&self, range: Range<usize>) {
        let s = self.s;
        let (hd, hdv) = (s.head_dim, s.head_dim_v);
        let (qw, kw, vw, ow) = (
            s.n_head * hd,
            s.n_head_kv * hd,
            s.n_head_kv * hdv,
            s.n_head * hdv,
        );
        let group = s.n_head / s.n_head_kv;
        let mut k32 = Vec::new();
        let mut v32 = Vec::new();
        let mut scores = Vec::new();
        let mut qh = vec![0.0f32; hd];
        for task in range {
            // Later token blocks attend to more keys: hand them out first, for balance.
            let (g, blk) = (
                task / self.n_blocks,
                self.n_blocks - 1 - task % self.n_blocks,
            );
            let t0 = blk * self.token_block;
            let t1 = ((blk + 1) * self.token_block).min(self.n);
            let (lo, hi) = (self.window_start(self.pos0 + t0), self.pos0 + t1);
            // The window is as long as the context (an option): allocate fallibly.
            scores.clear();
            let fits = fallible::resize(&mut k32, (hi - lo) * hd, 0.0, "")
                .and_then(|()| fallible::resize(&mut v32, (hi - lo) * hdv, 0.0, ""))
                .and_then(|()| fallible::reserve(&mut scores, hi - lo, ""));
            if fits.is_err() {
                self.out_of_memory.store(true, Ordering::Relaxed);
                return;
            }
            for j in lo..hi {
                let (r, kr) = (j - lo, j * kw + g * hd);
                self.keys[kr..kr + hd].convert_to_f32_slice(&mut k32[r * hd..(r + 1) * hd]);
                let vr = j * vw + g * hdv;
                self.values[vr..vr + hdv].convert_to_f32_slice(&mut v32[r * hdv..(r + 1) * hdv]);
            }
            for t in t0..t1 {
                let p = self.pos0 + t;
                let first = self.window_start(p);
                for h in g * group..(g + 1) * group {
                    qh.copy_from_slice(&self.q[t * qw + h * hd..t * qw + (h + 1) * hd]);
                    K::round(&mut qh);
                    scores.clear();
                    let key = |j: usize| &k32[(j - lo) * hd..(j - lo + 1) * hd];
                    let mut j = first;
                    while j + 4 <= p + 1 {
                        let d = K::dot4(&qh, [key(j), key(j + 1), key(j + 2), key(j + 3)]);
                        scores.extend(d.map(|d| d * s.scale));
                        j += 4;
                    }
                    for j in j..=p {
                        scores.push(ops::dot(&qh, key(j)) * s.scale);
                    }
                    ops::softmax(&mut scores);
                    K::round(&mut scores);
                    let at = t * ow + h * hdv;
                    assert!(at + hdv <= self.out_len);
                    // SAFETY: in bounds (checked); each (t, h) slice belongs to one task.
                    let dst =
                        unsafe { std::slice::from_raw_parts_mut(self.out.get().add(at), hdv) };
                    let rows = &v32[(first - lo) * hdv..(p + 1 - lo) * hdv];
                    ops::weighted_sum(&scores, rows, dst);
                }
            }
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

    /// [`Job::run`] compiled for NEON.
    ///
    /// # Safety
    /// The CPU must have NEON (every aarch64 Linux and Android CPU does).
    #[cfg(target_arch = "aarch64")]
    #[target_feature(enable = "neon")]
    unsafe fn run_neon(&self, range: Range<usize>) {
        self.run::<Neon>(range)
    }

    fn dispatch(&self, range: Range<usize>) {
        #[cfg(target_arch = "aarch64")]
        if std::arch::is_aarch64_feature_detected!("neon") {
            // SAFETY: the feature was just detected.
            return unsafe { self.run_neon(range) };
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

/// Attention of `n` new tokens at positions `pos0..pos0 + n`: `q` holds their (rotated,
/// scaled) queries, `keys`/`values` the layer's cache including them, `out` receives
/// `n × n_head × head_dim_v` values. [`Error::InsufficientMemory`] when the per-task buffers
/// (as long as the attended window) cannot be allocated.
#[allow(clippy::too_many_arguments)]
pub(crate) fn attention(
    shape: &AttentionShape,
    q: &[f32],
    keys: &[f16],
    values: &[f16],
    n: usize,
    pos0: usize,
    out: &mut [f32],
    threads: &Threads,
) -> Result<()> {
    // Split tokens into blocks so that every KV head gets several tasks.
    let token_block = n
        .div_ceil((threads.count() * 4).div_ceil(shape.n_head_kv))
        .max(1);
    let n_blocks = n.div_ceil(token_block);
    let job = Job {
        s: shape,
        q,
        keys,
        values,
        out: SharedMut(out.as_mut_ptr()),
        out_len: out.len(),
        n,
        pos0,
        token_block,
        n_blocks,
        out_of_memory: AtomicBool::new(false),
    };
    threads.for_each_chunk(shape.n_head_kv * n_blocks, 1, |range| job.dispatch(range));
    if job.out_of_memory.into_inner() {
        return Err(Error::InsufficientMemory(format!(
            "cannot allocate the attention buffers for {} positions",
            pos0 + n
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The AVX2/F16C (or NEON) build of the attention loop equals the portable one bit for bit
    /// (sliding window, grouped heads, several token blocks).
    #[test]
    fn simd_build_equals_portable_build() {
        let shape = AttentionShape {
            n_head: 4,
            n_head_kv: 2,
            head_dim: 44,
            head_dim_v: 24,
            scale: 0.3,
            window: Some(7),
        };
        let (n, pos0) = (9usize, 5usize);
        let total = pos0 + n;
        let mut seed = 12345u32;
        let mut next = || {
            seed = seed.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
            (seed >> 8) as f32 / (1u32 << 24) as f32 * 4.0 - 2.0
        };
        let q: Vec<f32> = (0..n * 4 * 44).map(|_| next()).collect();
        let keys: Vec<f16> = (0..total * 2 * 44).map(|_| f16::from_f32(next())).collect();
        let values: Vec<f16> = (0..total * 2 * 24).map(|_| f16::from_f32(next())).collect();
        let run = |simd: bool| {
            let mut out = vec![0f32; n * 4 * 24];
            let job = Job {
                s: &shape,
                q: &q,
                keys: &keys,
                values: &values,
                out: SharedMut(out.as_mut_ptr()),
                out_len: out.len(),
                n,
                pos0,
                token_block: 4,
                n_blocks: 3,
                out_of_memory: AtomicBool::new(false),
            };
            if simd {
                job.dispatch(0..6);
            } else {
                job.run::<Portable>(0..6);
            }
            out
        };
        let (a, b) = (run(false), run(true));
        assert!(a.iter().zip(&b).all(|(x, y)| x.to_bits() == y.to_bits()));
        assert!(a.iter().any(|&v| v != 0.0));
    }
}
