//! The kernel table's entries: for every weight format, the kernels this CPU runs, chosen once
//! per process (ggml's `type_traits_cpu[type]`; `super::kernels` builds the table). The
//! portable entries are made here; the x86-64 and aarch64 modules (`x86::table`, `arm::table`)
//! make the entries their SIMD kernels cover, and `backend/cpu.rs` asks an entry for its
//! shapes to plan a matmul. Nothing else chooses a kernel.
//!
//! Every entry's kernels give, for each (row, token), exactly what its [`Kernels::dot`] gives:
//! the decoding kernel and the tiles only change how often each weight and activation block is
//! loaded, never the arithmetic (the tests of `tests/quant_dot.rs` check it bit for bit).

use super::types::{vec_dot_type, GgmlType};
use super::{float, iquants, kquants, legacy, nonlinear, ternary};

/// One 64-byte line of quantized activations packed for the wide prompt tile
/// ([`Kernels::pack`]).
#[repr(C, align(64))]
#[derive(Clone, Copy)]
pub(crate) struct PackLine(pub [u8; 64]);

/// The largest number of weight rows a tile takes.
pub const MAX_TILE_ROWS: usize = 4;
/// The largest number of tokens a tile takes.
pub const MAX_TILE_TOKENS: usize = 8;
/// The largest number of tokens the decoding kernel ([`Kernels::dot_rows`]) takes at once.
pub const MAX_ROWS_TOKENS: usize = 4;

/// A tile's results, `out[r][t]` for weight row `r` and token `t`.
pub type TileOut = [[f32; MAX_TILE_TOKENS]; MAX_TILE_ROWS];

/// How many weight rows and tokens one tile call multiplies.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct TileShape {
    /// Weight rows per call.
    pub rows: usize,
    /// Tokens per call.
    pub tokens: usize,
}

/// One weight row · one activation row of `nb` whole blocks (elements, for the float types).
///
/// # Safety
/// The entry's CPU features are present (they were detected before it was filled); both rows
/// hold `nb` whole blocks.
pub(super) type DotFn = unsafe fn(nb: usize, w: &[u8], a: &[u8]) -> f32;

/// The rows of a weight matrix stored back to back.
#[derive(Clone, Copy)]
pub(super) struct Matrix {
    /// The first row.
    pub(super) base: *const u8,
    /// Bytes per row.
    pub(super) row_len: usize,
    /// Rows.
    pub(super) rows: usize,
}

/// Every row of `m` · each of 1 to [`MAX_ROWS_TOKENS`] activation rows `a`, each weight block
/// read once for all of them: `*out[t].add(r) = row r · a[t]`.
///
/// # Safety
/// As [`DotFn`] for every row and activation row; `out[t]` has room for `m.rows` results;
/// `a.len() == out.len()`.
pub(super) type RowsFn = unsafe fn(nb: usize, m: Matrix, a: &[*const u8], out: &[*mut f32]);

/// A tile: `w.len()` weight rows × `a.len()` activation rows, exactly the entry's
/// [`TileShape`], into `out[r][t]`.
///
/// # Safety
/// As [`DotFn`] for every row pointer.
pub(super) type TileFn = unsafe fn(nb: usize, w: &[*const u8], a: &[*const u8], out: &mut TileOut);

/// Packs [`MAX_TILE_TOKENS`] activation rows of `nb` blocks into `out` (`lines × nb` lines).
///
/// # Safety
/// As [`DotFn`]; `out` holds `lines × nb` lines.
pub(super) type PackFn = unsafe fn(nb: usize, acts: [&[u8]; MAX_TILE_TOKENS], out: &mut [PackLine]);

/// A 4-row × 8-token tile over activations packed by the entry's [`PackFn`].
///
/// # Safety
/// As [`DotFn`] for every row pointer; `packed` holds `lines × nb` lines packed for this entry.
pub(super) type PackedFn =
    unsafe fn(nb: usize, w: [*const u8; 4], packed: *const PackLine) -> TileOut;

