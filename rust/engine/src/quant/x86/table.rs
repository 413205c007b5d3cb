//! The x86-64 rows of the kernel table (`kernels`), filled once for the detected instruction
//! set: the 32-element formats through their [`Block32`] impls (one generic entry), the K
//! formats through their multi-token row kernels, the float types with their one-row kernels.

use std::marker::PhantomData;

use super::tile::{tile, with_prepared, Block32};
use super::{
    codebook, decode, decode_avx2, half, ilanes, iq4xs, kdecode, klanes, kquants, ternary as tq,
    wide,
};
use crate::quant::blocks::{
    BlockIQ4_NL, BlockMXFP4, BlockQ4_0, BlockQ4_1, BlockQ5_0, BlockQ5_1, BlockQ8_0,
};
use crate::quant::iquants::{self, Codebook};
use crate::quant::kernels::{
    for_tokens, DotFn, ForTokens, Kernels, Matrix, RowsFn, Tile, TileFn, TileOut, TileShape,
    MAX_TILE_TOKENS,
};
use crate::quant::ternary;
use crate::quant::types::GgmlType;
use crate::quant::unpacked::Unpack;

/// The x86-64 instruction sets the kernels are compiled for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(in crate::quant) enum Isa {
    /// AVX2, FMA and F16C.
    Avx2,
    /// Plus AVX-512 F/VL/VNNI (256-bit `vpdpbusd`, 32 registers).
    Vnni,
    /// Plus AVX-512 BW: the 512-bit prompt tile and decoding kernels.
    Wide,
}

/// Every entry the x86-64 kernels cover, for `isa`.
pub(in crate::quant) fn entries(isa: Isa, entry: &mut impl FnMut(Kernels)) {
    entry(legacy::<BlockQ8_0>(GgmlType::Q8_0, isa, super::dot_q8_0));
    entry(legacy::<BlockQ4_0>(GgmlType::Q4_0, isa, super::dot_q4_0));
    entry(legacy::<BlockQ5_0>(GgmlType::Q5_0, isa, super::dot_q5_0));
    entry(legacy::<BlockQ4_1>(GgmlType::Q4_1, isa, super::dot_q4_1));
    entry(legacy::<BlockQ5_1>(GgmlType::Q5_1, isa, super::dot_q5_1));
    entry(legacy::<BlockIQ4_NL>(
        GgmlType::IQ4_NL,
        isa,
        dot_avx2::<BlockIQ4_NL>,
    ));
    entry(legacy::<BlockMXFP4>(
        GgmlType::MXFP4,
        isa,
        dot_avx2::<BlockMXFP4>,
    ));
    let dot_only = |ty, dot| Kernels {
        ty,
        dot,
        rows: None,
        tile: None,
    };
    entry(dot_only(GgmlType::F32, super::dot_f32));
    entry(match isa {
        Isa::Wide => Kernels {
            tile: Some(Tile::Plain(TILE_4X6, half::tile_f16_512)),
            ..dot_only(GgmlType::F16, half::dot_f16_512)
        },
        Isa::Avx2 | Isa::Vnni => Kernels {
            tile: Some(Tile::Plain(TILE_2X4, half::tile_f16)),
            ..dot_only(GgmlType::F16, super::dot_f16)
        },
    });
    entry(dot_only(GgmlType::BF16, super::dot_bf16));
    entry(dot_only(GgmlType::Q2_K, kquants::dot_q2_k));
    entry(dot_only(GgmlType::Q3_K, kquants::dot_q3_k));
    let wide = isa == Isa::Wide;
    let prepared = |lines, pack, prepared, prepare, run| Tile::Prepared {
        lines,
        pack,
        prepared,
        prepare,
        run,
    };
    let q4k_tile = prepared(
        klanes::Q4K_LANES_LINES,
        klanes::pack_q4k_lanes,
        klanes::Q45K_PREPARED_LINES,
        klanes::prepare_q4k,
        klanes::q45k_prepared,
    );
    entry(k_format::<Q45K<false>>(isa, wide.then_some(q4k_tile)));
    let q5k_tile = prepared(
        klanes::Q4K_LANES_LINES,
        klanes::pack_q4k_lanes,
        klanes::Q45K_PREPARED_LINES,
        klanes::prepare_q5k,
        klanes::q45k_prepared,
    );
    entry(k_format::<Q45K<true>>(isa, wide.then_some(q5k_tile)));
    let q6k_tile = prepared(
        klanes::Q6K_LANES_LINES,
        klanes::pack_q6k_lanes,
        klanes::Q6K_PREPARED_LINES,
        klanes::prepare_q6k,
        klanes::q6k_prepared,
    );
    entry(k_format::<Q6K>(isa, wide.then_some(q6k_tile)));
    let iq4xs_tile = prepared(
        klanes::Q4K_LANES_LINES,
        klanes::pack_q4k_lanes,
        klanes::IQ4XS_PREPARED_LINES,
        klanes::prepare_iq4xs,
        klanes::iq4xs_prepared,
    );
    entry(k_format::<IQ4XS>(isa, wide.then_some(iq4xs_tile)));
    entry(codebook_format::<iquants::IQ2XXS>(isa));
    entry(codebook_format::<iquants::IQ2XS>(isa));
    entry(codebook_format::<iquants::IQ2S>(isa));
    entry(codebook_format::<iquants::IQ3XXS>(isa));
    entry(codebook_format::<iquants::IQ3S>(isa));
    entry(codebook_format::<iquants::IQ1S>(isa));
    entry(codebook_format::<iquants::IQ1M>(isa));
    entry(k_format::<Tq<tq::Tq1>>(
        isa,
        wide.then(unpacking_tile::<ternary::TQ1>),
    ));
    entry(k_format::<Tq<tq::Tq2>>(
        isa,
        wide.then(unpacking_tile::<ternary::TQ2>),
    ));
}

