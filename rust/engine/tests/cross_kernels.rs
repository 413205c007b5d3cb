//! Python-free kernel checks that run on every target, including under qemu-user
//! (`scripts/checks/cross-test.sh`): the SIMD dot products selected at run time (AVX2 on x86-64, NEON
//! on aarch64) against the portable kernels, and the portable kernels against a plain f64 dot
//! product of the dequantized rows. On big-endian s390x the latter shows that every block field
//! is read as little-endian, because the reference goes through [`dequantize`], which the
//! `quant_oracle` tests check against the PyPI `gguf` package on the host.

mod quant_support;

use local_llm_engine::quant::{
    dequantize, kernels, portable_dot, quantize_row, simd_level, vec_dot_type, GgmlType,
};
use quant_support::{random_row, Rng};

/// Block counts per row: one block, an odd count (tails of kernels that take two blocks at a
/// time) and a longer row.
const BLOCKS: [usize; 3] = [1, 3, 16];

/// A weight row of `w` and a matching activation row quantized from random floats.
fn rows(rng: &mut Rng, w: GgmlType, n: usize) -> (Vec<u8>, Vec<u8>) {
    let weights = random_row(rng, w, n);
    let a = vec_dot_type(w);
    let x: Vec<f32> = (0..n).map(|_| rng.value()).collect();
    let mut act = vec![0u8; a.row_bytes(n as u64).expect("whole blocks") as usize];
    quantize_row(a, &x, &mut act).expect("quantize activations");
    (weights, act)
}

/// Σ w·a in f64 over the dequantized rows, and Σ |w·a| (the scale for tolerances).
fn reference(w: GgmlType, n: usize, weights: &[u8], act: &[u8]) -> (f64, f64) {
    let mut wf = vec![0f32; n];
    let mut af = vec![0f32; n];
    dequantize(w, weights, &mut wf).expect("dequantize weights");
    dequantize(vec_dot_type(w), act, &mut af).expect("dequantize activations");
    wf.iter().zip(&af).fold((0.0, 0.0), |(s, m), (&x, &y)| {
        let p = f64::from(x) * f64::from(y);
        (s + p, m + p.abs())
    })
}

/// The aarch64 level `quant` should select: the best the CPU has (dotprod, then i8mm too), or
/// the lower one `LOCAL_LLM_SIMD` forces (`neon`, `dotprod`).
#[cfg(target_arch = "aarch64")]
fn expected_arm_level() -> &'static str {
    let forced = std::env::var("LOCAL_LLM_SIMD").unwrap_or_default();
    let dot = std::arch::is_aarch64_feature_detected!("dotprod");
    let mm = std::arch::is_aarch64_feature_detected!("i8mm");
    if forced == "neon" || !dot {
        "neon"
    } else if forced == "dotprod" || !mm {
        "dotprod"
    } else {
        "i8mm"
    }
}

#[test]
fn simd_level_is_the_native_one() {
    let level = simd_level();
    eprintln!(
        "target {} ({} endian): SIMD level {level}",
        std::env::consts::ARCH,
        if cfg!(target_endian = "big") {
            "big"
        } else {
            "little"
        }
    );
    let forced_scalar =
        std::env::var("LOCAL_LLM_SIMD").is_ok_and(|v| v.eq_ignore_ascii_case("scalar"));
    if forced_scalar {
        assert_eq!(level, "scalar");
    } else if cfg!(target_arch = "aarch64") {
        // NEON is mandatory on aarch64 Linux and Android: the NEON kernels must be the ones
        // tested, at the best level the CPU has (std's detection) or the one forced.
        #[cfg(target_arch = "aarch64")]
        assert_eq!(level, expected_arm_level());
    } else if !cfg!(target_arch = "x86_64") {
        assert_eq!(level, "scalar");
    }
}

