//! The attention loop's NEON kernels: the arithmetic and order of [`ops::dot`] with two
//! 4-lane registers, and hardware f16 rounding.

use std::ops::Range;

use super::{ops, Job, Kernels};

/// NEON: f16 rounding by `fcvtn`/`fcvtl` (round to nearest even, like `half`) and dot products
/// with the lane layout of [`ops::dot`] (8 partial sums as two 4-lane vectors, multiply then
/// add, summed in lane order).
pub(super) struct Neon;

impl Kernels for Neon {
    type Scratch = ();

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
    /// [`Job::run`] compiled for NEON.
    ///
    /// # Safety
    /// The CPU must have NEON (every aarch64 Linux and Android CPU does).
    #[target_feature(enable = "neon")]
    pub(super) unsafe fn run_neon(&self, range: Range<usize>) {
        self.run::<Neon>(range)
    }
}
