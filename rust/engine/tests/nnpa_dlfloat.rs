//! DLFLOAT16 conversion against the format's definition (zdnn.md): every one of the 65,536
//! encodings, fp32 edge cases, and a reference rounding built independently from the
//! implementation (a sorted table of representable values and exact midpoint comparisons).

use local_llm_engine::backend::nnpa::dlfloat::{from_f32, to_f32, MAX, NINF};

/// The value of a finite non-zero DLFLOAT16 encoding from the definition, in f64:
/// (−1)^s · (1 + f/512) · 2^(e − 31), exponent field 0 included (no subnormals).
fn spec_value(code: u16) -> f64 {
    let s = if code & 0x8000 != 0 { -1.0 } else { 1.0 };
    let e = i32::from((code >> 9) & 0x3F);
    let f = f64::from(code & 0x1FF);
    s * (1.0 + f / 512.0) * 2f64.powi(e - 31)
}

/// Positive magnitudes of codes 0..=0x7FFE where code 0 stands for the pattern with exponent
/// field 0 and fraction 0 (2^-31 before the "that pattern is zero" rule).
fn magnitudes() -> Vec<f64> {
    (0..=0x7FFEu16)
        .map(|c| {
            if c == 0 {
                2f64.powi(-31)
            } else {
                spec_value(c)
            }
        })
        .collect()
}

/// Reference conversion: round |x| to the nearest value on the 9-bit-fraction grid with ties
/// away from zero; above the largest finite (after rounding) or non-finite → NINF; below the
/// smallest exponent → zero; the pattern 0x0000 means zero.
fn reference(x: f32, table: &[f64]) -> u16 {
    let sign = if x.is_sign_negative() { 0x8000 } else { 0 };
    if !x.is_finite() {
        return sign | NINF;
    }
    let a = f64::from(x.abs());
    if a < table[0] {
        return sign;
    }
    let k = table.partition_point(|&v| v <= a) - 1;
    // Past the largest finite, the next grid point is what pattern 0x7FFF would be.
    let next = if k + 1 < table.len() {
        table[k + 1]
    } else {
        spec_value(NINF)
    };
    let mid = (table[k] + next) / 2.0; // exact in f64 (values have ≤ 11 significant bits)
    let code = if a >= mid { k + 1 } else { k };
    if code > 0x7FFE {
        return sign | NINF;
    }
    sign | code as u16
}

#[test]
fn every_encoding_decodes_per_spec_and_round_trips() {
    for code in 0..=u16::MAX {
        let v = to_f32(code);
        match code & 0x7FFF {
            0x7FFF => assert!(v.is_nan(), "{code:#06x}"),
            0 => {
                assert_eq!(v, 0.0);
                assert_eq!(v.is_sign_negative(), code == 0x8000);
                assert_eq!(from_f32(v), code);
            }
            _ => {
                assert_eq!(f64::from(v), spec_value(code), "{code:#06x}");
                assert_eq!(from_f32(v), code, "{code:#06x} round trip");
            }
        }
    }
}

#[test]
fn decoding_is_strictly_monotonic() {
    for code in 1..0x7FFEu16 {
        assert!(to_f32(code) < to_f32(code + 1), "{code:#06x}");
        assert!(
            to_f32(code | 0x8000) > to_f32((code + 1) | 0x8000),
            "-{code:#06x}"
        );
    }
    assert_eq!(to_f32(0x7FFE), MAX);
    assert_eq!(
        f64::from(to_f32(0x0001)),
        (1.0 + 2f64.powi(-9)) * 2f64.powi(-31)
    );
}