#[test]
fn simd_vec_dot_matches_scalar_for_every_type() {
    let mut rng = Rng::new(0x5eed);
    let mut worst = Vec::new();
    for w in GgmlType::ALL {
        let mut max_rel = 0f64;
        for nb in BLOCKS {
            let n = nb * w.block_size();
            for trial in 0..4 {
                let (weights, act) = rows(&mut rng, w, n);
                let simd = kernels(w).dot(n, &weights, &act);
                let scalar = portable_dot(w, n, &weights, &act);
                let (_, mag) = reference(w, n, &weights, &act);
                let diff = f64::from(simd - scalar).abs();
                assert!(
                    simd.is_finite() && diff <= 1e-5 * mag + 1e-6,
                    "{w} ({} kernel), {nb} blocks, trial {trial}: SIMD {simd} vs scalar {scalar} \
                     (Σ|w·a| = {mag})",
                    simd_level()
                );
                max_rel = max_rel.max(diff / mag.max(f64::MIN_POSITIVE));
            }
        }
        worst.push(format!("{w}: {max_rel:.1e}"));
    }
    eprintln!(
        "{} vs scalar, max |Δ|/Σ|w·a| per type: {}",
        simd_level(),
        worst.join(", ")
    );
}

#[test]
fn scalar_vec_dot_matches_dequantized_reference_for_every_type() {
    let mut rng = Rng::new(0xd07);
    for w in GgmlType::ALL {
        for nb in BLOCKS {
            let n = nb * w.block_size();
            let (weights, act) = rows(&mut rng, w, n);
            let ours = f64::from(portable_dot(w, n, &weights, &act));
            let (want, mag) = reference(w, n, &weights, &act);
            // The kernels round block scales and partial sums to f32 (and Q4_1/Q5_1 use Q8_1's
            // f16 sum); a misread field is off by orders of magnitude more than this.
            assert!(
                (ours - want).abs() <= 2e-3 * mag + 1e-6,
                "{w}, {nb} blocks: portable_dot {ours} vs dequantized reference {want} \
                 (Σ|w·a| = {mag})"
            );
        }
    }
}

#[cfg(target_arch = "aarch64")]
/// Overwrites the scales of every block of `row` (type `w`) with extreme values: the largest
/// and smallest halves (normal and subnormal), zero, and for Q8_K huge and tiny f32 scales.
fn extreme_scales(rng: &mut Rng, w: GgmlType, row: &mut [u8]) {
    const HALVES: [u16; 8] = [
        0x7bff, 0xfbff, 0x0400, 0x0001, 0x8001, 0x0000, 0x3c00, 0xc100,
    ];
    const SINGLES: [f32; 5] = [1e30, 1e-30, 3.0e38, -7.5e-39, 1.0];
    let pick = |rng: &mut Rng, n: usize| (rng.next_u64() % n as u64) as usize;
    for b in row.chunks_exact_mut(w.type_size()) {
        for &(at, _) in quant_support::f16_fields(w) {
            let h = HALVES[pick(rng, HALVES.len())];
            b[at..at + 2].copy_from_slice(&h.to_le_bytes());
        }
        if w == GgmlType::Q8_K {
            b[0..4].copy_from_slice(&SINGLES[pick(rng, SINGLES.len())].to_le_bytes());
        }
        if w == GgmlType::MXFP4 {
            // E8M0: the two subnormal exponents, 1, and the largest (levels × 2^127 overflow).
            b[0] = [0, 1, 127, 128, 254, 255][pick(rng, 6)];
        }
    }
}

