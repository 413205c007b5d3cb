//! The emulated NNPA's matmul against the CPU: F32/F16/BF16 (and opt-in quantized) weights agree
//! within the DLFLOAT16 error bound; placement rules; failures fall back to the CPU exactly.
//!
//! Error bound: rounding to DLFLOAT16 (9 fraction bits, round to nearest) changes a value by at
//! most u·|v| with u = 2⁻⁹ (conservative: the exact half-ulp bound is 2⁻¹⁰). A product of two
//! rounded inputs is off by at most (2u + u²)·|w·x|, so a sum by (2u + u²)·S with
//! S = Σ|w||x|; both sides accumulate in f32 (≤ 2·n·2⁻²⁴·S more), and the output is rounded to
//! DLFLOAT16 once more (u·|y|). Hence |y_nnpa − y_cpu| ≤ (2u + u²)(1 + u)·S + u·|y_cpu| + 2n·2⁻²⁴·S.

use local_llm_engine::backend::nnpa::{self, dlfloat, EmulatorOptions, InjectedFailure};
use local_llm_engine::backend::{MatmulShape, Registry, TensorBytes, Threads, Weight};
use local_llm_engine::quant::{self, GgmlType};

const U: f64 = 1.0 / 512.0;

/// f32 → f64 kept opaque to the optimiser: under qemu-s390x a product of two widened f32s
/// (folded into one "multiply short to long" instruction) came out wrong.
fn widen(v: f32) -> f64 {
    std::hint::black_box(f64::from(v))
}

/// Deterministic pseudo-random values in [-1, 1) with a few larger ones.
fn values(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|i| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            let v = (s >> 40) as f32 / (1u64 << 24) as f32 * 2.0 - 1.0;
            if i % 97 == 0 {
                v * 40.0
            } else {
                v
            }
        })
        .collect()
}

fn encode(ty: GgmlType, w: &[f32], cols: usize) -> Vec<u8> {
    let row = ty.row_bytes(cols as u64).unwrap() as usize;
    let mut out = vec![0u8; row * (w.len() / cols)];
    for (src, dst) in w.chunks_exact(cols).zip(out.chunks_exact_mut(row)) {
        match ty {
            GgmlType::F32 => {
                for (v, d) in src.iter().zip(dst.chunks_exact_mut(4)) {
                    d.copy_from_slice(&v.to_le_bytes());
                }
            }
            GgmlType::F16 => {
                for (v, d) in src.iter().zip(dst.chunks_exact_mut(2)) {
                    d.copy_from_slice(&half::f16::from_f32(*v).to_le_bytes());
                }
            }
            GgmlType::BF16 => {
                for (v, d) in src.iter().zip(dst.chunks_exact_mut(2)) {
                    d.copy_from_slice(&half::bf16::from_f32(*v).to_le_bytes());
                }
            }
            _ => panic!("use random_blocks for {ty}"),
        }
    }
    out
}

/// Random quantized blocks of `ty` with sane f16 scales (byte offsets of the scale fields in
/// GGUF's block layouts: Q8_0/Q5_0 d @0; Q4_1/Q4_K d, m @0, @2; Q6_K d @208).
fn random_blocks(ty: GgmlType, rows: usize, cols: usize, seed: u64) -> Vec<u8> {
    let scale_fields: &[usize] = match ty {
        GgmlType::Q8_0 | GgmlType::Q5_0 => &[0],
        GgmlType::Q4_1 | GgmlType::Q4_K => &[0, 2],
        GgmlType::Q6_K => &[208],
        other => panic!("no block recipe for {other}"),
    };
    let n = ty.row_bytes(cols as u64).unwrap() as usize * rows;
    let mut bytes: Vec<u8> = values(n, seed)
        .iter()
        .map(|v| (v.to_bits() >> 7) as u8)
        .collect();
    for block in bytes.chunks_exact_mut(ty.type_size()) {
        for (i, &at) in scale_fields.iter().enumerate() {
            let scale = half::f16::from_f32(if i == 0 { 0.01 } else { 0.003 });
            block[at..at + 2].copy_from_slice(&scale.to_le_bytes());
        }
    }
    bytes
}

fn place(registry: &Registry, ty: GgmlType, rows: usize, cols: usize, bytes: &[u8]) -> Weight {
    registry.place(
        MatmulShape { ty, rows, cols },
        TensorBytes::owned(bytes.to_vec()),
    )
}

fn emulated(options: EmulatorOptions) -> Registry {
    Registry::with_accelerators(vec![nnpa::emulated_device(options)])
}

fn run(w: &Weight, x: &[f32], n_tokens: usize, threads: &Threads) -> Vec<f32> {
    let mut out = vec![0.0; w.shape().rows * n_tokens];
    w.matmul(x, n_tokens, &mut out, threads).unwrap();
    out
}

