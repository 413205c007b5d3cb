//! The two loops of a LoRA product, on adapter values in f32 or F16 (decoding reads every value
//! once per token, so F16 halves those bytes):
//! - [`Value::dots`]: `out[r] = Σ_i a[(first + r)·n + i]·x[i]`, several rows of `A` against one
//!   input row, four rows at a time (four independent sums, where one at a time would wait on
//!   each addition's latency);
//! - [`Value::axpys`]: `out[c] += Σ_j t[j]·b[j·stride + c]`, all of a rank's rows of `Bᵀ` added
//!   into a block of `out` held in registers, where one row at a time would read and write
//!   `out` once per row.
//!
//! Bit-identity contract: every path returns exactly what the portable one does. Each dot is
//! [`ops::dot`]'s arithmetic (eight ordered partial sums, then the tail) on the values converted
//! to f32 (exact); each update is `o = o + t[j]·b` (two roundings, no FMA) in the order of `j`,
//! as adding the rows one after another would do. The AVX2 path converts eight F16 values at a
//! time with F16C and keeps the same eight lanes; tested in this module. (`ops::dot` in these
//! docs is `super::ops::dot`.)

use half::f16;

/// An adapter value type: its LoRA loops.
pub(crate) trait Value: Copy {
    /// The value as f32 (exact).
    fn f32(self) -> f32;

    /// `out[r] = ` [`ops::dot`]`(a[(first + r)·n..][..n], x)` for every `r < out.len()`, with
    /// `n = x.len()`; `a` must hold those rows.
    #[inline(always)]
    fn dots(a: &[Self], first: usize, x: &[f32], out: &mut [f32]) {
        dots_portable(a, first, x, out)
    }

    /// `out[c] += t[j]·b[j·stride + c]` for `j` in order, for every `c < out.len()`; `b` must
    /// hold those values (`t.len()` rows of `stride`, the last one possibly cut after
    /// `out.len()`), `out.len() <= stride`.
    #[inline(always)]
    fn axpys(t: &[f32], b: &[Self], stride: usize, out: &mut [f32]) {
        axpys_portable(t, b, stride, out)
    }
}

impl Value for f32 {
    #[inline(always)]
    fn f32(self) -> f32 {
        self
    }
}

impl Value for f16 {
    #[inline(always)]
    fn f32(self) -> f32 {
        self.to_f32()
    }

    #[inline(always)]
    fn dots(a: &[f16], first: usize, x: &[f32], out: &mut [f32]) {
        #[cfg(target_arch = "x86_64")]
        if has_f16c() {
            let n = x.len();
            assert!(a.len() >= (first + out.len()) * n, "LoRA rows out of range");
            // SAFETY: AVX2 and F16C were detected; the rows are inside `a` (checked above).
            return unsafe { x86::dots_f16(a, first, x, out) };
        }
        dots_portable(a, first, x, out)
    }

    #[inline(always)]
    fn axpys(t: &[f32], b: &[f16], stride: usize, out: &mut [f32]) {
        #[cfg(target_arch = "x86_64")]
        if has_f16c() {
            let rows_end = t.len().saturating_sub(1) * stride + out.len();
            assert!(
                out.len() <= stride && (t.is_empty() || b.len() >= rows_end),
                "LoRA rows out of range"
            );
            // SAFETY: AVX2 and F16C were detected; the rows are inside `b` (checked above).
            return unsafe { x86::axpys_f16(t, b, stride, out) };
        }
        axpys_portable(t, b, stride, out)
    }
}

#[cfg(target_arch = "x86_64")]
#[inline(always)]
fn has_f16c() -> bool {
    std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("f16c")
}