/// The entry of the codebook format `C`: its row kernels, and on AVX-512 the tile over
/// prepared rows.
fn codebook_format<C: Codebook>(isa: Isa) -> Kernels {
    let wide = isa == Isa::Wide;
    k_format::<Cb<C>>(isa, wide.then(unpacking_tile::<C>))
}

/// The AVX-512 tile of `U` (a format that unpacks) with tokens in its lanes, over rows
/// prepared once per matmul task (`ilanes`).
fn unpacking_tile<U: Unpack>() -> Tile {
    Tile::Prepared {
        lines: klanes::Q6K_LANES_LINES,
        pack: klanes::pack_q6k_lanes,
        prepared: ilanes::PREPARED_LINES,
        prepare: ilanes::prepare::<U>,
        run: ilanes::run::<U>,
    }
}

/// The F16 prompt tiles (AVX2: 2 rows × 4 tokens; AVX-512: 4 × 6).
const TILE_2X4: TileShape = TileShape { rows: 2, tokens: 4 };
const TILE_4X6: TileShape = TileShape { rows: 4, tokens: 6 };

/// The 4 × 4 prompt tile of the AVX2 and 256-bit VNNI kernels.
const TILE_4X4: TileShape = TileShape { rows: 4, tokens: 4 };

/// The entry of the 32-element format `B`: its AVX2 one-row kernel `avx2_dot` (VNNI: the 1 × 1
/// tile), the decoding kernel and the prompt tile of `isa`.
fn legacy<B: Block32>(ty: GgmlType, isa: Isa, avx2_dot: DotFn) -> Kernels {
    Kernels {
        ty,
        dot: match isa {
            Isa::Avx2 => avx2_dot,
            Isa::Vnni | Isa::Wide => dot_vnni::<B>,
        },
        rows: Some(match isa {
            Isa::Avx2 => rows::<B, OnAvx2>,
            Isa::Vnni => rows::<B, OnVnni>,
            Isa::Wide => rows::<B, OnWide>,
        }),
        tile: Some(match isa {
            Isa::Avx2 => Tile::Plain(TILE_4X4, tile_avx2::<B>),
            Isa::Vnni => Tile::Plain(TILE_4X4, tile_vnni::<B>),
            Isa::Wide => Tile::Packed {
                lines: wide::LINES,
                pack: wide::pack::<B>,
                run: wide::tile::<B>,
            },
        }),
    }
}