/// Checks the NNPA result against an f64 product of the weight's dequantized values and returns
/// the largest error relative to the bound.
fn check_bound(
    ty: GgmlType,
    rows: usize,
    cols: usize,
    bytes: &[u8],
    x: &[f32],
    got: &[f32],
) -> f64 {
    let mut w = vec![0.0f32; rows * cols];
    quant::dequantize(ty, bytes, &mut w).unwrap();
    let n_tokens = x.len() / cols;
    let mut worst = 0.0f64;
    for t in 0..n_tokens {
        for r in 0..rows {
            let (mut y, mut s) = (0.0f64, 0.0f64);
            for c in 0..cols {
                let p = widen(w[r * cols + c]) * widen(x[t * cols + c]);
                y += p;
                s += p.abs();
            }
            let bound = (2.0 * U + U * U) * (1.0 + U) * s
                + U * y.abs()
                + 2.0 * cols as f64 * 2f64.powi(-24) * s;
            let err = (f64::from(got[t * rows + r]) - y).abs();
            assert!(
                err <= bound,
                "{ty} ({t},{r}): got {} want {y} (err {err:e} > bound {bound:e})",
                got[t * rows + r]
            );
            worst = worst.max(err / bound.max(f64::MIN_POSITIVE));
        }
    }
    worst
}

#[test]
fn float_weights_match_the_cpu_within_the_dlfloat16_bound() {
    let threads = Threads::new(2).unwrap();
    let nnpa = emulated(EmulatorOptions::default());
    let cpu = Registry::with_accelerators(Vec::new());
    let (rows, cols) = (70, 200);
    for ty in [GgmlType::F32, GgmlType::F16, GgmlType::BF16] {
        let bytes = encode(ty, &values(rows * cols, 1), cols);
        let on_nnpa = place(&nnpa, ty, rows, cols, &bytes);
        let on_cpu = place(&cpu, ty, rows, cols, &bytes);
        assert_eq!(on_nnpa.device_name(), "NNPA (emulated)");
        assert_eq!(on_cpu.device_name(), "CPU");
        for n_tokens in [1, 5] {
            let x = values(cols * n_tokens, 7 + n_tokens as u64);
            let got = run(&on_nnpa, &x, n_tokens, &threads);
            let want = run(&on_cpu, &x, n_tokens, &threads);
            check_bound(ty, rows, cols, &bytes, &x, &got);
            let differs = got.iter().zip(&want).any(|(a, b)| a != b);
            assert!(differs, "{ty}: the emulator should show DLFLOAT16 rounding");
            // Every output is a DLFLOAT16 value.
            assert!(got.iter().all(|&v| dlfloat::round_f32(v) == v));
        }
    }
}

#[test]
fn output_is_the_dlfloat16_rounding_of_the_exact_product_of_rounded_inputs() {
    let threads = Threads::new(1).unwrap();
    let (rows, cols) = (33, 65);
    let w = values(rows * cols, 3);
    let x = values(cols * 2, 4);
    let weight = place(
        &emulated(EmulatorOptions::default()),
        GgmlType::F32,
        rows,
        cols,
        &encode(GgmlType::F32, &w, cols),
    );
    let got = run(&weight, &x, 2, &threads);
    for t in 0..2 {
        for r in 0..rows {
            let mut exact = 0.0f64;
            for c in 0..cols {
                let a = dlfloat::round_f32(w[r * cols + c]);
                let b = dlfloat::round_f32(x[t * cols + c]);
                exact += widen(a) * widen(b);
            }
            let want = dlfloat::round_f32(exact as f32);
            // f32 accumulation may move the sum by a few f32 ulps: at most one DLFLOAT16 step.
            let step = f64::from(want.abs()) * U;
            assert!(
                (f64::from(got[t * rows + r]) - f64::from(want)).abs() <= step,
                "({t},{r}): got {} want {want} (exact {exact}, step {step})",
                got[t * rows + r]
            );
        }
    }
}

#[test]
fn parameter_block_formats_0_and_1_agree_exactly() {
    let threads = Threads::new(2).unwrap();
    let (rows, cols) = (45, 130);
    let bytes = encode(GgmlType::F16, &values(rows * cols, 5), cols);
    let x = values(cols * 3, 6);
    let f1 = place(
        &emulated(EmulatorOptions::default()),
        GgmlType::F16,
        rows,
        cols,
        &bytes,
    );
    let f0 = place(
        &emulated(EmulatorOptions {
            parmblk_format_1: false,
            ..EmulatorOptions::default()
        }),
        GgmlType::F16,
        rows,
        cols,
        &bytes,
    );
    assert_eq!(run(&f1, &x, 3, &threads), run(&f0, &x, 3, &threads));
}