#[test]
fn fp32_edge_cases() {
    let f = f32::from_bits;
    let cases: &[(f32, u16, &str)] = &[
        (0.0, 0x0000, "+0"),
        (-0.0, 0x8000, "-0"),
        (1.0, 0x3E00, "one"),
        (-2.0, 0xC000, "minus two"),
        (f(1), 0x0000, "smallest fp32 subnormal"),
        (-f(1), 0x8000, "negative subnormal → -0"),
        (f32::MIN_POSITIVE, 0x0000, "smallest fp32 normal underflows"),
        (
            2f32.powi(-31),
            0x0000,
            "2^-31: exponent field 0, fraction 0 is zero",
        ),
        (
            f(0x3000_2000),
            0x0001,
            "2^-31·(1+2^-10) ties away to the smallest dlf16",
        ),
        (f(0x3000_1FFF), 0x0000, "just below that tie"),
        (to_f32(0x0001), 0x0001, "smallest positive dlf16"),
        (-to_f32(0x0001), 0x8001, "smallest negative dlf16"),
        (
            1.0 + 2f32.powi(-10),
            0x3E01,
            "tie rounds away (not to even)",
        ),
        (-(1.0 + 2f32.powi(-10)), 0xBE01, "negative tie rounds away"),
        (
            f((1.0f32 + 2f32.powi(-10)).to_bits() - 1),
            0x3E00,
            "below the tie rounds down",
        ),
        (
            f(0x3FFF_E000),
            0x4000,
            "carry into the exponent: 2 − 2^-10 → 2",
        ),
        (MAX, 0x7FFE, "largest finite"),
        (-MAX, 0xFFFE, "largest negative"),
        (f(0x4FFF_9FFF), 0x7FFE, "largest fp32 that stays finite"),
        (
            f(0x4FFF_A000),
            0x7FFF,
            "tie above the largest finite overflows to NINF",
        ),
        (-f(0x4FFF_A000), 0xFFFF, "negative overflow"),
        (f32::MAX, 0x7FFF, "fp32 max"),
        (f32::INFINITY, 0x7FFF, "+inf"),
        (f32::NEG_INFINITY, 0xFFFF, "-inf"),
        (f32::NAN, 0x7FFF, "NaN"),
        (-f32::NAN, 0xFFFF, "negative NaN"),
    ];
    let table = magnitudes();
    for &(x, want, what) in cases {
        assert_eq!(from_f32(x), want, "{what}: {x:e}");
        assert_eq!(
            reference(x, &table),
            want,
            "reference disagrees with the case list: {what}"
        );
    }
    assert!(to_f32(NINF).is_nan() && to_f32(0xFFFF).is_nan());
}

#[test]
fn conversion_matches_the_reference_rounding() {
    let table = magnitudes();
    let mut checked = 0u64;
    let mut check = |bits: u32| {
        let x = f32::from_bits(bits);
        assert_eq!(from_f32(x), reference(x, &table), "{bits:#010x} ({x:e})");
        checked += 1;
    };
    // Every exponent with fraction patterns around the rounding point.
    let fracs = [
        0, 1, 0x1FFF, 0x2000, 0x2001, 0x3FFF, 0x4000, 0x6000, 0x5FFF, 0x12_3456, 0x7F_A000,
        0x7F_9FFF, 0x7F_BFFF, 0x7F_DFFF, 0x7F_E000, 0x7F_FFFF,
    ];
    for sign in [0u32, 1 << 31] {
        for exp in 0..=255u32 {
            for &frac in &fracs {
                check(sign | (exp << 23) | frac);
            }
        }
    }
    // A stride through all 2^32 patterns (odd stride: every residue class is visited).
    let mut bits = 0u32;
    for _ in 0..2_000_000 {
        check(bits);
        bits = bits.wrapping_add(2_147_519);
    }
    assert!(checked > 2_000_000);
}

#[test]
fn conversion_is_monotonic_over_fp32() {
    // Non-decreasing over increasing positive fp32 values (sampled densely).
    let mut prev = 0u16;
    let mut bits = 0u32;
    while bits < 0x7F80_0000 {
        let d = from_f32(f32::from_bits(bits));
        let key = if d == NINF { 0x8000 } else { d };
        assert!(key >= prev, "{bits:#010x}");
        prev = key;
        bits += 997;
    }
}