/// Prepares 4 weight rows of `nb` blocks for the entry's [`PreparedFn`] into `out`
/// (`prepared × nb` lines): unpacked once, read by every group of tokens.
///
/// # Safety
/// As [`DotFn`] for every row pointer; `out` holds `prepared × nb` lines.
pub(super) type PrepareFn = unsafe fn(nb: usize, w: [*const u8; 4], out: *mut PackLine);

/// A 4-row × 8-token tile on weight rows prepared by the entry's [`PrepareFn`], over
/// activations packed by its [`PackFn`]: the group of 8 tokens `packed[0]`, and when `two` the
/// group `packed[1]` too (in the same pass over the rows; else the second result is zeros).
///
/// # Safety
/// `w` holds `prepared × nb` lines prepared for this entry, each group used `lines × nb` lines
/// packed for it.
pub(super) type PreparedFn = unsafe fn(
    nb: usize,
    w: *const PackLine,
    packed: [*const PackLine; 2],
    two: bool,
) -> [TileOut; 2];

/// A prompt tile (the packed and prepared ones are made by the x86-64 table only, so far).
#[derive(Clone, Copy)]
#[cfg_attr(not(target_arch = "x86_64"), allow(dead_code))]
pub(super) enum Tile {
    /// Weight rows × activation rows as they are.
    Plain(TileShape, TileFn),
    /// 4 weight rows × 8 tokens whose activations are packed once per matmul.
    Packed {
        /// Packed lines per block of 8 tokens.
        lines: usize,
        /// The packing.
        pack: PackFn,
        /// The tile.
        run: PackedFn,
    },
    /// 4 weight rows prepared once per matmul task × 8 tokens whose activations are packed
    /// once per matmul.
    Prepared {
        /// Packed lines per block of 8 tokens.
        lines: usize,
        /// The packing.
        pack: PackFn,
        /// Prepared lines per block of 4 rows.
        prepared: usize,
        /// The preparation.
        prepare: PrepareFn,
        /// The tile.
        run: PreparedFn,
    },
}

/// What this CPU runs for one weight format.
#[derive(Clone, Copy)]
pub struct Kernels {
    pub(super) ty: GgmlType,
    pub(super) dot: DotFn,
    pub(super) rows: Option<RowsFn>,
    pub(super) tile: Option<Tile>,
}

impl Kernels {
    /// The portable entry of `ty`: its one-row kernel, no decoding kernel and no tile.
    pub(super) fn portable(ty: GgmlType) -> Self {
        Kernels {
            ty,
            dot: portable_dot_fn(ty),
            rows: None,
            tile: None,
        }
    }

    /// The weight format.
    pub fn ty(&self) -> GgmlType {
        self.ty
    }

    /// The number of whole blocks of `n` elements that both rows really hold: `n / block_size`
    /// for well-formed input (checked in debug builds); clamping keeps the SIMD kernels in
    /// bounds even when a caller passes short rows.
    fn blocks(&self, n: usize, w_row: &[u8], act_row: &[u8]) -> usize {
        blocks_in_rows(self.ty, n, w_row, act_row)
    }

    /// Dot product of one weight row (`n` elements) with one activation row already in
    /// [`vec_dot_type`]. Lengths are the caller's responsibility (checked with `debug_assert`;
    /// in release builds short rows are truncated to whole blocks, never read out of bounds).
    ///
    /// The SIMD kernels assume weights as ggml writes them: Q8_0 quants in −127..=127 (a −128
    /// in both operands of a product is mis-signed, exactly as in ggml's AVX2 kernel).
    pub fn dot(&self, n: usize, w_row: &[u8], act_row: &[u8]) -> f32 {
        let nb = self.blocks(n, w_row, act_row);
        // SAFETY: the entry was filled for this CPU; both rows hold nb whole blocks.
        unsafe { (self.dot)(nb, w_row, act_row) }
    }

    /// Whether [`Kernels::dot_rows`] has a kernel that reads each weight block once for all its
    /// tokens (otherwise it runs [`Kernels::dot`] per row and token).
    pub fn has_rows_kernel(&self) -> bool {
        self.rows.is_some()
    }