#[test]
fn quantized_weights_only_with_the_option() {
    let threads = Threads::new(2).unwrap();
    let (rows, cols) = (40, 256);
    for ty in [
        GgmlType::Q8_0,
        GgmlType::Q4_K,
        GgmlType::Q5_0,
        GgmlType::Q6_K,
        GgmlType::Q4_1,
    ] {
        let bytes = random_blocks(ty, rows, cols, 9);
        let default = place(
            &emulated(EmulatorOptions::default()),
            ty,
            rows,
            cols,
            &bytes,
        );
        assert_eq!(
            default.device_name(),
            "CPU",
            "{ty} is not offloaded by default"
        );
        let opted = emulated(EmulatorOptions {
            offload_quantized: true,
            ..EmulatorOptions::default()
        });
        let w = place(&opted, ty, rows, cols, &bytes);
        assert_eq!(w.device_name(), "NNPA (emulated)", "{ty}");
        let x = values(cols * 2, 10);
        let got = run(&w, &x, 2, &threads);
        check_bound(ty, rows, cols, &bytes, &x, &got);
    }
}

#[test]
fn shapes_beyond_the_max_dimension_stay_on_the_cpu() {
    let threads = Threads::new(1).unwrap();
    let small = emulated(EmulatorOptions {
        max_dim_idx_size: 64,
        ..EmulatorOptions::default()
    });
    let cpu = Registry::with_accelerators(Vec::new());
    let bytes = encode(GgmlType::F32, &values(65 * 8, 11), 8);
    assert_eq!(
        place(&small, GgmlType::F32, 65, 8, &bytes).device_name(),
        "CPU"
    );
    let bytes = encode(GgmlType::F32, &values(8 * 65, 12), 65);
    assert_eq!(
        place(&small, GgmlType::F32, 8, 65, &bytes).device_name(),
        "CPU"
    );
    // A placed weight given more tokens than the max dimension: ZDNN_INVALID_SHAPE → CPU.
    let bytes = encode(GgmlType::F32, &values(8 * 16, 13), 16);
    let w = place(&small, GgmlType::F32, 8, 16, &bytes);
    assert_eq!(w.device_name(), "NNPA (emulated)");
    let x = values(16 * 65, 14);
    let reference = place(&cpu, GgmlType::F32, 8, 16, &bytes);
    assert_eq!(run(&w, &x, 65, &threads), run(&reference, &x, 65, &threads));
}

#[test]
fn injected_failures_fall_back_to_the_cpu_exactly() {
    let threads = Threads::new(2).unwrap();
    let (rows, cols) = (20, 64);
    let bytes = encode(GgmlType::F32, &values(rows * cols, 15), cols);
    let x = values(cols * 3, 16);
    let cpu = place(
        &Registry::with_accelerators(Vec::new()),
        GgmlType::F32,
        rows,
        cols,
        &bytes,
    );
    let want = run(&cpu, &x, 3, &threads);

    let failing = emulated(EmulatorOptions {
        failure: Some(InjectedFailure::Matmul(zdnn_sys::ZDNN_UNAVAILABLE_FUNCTION)),
        ..EmulatorOptions::default()
    });
    let w = place(&failing, GgmlType::F32, rows, cols, &bytes);
    assert_eq!(w.device_name(), "NNPA (emulated)");
    assert_eq!(run(&w, &x, 3, &threads), want);

    let unplaceable = emulated(EmulatorOptions {
        failure: Some(InjectedFailure::Place(zdnn_sys::ZDNN_ALLOCATION_FAILURE)),
        ..EmulatorOptions::default()
    });
    let w = place(&unplaceable, GgmlType::F32, rows, cols, &bytes);
    assert_eq!(w.device_name(), "CPU");
    assert_eq!(run(&w, &x, 3, &threads), want);
}

#[test]
fn out_of_range_results_are_a_range_violation_and_fall_back() {
    let threads = Threads::new(1).unwrap();
    let (rows, cols) = (2, 4);
    let w = [1e9f32, 1e9, 1e9, 1e9, 1.0, 1.0, 1.0, 1.0];
    let bytes = encode(GgmlType::F32, &w, cols);
    let x = [10.0f32; 4];
    let placed = place(
        &emulated(EmulatorOptions::default()),
        GgmlType::F32,
        rows,
        cols,
        &bytes,
    );
    let cpu = place(
        &Registry::with_accelerators(Vec::new()),
        GgmlType::F32,
        rows,
        cols,
        &bytes,
    );
    let got = run(&placed, &x, 1, &threads);
    // 4e10 exceeds DLFLOAT16's range: the CPU's answer is used instead of NINF.
    assert!((got[0] - 4e10).abs() < 1e4 && got[1] == 40.0, "{got:?}");
    assert_eq!(got, run(&cpu, &x, 1, &threads));
}

#[test]
fn status_errors_carry_code_name_and_message() {
    let e = nnpa::StatusError::new("zdnn_matmul_op", zdnn_sys::ZDNN_UNAVAILABLE_FUNCTION);
    let text = local_llm_engine::Error::from(e).to_string();
    assert!(text.contains("zdnn_matmul_op"), "{text}");
    assert!(
        text.contains("ZDNN_UNAVAILABLE_FUNCTION (0x000C0002)"),
        "{text}"
    );
    assert!(text.contains("unavailable"), "{text}");
}
