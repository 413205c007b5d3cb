//! Python-free kernel checks that run on every target, including under qemu-user
//! (`scripts/cross-test.sh`): the SIMD dot products selected at run time (AVX2 on x86-64, NEON
//! on aarch64) against the portable kernels, and the portable kernels against a plain f64 dot
//! product of the dequantized rows. On big-endian s390x the latter shows that every block field
//! is read as little-endian, because the reference goes through [`dequantize`], which the
//! `quant_oracle` tests check against the PyPI `gguf` package on the host.

mod quant_support;

use local_llm_engine::quant::{
    dequantize, quantize_row, simd_level, vec_dot, vec_dot_scalar, vec_dot_type, GgmlType,
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
        // NEON is mandatory on aarch64 Linux and Android: the NEON kernels must be the ones tested.
        assert_eq!(level, "neon");
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
                let simd = vec_dot(w, n, &weights, &act);
                let scalar = vec_dot_scalar(w, n, &weights, &act);
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
            let ours = f64::from(vec_dot_scalar(w, n, &weights, &act));
            let (want, mag) = reference(w, n, &weights, &act);
            // The kernels round block scales and partial sums to f32 (and Q4_1/Q5_1 use Q8_1's
            // f16 sum); a misread field is off by orders of magnitude more than this.
            assert!(
                (ours - want).abs() <= 2e-3 * mag + 1e-6,
                "{w}, {nb} blocks: vec_dot_scalar {ours} vs dequantized reference {want} \
                 (Σ|w·a| = {mag})"
            );
        }
    }
}
