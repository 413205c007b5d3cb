//! Shared helpers of the quant integration tests: a deterministic PRNG, random blocks with sane
//! scales for every type, and running the `gguf`-package oracle script.

#![allow(dead_code)]

use std::path::{Path, PathBuf};
use std::process::Command;

use half::f16;
use local_llm_engine::quant::{
    dequantize, kernels, portable_dot, quantize_row, vec_dot_type, GgmlType,
};

/// SplitMix64: small, deterministic, good enough for test data.
pub struct Rng(u64);

impl Rng {
    pub fn new(seed: u64) -> Self {
        Rng(seed)
    }
    pub fn next_u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    /// Uniform in [0, 1).
    pub fn unit(&mut self) -> f32 {
        (self.next_u64() >> 40) as f32 / (1u64 << 24) as f32
    }
    /// Uniform in [-1, 1).
    pub fn signed(&mut self) -> f32 {
        2.0 * self.unit() - 1.0
    }
    pub fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next_u64() as u8).collect()
    }
    /// A random value of varied magnitude (roughly 1e-3 .. 10), random sign.
    pub fn value(&mut self) -> f32 {
        let mag = 10f32.powf(4.0 * self.unit() - 3.0);
        if self.next_u64() & 1 == 0 {
            mag
        } else {
            -mag
        }
    }
}

fn put_f16(b: &mut [u8], at: usize, v: f32) {
    b[at..at + 2].copy_from_slice(&f16::from_f32(v).to_bits().to_le_bytes());
}

/// The byte offsets of the f16 scale fields in one block of `ty` (`signed` ones may be negative).
pub fn f16_fields(ty: GgmlType) -> &'static [(usize, bool)] {
    match ty {
        GgmlType::Q4_0 | GgmlType::Q5_0 | GgmlType::Q8_0 => &[(0, true)],
        GgmlType::Q4_1 | GgmlType::Q5_1 | GgmlType::Q8_1 => &[(0, true), (2, true)],
        GgmlType::Q2_K => &[(80, false), (82, false)],
        GgmlType::Q3_K => &[(108, true)],
        GgmlType::Q4_K | GgmlType::Q5_K => &[(0, false), (2, false)],
        GgmlType::Q6_K => &[(208, true)],
        GgmlType::IQ4_NL
        | GgmlType::IQ4_XS
        | GgmlType::IQ2_XXS
        | GgmlType::IQ2_XS
        | GgmlType::IQ2_S
        | GgmlType::IQ3_XXS
        | GgmlType::IQ3_S
        | GgmlType::IQ1_S => &[(0, true)],
        GgmlType::TQ1_0 => &[(52, true)],
        GgmlType::TQ2_0 => &[(64, true)],
        _ => &[],
    }
}

/// `n` elements of `ty` as random bytes with finite, sane scales (and finite float values).
/// Q8_0/Q8_1/Q8_K quants avoid −128 (ggml's quantizers never produce it). Q8_1's `s` and
/// Q8_K's sums are made consistent with the quants.
pub fn random_row(rng: &mut Rng, ty: GgmlType, n: usize) -> Vec<u8> {
    let bytes = ty.row_bytes(n as u64).expect("whole blocks") as usize;
    match ty {
        GgmlType::F32 => return (0..n).flat_map(|_| rng.value().to_le_bytes()).collect(),
        GgmlType::F16 => {
            return (0..n)
                .flat_map(|_| f16::from_f32(rng.value()).to_bits().to_le_bytes())
                .collect()
        }
        GgmlType::BF16 => {
            return (0..n)
                .flat_map(|_| ((rng.value().to_bits() >> 16) as u16).to_le_bytes())
                .collect()
        }
        _ => {}
    }
    let mut out = rng.bytes(bytes);
    let ts = ty.type_size();
    for b in out.chunks_exact_mut(ts) {
        for &(at, signed) in f16_fields(ty) {
            let v = 0.001 + 0.05 * rng.unit();
            put_f16(
                b,
                at,
                if signed && rng.next_u64() & 1 == 1 {
                    -v
                } else {
                    v
                },
            );
        }
        let qs = match ty {
            GgmlType::Q8_0 => 2..34,
            GgmlType::Q8_1 => 4..36,
            GgmlType::Q8_K => 4..260,
            _ => 0..0,
        };
        for q in &mut b[qs.clone()] {
            if *q == 0x80 {
                *q = 0x81;
            }
        }
        if ty == GgmlType::MXFP4 {
            // E8M0 exponent: scales 2^-12 .. 2^0 (times levels up to 6).
            b[0] = 115 + (rng.next_u64() % 13) as u8;
        }
        if ty == GgmlType::IQ1_M {
            // The f16 super-block scale is spread over the top nibbles of the 4 scale words.
            let v = 0.001 + 0.05 * rng.unit();
            let v = if rng.next_u64() & 1 == 1 { -v } else { v };
            let bits = f16::from_f32(v).to_bits();
            for i in 0..4 {
                let at = 48 + 2 * i + 1;
                b[at] = (b[at] & 0x0f) | ((((bits >> (4 * i)) & 0xf) as u8) << 4);
            }
        }
        if ty == GgmlType::Q8_1 {
            let d = f16::from_le_bytes([b[0], b[1]]).to_f32();
            let sum: i32 = b[4..36].iter().map(|&q| i32::from(q as i8)).sum();
            put_f16(b, 2, d * sum as f32);
        }
        if ty == GgmlType::Q8_K {
            let d = 0.0001 + 0.01 * rng.unit();
            b[0..4].copy_from_slice(&d.to_le_bytes());
            for g in 0..16 {
                let s: i32 = b[4 + 16 * g..20 + 16 * g]
                    .iter()
                    .map(|&q| i32::from(q as i8))
                    .sum();
                b[260 + 2 * g..262 + 2 * g].copy_from_slice(&(s as i16).to_le_bytes());
            }
        }
    }
    out
}