/// On aarch64 every NEON kernel (at the level selected, see `simd_level_is_the_native_one`;
/// `scripts/checks/cross-test.sh` runs this at each level) gives the portable kernel's result bit
/// for bit: one-row dot products, the far-apart row streams of decoding and the prompt tiles,
/// on random rows and on rows with extreme scales.
#[cfg(target_arch = "aarch64")]
#[test]
fn neon_kernels_equal_the_portable_ones_bitwise() {
    use local_llm_engine::quant::{TileOut, MAX_TILE_ROWS, MAX_TILE_TOKENS};

    /// The format's prompt tile (if it has one) on the first weight rows and tokens.
    fn tile(w: GgmlType, n: usize, ws: &[Vec<u8>], acts: &[Vec<u8>]) -> bool {
        let k = kernels(w);
        let Some(shape) = k.tile_shape() else {
            return false;
        };
        let w_rows: Vec<&[u8]> = ws.iter().take(shape.rows).map(|r| &r[..]).collect();
        let a_rows: Vec<&[u8]> = acts.iter().take(shape.tokens).map(|a| &a[..]).collect();
        let mut v: TileOut = [[f32::NAN; MAX_TILE_TOKENS]; MAX_TILE_ROWS];
        k.dot_tile(n, &w_rows, &a_rows, &mut v);
        for r in 0..shape.rows {
            for t in 0..shape.tokens {
                let want = portable_dot(w, n, &ws[r], &acts[t]);
                assert_eq!(
                    v[r][t].to_bits(),
                    want.to_bits(),
                    "{w} {shape:?} tile ({r}, {t}), n={n}"
                );
            }
        }
        true
    }

    /// Each of the nine rows against `tokens` tokens in one pass (decoding several sequences).
    fn rows_tokens(w: GgmlType, n: usize, ws: &[Vec<u8>], acts: &[Vec<u8>], tokens: usize) {
        let mut out = vec![vec![f32::NAN; ws.len()]; tokens];
        let mut slices: Vec<&mut [f32]> = out.iter_mut().map(|o| &mut o[..]).collect();
        let a_rows: Vec<&[u8]> = acts.iter().take(tokens).map(|a| &a[..]).collect();
        kernels(w).dot_rows(n, &ws.concat(), &a_rows, &mut slices);
        for (t, row) in out.iter().enumerate() {
            for (i, (o, wr)) in row.iter().zip(ws).enumerate() {
                assert_eq!(
                    o.to_bits(),
                    portable_dot(w, n, wr, &acts[t]).to_bits(),
                    "{w} dot_rows with {tokens} tokens, row {i} token {t}, n={n}"
                );
            }
        }
    }

    let mut rng = Rng::new(0xa64);
    let mut tiled = Vec::new();
    for w in GgmlType::ALL {
        let a = vec_dot_type(w);
        for nb in BLOCKS {
            // Float rows: 37, 111 and 592 elements (vector bodies and scalar tails).
            let n = nb
                * if w.block_size() == 1 {
                    37
                } else {
                    w.block_size()
                };
            for extreme in [false, true] {
                // Nine weight rows: decoding takes two quarters of four plus one row.
                let mut ws: Vec<Vec<u8>> = (0..9).map(|_| random_row(&mut rng, w, n)).collect();
                let mut acts: Vec<Vec<u8>> = (0..MAX_TILE_TOKENS)
                    .map(|_| rows(&mut rng, w, n).1)
                    .collect();
                if extreme {
                    for row in ws.iter_mut() {
                        extreme_scales(&mut rng, w, row);
                    }
                    for row in acts.iter_mut() {
                        extreme_scales(&mut rng, a, row);
                    }
                }
                for (i, wr) in ws.iter().enumerate() {
                    let (simd, scalar) = (
                        kernels(w).dot(n, wr, &acts[0]),
                        portable_dot(w, n, wr, &acts[0]),
                    );
                    assert_eq!(
                        simd.to_bits(),
                        scalar.to_bits(),
                        "{w} row {i}, n={n}: {simd} vs {scalar} ({})",
                        simd_level()
                    );
                }
                for tokens in 1..=4 {
                    rows_tokens(w, n, &ws, &acts, tokens);
                }
                if tile(w, n, &ws, &acts) && !tiled.contains(&w) {
                    tiled.push(w);
                }
            }
        }
    }
    eprintln!(
        "{}: bit-identical; tile kernels for {tiled:?}",
        simd_level()
    );
    if simd_level() != "scalar" {
        assert_eq!(
            tiled.len(),
            22,
            "Q4_0 Q4_1 Q5_0 Q5_1 Q8_0 Q2_K..Q6_K, IQ4_NL IQ4_XS MXFP4, the 7 codebook \
             formats and TQ1_0 TQ2_0 have NEON tiles"
        );
    }
}
