//! The AVX-512 VNNI prompt tile of the formats that unpack (`quant::unpacked`: the codebook
//! i-quants and the ternary formats): Q6_K's tile with tokens in its lanes
//! (`klanes::groups16`) on their values `v + 128` (1..=255, unsigned for `vpdpbusd`), less
//! `128 · Σ_h s_h · Σ y` per 16 values, then `(d_w · d_y) · (float(total) · K)`.
//!
//! Bit identity: per (row, token) and super-block the integer total is exactly
//! `Σ_h s_h · Σ v·y` (|v| ≤ 127, scales ≤ 31: every partial sum fits an i32), and the floating
//! point operations are the formats' portable kernels' (`iquants::dot`, `ternary`) in their
//! order, lane by lane.
//!
//! Safety: requires AVX2, FMA, F16C and AVX-512 F/VL/BW/VNNI, and `nb` whole super-blocks in
//! every row.

use super::klanes::{groups16, one_or_two, prepare_pairs, Prepared6};
use crate::quant::kernels::{PackLine, TileOut};
use crate::quant::unpacked::Unpack;

/// Prepared lines per super-block of 4 rows ([`prepare`]).
pub(super) const PREPARED_LINES: usize = std::mem::size_of::<Prepared6>() / 64;

/// Prepares 4 rows of `U` of `nb` super-blocks for [`run`]: values, scales and `d` from
/// [`Unpack::parts`], two rows side by side as the tile reads them.
///
/// # Safety
/// The module's; `out` holds `PREPARED_LINES × nb` lines.
pub(super) unsafe fn prepare<U: Unpack>(nb: usize, w: [*const u8; 4], out: *mut PackLine) {
    let pair = |x0: *const u8, x1: *const u8, p: usize, prepared: &mut Prepared6| {
        // SAFETY: every row holds `nb` whole super-blocks (the caller's contract).
        let block = |x: *const u8| unsafe { std::slice::from_raw_parts(x, U::SIZE) };
        let ((d0, v0, s0), (d1, v1, s1)) = (U::parts(block(x0)), U::parts(block(x1)));
        let u = &mut prepared.u[p];
        for (g, codes) in u.codes.chunks_exact_mut(8).enumerate() {
            for (i, c) in codes.iter_mut().enumerate() {
                let v = if i < 4 {
                    v0[4 * g + i]
                } else {
                    v1[4 * g + i - 4]
                };
                *c = (i16::from(v) + 128) as u8;
            }
        }
        for (h, sc) in u.scales.chunks_exact_mut(8).enumerate() {
            sc[..4].copy_from_slice(&i32::from(s0[h]).to_le_bytes());
            sc[4..].copy_from_slice(&i32::from(s1[h]).to_le_bytes());
        }
        for (k, pair) in u.pairs.chunks_exact_mut(8).enumerate() {
            let words = [s0[2 * k], s0[2 * k + 1], s1[2 * k], s1[2 * k + 1]];
            for (o, w) in pair.chunks_exact_mut(2).zip(words) {
                o.copy_from_slice(&w.to_le_bytes());
            }
        }
        prepared.d[p] = [d0, d1];
    };
    // SAFETY: the caller's contract: `nb` super-blocks in every row, `nb` prepared ones in
    // `out`.
    unsafe { prepare_pairs(nb, w, U::SIZE, out, pair) }
}

/// `U`'s weights (4 rows prepared by [`prepare`]) × one or two groups of 8 tokens packed by
/// `klanes::pack_q6k_lanes` (as `klanes::q45k_prepared`).
///
/// # Safety
/// The module's; `w` holds `PREPARED_LINES × nb` prepared lines, each packed group used
/// `klanes::Q6K_LANES_LINES × nb` lines.
pub(super) unsafe fn run<U: Unpack>(
    nb: usize,
    w: *const PackLine,
    packed: [*const PackLine; 2],
    two: bool,
) -> [TileOut; 2] {
    // SAFETY: as the caller promises.
    unsafe {
        one_or_two(
            two,
            packed,
            |p| groups16::<2, 7>(nb, w, p, U::K),
            |p| groups16::<1, 7>(nb, w, p, U::K),
        )
    }
}