/// A fresh scratch directory under the system temp dir.
pub fn scratch_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("local-llm-quant-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).expect("create scratch dir");
    dir
}

/// The oracle script (tools/gguf-oracle/quant_oracle.py).
pub fn oracle_script() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../tools/gguf-oracle/quant_oracle.py")
}

/// Runs the oracle script with `args` and panics with its stderr on failure.
pub fn run_oracle(args: &[&str]) {
    let out = Command::new("python3")
        .arg(oracle_script())
        .args(args)
        .output()
        .expect("run python3 (needs the gguf and numpy packages)");
    assert!(
        out.status.success(),
        "oracle {:?} failed: {}",
        args,
        String::from_utf8_lossy(&out.stderr)
    );
}

/// Reads a little-endian f32 file.
pub fn read_f32(path: &Path) -> Vec<f32> {
    std::fs::read(path)
        .expect("read oracle output")
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect()
}

/// One weight row, one activation row and the f64 reference of their dot product.
pub struct Case {
    pub w: Vec<u8>,
    pub act: Vec<u8>,
    /// Σ w·a in f64 over the dequantized rows.
    pub reference: f64,
    /// Σ |w·a|.
    pub magnitude: f64,
    /// Allowance for Q8_1's `s = half(d·Σq)` rounding: Σ_b |m_b·s_b|·2⁻⁹.
    pub min_term: f64,
}

/// A dot-product case for the weight row `w` (type `ty`, `n` elements) and random activations
/// quantized to `vec_dot_type(ty)`, with its f64 reference over the dequantized rows.
pub fn case_for_row(rng: &mut Rng, ty: GgmlType, n: usize, w: Vec<u8>) -> Case {
    let at = vec_dot_type(ty);
    let x: Vec<f32> = (0..n).map(|_| rng.signed() * (0.5 + rng.unit())).collect();
    let mut act = vec![0u8; at.row_bytes(n as u64).unwrap() as usize];
    quantize_row(at, &x, &mut act).unwrap();
    let (mut wf, mut af) = (vec![0f32; n], vec![0f32; n]);
    dequantize(ty, &w, &mut wf).unwrap();
    dequantize(at, &act, &mut af).unwrap();
    let reference = wf
        .iter()
        .zip(&af)
        .map(|(&a, &b)| f64::from(a) * f64::from(b))
        .sum();
    let magnitude = wf
        .iter()
        .zip(&af)
        .map(|(&a, &b)| (f64::from(a) * f64::from(b)).abs())
        .sum();
    let mut min_term = 0f64;
    if matches!(ty, GgmlType::Q4_1 | GgmlType::Q5_1) {
        let half = |b: &[u8]| f64::from(f16::from_le_bytes([b[2], b[3]]).to_f32());
        for (wb, ab) in w.chunks_exact(ty.type_size()).zip(act.chunks_exact(36)) {
            min_term += (half(wb) * half(ab)).abs() / 512.0;
        }
    }
    Case {
        w,
        act,
        reference,
        magnitude,
        min_term,
    }
}

/// A dot-product case on a random weight row.
pub fn make_case(rng: &mut Rng, ty: GgmlType, n: usize) -> Case {
    let w = random_row(rng, ty, n);
    case_for_row(rng, ty, n, w)
}

impl Case {
    /// Asserts that the runtime and the scalar kernels are within tolerance of the reference:
    /// f32 rounding of block scales and of the accumulation, relative to the sum of absolute
    /// products, plus Q8_1's rounded block sums.
    pub fn check(&self, ty: GgmlType, n: usize) {
        let tol = 2e-6 * self.magnitude + self.min_term + 1e-30;
        for (kernel, got) in [
            ("runtime", kernels(ty).dot(n, &self.w, &self.act)),
            ("scalar", portable_dot(ty, n, &self.w, &self.act)),
        ] {
            let err = (f64::from(got) - self.reference).abs();
            assert!(
                err <= tol,
                "{ty} n={n} {kernel}: got {got}, reference {}, error {err:e} > {tol:e}",
                self.reference
            );
        }
    }
}