    /// `out[t][i] = rows[i] · acts[t]` for consecutive weight rows of `n` elements stored back
    /// to back in `rows` (as many as each `out[t]` holds) and 1 to [`MAX_ROWS_TOKENS`]
    /// activation rows (decoding: one token, or one token of each of a few sequences). Each
    /// result is bit-identical to [`Kernels::dot`]. Panics when `rows` is shorter than that,
    /// the `out` slices differ in length, `acts` and `out` differ in count or have more than
    /// [`MAX_ROWS_TOKENS`].
    pub fn dot_rows(&self, n: usize, rows: &[u8], acts: &[&[u8]], out: &mut [&mut [f32]]) {
        let count = out.first().map_or(0, |o| o.len());
        let row_len = self.ty.row_bytes(n as u64).unwrap_or(0) as usize;
        assert!(
            rows.len() >= row_len * count && out.iter().all(|o| o.len() == count),
            "dot_rows: too few weight rows"
        );
        assert!(
            acts.len() == out.len() && acts.len() <= MAX_ROWS_TOKENS,
            "dot_rows: 1 to {MAX_ROWS_TOKENS} tokens, one output each"
        );
        let (Some(kernel), Some(first), Some(a0)) = (self.rows, rows.get(..row_len), acts.first())
        else {
            for (r, row) in rows.chunks_exact(row_len.max(1)).enumerate().take(count) {
                for (o, a) in out.iter_mut().zip(acts) {
                    o[r] = self.dot(n, row, a);
                }
            }
            return;
        };
        assert!(
            acts.iter().all(|a| a.len() == a0.len()),
            "dot_rows: activation rows of different lengths"
        );
        let nb = self.blocks(n, first, a0);
        let m = Matrix {
            base: rows.as_ptr(),
            row_len,
            rows: count,
        };
        let mut a = [std::ptr::null(); MAX_ROWS_TOKENS];
        let mut o = [std::ptr::null_mut(); MAX_ROWS_TOKENS];
        for (t, (act, out)) in acts.iter().zip(out.iter_mut()).enumerate() {
            a[t] = act.as_ptr();
            o[t] = out.as_mut_ptr();
        }
        // SAFETY: the entry was filled for this CPU; every row holds nb whole blocks (the
        // weight rows are inside `rows`, checked above, and the activation rows have equal
        // lengths); each output has room for `count` results.
        unsafe { kernel(nb, m, &a[..acts.len()], &o[..acts.len()]) }
    }

    /// The shape of this entry's prompt tile, `None` where it has none.
    pub fn tile_shape(&self) -> Option<TileShape> {
        match self.tile? {
            Tile::Plain(shape, _) => Some(shape),
            Tile::Packed { .. } | Tile::Prepared { .. } => Some(TileShape {
                rows: 4,
                tokens: MAX_TILE_TOKENS,
            }),
        }
    }

