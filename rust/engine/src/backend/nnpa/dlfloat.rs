//! DLFLOAT16, the NNPA's 16-bit float: 1 sign bit, 6 exponent bits (bias 31), 9 fraction bits,
//! an implicit leading 1 and no subnormals. Encoding `0x7FFF`/`0xFFFF` is NINF (NaN or
//! infinity); `0x0000`/`0x8000` are ±0; every other encoding is a normal number, so the smallest
//! positive value is `0x0001` = (1 + 2⁻⁹)·2⁻³¹ and the largest `0x7FFE` = (2 − 2⁻⁸)·2³².

/// The NINF encoding (positive sign).
pub const NINF: u16 = 0x7FFF;
/// The largest finite DLFLOAT16 value, (2 − 2⁻⁸)·2³².
pub const MAX: f32 = 8_573_157_376.0;

/// Largest fp32 bit pattern (sign cleared) that rounds to a finite DLFLOAT16.
const MAX_FINITE_F32_BITS: u32 = 0x4FFF_9FFF;
/// Half a DLFLOAT16 unit in the last place, in fp32 fraction units (23 − 9 − 1 = 13).
const ROUND: u32 = 1 << 13;
/// fp32 exponent bias minus DLFLOAT16 exponent bias.
const BIAS_DIFF: u32 = 127 - 31;

/// Convert an `f32` to DLFLOAT16 the way zDNN does: round the fraction to 9 bits to nearest with
/// ties away from zero (carry may bump the exponent), then exponents below the range give a
/// signed zero and values beyond the largest finite, ±infinity and NaN give a signed NINF.
pub fn from_f32(value: f32) -> u16 {
    let bits = value.to_bits();
    let sign = ((bits >> 16) & 0x8000) as u16;
    let magnitude = bits & 0x7FFF_FFFF;
    if magnitude > MAX_FINITE_F32_BITS {
        return sign | NINF;
    }
    let rounded = magnitude + ROUND;
    let exponent = rounded >> 23;
    if exponent < BIAS_DIFF {
        return sign;
    }
    sign | (((exponent - BIAS_DIFF) as u16) << 9) | ((rounded >> 14) & 0x1FF) as u16
}

/// Convert a DLFLOAT16 to `f32` exactly (NINF becomes NaN).
pub fn to_f32(value: u16) -> f32 {
    let sign = u32::from(value & 0x8000) << 16;
    let magnitude = u32::from(value & 0x7FFF);
    if magnitude == 0 {
        return f32::from_bits(sign);
    }
    if magnitude == u32::from(NINF) {
        return f32::NAN;
    }
    let exponent = (magnitude >> 9) + BIAS_DIFF;
    f32::from_bits(sign | (exponent << 23) | ((magnitude & 0x1FF) << 14))
}

/// Round an `f32` to the nearest DLFLOAT16 value and back (what a trip through the NNPA does).
pub fn round_f32(value: f32) -> f32 {
    to_f32(from_f32(value))
}
