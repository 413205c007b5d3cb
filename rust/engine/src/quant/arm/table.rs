//! The aarch64 rows of the kernel table (`kernels`), filled once for the detected instruction
//! set: every block format through its `R × T` tile (the 32-element formats' [`Legacy`] impls
//! and the K formats' [`KFormat`] impls, one generic entry each), the float types with their
//! one-row kernels.

use std::marker::PhantomData;

use super::float;
use super::kquants::{Cb, KFormat, KTile, IQ4XS, Q2K, Q3K, Q4K, Q5K, Q6K};
use super::{run, Isa, Legacy, LegacyTile};
use crate::quant::blocks::{
    BlockIQ4_NL, BlockMXFP4, BlockQ4_0, BlockQ4_1, BlockQ5_0, BlockQ5_1, BlockQ8_0,
};
use crate::quant::kernels::{for_tokens, ForTokens, Kernels, Matrix, Tile, TileOut, TileShape};
use crate::quant::types::GgmlType;
use crate::quant::{iquants, ternary};

/// Every entry the NEON kernels cover, for `isa`.
pub(in crate::quant) fn entries(isa: Isa, entry: &mut impl FnMut(Kernels)) {
    match isa {
        Isa::Neon => entries_for::<Base>(entry),
        Isa::Dotprod => entries_for::<Dot>(entry),
        Isa::I8mm => entries_for::<Mm>(entry),
    }
}

/// An instruction level as a type: the entries' kernels are compiled for `ISA`.
trait Level {
    /// The level.
    const ISA: Isa;
}

/// Base Advanced SIMD.
struct Base;
/// With `sdot`.
struct Dot;
/// With `sdot` and `smmla`.
struct Mm;

impl Level for Base {
    const ISA: Isa = Isa::Neon;
}

impl Level for Dot {
    const ISA: Isa = Isa::Dotprod;
}

impl Level for Mm {
    const ISA: Isa = Isa::I8mm;
}

/// Every entry the NEON kernels cover, at level `I`.
fn entries_for<I: Level>(entry: &mut impl FnMut(Kernels)) {
    let dot_only = |ty, dot| Kernels {
        ty,
        dot,
        rows: None,
        tile: None,
    };
    entry(dot_only(GgmlType::F32, float::dot_f32));
    entry(dot_only(GgmlType::F16, float::dot_f16));
    entry(dot_only(GgmlType::BF16, float::dot_bf16));
    // The row pair of `smmla`; without it the K tiles take one row.
    let pair = TileShape { rows: 2, tokens: 4 };
    let k = if I::ISA == Isa::I8mm {
        pair
    } else {
        TileShape { rows: 1, tokens: 4 }
    };
    entry(tiled::<L<I, BlockQ4_0>>(GgmlType::Q4_0, pair));
    entry(tiled::<L<I, BlockQ4_1>>(GgmlType::Q4_1, pair));
    entry(tiled::<L<I, BlockQ5_0>>(GgmlType::Q5_0, pair));
    entry(tiled::<L<I, BlockQ5_1>>(GgmlType::Q5_1, pair));
    entry(tiled::<L<I, BlockQ8_0>>(GgmlType::Q8_0, pair));
    entry(tiled::<K<I, Q2K>>(GgmlType::Q2_K, k));
    entry(tiled::<K<I, Q3K>>(GgmlType::Q3_K, k));
    entry(tiled::<K<I, Q4K>>(GgmlType::Q4_K, k));
    entry(tiled::<K<I, Q5K>>(GgmlType::Q5_K, k));
    entry(tiled::<K<I, Q6K>>(GgmlType::Q6_K, k));
    entry(tiled::<L<I, BlockIQ4_NL>>(GgmlType::IQ4_NL, pair));
    entry(tiled::<L<I, BlockMXFP4>>(GgmlType::MXFP4, pair));
    entry(tiled::<K<I, IQ4XS>>(GgmlType::IQ4_XS, k));
    entry(tiled::<K<I, Cb<iquants::IQ2XXS>>>(GgmlType::IQ2_XXS, k));
    entry(tiled::<K<I, Cb<iquants::IQ2XS>>>(GgmlType::IQ2_XS, k));
    entry(tiled::<K<I, Cb<iquants::IQ2S>>>(GgmlType::IQ2_S, k));
    entry(tiled::<K<I, Cb<iquants::IQ3XXS>>>(GgmlType::IQ3_XXS, k));
    entry(tiled::<K<I, Cb<iquants::IQ3S>>>(GgmlType::IQ3_S, k));
    entry(tiled::<K<I, Cb<iquants::IQ1S>>>(GgmlType::IQ1_S, k));
    entry(tiled::<K<I, Cb<iquants::IQ1M>>>(GgmlType::IQ1_M, k));
    entry(tiled::<K<I, Cb<ternary::TQ1>>>(GgmlType::TQ1_0, k));
    entry(tiled::<K<I, Cb<ternary::TQ2>>>(GgmlType::TQ2_0, k));
}

