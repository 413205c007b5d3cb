//! Dot-product kernels: every weight type against an f64 reference built from dequantized rows,
//! and the runtime-selected SIMD kernels against the portable ones.

mod quant_support;

use half::f16;
use local_llm_engine::quant::{
    simd_level, vec_dot, vec_dot_rows_tokens, vec_dot_scalar, vec_dot_tile, vec_dot_type, GgmlType,
};
use quant_support::{make_case, Rng};

const WEIGHT_TYPES: [GgmlType; 15] = GgmlType::ALL;

/// Row lengths to try for a type: several whole-block counts, plus ragged tails for floats.
fn lengths(ty: GgmlType) -> Vec<usize> {
    match ty.block_size() {
        1 => vec![1, 7, 31, 32, 37, 100, 256, 1000, 2048],
        32 => vec![32, 64, 96, 256, 640, 2048],
        _ => vec![256, 512, 768, 2048],
    }
}

#[test]
fn vec_dot_matches_f64_reference_for_every_type() {
    let mut rng = Rng::new(42);
    let mut checked = 0;
    for ty in WEIGHT_TYPES {
        for n in lengths(ty) {
            for _ in 0..3 {
                let c = make_case(&mut rng, ty, n);
                c.check(ty, n);
                checked += 1;
            }
        }
    }
    eprintln!("checked {checked} rows (simd level {})", simd_level());
}

#[test]
fn simd_kernels_agree_with_scalar() {
    let mut rng = Rng::new(1234);
    for ty in WEIGHT_TYPES {
        for n in lengths(ty) {
            for _ in 0..5 {
                let c = make_case(&mut rng, ty, n);
                let simd = vec_dot(ty, n, &c.w, &c.act);
                let scalar = vec_dot_scalar(ty, n, &c.w, &c.act);
                let tol = 1e-6 * c.magnitude + 1e-30;
                if matches!(ty, GgmlType::Q2_K | GgmlType::Q3_K) {
                    // These SIMD kernels reduce to the same integer and combine it like scalar.
                    assert_eq!(simd.to_bits(), scalar.to_bits(), "{ty} n={n}");
                }
                assert!(
                    (f64::from(simd) - f64::from(scalar)).abs() <= tol,
                    "{ty} n={n}: {} {simd} vs scalar {scalar}",
                    simd_level()
                );
            }
        }
    }
    if std::env::var("LOCAL_LLM_SIMD").is_ok_and(|v| v == "scalar") {
        assert_eq!(simd_level(), "scalar");
    }
    #[cfg(target_arch = "x86_64")]
    if std::env::var("LOCAL_LLM_SIMD").is_err() && std::arch::is_x86_feature_detected!("avx2") {
        let want = if std::arch::is_x86_feature_detected!("avx512vnni")
            && std::arch::is_x86_feature_detected!("avx512vl")
        {
            "avx512vnni"
        } else {
            "avx2"
        };
        assert_eq!(simd_level(), want);
    }
    if std::env::var("LOCAL_LLM_SIMD").is_ok_and(|v| v == "avx2") {
        assert_eq!(simd_level(), "avx2");
    }
}

#[test]
fn integer_parts_are_exact_on_small_values() {
    // With power-of-two scales and small quants every kernel's result is exactly representable,
    // so SIMD and scalar must agree bit for bit.
    let mut rng = Rng::new(9);
    for ty in [
        GgmlType::Q8_0,
        GgmlType::Q4_0,
        GgmlType::Q5_0,
        GgmlType::Q4_1,
        GgmlType::Q4_K,
        GgmlType::Q6_K,
    ] {
        let n = 1024;
        let mut c = make_case(&mut rng, ty, n);
        let one = f16::from_f32(0.25).to_bits().to_le_bytes();
        for b in c.w.chunks_exact_mut(ty.type_size()) {
            match ty {
                GgmlType::Q6_K => b[208..210].copy_from_slice(&one),
                GgmlType::Q4_K => {
                    b[0..2].copy_from_slice(&one);
                    b[2..4].copy_from_slice(&one);
                }
                GgmlType::Q4_1 => {
                    b[0..2].copy_from_slice(&one);
                    b[2..4].copy_from_slice(&[0, 0]);
                }
                _ => b[0..2].copy_from_slice(&one),
            }
        }
        let at = vec_dot_type(ty);
        for b in c.act.chunks_exact_mut(at.type_size()) {
            if at == GgmlType::Q8_K {
                b[0..4].copy_from_slice(&0.125f32.to_le_bytes());
            } else {
                b[0..2].copy_from_slice(&f16::from_f32(0.125).to_bits().to_le_bytes());
            }
        }
        assert_eq!(
            vec_dot(ty, n, &c.w, &c.act).to_bits(),
            vec_dot_scalar(ty, n, &c.w, &c.act).to_bits(),
            "{ty}"
        );
    }
}