    /// The prompt tile on `w_rows` × `acts` (exactly [`Kernels::tile_shape`]; rows of `n`
    /// elements, activations in [`vec_dot_type`]) into `out[r][t]`, each result bit-identical
    /// to [`Kernels::dot`]. Panics where the entry has no tile or the rows do not have the
    /// tile's shape or equal lengths.
    pub fn dot_tile(&self, n: usize, w_rows: &[&[u8]], acts: &[&[u8]], out: &mut TileOut) {
        let shape = self.tile_shape();
        assert!(
            shape
                == Some(TileShape {
                    rows: w_rows.len(),
                    tokens: acts.len()
                }),
            "dot_tile: {}x{} is not the {} tile ({shape:?})",
            w_rows.len(),
            acts.len(),
            self.ty
        );
        let (w0, a0) = (w_rows[0], acts[0]);
        assert!(
            w_rows.iter().all(|r| r.len() == w0.len()) && acts.iter().all(|a| a.len() == a0.len()),
            "dot_tile: rows of different lengths"
        );
        let nb = self.blocks(n, w0, a0);
        let mut w = [std::ptr::null(); MAX_TILE_ROWS];
        for (p, r) in w.iter_mut().zip(w_rows) {
            *p = r.as_ptr();
        }
        let w = &w[..w_rows.len()];
        match self.tile {
            Some(Tile::Plain(_, run)) => {
                let mut a = [std::ptr::null(); MAX_TILE_TOKENS];
                for (p, r) in a.iter_mut().zip(acts) {
                    *p = r.as_ptr();
                }
                // SAFETY: the entry was filled for this CPU; every row holds nb whole blocks
                // (equal lengths); the shape is the tile's.
                unsafe { run(nb, w, &a[..acts.len()], out) }
            }
            Some(Tile::Packed { lines, pack, run }) => {
                let mut packed = vec![PackLine([0; 64]); lines * nb];
                let acts = std::array::from_fn(|t| acts[t]);
                // SAFETY: as above; `packed` holds `lines × nb` lines, packed here.
                unsafe {
                    pack(nb, acts, &mut packed);
                    *out = run(nb, std::array::from_fn(|i| w[i]), packed.as_ptr());
                }
            }
            Some(Tile::Prepared {
                lines,
                pack,
                prepared,
                prepare,
                run,
            }) => {
                let line = PackLine([0; 64]);
                let (mut packed, mut rows) = (vec![line; lines * nb], vec![line; prepared * nb]);
                let acts = std::array::from_fn(|t| acts[t]);
                // SAFETY: as above; `packed` holds `lines × nb` lines and `rows`
                // `prepared × nb`, packed and prepared here.
                unsafe {
                    pack(nb, acts, &mut packed);
                    prepare(nb, std::array::from_fn(|i| w[i]), rows.as_mut_ptr());
                    let packed = packed.as_ptr();
                    [*out, _] = run(nb, rows.as_ptr(), [packed, packed], false);
                }
            }
            None => unreachable!("checked by the shape"),
        }
    }

    /// How many [`PackLine`]s [`Kernels::pack`] writes per group of [`MAX_TILE_TOKENS`]
    /// activation rows of `n` elements; 0 where the entry's tile takes its activations as they
    /// are.
    pub(crate) fn packed_lines(&self, n: usize) -> usize {
        match self.tile {
            Some(Tile::Packed { lines, .. } | Tile::Prepared { lines, .. }) => {
                lines * (n / self.ty.block_size())
            }
            _ => 0,
        }
    }

    /// Packs a group of [`MAX_TILE_TOKENS`] activation rows of `n` elements for
    /// [`Kernels::dot_packed`] into `out` ([`Kernels::packed_lines`] lines); done once per
    /// matmul, so every group of weight rows reads the same pack. Does nothing where the entry
    /// packs nothing.
    pub(crate) fn pack(&self, n: usize, acts: [&[u8]; MAX_TILE_TOKENS], out: &mut [PackLine]) {
        if let Some(Tile::Packed { lines, pack, .. } | Tile::Prepared { lines, pack, .. }) =
            self.tile
        {
            let a = vec_dot_type(self.ty);
            let nb = acts
                .iter()
                .map(|r| r.len() / a.type_size())
                .fold(n / self.ty.block_size(), usize::min)
                .min(out.len() / lines);
            // SAFETY: the entry was filled for this CPU; every activation row holds nb blocks
            // and `out` `lines × nb` lines.
            unsafe { pack(nb, acts, out) }
        }
    }

    /// The packed tile: 4 weight rows × the [`MAX_TILE_TOKENS`] tokens packed by
    /// [`Kernels::pack`], bit-identical to [`Kernels::dot`]; `None` where the entry packs
    /// nothing.
    pub(crate) fn dot_packed(
        &self,
        n: usize,
        w_rows: [&[u8]; 4],
        packed: &[PackLine],
    ) -> Option<TileOut> {
        let Some(Tile::Packed { lines, run, .. }) = self.tile else {
            return None;
        };
        assert!(
            w_rows.iter().all(|r| r.len() == w_rows[0].len()),
            "dot_packed: rows of different lengths"
        );
        let nb = (n / self.ty.block_size())
            .min(w_rows[0].len() / self.ty.type_size())
            .min(packed.len() / lines);
        // SAFETY: the entry was filled for this CPU; every row holds nb whole blocks (equal
        // lengths) and `packed` `lines × nb` lines.
        Some(unsafe { run(nb, w_rows.map(|r| r.as_ptr()), packed.as_ptr()) })
    }