/// The VNNI 1 × 1 tile as a one-row kernel.
///
/// # Safety
/// As [`DotFn`], with AVX-512 F/VL/VNNI.
unsafe fn dot_vnni<B: Block32>(nb: usize, w: &[u8], a: &[u8]) -> f32 {
    tile::<B, 1, 1>(true, nb, [w.as_ptr()], [a.as_ptr()])[0][0]
}

/// The AVX2 1 × 1 tile as a one-row kernel (for the formats without a dedicated one).
///
/// # Safety
/// As [`DotFn`].
unsafe fn dot_avx2<B: Block32>(nb: usize, w: &[u8], a: &[u8]) -> f32 {
    tile::<B, 1, 1>(false, nb, [w.as_ptr()], [a.as_ptr()])[0][0]
}

/// The four pointers of a 4-row or 4-token tile.
fn four(p: &[*const u8]) -> [*const u8; 4] {
    std::array::from_fn(|i| p[i])
}

/// Copies an `R × T` result into a [`TileOut`].
fn store<const R: usize, const T: usize>(v: [[f32; T]; R], out: &mut TileOut) {
    for (o, v) in out.iter_mut().zip(v) {
        o[..T].copy_from_slice(&v);
    }
}

/// The AVX2 4 × 4 prompt tile (two rows per register).
///
/// # Safety
/// As `TileFn` (AVX2, FMA, F16C).
unsafe fn tile_avx2<B: Block32>(nb: usize, w: &[*const u8], a: &[*const u8], out: &mut TileOut) {
    store(decode_avx2::tile4::<B, 4>(nb, four(w), four(a)), out);
}

/// The 256-bit VNNI 4 × 4 prompt tile.
///
/// # Safety
/// As `TileFn` (AVX-512 F/VL/VNNI).
unsafe fn tile_vnni<B: Block32>(nb: usize, w: &[*const u8], a: &[*const u8], out: &mut TileOut) {
    store(tile::<B, 4, 4>(true, nb, four(w), four(a)), out);
}

/// The decoding kernel of a 32-element format for one instruction set.
struct Rows<B> {
    nb: usize,
    m: Matrix,
    isa: Isa,
    format: PhantomData<B>,
}

impl<B: Block32> ForTokens for Rows<B> {
    /// Four rows a quarter of the matrix apart at a time (four far-apart sequential streams
    /// read at full bandwidth, while adjacent rows read together do not, see `tile`), then
    /// the rows left over one at a time.
    unsafe fn run<const T: usize>(self, a: [*const u8; T], out: [*mut f32; T]) {
        let Rows { nb, m, isa, .. } = self;
        let quarter = m.rows / 4;
        let row = |r: usize| m.base.add(r * m.row_len);
        let rows4 = |i: usize| [i, i + quarter, i + 2 * quarter, i + 3 * quarter];
        let store = |r: [usize; 4], v: [[f32; T]; 4]| {
            for (&r, v) in r.iter().zip(v) {
                for (o, v) in out.iter().zip(v) {
                    *o.add(r) = v;
                }
            }
        };
        let acts = a.map(|p| std::slice::from_raw_parts(p, nb * B::ACT_SIZE));
        match isa {
            Isa::Wide => {
                let prepare = |a: &[u8], p: &mut [_]| decode::prepare::<B>(nb, a, p);
                with_prepared(nb, acts, prepare, |prep| {
                    decode::quarters::<B, T>(nb, (m.base, m.row_len, quarter), a, prep, out)
                });
            }
            // Without VNNI the kernel that holds two rows per register.
            Isa::Avx2 => {
                let prepare = |a: &[u8], p: &mut [_]| decode_avx2::prepare::<B>(nb, a, p);
                with_prepared(nb, acts, prepare, |prep| {
                    for r in (0..quarter).map(rows4) {
                        store(r, decode_avx2::rows4::<B, T>(nb, r.map(row), a, prep));
                    }
                });
            }
            Isa::Vnni => {
                for r in (0..quarter).map(rows4) {
                    store(r, tile::<B, 4, T>(true, nb, r.map(row), a));
                }
            }
        }
        for r in 4 * quarter..m.rows {
            let v = tile::<B, 1, T>(isa != Isa::Avx2, nb, [row(r)], a);
            for (o, v) in out.iter().zip(v[0]) {
                *o.add(r) = v;
            }
        }
    }
}

