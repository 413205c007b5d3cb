//! Tests of `attention`: every build of the attention loop against the others and against a
//! plain f32 reference.

use super::*;

/// Deterministic values in [-2, 2).
struct Lcg(u32);

impl Lcg {
    fn next(&mut self) -> f32 {
        self.0 = self.0.wrapping_mul(1_664_525).wrapping_add(1_013_904_223);
        (self.0 >> 8) as f32 / (1u32 << 24) as f32 * 4.0 - 2.0
    }

    fn below(&mut self, n: usize) -> usize {
        ((self.next() + 2.0) / 4.0 * n as f32) as usize % n
    }
}

/// A build of the attention loop: its name and entry point.
type Build = (&'static str, fn(&Job, Range<usize>));

/// Every build of the attention loop available on this CPU (portable first).
fn builds() -> Vec<Build> {
    let mut b: Vec<Build> = vec![("portable", |j, r| j.run::<Portable>(r))];
    #[cfg(target_arch = "x86_64")]
    if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("f16c") {
        // SAFETY (both): the features were just detected.
        b.push(("avx2", |j, r| unsafe { j.run_avx2(r) }));
        if std::arch::is_x86_feature_detected!("avx512f") {
            b.push(("avx512", |j, r| unsafe { j.run_avx512(r) }));
        }
    }
    #[cfg(target_arch = "aarch64")]
    if std::arch::is_aarch64_feature_detected!("neon") {
        // SAFETY: the feature was just detected.
        b.push(("neon", |j, r| unsafe { j.run_neon(r) }));
    }
    b.push(("dispatch", |j, r| j.dispatch(r)));
    b
}

/// Every task of the attention of `n` tokens at `pos0` (blocks of `token_block` tokens)
/// run by `build`; returns the output.
fn run_job(
    shape: &AttentionShape,
    (q, keys, values): (&[f32], &[f16], &[f16]),
    (n, pos0, token_block): (usize, usize, usize),
    build: fn(&Job, Range<usize>),
) -> Vec<f32> {
    let (kw, vw) = (
        shape.n_head_kv * shape.head_dim,
        shape.n_head_kv * shape.head_dim_v,
    );
    let widen = |x: &[f16]| x.iter().map(|v| v.to_f32()).collect::<Vec<f32>>();
    let mut k = widen(&keys[pos0 * kw..(pos0 + n) * kw]);
    let v = widen(&values[pos0 * vw..(pos0 + n) * vw]);
    // The new rows are stored by `Job::prepare`: cleared here, so that a row it misses
    // shows in the output.
    let (mut keys, mut values, mut q) = (keys.to_vec(), values.to_vec(), q.to_vec());
    keys[pos0 * kw..].fill(f16::ZERO);
    values[pos0 * vw..].fill(f16::ZERO);
    let mut out = vec![0f32; n * shape.n_head * shape.head_dim_v];
    let n_blocks = n.div_ceil(token_block);
    let job = Job {
        s: shape,
        seq: 0,
        rotate: &|_, _, _, _| {},
        q: Parts::new(&mut q),
        k: Parts::new(&mut k),
        v: &v,
        keys: Parts::new(&mut keys),
        values: Parts::new(&mut values),
        prepare_in_task: n_blocks == 1,
        out: SharedMut(out.as_mut_ptr()),
        out_len: out.len(),
        n,
        pos0,
        token_block,
        n_blocks,
        out_of_memory: AtomicBool::new(false),
    };
    if n_blocks > 1 {
        for t in 0..n {
            for g in 0..shape.n_head_kv {
                // SAFETY: once per (t, g), before the tasks, on this thread only.
                unsafe { job.prepare(t, g) };
            }
        }
    }
    build(&job, 0..shape.n_head_kv * n_blocks);
    out
}

/// The SIMD builds of the attention loop (AVX2/F16C, AVX-512F, NEON: whichever this CPU
/// has) equal the portable one bit for bit, on random shapes: head sizes that are and are
/// not multiples of 8 (and 16), GQA groups 1 to 4, sliding windows, new tokens after
/// cached ones, several token blocks, partial query tiles and key blocks, infinite values,
/// bidirectional (encoder) attention.
#[test]
fn simd_builds_equal_portable_build() {
    let mut rng = Lcg(12345);
    let head_dims = [1, 7, 8, 13, 16, 44, 64, 67, 256];
    let value_dims = [3, 16, 24, 64, 100, 131, 256, 300];
    for case in 0..60 {
        let n_head_kv = 1 + rng.below(3);
        let group = [1, 2, 3, 4][case % 4];
        let shape = AttentionShape {
            n_head: n_head_kv * group,
            n_head_kv,
            head_dim: head_dims[rng.below(head_dims.len())],
            head_dim_v: value_dims[rng.below(value_dims.len())],
            scale: 0.05 + (rng.next() + 2.0) / 8.0,
            softcap: None,
            window: [None, Some(1), Some(5), Some(16)][rng.below(4)],
            causal: case % 7 != 6,
            types: KvTypes::default(),
            alibi: [None, Some(8.0)][case % 5 / 4],
            store: true,
        };
        let n = 1 + rng.below(24);
        let pos0 = [0, 1, 9, 30][rng.below(4)];
        let total = pos0 + n;
        let (hd, hdv) = (shape.head_dim, shape.head_dim_v);
        let q: Vec<f32> = (0..n * shape.n_head * hd).map(|_| rng.next()).collect();
        let keys: Vec<f16> = (0..total * n_head_kv * hd)
            .map(|_| f16::from_f32(rng.next()))
            .collect();
        let mut values: Vec<f16> = (0..total * n_head_kv * hdv)
            .map(|_| f16::from_f32(rng.next()))
            .collect();
        // Now and then an infinite value (an overflowed f16): outside a query's window it
        // must not reach that query's output.
        if case % 5 == 4 {
            let at = rng.below(values.len());
            values[at] = f16::INFINITY;
        }
        let token_block = 1 + rng.below(n);
        let run = |build: fn(&Job, Range<usize>)| {
            run_job(&shape, (&q, &keys, &values), (n, pos0, token_block), build)
        };
        let builds = builds();
        let reference = run(builds[0].1);
        assert!(reference.iter().any(|&v| v != 0.0));
        for &(name, build) in &builds[1..] {
            let out = run(build);
            let same = reference
                .iter()
                .zip(&out)
                .all(|(x, y)| x.to_bits() == y.to_bits() || x.is_nan() && y.is_nan());
            assert!(same, "{name} differs from portable in case {case}");
        }
    }
}

/// The portable build follows the module's contract written out naively: per (token,
/// head), f16-rounded query, [`ops::dot`] scores times the scale, [`ops::softmax`],
/// f16-rounded probabilities, [`ops::weighted_sum`] of the window's values.
#[test]
fn portable_build_equals_naive_attention() {
    for causal in [true, false] {
        for window in [None, Some(6)] {
            naive_case(causal, window, None);
        }
    }
    naive_case(false, None, Some(8.0));
    naive_case(true, Some(6), Some(8.0));
}

/// [`portable_build_equals_naive_attention`] with causal or bidirectional attention, each
/// within a window of 6 positions (the last 6; 3 before and after) or none, with ALiBi of
/// maximum bias `alibi` or none.
fn naive_case(causal: bool, window: Option<usize>, alibi: Option<f32>) {
    let shape = AttentionShape {
        n_head: 6,
        n_head_kv: 2,
        head_dim: 20,
        head_dim_v: 12,
        scale: 0.3,
        softcap: None,
        window,
        causal,
        types: KvTypes::default(),
        alibi,
        store: true,
    };
    // ALiBi's slopes of 6 heads with maximum bias 8 (ggml: powers of 2^(-8/4) for the first
    // 4 heads, odd powers of 2^(-4/4) for the other 2).
    let slopes = [0.25, 0.0625, 0.015625, 0.003_906_25, 0.5, 0.125];
    let (n, pos0) = (7usize, 4usize);
    let total = pos0 + n;
    let mut rng = Lcg(777);
    let q: Vec<f32> = (0..n * 6 * 20).map(|_| rng.next()).collect();
    let keys: Vec<f16> = (0..total * 2 * 20)
        .map(|_| f16::from_f32(rng.next()))
        .collect();
    let values: Vec<f16> = (0..total * 2 * 12)
        .map(|_| f16::from_f32(rng.next()))
        .collect();
    let out = run_job(&shape, (&q, &keys, &values), (n, pos0, 3), |j, r| {
        j.run::<Portable>(r)
    });
    let widen = |x: &[f16]| x.iter().map(|v| v.to_f32()).collect::<Vec<f32>>();
    for t in 0..n {
        let p = pos0 + t;
        let (first, last) = match (causal, window) {
            (true, None) => (0, p),
            (true, Some(w)) => ((p + 1).saturating_sub(w), p),
            (false, None) => (0, total - 1),
            (false, Some(w)) => (p.saturating_sub(w / 2), (p + w / 2).min(total - 1)),
        };
        for h in 0..6 {
            let g = h / 3;
            let qh: Vec<f32> = q[t * 120 + h * 20..][..20]
                .iter()
                .map(|&v| ops::round_f16(v))
                .collect();
            let mut scores: Vec<f32> = (first..=last)
                .map(|j| {
                    let score = ops::dot(&qh, &widen(&keys[j * 40 + g * 20..][..20])) * 0.3;
                    match alibi {
                        Some(_) => score + slopes[h] * -(j.abs_diff(p) as f32),
                        None => score,
                    }
                })
                .collect();
            ops::softmax(&mut scores);
            scores.iter_mut().for_each(|v| *v = ops::round_f16(*v));
            let rows: Vec<f32> = (first..=last)
                .flat_map(|j| widen(&values[j * 24 + g * 12..][..12]))
                .collect();
            let mut want = vec![0f32; 12];
            ops::weighted_sum(&scores, &rows, &mut want);
            let got = &out[t * 72 + h * 12..][..12];
            assert!(want
                .iter()
                .zip(got)
                .all(|(x, y)| x.to_bits() == y.to_bits()));
        }
    }
}