    /// How many [`PackLine`]s [`Kernels::prepare`] writes per 4 weight rows of `n` elements;
    /// 0 where the entry's tile takes its rows as they are.
    pub(crate) fn prepared_lines(&self, n: usize) -> usize {
        match self.tile {
            Some(Tile::Prepared { prepared, .. }) => prepared * (n / self.ty.block_size()),
            _ => 0,
        }
    }

    /// Prepares 4 weight rows of `n` elements for [`Kernels::dot_prepared`] into `out`
    /// ([`Kernels::prepared_lines`] lines). Does nothing where the entry prepares nothing.
    pub(crate) fn prepare(&self, n: usize, w_rows: [&[u8]; 4], out: &mut [PackLine]) {
        if let Some(Tile::Prepared {
            prepared, prepare, ..
        }) = self.tile
        {
            let nb = w_rows
                .iter()
                .map(|r| r.len() / self.ty.type_size())
                .fold(n / self.ty.block_size(), usize::min)
                .min(out.len() / prepared);
            // SAFETY: the entry was filled for this CPU; every row holds nb whole blocks and
            // `out` `prepared × nb` lines.
            unsafe { prepare(nb, w_rows.map(|r| r.as_ptr()), out.as_mut_ptr()) }
        }
    }

    /// The prepared tile: 4 weight rows prepared by [`Kernels::prepare`] × one or two groups
    /// of [`MAX_TILE_TOKENS`] tokens packed by [`Kernels::pack`] (`packed`: one or two
    /// groups; the second result is zeros for one), bit-identical to [`Kernels::dot`] on the
    /// rows as they were; `None` where the entry prepares nothing. Panics on no group or more
    /// than two.
    pub(crate) fn dot_prepared(
        &self,
        n: usize,
        rows: &[PackLine],
        packed: &[&[PackLine]],
    ) -> Option<[TileOut; 2]> {
        let Some(Tile::Prepared {
            lines,
            prepared,
            run,
            ..
        }) = self.tile
        else {
            return None;
        };
        assert!(
            matches!(packed.len(), 1 | 2),
            "dot_prepared: {} groups of tokens",
            packed.len()
        );
        let nb = packed.iter().map(|p| p.len() / lines).fold(
            (n / self.ty.block_size()).min(rows.len() / prepared),
            usize::min,
        );
        let groups = [packed[0].as_ptr(), packed[packed.len() - 1].as_ptr()];
        // SAFETY: the entry was filled for this CPU; `rows` holds `prepared × nb` prepared
        // lines and each group `lines × nb` packed ones.
        Some(unsafe { run(nb, rows.as_ptr(), groups, packed.len() == 2) })
    }
}

/// The number of whole blocks of `n` elements of weight type `w` that both rows hold (see
/// [`Kernels::dot`]).
pub(super) fn blocks_in_rows(w: GgmlType, n: usize, w_row: &[u8], act_row: &[u8]) -> usize {
    let a = vec_dot_type(w);
    debug_assert_eq!(
        n % w.block_size(),
        0,
        "dot: {n} is not a whole number of {w} blocks"
    );
    debug_assert_eq!(
        w_row.len(),
        n / w.block_size() * w.type_size(),
        "dot: {w} row length"
    );
    debug_assert_eq!(
        act_row.len(),
        n / a.block_size() * a.type_size(),
        "dot: {a} row length"
    );
    (n / w.block_size())
        .min(w_row.len() / w.type_size())
        .min(act_row.len() / a.type_size())
}