/// An instruction set as a type, so that a table entry's decoding kernel is compiled for it.
trait Level {
    /// The instruction set.
    const ISA: Isa;
}

/// [`Isa::Avx2`].
struct OnAvx2;
/// [`Isa::Vnni`].
struct OnVnni;
/// [`Isa::Wide`].
struct OnWide;

impl Level for OnAvx2 {
    const ISA: Isa = Isa::Avx2;
}

impl Level for OnVnni {
    const ISA: Isa = Isa::Vnni;
}

impl Level for OnWide {
    const ISA: Isa = Isa::Wide;
}

/// The decoding kernel of `B` for the instruction set `L`.
///
/// # Safety
/// As `RowsFn`, with `L`'s features.
unsafe fn rows<B: Block32, L: Level>(nb: usize, m: Matrix, a: &[*const u8], out: &[*mut f32]) {
    let isa = L::ISA;
    for_tokens(
        Rows::<B> {
            nb,
            m,
            isa,
            format: PhantomData,
        },
        a,
        out,
    );
}

/// A K format's multi-token one-row kernels (each weight row unpacked once for `T` tokens).
trait KFormat {
    /// The format.
    const TY: GgmlType;
    /// Its one-row kernel.
    const DOT: DotFn;
    /// One row `x` against the `T` Q8_K rows `y` with the kernel of `L`.
    ///
    /// # Safety
    /// As [`DotFn`] for the row and each of `y`, with `L`'s features.
    unsafe fn row<L: Level, const T: usize>(nb: usize, x: *const u8, y: [*const u8; T])
        -> [f32; T];

    /// Four rows `x` against the `T` Q8_K rows `y` with the kernel of `L`, each super-block
    /// of the four read together.
    ///
    /// # Safety
    /// As [`DotFn`] for each row and each of `y`, with `L`'s features.
    unsafe fn quad<L: Level, const T: usize>(
        nb: usize,
        x: [*const u8; 4],
        y: [*const u8; T],
    ) -> [[f32; T]; 4];
}

/// A multi-row kernel `$k::<$g.., R, T>` on four rows: all four at once for up to two tokens,
/// else two pairs (four rows of more tokens would keep more accumulators than there are
/// registers).
macro_rules! by_pairs {
    ($($k:ident)::+ $(, $g:ident)?; $nb:expr, $x:expr, $y:expr) => {{
        let (nb, x, y) = ($nb, $x, $y);
        if T <= 2 {
            $($k)::+::<$($g,)? 4, T>(nb, x, y)
        } else {
            let a = $($k)::+::<$($g,)? 2, T>(nb, [x[0], x[1]], y);
            let b = $($k)::+::<$($g,)? 2, T>(nb, [x[2], x[3]], y);
            [a[0], a[1], b[0], b[1]]
        }
    }};
}

/// Q4_K (`FIVE` false) and Q5_K (`FIVE` true), which share their row kernels.
struct Q45K<const FIVE: bool>;
/// Q6_K.
struct Q6K;

impl<const FIVE: bool> KFormat for Q45K<FIVE> {
    const TY: GgmlType = if FIVE { GgmlType::Q5_K } else { GgmlType::Q4_K };
    const DOT: DotFn = if FIVE {
        kquants::dot_q5_k
    } else {
        kquants::dot_q4_k
    };
    unsafe fn row<L: Level, const T: usize>(
        nb: usize,
        x: *const u8,
        y: [*const u8; T],
    ) -> [f32; T] {
        match L::ISA {
            Isa::Wide if !FIVE => kdecode::q4k::<1, T>(nb, [x], y)[0],
            Isa::Vnni | Isa::Wide => kquants::dot_q45_k_rows_vnni::<FIVE, 1, T>(nb, [x], y)[0],
            Isa::Avx2 => kquants::dot_q45_k_rows::<FIVE, 1, T>(nb, [x], y)[0],
        }
    }