/// The tile kernels (R weight rows × T activation rows, prompt processing) must give, bit for
/// bit, what the single-row kernel gives for each pair.
#[test]
fn vec_dot_tile_equals_vec_dot_bitwise() {
    fn check<const R: usize, const T: usize>(rng: &mut Rng, ty: GgmlType, n: usize) -> bool {
        let w: Vec<Vec<u8>> = (0..R)
            .map(|_| quant_support::random_row(rng, ty, n))
            .collect();
        let acts: Vec<Vec<u8>> = (0..T)
            .map(|_| quant_support::random_row(rng, vec_dot_type(ty), n))
            .collect();
        let w_rows: [&[u8]; R] = std::array::from_fn(|i| &w[i][..]);
        let a_rows: [&[u8]; T] = std::array::from_fn(|i| &acts[i][..]);
        let Some(tile) = vec_dot_tile(ty, n, w_rows, a_rows) else {
            return false;
        };
        for r in 0..R {
            for t in 0..T {
                assert_eq!(
                    tile[r][t].to_bits(),
                    vec_dot(ty, n, &w[r], &acts[t]).to_bits(),
                    "{ty} n={n} {R}x{T} ({r}, {t})"
                );
            }
        }
        true
    }
    let mut rng = Rng::new(7);
    let mut tiled = Vec::new();
    for ty in WEIGHT_TYPES {
        for n in lengths(ty) {
            let mut any = check::<1, 1>(&mut rng, ty, n);
            any |= check::<1, 4>(&mut rng, ty, n);
            any |= check::<2, 4>(&mut rng, ty, n);
            any |= check::<4, 4>(&mut rng, ty, n);
            any |= check::<4, 1>(&mut rng, ty, n);
            if matches!(ty, GgmlType::Q4_K | GgmlType::Q5_K | GgmlType::Q6_K) {
                // The K tiles take any row count and any multiple of 4 tokens up to 16.
                check::<1, 8>(&mut rng, ty, n);
                check::<2, 8>(&mut rng, ty, n);
                check::<3, 12>(&mut rng, ty, n);
                check::<4, 16>(&mut rng, ty, n);
            }
            if any && !tiled.contains(&ty) {
                tiled.push(ty);
            }
        }
    }
    eprintln!(
        "tile kernels checked for {tiled:?} (simd level {})",
        simd_level()
    );
    if simd_level().starts_with("avx") {
        assert_eq!(
            tiled.len(),
            7,
            "Q8_0 Q4_0 Q5_0 Q4_1 Q4_K Q5_K Q6_K have tile kernels on x86-64"
        );
    }
}

/// Decoding several sequences: each weight row against 1 to 4 tokens in one pass (four rows a
/// quarter of the matrix apart, then the rows left over) gives, bit for bit, the single-row
/// kernel's result for every (row, token).
#[test]
fn vec_dot_rows_tokens_equals_vec_dot_bitwise() {
    fn check<const T: usize>(rng: &mut Rng, ty: GgmlType, n: usize) {
        // Nine rows: two quarters of four, then one.
        let w: Vec<Vec<u8>> = (0..9)
            .map(|_| quant_support::random_row(rng, ty, n))
            .collect();
        let acts: Vec<Vec<u8>> = (0..T)
            .map(|_| quant_support::random_row(rng, vec_dot_type(ty), n))
            .collect();
        let mut out = vec![vec![0f32; w.len()]; T];
        let mut slices = out.iter_mut();
        let outs: [&mut [f32]; T] =
            std::array::from_fn(|_| &mut slices.next().expect("T rows")[..]);
        let a_rows: [&[u8]; T] = std::array::from_fn(|i| &acts[i][..]);
        vec_dot_rows_tokens(ty, n, &w.concat(), a_rows, outs);
        for (t, row) in out.iter().enumerate() {
            for (r, got) in row.iter().enumerate() {
                assert_eq!(
                    got.to_bits(),
                    vec_dot(ty, n, &w[r], &acts[t]).to_bits(),
                    "{ty} n={n} {T} tokens, row {r} token {t} ({})",
                    simd_level()
                );
            }
        }
    }
    let mut rng = Rng::new(11);
    for ty in WEIGHT_TYPES {
        for n in lengths(ty) {
            check::<1>(&mut rng, ty, n);
            check::<2>(&mut rng, ty, n);
            check::<3>(&mut rng, ty, n);
            check::<4>(&mut rng, ty, n);
        }
    }
}
