//! The two loops of a LoRA product on F16 adapter values, which decoding reads once per token
//! (so F16 halves the bytes against f32): `dot(a, x)` with `a` in F16, and `out += t · b` with
//! `b` in F16.
//!
//! Bit-identity contract: every path returns exactly what the portable one does, which is
//! [`ops::dot`]'s arithmetic (eight ordered partial sums, then the tail) on the values converted
//! to f32 (exact), and one rounding per element for the update (`ops::dot` in the docs below is
//! `super::ops::dot`). The AVX2 path converts eight
//! values at a time with F16C and keeps the same eight lanes; tested in this module.

use half::f16;

/// `Σ a[i]·x[i]` with [`ops::dot`]'s order; `a.len() == x.len()`.
#[inline]
pub(crate) fn dot_f16(a: &[f16], x: &[f32]) -> f32 {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("f16c") {
        // SAFETY: AVX2 and F16C were detected.
        return unsafe { x86::dot_f16(a, x) };
    }
    dot_f16_portable(a, x)
}

/// `out[i] += t · b[i]`; `b.len() == out.len()`.
#[inline]
pub(crate) fn axpy_f16(t: f32, b: &[f16], out: &mut [f32]) {
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("f16c") {
        // SAFETY: AVX2 and F16C were detected.
        return unsafe { x86::axpy_f16(t, b, out) };
    }
    axpy_f16_portable(t, b, out)
}

fn dot_f16_portable(a: &[f16], x: &[f32]) -> f32 {
    let mut acc = [0.0f32; 8];
    let (ca, cx) = (a.chunks_exact(8), x.chunks_exact(8));
    let (ra, rx) = (ca.remainder(), cx.remainder());
    for (p, q) in ca.zip(cx) {
        for l in 0..8 {
            acc[l] += p[l].to_f32() * q[l];
        }
    }
    let tail: f32 = ra.iter().zip(rx).map(|(p, q)| p.to_f32() * q).sum();
    acc.iter().sum::<f32>() + tail
}

fn axpy_f16_portable(t: f32, b: &[f16], out: &mut [f32]) {
    for (o, v) in out.iter_mut().zip(b) {
        *o += t * v.to_f32();
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    use half::f16;

    /// [`super::dot_f16`] with F16C conversions and the same eight lanes.
    ///
    /// # Safety
    /// The CPU must support AVX2 and F16C.
    #[target_feature(enable = "avx2,f16c")]
    pub(super) unsafe fn dot_f16(a: &[f16], x: &[f32]) -> f32 {
        let n = a.len().min(x.len());
        let main = n - n % 8;
        let mut acc = _mm256_setzero_ps();
        let mut i = 0;
        while i < main {
            // SAFETY: i + 8 <= main <= both lengths: 8 halves (16 bytes) and 8 floats are read.
            let (av, xv) = unsafe {
                (
                    _mm256_cvtph_ps(_mm_loadu_si128(a.as_ptr().add(i).cast())),
                    _mm256_loadu_ps(x.as_ptr().add(i)),
                )
            };
            // A multiply then an add (no FMA): the portable path's two roundings.
            acc = _mm256_add_ps(acc, _mm256_mul_ps(av, xv));
            i += 8;
        }
        let mut lanes = [0.0f32; 8];
        // SAFETY: `lanes` holds 8 floats.
        unsafe { _mm256_storeu_ps(lanes.as_mut_ptr(), acc) };
        let tail: f32 = a[main..n]
            .iter()
            .zip(&x[main..n])
            .map(|(p, q)| p.to_f32() * q)
            .sum();
        lanes.iter().sum::<f32>() + tail
    }

    /// [`super::axpy_f16`] with F16C conversions.
    ///
    /// # Safety
    /// The CPU must support AVX2 and F16C.
    #[target_feature(enable = "avx2,f16c")]
    pub(super) unsafe fn axpy_f16(t: f32, b: &[f16], out: &mut [f32]) {
        let n = b.len().min(out.len());
        let main = n - n % 8;
        let tv = _mm256_set1_ps(t);
        let mut i = 0;
        while i < main {
            // SAFETY: i + 8 <= main <= both lengths.
            unsafe {
                let bv = _mm256_cvtph_ps(_mm_loadu_si128(b.as_ptr().add(i).cast()));
                let o = out.as_mut_ptr().add(i);
                _mm256_storeu_ps(o, _mm256_add_ps(_mm256_loadu_ps(o), _mm256_mul_ps(tv, bv)));
            }
            i += 8;
        }
        for (o, v) in out[main..n].iter_mut().zip(&b[main..n]) {
            *o += t * v.to_f32();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::ops;
    use super::*;

    /// [`ops::dot`] on `a` converted to f32: the contract's reference.
    fn reference_dot(a: &[f16], x: &[f32]) -> f32 {
        let wide: Vec<f32> = a.iter().map(|v| v.to_f32()).collect();
        ops::dot(&wide, x)
    }

    fn data(n: usize, seed: u32) -> (Vec<f16>, Vec<f32>) {
        let mut s = seed;
        let mut next = move || {
            s = s.wrapping_mul(1_103_515_245).wrapping_add(12_345);
            (s >> 8) as f32 / (1u32 << 24) as f32 * 4.0 - 2.0
        };
        let a = (0..n).map(|_| f16::from_f32(next())).collect();
        let x = (0..n).map(|_| next()).collect();
        (a, x)
    }

    #[test]
    fn every_path_computes_the_portable_bits() {
        for n in [0, 1, 7, 8, 9, 31, 576, 1536, 1539] {
            let (a, x) = data(n, n as u32 + 1);
            let want = reference_dot(&a, &x);
            assert_eq!(
                dot_f16_portable(&a, &x).to_bits(),
                want.to_bits(),
                "dot, n = {n}"
            );
            assert_eq!(dot_f16(&a, &x).to_bits(), want.to_bits(), "dot, n = {n}");
            let mut p: Vec<f32> = x.clone();
            let mut q: Vec<f32> = x.clone();
            axpy_f16_portable(0.37, &a, &mut p);
            axpy_f16(0.37, &a, &mut q);
            let same = p.iter().zip(&q).all(|(u, v)| u.to_bits() == v.to_bits());
            assert!(same, "axpy, n = {n}");
        }
    }
}