    unsafe fn quad<L: Level, const T: usize>(
        nb: usize,
        x: [*const u8; 4],
        y: [*const u8; T],
    ) -> [[f32; T]; 4] {
        match L::ISA {
            Isa::Wide if !FIVE => by_pairs!(kdecode::q4k; nb, x, y),
            Isa::Vnni | Isa::Wide => by_pairs!(kquants::dot_q45_k_rows_vnni, FIVE; nb, x, y),
            Isa::Avx2 => by_pairs!(kquants::dot_q45_k_rows, FIVE; nb, x, y),
        }
    }
}

impl KFormat for Q6K {
    const TY: GgmlType = GgmlType::Q6_K;
    const DOT: DotFn = kquants::dot_q6_k;
    unsafe fn row<L: Level, const T: usize>(
        nb: usize,
        x: *const u8,
        y: [*const u8; T],
    ) -> [f32; T] {
        match L::ISA {
            Isa::Wide => kdecode::q6k::<1, T>(nb, [x], y)[0],
            Isa::Vnni => kquants::dot_q6_k_rows_vnni::<1, T>(nb, [x], y)[0],
            Isa::Avx2 => kquants::dot_q6_k_rows::<1, T>(nb, [x], y)[0],
        }
    }

    unsafe fn quad<L: Level, const T: usize>(
        nb: usize,
        x: [*const u8; 4],
        y: [*const u8; T],
    ) -> [[f32; T]; 4] {
        match L::ISA {
            Isa::Wide => by_pairs!(kdecode::q6k; nb, x, y),
            Isa::Vnni => by_pairs!(kquants::dot_q6_k_rows_vnni; nb, x, y),
            Isa::Avx2 => by_pairs!(kquants::dot_q6_k_rows; nb, x, y),
        }
    }
}

/// IQ4_XS (one kernel for every instruction set).
struct IQ4XS;

impl KFormat for IQ4XS {
    const TY: GgmlType = GgmlType::IQ4_XS;
    const DOT: DotFn = iq4xs::dot;
    unsafe fn row<L: Level, const T: usize>(
        nb: usize,
        x: *const u8,
        y: [*const u8; T],
    ) -> [f32; T] {
        match L::ISA {
            Isa::Wide => iq4xs::rows_wide::<1, T>(nb, [x], y)[0],
            Isa::Avx2 | Isa::Vnni => iq4xs::rows::<1, T>(nb, [x], y)[0],
        }
    }

    unsafe fn quad<L: Level, const T: usize>(
        nb: usize,
        x: [*const u8; 4],
        y: [*const u8; T],
    ) -> [[f32; T]; 4] {
        match L::ISA {
            Isa::Wide => iq4xs::rows_wide::<4, T>(nb, x, y),
            Isa::Avx2 | Isa::Vnni => by_pairs!(iq4xs::rows; nb, x, y),
        }
    }
}

/// A codebook format (one kernel for every instruction set).
struct Cb<C>(PhantomData<C>);

impl<C: Codebook> KFormat for Cb<C> {
    const TY: GgmlType = C::TY;
    const DOT: DotFn = codebook::dot::<C>;
    unsafe fn row<L: Level, const T: usize>(
        nb: usize,
        x: *const u8,
        y: [*const u8; T],
    ) -> [f32; T] {
        codebook::rows::<C, 1, T>(nb, [x], y)[0]
    }

    unsafe fn quad<L: Level, const T: usize>(
        nb: usize,
        x: [*const u8; 4],
        y: [*const u8; T],
    ) -> [[f32; T]; 4] {
        by_pairs!(codebook::rows, C; nb, x, y)
    }
}