/// [`Value::dots`], portable: four rows at a time with [`ops::dot`]'s lanes, then one at a time.
#[inline(always)]
fn dots_portable<V: Value>(a: &[V], first: usize, x: &[f32], out: &mut [f32]) {
    let n = x.len();
    let main = n - n % 8;
    let row = |r: usize| &a[(first + r) * n..][..n];
    let finish = |acc: &[f32; 8], a: &[V]| {
        let tail: f32 = a[main..]
            .iter()
            .zip(&x[main..])
            .map(|(p, q)| p.f32() * q)
            .sum();
        acc.iter().sum::<f32>() + tail
    };
    let mut r = 0;
    while r + 4 <= out.len() {
        let rows = [row(r), row(r + 1), row(r + 2), row(r + 3)];
        let mut acc = [[0.0f32; 8]; 4];
        for i in (0..main).step_by(8) {
            for (acc, a) in acc.iter_mut().zip(&rows) {
                for l in 0..8 {
                    acc[l] += a[i + l].f32() * x[i + l];
                }
            }
        }
        for k in 0..4 {
            out[r + k] = finish(&acc[k], rows[k]);
        }
        r += 4;
    }
    while r < out.len() {
        let a = row(r);
        let mut acc = [0.0f32; 8];
        for i in (0..main).step_by(8) {
            for l in 0..8 {
                acc[l] += a[i + l].f32() * x[i + l];
            }
        }
        out[r] = finish(&acc, a);
        r += 1;
    }
}

/// [`Value::axpys`], portable: blocks of `out` updated by every row in turn.
#[inline(always)]
fn axpys_portable<V: Value>(t: &[f32], b: &[V], stride: usize, out: &mut [f32]) {
    const BLOCK: usize = 64;
    let mut start = 0;
    while start < out.len() {
        let len = BLOCK.min(out.len() - start);
        let block = &mut out[start..start + len];
        for (j, &tj) in t.iter().enumerate() {
            let b = &b[j * stride + start..][..len];
            for (o, v) in block.iter_mut().zip(b) {
                *o += tj * v.f32();
            }
        }
        start += len;
    }
}

#[cfg(target_arch = "x86_64")]
mod x86 {
    use std::arch::x86_64::*;

    use half::f16;

    /// Eight F16 values at `p` as f32.
    ///
    /// # Safety
    /// AVX2 and F16C; `p` points to 8 readable values.
    #[inline(always)]
    unsafe fn load8(p: *const f16) -> __m256 {
        // SAFETY: as the caller promises.
        unsafe { _mm256_cvtph_ps(_mm_loadu_si128(p.cast())) }
    }

    /// The sum of `acc`'s lanes in [`super::dots_portable`]'s order, plus its tail.
    ///
    /// # Safety
    /// AVX2.
    #[inline(always)]
    unsafe fn finish(acc: __m256, a: &[f16], x: &[f32]) -> f32 {
        let mut lanes = [0.0f32; 8];
        // SAFETY: `lanes` holds 8 floats.
        unsafe { _mm256_storeu_ps(lanes.as_mut_ptr(), acc) };
        let tail: f32 = a.iter().zip(x).map(|(p, q)| p.to_f32() * q).sum();
        lanes.iter().sum::<f32>() + tail
    }

    /// [`super::Value::dots`] for F16 with F16C conversions and the same eight lanes.
    ///
    /// # Safety
    /// The CPU must support AVX2 and F16C; `a` holds rows `first..first + out.len()` of
    /// `x.len()` values.
    #[target_feature(enable = "avx2,f16c")]
    pub(super) unsafe fn dots_f16(a: &[f16], first: usize, x: &[f32], out: &mut [f32]) {
        let n = x.len();
        let main = n - n % 8;
        let base = a.as_ptr();
        let mut r = 0;
        while r + 4 <= out.len() {
            // SAFETY: rows first + r .. first + r + 4 lie inside `a` (the caller's promise).
            let p: [*const f16; 4] =
                std::array::from_fn(|k| unsafe { base.add((first + r + k) * n) });
            let mut acc = [_mm256_setzero_ps(); 4];
            let mut i = 0;
            while i < main {
                // SAFETY: i + 8 <= main <= n: inside each row and inside `x`.
                let xv = unsafe { _mm256_loadu_ps(x.as_ptr().add(i)) };
                for k in 0..4 {
                    // SAFETY: as above.
                    let av = unsafe { load8(p[k].add(i)) };
                    // A multiply then an add (no FMA): the portable path's two roundings.
                    acc[k] = _mm256_add_ps(acc[k], _mm256_mul_ps(av, xv));
                }
                i += 8;
            }
            for k in 0..4 {
                let row = &a[(first + r + k) * n..][..n];
                // SAFETY: AVX2 is enabled in this function.
                out[r + k] = unsafe { finish(acc[k], &row[main..], &x[main..]) };
            }
            r += 4;
        }
        while r < out.len() {
            let row = &a[(first + r) * n..][..n];
            let mut acc = _mm256_setzero_ps();
            let mut i = 0;
            while i < main {
                // SAFETY: i + 8 <= main <= n.
                let (av, xv) = unsafe {
                    (
                        load8(row.as_ptr().add(i)),
                        _mm256_loadu_ps(x.as_ptr().add(i)),
                    )
                };
                acc = _mm256_add_ps(acc, _mm256_mul_ps(av, xv));
                i += 8;
            }
            // SAFETY: AVX2 is enabled in this function.
            out[r] = unsafe { finish(acc, &row[main..], &x[main..]) };
            r += 1;
        }
    }