/// A block format's NEON tiles: `R` weight rows × `T` activation rows.
trait Tiles {
    /// The tile.
    ///
    /// # Safety
    /// NEON (and the selected level's extensions); every row holds `nb` whole blocks.
    unsafe fn tile<const R: usize, const T: usize>(
        nb: usize,
        w: [*const u8; R],
        a: [*const u8; T],
    ) -> [[f32; T]; R];
}

/// A 32-element format's tiles at level `I`.
struct L<I, W>(PhantomData<(I, W)>);

impl<I: Level, W: Legacy> Tiles for L<I, W> {
    unsafe fn tile<const R: usize, const T: usize>(
        nb: usize,
        w: [*const u8; R],
        a: [*const u8; T],
    ) -> [[f32; T]; R] {
        run(I::ISA, LegacyTile::<W, R, T>::new(nb, w, a))
    }
}

/// A K format's tiles at level `I`.
struct K<I, F>(PhantomData<(I, F)>);

impl<I: Level, F: KFormat> Tiles for K<I, F> {
    unsafe fn tile<const R: usize, const T: usize>(
        nb: usize,
        w: [*const u8; R],
        a: [*const u8; T],
    ) -> [[f32; T]; R] {
        run(I::ISA, KTile::<F, R, T>::new(nb, w, a))
    }
}

/// The entry of a block format: the 1 × 1 tile as its one-row kernel, four rows a quarter
/// apart for decoding, and the prompt tile `shape` (1 or 2 rows × 4 tokens).
fn tiled<F: Tiles>(ty: GgmlType, shape: TileShape) -> Kernels {
    Kernels {
        ty,
        dot: dot::<F>,
        rows: Some(rows::<F>),
        tile: Some(Tile::Plain(
            shape,
            if shape.rows == 2 {
                tile::<F, 2>
            } else {
                tile::<F, 1>
            },
        )),
    }
}

/// The 1 × 1 tile as a one-row kernel.
///
/// # Safety
/// As `DotFn`.
unsafe fn dot<F: Tiles>(nb: usize, w: &[u8], a: &[u8]) -> f32 {
    F::tile::<1, 1>(nb, [w.as_ptr()], [a.as_ptr()])[0][0]
}

/// The `R × 4` prompt tile.
///
/// # Safety
/// As `TileFn`.
unsafe fn tile<F: Tiles, const R: usize>(
    nb: usize,
    w: &[*const u8],
    a: &[*const u8],
    out: &mut TileOut,
) {
    let v = F::tile::<R, 4>(
        nb,
        std::array::from_fn(|i| w[i]),
        std::array::from_fn(|t| a[t]),
    );
    for (o, v) in out.iter_mut().zip(v) {
        o[..4].copy_from_slice(&v);
    }
}

/// The decoding kernel: four rows a quarter of the matrix apart at a time (four far-apart
/// sequential streams, as on x86-64), then the rows left over one at a time.
struct Rows<F> {
    nb: usize,
    m: Matrix,
    format: PhantomData<F>,
}

impl<F: Tiles> ForTokens for Rows<F> {
    unsafe fn run<const T: usize>(self, a: [*const u8; T], out: [*mut f32; T]) {
        let Rows { nb, m, .. } = self;
        let quarter = m.rows / 4;
        let row = |r: usize| m.base.add(r * m.row_len);
        for i in 0..quarter {
            let r = [i, i + quarter, i + 2 * quarter, i + 3 * quarter];
            let v = F::tile::<4, T>(nb, r.map(row), a);
            for (&r, v) in r.iter().zip(v) {
                for (o, v) in out.iter().zip(v) {
                    *o.add(r) = v;
                }
            }
        }
        for r in 4 * quarter..m.rows {
            let v = F::tile::<1, T>(nb, [row(r)], a);
            for (o, v) in out.iter().zip(v[0]) {
                *o.add(r) = v;
            }
        }
    }
}

/// The decoding kernel of `F`.
///
/// # Safety
/// As `RowsFn`.
unsafe fn rows<F: Tiles>(nb: usize, m: Matrix, a: &[*const u8], out: &[*mut f32]) {
    let format = PhantomData;
    for_tokens(Rows::<F> { nb, m, format }, a, out);
}
