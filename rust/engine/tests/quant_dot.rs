//! Dot-product kernels: every weight type against an f64 reference built from dequantized rows,
//! and the runtime-selected SIMD kernels against the portable ones.

mod quant_support;

use half::f16;
use local_llm_engine::quant::{
    kernels, portable_dot, simd_level, vec_dot_type, GgmlType, TileOut, MAX_ROWS_TOKENS,
    MAX_TILE_ROWS, MAX_TILE_TOKENS,
};
use quant_support::{make_case, Rng};

const WEIGHT_TYPES: [GgmlType; 27] = GgmlType::ALL;

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
                let simd = kernels(ty).dot(n, &c.w, &c.act);
                let scalar = portable_dot(ty, n, &c.w, &c.act);
                let tol = 1e-6 * c.magnitude + 1e-30;
                let exact = [GgmlType::Q2_K, GgmlType::Q3_K, GgmlType::IQ4_XS];
                let codebook = [
                    GgmlType::IQ2_XXS,
                    GgmlType::IQ2_XS,
                    GgmlType::IQ2_S,
                    GgmlType::IQ3_XXS,
                    GgmlType::IQ3_S,
                    GgmlType::IQ1_S,
                    GgmlType::IQ1_M,
                ];
                // x86's Q4_K/Q5_K/Q6_K kernels combine each super-block's integers as the
                // portable kernel does (which lets the prompt tiles hold tokens in their lanes).
                let x86_exact = cfg!(target_arch = "x86_64")
                    && matches!(ty, GgmlType::Q4_K | GgmlType::Q5_K | GgmlType::Q6_K);
                if exact.contains(&ty) || codebook.contains(&ty) || x86_exact {
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
            kernels(ty).dot(n, &c.w, &c.act).to_bits(),
            portable_dot(ty, n, &c.w, &c.act).to_bits(),
            "{ty}"
        );
    }
}

/// Each format's prompt tile (its table entry's rows × tokens) must give, bit for bit, what the
/// single-row kernel gives for each pair.
#[test]
fn the_tile_equals_the_one_row_kernel_bitwise() {
    let mut rng = Rng::new(7);
    let mut tiled = Vec::new();
    for ty in WEIGHT_TYPES {
        let k = kernels(ty);
        let Some(shape) = k.tile_shape() else {
            continue;
        };
        assert!(shape.rows <= MAX_TILE_ROWS && shape.tokens <= MAX_TILE_TOKENS);
        tiled.push(ty);
        for n in lengths(ty) {
            let w: Vec<Vec<u8>> = (0..shape.rows)
                .map(|_| quant_support::random_row(&mut rng, ty, n))
                .collect();
            let acts: Vec<Vec<u8>> = (0..shape.tokens)
                .map(|_| quant_support::random_row(&mut rng, vec_dot_type(ty), n))
                .collect();
            let w_rows: Vec<&[u8]> = w.iter().map(|r| &r[..]).collect();
            let a_rows: Vec<&[u8]> = acts.iter().map(|r| &r[..]).collect();
            let mut out: TileOut = [[f32::NAN; MAX_TILE_TOKENS]; MAX_TILE_ROWS];
            k.dot_tile(n, &w_rows, &a_rows, &mut out);
            for r in 0..shape.rows {
                for t in 0..shape.tokens {
                    assert_eq!(
                        out[r][t].to_bits(),
                        k.dot(n, &w[r], &acts[t]).to_bits(),
                        "{ty} n={n} {shape:?} ({r}, {t}) ({})",
                        simd_level()
                    );
                }
            }
        }
        // Rows without one whole block: empty sums, not a panic.
        let (w, a): (Vec<&[u8]>, Vec<&[u8]>) = (vec![&[]; shape.rows], vec![&[]; shape.tokens]);
        let mut out: TileOut = [[f32::NAN; MAX_TILE_TOKENS]; MAX_TILE_ROWS];
        k.dot_tile(0, &w, &a, &mut out);
        let sums = out[..shape.rows].iter().flat_map(|r| &r[..shape.tokens]);
        assert!(sums.clone().all(|&v| v == 0.0), "{ty}: {out:?}");
    }
    eprintln!("tiles checked for {tiled:?} (simd level {})", simd_level());
    if simd_level().starts_with("avx") {
        for ty in [
            GgmlType::Q8_0,
            GgmlType::Q4_0,
            GgmlType::Q5_0,
            GgmlType::Q4_1,
            GgmlType::Q5_1,
            GgmlType::Q4_K,
            GgmlType::Q5_K,
            GgmlType::Q6_K,
            GgmlType::IQ4_NL,
            GgmlType::IQ4_XS,
            GgmlType::IQ2_XXS,
            GgmlType::IQ3_S,
            GgmlType::IQ1_M,
        ] {
            assert!(tiled.contains(&ty), "{ty} has a prompt tile on x86-64");
        }
    }
}

/// Decoding several sequences: each weight row against 1 to 4 tokens in one pass (four rows a
/// quarter of the matrix apart, then the rows left over) gives, bit for bit, the single-row
/// kernel's result for every (row, token).
#[test]
fn dot_rows_equals_the_one_row_kernel_bitwise() {
    let mut rng = Rng::new(11);
    let mut streamed = Vec::new();
    for ty in WEIGHT_TYPES {
        let k = kernels(ty);
        if k.has_rows_kernel() {
            streamed.push(ty);
        }
        for n in lengths(ty) {
            // Nine rows: two quarters of four, then one.
            let w: Vec<Vec<u8>> = (0..9)
                .map(|_| quant_support::random_row(&mut rng, ty, n))
                .collect();
            for tokens in 1..=MAX_ROWS_TOKENS {
                let acts: Vec<Vec<u8>> = (0..tokens)
                    .map(|_| quant_support::random_row(&mut rng, vec_dot_type(ty), n))
                    .collect();
                let mut out = vec![vec![f32::NAN; w.len()]; tokens];
                let mut outs: Vec<&mut [f32]> = out.iter_mut().map(|o| &mut o[..]).collect();
                let a_rows: Vec<&[u8]> = acts.iter().map(|a| &a[..]).collect();
                k.dot_rows(n, &w.concat(), &a_rows, &mut outs);
                for (t, row) in out.iter().enumerate() {
                    for (r, got) in row.iter().enumerate() {
                        assert_eq!(
                            got.to_bits(),
                            k.dot(n, &w[r], &acts[t]).to_bits(),
                            "{ty} n={n} {tokens} tokens, row {r} token {t} ({})",
                            simd_level()
                        );
                    }
                }
            }
        }
    }
    eprintln!(
        "decoding kernels for {streamed:?} (simd level {})",
        simd_level()
    );
    if simd_level().starts_with("avx") {
        let want = [
            GgmlType::Q4_0,
            GgmlType::Q4_1,
            GgmlType::Q5_0,
            GgmlType::Q5_1,
            GgmlType::Q8_0,
            GgmlType::Q4_K,
            GgmlType::Q5_K,
            GgmlType::Q6_K,
            GgmlType::IQ2_XXS,
            GgmlType::IQ2_XS,
            GgmlType::IQ3_XXS,
            GgmlType::IQ1_S,
            GgmlType::IQ4_NL,
            GgmlType::IQ3_S,
            GgmlType::IQ2_S,
            GgmlType::IQ4_XS,
            GgmlType::IQ1_M,
            GgmlType::TQ1_0,
            GgmlType::TQ2_0,
            GgmlType::MXFP4,
        ];
        assert_eq!(streamed, want, "the x86-64 decoding kernels");
    }
}