/// The portable one-row kernel of `ty`.
fn portable_dot_fn(ty: GgmlType) -> DotFn {
    match ty {
        GgmlType::F32 => float::dot_f32,
        GgmlType::F16 => float::dot_f16,
        GgmlType::BF16 => float::dot_bf16,
        GgmlType::Q4_0 => legacy::dot_q4_0_q8_0,
        GgmlType::Q4_1 => legacy::dot_q4_1_q8_1,
        GgmlType::Q5_0 => legacy::dot_q5_0_q8_0,
        GgmlType::Q5_1 => legacy::dot_q5_1_q8_1,
        GgmlType::Q8_0 => legacy::dot_q8_0_q8_0,
        GgmlType::Q8_1 => legacy::dot_q8_1_q8_1,
        GgmlType::Q2_K => kquants::dot_q2_k,
        GgmlType::Q3_K => kquants::dot_q3_k,
        GgmlType::Q4_K => kquants::dot_q4_k,
        GgmlType::Q5_K => kquants::dot_q5_k,
        GgmlType::Q6_K => kquants::dot_q6_k,
        GgmlType::Q8_K => kquants::dot_q8_k,
        GgmlType::IQ4_NL => nonlinear::dot_iq4_nl_q8_0,
        GgmlType::IQ4_XS => nonlinear::dot_iq4_xs_q8_k,
        GgmlType::MXFP4 => nonlinear::dot_mxfp4_q8_0,
        GgmlType::TQ1_0 => iquants::dot::<ternary::TQ1>,
        GgmlType::TQ2_0 => iquants::dot::<ternary::TQ2>,
        GgmlType::IQ2_XXS => iquants::dot::<iquants::IQ2XXS>,
        GgmlType::IQ2_XS => iquants::dot::<iquants::IQ2XS>,
        GgmlType::IQ2_S => iquants::dot::<iquants::IQ2S>,
        GgmlType::IQ3_XXS => iquants::dot::<iquants::IQ3XXS>,
        GgmlType::IQ3_S => iquants::dot::<iquants::IQ3S>,
        GgmlType::IQ1_S => iquants::dot::<iquants::IQ1S>,
        GgmlType::IQ1_M => iquants::dot::<iquants::IQ1M>,
    }
}

/// The portable kernel for `w`, whatever this CPU runs; exposed so tests and benchmarks can
/// compare the SIMD kernels against it.
pub fn portable_dot(w: GgmlType, n: usize, w_row: &[u8], act_row: &[u8]) -> f32 {
    let nb = blocks_in_rows(w, n, w_row, act_row);
    // SAFETY: the portable kernels need no CPU feature and read only nb whole blocks, which
    // both rows hold.
    unsafe { portable_dot_fn(w)(nb, w_row, act_row) }
}

/// A kernel generic over its token count, run for 1 to [`MAX_ROWS_TOKENS`] tokens by
/// [`for_tokens`] (fn pointers cannot be generic, so a table entry's decoding kernel
/// instantiates its const-generic body once per count).
pub(super) trait ForTokens {
    /// Runs with `T` tokens.
    ///
    /// # Safety
    /// As the kernel's.
    unsafe fn run<const T: usize>(self, a: [*const u8; T], out: [*mut f32; T]);
}

/// Runs `k` with `a.len()` (1 to [`MAX_ROWS_TOKENS`]) tokens.
///
/// # Safety
/// As `k`'s; `a.len() == out.len()`.
pub(super) unsafe fn for_tokens(k: impl ForTokens, a: &[*const u8], out: &[*mut f32]) {
    match (a, out) {
        (&[a0], &[o0]) => k.run([a0], [o0]),
        (&[a0, a1], &[o0, o1]) => k.run([a0, a1], [o0, o1]),
        (&[a0, a1, a2], &[o0, o1, o2]) => k.run([a0, a1, a2], [o0, o1, o2]),
        (&[a0, a1, a2, a3], &[o0, o1, o2, o3]) => k.run([a0, a1, a2, a3], [o0, o1, o2, o3]),
        (a, o) => panic!(
            "{} tokens and {} outputs: 1 to {MAX_ROWS_TOKENS} each",
            a.len(),
            o.len()
        ),
    }
}