    /// [`super::Value::axpys`] for F16 with F16C conversions, eight columns at a time.
    ///
    /// # Safety
    /// The CPU must support AVX2 and F16C; `b` holds `t.len()` rows of `stride >= out.len()`
    /// values (the last one possibly cut after `out.len()`).
    #[target_feature(enable = "avx2,f16c")]
    pub(super) unsafe fn axpys_f16(t: &[f32], b: &[f16], stride: usize, out: &mut [f32]) {
        let n = out.len();
        let main = n - n % 8;
        let mut c = 0;
        while c < main {
            // SAFETY: c + 8 <= main <= n <= stride: inside `out` and inside each row of `b`.
            unsafe {
                let o = out.as_mut_ptr().add(c);
                let mut acc = _mm256_loadu_ps(o);
                for (j, &tj) in t.iter().enumerate() {
                    let bv = load8(b.as_ptr().add(j * stride + c));
                    acc = _mm256_add_ps(acc, _mm256_mul_ps(_mm256_set1_ps(tj), bv));
                }
                _mm256_storeu_ps(o, acc);
            }
            c += 8;
        }
        for (c, o) in out.iter_mut().enumerate().skip(main) {
            for (j, &tj) in t.iter().enumerate() {
                *o += tj * b[j * stride + c].to_f32();
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::super::ops;
    use super::*;

    fn data(n: usize, seed: u32) -> Vec<f32> {
        let mut s = seed;
        (0..n)
            .map(|_| {
                s = s.wrapping_mul(1_103_515_245).wrapping_add(12_345);
                (s >> 8) as f32 / (1u32 << 24) as f32 * 4.0 - 2.0
            })
            .collect()
    }

    /// Every path, for both value types, against [`ops::dot`] on the values as f32 and against
    /// adding the rows one after another.
    fn check<V: Value>(to: impl Fn(f32) -> V) {
        for n in [0, 1, 7, 8, 9, 31, 576, 1539] {
            for rows in [1, 3, 4, 7, 8] {
                let a: Vec<V> = data(rows * n, n as u32 + 1).into_iter().map(&to).collect();
                let wide: Vec<f32> = a.iter().map(|v| v.f32()).collect();
                let x = data(n, 7);
                for first in [0, rows / 2] {
                    let mut got = vec![0.0f32; rows - first];
                    V::dots(&a, first, &x, &mut got);
                    let mut portable = vec![0.0f32; rows - first];
                    dots_portable(&a, first, &x, &mut portable);
                    for (r, (&g, &p)) in got.iter().zip(&portable).enumerate() {
                        let want = ops::dot(&wide[(first + r) * n..][..n], &x);
                        assert_eq!(g.to_bits(), want.to_bits(), "dots n={n} rows={rows}");
                        assert_eq!(p.to_bits(), want.to_bits(), "portable dots n={n}");
                    }
                }
                let t = data(rows, 3);
                for width in [n, n / 2] {
                    let mut want = data(width, 5);
                    for (j, &tj) in t.iter().enumerate() {
                        for (c, o) in want.iter_mut().enumerate() {
                            *o += tj * wide[j * n + c];
                        }
                    }
                    let mut got = data(width, 5);
                    V::axpys(&t, &a, n, &mut got);
                    let mut portable = data(width, 5);
                    axpys_portable(&t, &a, n, &mut portable);
                    for ((g, p), w) in got.iter().zip(&portable).zip(&want) {
                        assert_eq!(g.to_bits(), w.to_bits(), "axpys n={n} rows={rows}");
                        assert_eq!(p.to_bits(), w.to_bits(), "portable axpys n={n}");
                    }
                }
            }
        }
    }

    #[test]
    fn every_path_computes_the_reference_bits() {
        check(f16::from_f32);
        check(|v| v);
    }
}