/// TQ1_0 and TQ2_0, with their own row kernels (their digits multiply the quants directly).
struct Tq<F>(PhantomData<F>);

impl<F: tq::Ternary> KFormat for Tq<F> {
    const TY: GgmlType = F::TY;
    const DOT: DotFn = tq::dot::<F>;
    unsafe fn row<L: Level, const T: usize>(
        nb: usize,
        x: *const u8,
        y: [*const u8; T],
    ) -> [f32; T] {
        tq::rows::<F, 1, T>(nb, [x], y)[0]
    }

    unsafe fn quad<L: Level, const T: usize>(
        nb: usize,
        x: [*const u8; 4],
        y: [*const u8; T],
    ) -> [[f32; T]; 4] {
        by_pairs!(tq::rows, F; nb, x, y)
    }
}

/// The entry of the K format `K`: its AVX2 one-row kernel, every row against up to four
/// tokens at a time, and as the prompt tile the AVX-512 `wide_tile` where given, else the
/// row kernels on 4 rows × 4 tokens (so that the prompt's tokens go through a few rows at a
/// time while they are in the cache, rather than through the whole matrix 4 tokens at a time).
fn k_format<K: KFormat>(isa: Isa, wide_tile: Option<Tile>) -> Kernels {
    let (rows, tile): (RowsFn, TileFn) = match isa {
        Isa::Avx2 => (k_rows::<K, OnAvx2>, k_tile::<K, OnAvx2>),
        Isa::Vnni => (k_rows::<K, OnVnni>, k_tile::<K, OnVnni>),
        Isa::Wide => (k_rows::<K, OnWide>, k_tile::<K, OnWide>),
    };
    Kernels {
        ty: K::TY,
        dot: K::DOT,
        rows: Some(rows),
        tile: Some(wide_tile.unwrap_or(Tile::Plain(TILE_4X4, tile))),
    }
}

/// The 4 × 4 prompt tile of the K format `K` from its row kernels.
///
/// # Safety
/// As `TileFn`, with `L`'s features.
unsafe fn k_tile<K: KFormat, L: Level>(
    nb: usize,
    w: &[*const u8],
    a: &[*const u8],
    out: &mut TileOut,
) {
    store(K::quad::<L, 4>(nb, four(w), four(a)), out);
}

/// Every row of a K-format matrix against `T` tokens.
struct KRows<K, L> {
    nb: usize,
    m: Matrix,
    format: PhantomData<(K, L)>,
}

impl<K: KFormat, L: Level> ForTokens for KRows<K, L> {
    /// Four rows a quarter of the matrix apart at a time (four far-apart sequential streams,
    /// as the 32-element formats' `Rows`), then the rows left over one at a time.
    unsafe fn run<const T: usize>(self, a: [*const u8; T], out: [*mut f32; T]) {
        let (nb, m) = (self.nb, self.m);
        let row = |r: usize| m.base.add(r * m.row_len);
        let quarter = m.rows / 4;
        for i in 0..quarter {
            let r = [i, i + quarter, i + 2 * quarter, i + 3 * quarter];
            let v = K::quad::<L, T>(nb, r.map(row), a);
            for (&r, v) in r.iter().zip(v) {
                for (o, v) in out.iter().zip(v) {
                    *o.add(r) = v;
                }
            }
        }
        let done = 4 * quarter;
        for r in done..m.rows {
            let v = K::row::<L, T>(nb, row(r), a);
            for (o, v) in out.iter().zip(v) {
                *o.add(r) = v;
            }
        }
    }
}

/// The decoding kernel of the K format `K`.
///
/// # Safety
/// As `RowsFn`, with `L`'s features.
unsafe fn k_rows<K: KFormat, L: Level>(nb: usize, m: Matrix, a: &[*const u8], out: &[*mut f32]) {
    let format = PhantomData;
    for_tokens(KRows::<K, L> { nb, m, format }, a, out);
}

// The packed tile's activation groups are the table's.
const _: () = assert!(wide::TOKENS == MAX_TILE_TOKENS);
