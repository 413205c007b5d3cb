//! The NNPA's stickified 4DFEATURE layout: a tensor with transformed dimensions (N, H, W, C) is
//! stored as pages of 4096 bytes, each page 32 sticks of 64 DLFLOAT16 cells (128 bytes). A stick
//! holds 64 consecutive C values of one (n, h, w); a page holds 32 consecutive W positions.
//! Pages are ordered n, then C-stick, then h, then W-block. Padding cells are zero.

use zdnn_sys::{CELLS_PER_STICK, PAGE_BYTES, STICKS_PER_PAGE, STICK_BYTES};

use super::dlfloat;
use crate::{Error, Result};

/// Cells (u16) per stick.
const STICK_CELLS: usize = STICK_BYTES / 2;

/// Transformed (N, H, W, C) dimensions of a 4DFEATURE tensor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct StickShape {
    /// Outermost dimension (stack entries).
    pub n: usize,
    /// Height.
    pub h: usize,
    /// Width (rows of a 2-D tensor).
    pub w: usize,
    /// Channels (columns of a 2-D tensor; the stick dimension).
    pub c: usize,
}

impl StickShape {
    /// A 1-D tensor of `len` values (layout `ZDNN_1D` → (1, 1, 1, len)).
    pub fn d1(len: usize) -> Self {
        StickShape {
            n: 1,
            h: 1,
            w: 1,
            c: len,
        }
    }

    /// A 2-D tensor (layout `ZDNN_2D` → (1, 1, rows, cols)).
    pub fn d2(rows: usize, cols: usize) -> Self {
        StickShape {
            n: 1,
            h: 1,
            w: rows,
            c: cols,
        }
    }

    /// A stack of 2-D tensors (layout `ZDNN_3DS` → (stack, 1, rows, cols)).
    pub fn d3s(stack: usize, rows: usize, cols: usize) -> Self {
        StickShape {
            n: stack,
            h: 1,
            w: rows,
            c: cols,
        }
    }

    /// Number of elements (without padding).
    pub fn elements(&self) -> Option<usize> {
        self.n
            .checked_mul(self.h)?
            .checked_mul(self.w)?
            .checked_mul(self.c)
    }

    fn w_blocks(&self) -> usize {
        self.w.div_ceil(STICKS_PER_PAGE)
    }

    fn c_sticks(&self) -> usize {
        self.c.div_ceil(CELLS_PER_STICK)
    }

    /// Stickified size in bytes, N·H·⌈W/32⌉·⌈C/64⌉·4096 (`None` on overflow).
    pub fn size_bytes(&self) -> Option<usize> {
        self.n
            .checked_mul(self.h)?
            .checked_mul(self.w_blocks())?
            .checked_mul(self.c_sticks())?
            .checked_mul(PAGE_BYTES)
    }

    /// Byte offset of element (n, h, w, c); the indices must be within the dimensions.
    pub fn byte_offset(&self, n: usize, h: usize, w: usize, c: usize) -> usize {
        let (wb, cs) = (self.w_blocks(), self.c_sticks());
        let page = n * self.h * wb * cs
            + (c / CELLS_PER_STICK) * self.h * wb
            + h * wb
            + w / STICKS_PER_PAGE;
        page * PAGE_BYTES + (w % STICKS_PER_PAGE) * STICK_BYTES + (c % CELLS_PER_STICK) * 2
    }
}

/// A tensor in stickified 4DFEATURE layout with DLFLOAT16 cells (native-endian `u16`, as the
/// NNPA reads them), padding zeroed.
#[derive(Clone, Debug)]
pub struct Stickified {
    shape: StickShape,
    cells: Vec<u16>,
}

impl Stickified {
    /// An all-zero tensor of `shape` (e.g. a zero bias, or an output to be written).
    pub fn zeroed(shape: StickShape) -> Result<Self> {
        match (shape.elements(), shape.size_bytes()) {
            (Some(e), Some(size)) if e > 0 => Ok(Stickified {
                shape,
                cells: vec![0u16; size / 2],
            }),
            _ => Err(Error::Backend(format!(
                "cannot stickify a tensor of shape {shape:?}"
            ))),
        }
    }

    /// Convert `values` (row-major over n, h, w, c) to DLFLOAT16 and stickify them.
    pub fn from_f32(shape: StickShape, values: &[f32]) -> Result<Self> {
        let mut out = Stickified::zeroed(shape)?;
        if Some(values.len()) != shape.elements() {
            return Err(Error::Backend(format!(
                "stickify: {} values for a tensor of shape {shape:?}",
                values.len()
            )));
        }
        let cells = &mut out.cells;
        for (i, row) in values.chunks_exact(shape.c).enumerate() {
            let (w, nh) = (i % shape.w, i / shape.w);
            let (h, n) = (nh % shape.h, nh / shape.h);
            for (s, stick) in row.chunks(CELLS_PER_STICK).enumerate() {
                let at = shape.byte_offset(n, h, w, s * CELLS_PER_STICK) / 2;
                for (cell, &v) in cells[at..at + stick.len()].iter_mut().zip(stick) {
                    *cell = dlfloat::from_f32(v);
                }
            }
        }
        Ok(out)
    }

    /// The transformed dimensions.
    pub fn shape(&self) -> StickShape {
        self.shape
    }

    /// All cells, padding included (`size_bytes / 2` of them).
    pub fn cells(&self) -> &[u16] {
        &self.cells
    }

    /// All cells, mutable (for writing an operation's output).
    pub fn cells_mut(&mut self) -> &mut [u16] {
        &mut self.cells
    }

    /// The cell of element (n, h, w, c).
    pub fn cell(&self, n: usize, h: usize, w: usize, c: usize) -> u16 {
        self.cells[self.shape.byte_offset(n, h, w, c) / 2]
    }

    /// Decode the values of row (n, h, w) (`shape.c` of them) into `out`.
    pub fn read_row(&self, n: usize, h: usize, w: usize, out: &mut [f32]) {
        for (s, chunk) in out[..self.shape.c].chunks_mut(CELLS_PER_STICK).enumerate() {
            let at = self.shape.byte_offset(n, h, w, s * CELLS_PER_STICK) / 2;
            for (o, &cell) in chunk.iter_mut().zip(&self.cells[at..at + STICK_CELLS]) {
                *o = dlfloat::to_f32(cell);
            }
        }
    }

    /// Decode every element into row-major f32 (the inverse of [`Stickified::from_f32`] up to
    /// DLFLOAT16 rounding).
    pub fn to_f32(&self) -> Vec<f32> {
        let s = self.shape;
        let mut out = vec![0.0; s.n * s.h * s.w * s.c];
        for (i, row) in out.chunks_exact_mut(s.c).enumerate() {
            let (w, nh) = (i % s.w, i / s.w);
            self.read_row(nh / s.h, nh % s.h, w, row);
        }
        out
    }
}
