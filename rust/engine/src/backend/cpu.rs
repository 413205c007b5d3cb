//! The CPU device: runs every matmul with the quantized dot-product kernels, multi-threaded.

use std::cell::RefCell;
use std::ops::Range;

use super::{split_range, DeviceInfo, DeviceKind, HostMemory, MatmulShape, SharedMut, Threads};
use crate::quant::{self, GgmlType, Kernels, TileOut, TileShape, MAX_ROWS_TOKENS, MAX_TILE_TOKENS};
use crate::{Error, Result};

thread_local! {
    static ACTIVATIONS: RefCell<Vec<u8>> = const { RefCell::new(Vec::new()) };
    static PACKED: RefCell<Vec<quant::PackLine>> = const { RefCell::new(Vec::new()) };
    /// A worker's weight rows prepared for its current rows of a prepared tile.
    static PREPARED: RefCell<Vec<quant::PackLine>> = const { RefCell::new(Vec::new()) };
}

/// At most this many bytes of weight rows prepared at a time ([`Operands::prepared_tiles`]):
/// they stay in a core's level-2 cache while every group of tokens reads them, and every part
/// reads all the packed activations again. Llama-3.2-1B shape, Q4_K_M, pp512 on 2 threads of a
/// Xeon with 2 MiB of L2 per core: 64 KiB 144 tokens/s, 256 KiB 197, 1 MiB 207, 4 MiB 172.
const PREPARED_BYTES: usize = 1024 << 10;

/// Chunks per thread of a decoding matmul (see [`matmul_shared_input`]).
const DECODE_CHUNKS_PER_THREAD: usize = 2;

/// One weight matrix of a [`matmul_shared_input`] call and where its products go.
pub(crate) struct Part<'a> {
    /// The weight rows in GGUF block layout.
    pub(crate) w: &'a [u8],
    /// Rows of the weight.
    pub(crate) rows: usize,
    /// `n_tokens × rows` results.
    pub(crate) out: &'a mut [f32],
}

/// Work a caller adds to every task of a [`matmul_shared_input`] (a LoRA adapter's delta),
/// in the same dispatch as the products.
pub(crate) trait Epilogue: Sync {
    /// Called in a task before it computes rows `rows` of part `part`: the time to prefetch
    /// what [`Epilogue::after`] will read, while the products run.
    fn before(&self, part: usize, rows: Range<usize>);

    /// Called in the task once it has written rows `rows` of part `part` for every token, with
    /// that part's output (`n_tokens × part rows` values, token by token), which it may then
    /// change in those rows of every token and nowhere else.
    fn after(&self, part: usize, rows: Range<usize>, out: SharedMut<f32>);
}

/// `out[t*rows + r] = w[r] · x[t]` on the CPU for a weight in any supported type.
pub(crate) fn matmul(
    shape: MatmulShape,
    w: &[u8],
    x: &[f32],
    n_tokens: usize,
    out: &mut [f32],
    threads: &Threads,
) -> Result<()> {
    let part = Part {
        w,
        rows: shape.rows,
        out,
    };
    matmul_shared_input(
        shape.ty,
        shape.cols,
        &mut [part],
        x,
        n_tokens,
        threads,
        None,
    )
}

/// [`matmul`] for several weights of one type and width applied to the same input (a layer's
/// query, key and value projections): the input is quantized once and every weight's rows are
/// shared out among the threads in one dispatch, each task followed by `epilogue` if any.
pub(crate) fn matmul_shared_input(
    ty: GgmlType,
    cols: usize,
    parts: &mut [Part<'_>],
    x: &[f32],
    n_tokens: usize,
    threads: &Threads,
    epilogue: Option<&dyn Epilogue>,
) -> Result<()> {
    let w_row = ty.row_bytes(cols as u64).ok_or_else(|| {
        Error::Backend(format!(
            "{cols} columns is not a whole number of {ty} blocks"
        ))
    })? as usize;
    let act_ty = quant::vec_dot_type(ty);
    let act_row = act_ty.row_bytes(cols as u64).ok_or_else(|| {
        Error::Backend(format!(
            "{cols} columns is not a whole number of {act_ty} blocks"
        ))
    })? as usize;
    for p in parts.iter() {
        if p.w.len() != w_row * p.rows
            || x.len() != cols * n_tokens
            || p.out.len() != p.rows * n_tokens
        {
            return Err(Error::Backend(format!(
                "matmul size mismatch: weight {}x{cols} {ty} ({} bytes), input {} values, output {} values, {n_tokens} tokens",
                p.rows,
                p.w.len(),
                x.len(),
                p.out.len()
            )));
        }
    }
    // The kernel table's plan: row tiles only pay off with several tokens; decoding (one
    // token, or a few from as many sequences) streams the rows once for all tokens.
    let kernels = quant::kernels(ty);
    let tile = kernels
        .tile_shape()
        .filter(|s| n_tokens >= s.tokens.max(MAX_TILE_TOKENS));
    // A packed tile's activations: `group` lines per 8 tokens.
    let group = if tile.is_some() {
        kernels.packed_lines(cols)
    } else {
        0
    };
    let (mut act, mut packed) = (
        ACTIVATIONS.with_borrow_mut(std::mem::take),
        PACKED.with_borrow_mut(std::mem::take),
    );
    let result = (|| -> Result<()> {
        crate::fallible::resize(&mut act, act_row * n_tokens, 0, "the quantized activations")?;
        let line = quant::PackLine([0; 64]);
        let lines = group * (n_tokens / MAX_TILE_TOKENS);
        crate::fallible::resize(&mut packed, lines, line, "the packed activations")?;
        let failed = std::sync::Mutex::new(None);
        threads.for_each_rows(&mut act, act_row, |t0, act| {
            let x = &x[t0 * cols..];
            for (xt, at) in x.chunks_exact(cols).zip(act.chunks_exact_mut(act_row)) {
                if let Err(e) = quant::quantize_row(act_ty, xt, at) {
                    *failed.lock().unwrap_or_else(|e| e.into_inner()) = Some(e);
                    return;
                }
            }
        });
        if let Some(e) = failed.into_inner().unwrap_or_else(|e| e.into_inner()) {
            return Err(e);
        }
        if group > 0 {
            let act = &act;
            threads.for_each_rows(&mut packed, group, |g0, packed| {
                let acts = &act[g0 * MAX_TILE_TOKENS * act_row..];
                for (acts, out) in acts
                    .chunks_exact(MAX_TILE_TOKENS * act_row)
                    .zip(packed.chunks_exact_mut(group))
                {
                    let rows = std::array::from_fn(|k| &acts[k * act_row..(k + 1) * act_row]);
                    kernels.pack(cols, rows, out);
                }
            });
        }
        let ops: Vec<Operands> = parts
            .iter_mut()
            .map(|p| Operands {
                kernels,
                cols,
                rows: p.rows,
                n_tokens,
                w: p.w,
                w_row,
                act: &act,
                act_row,
                packed: &packed,
                group,
                out: SharedMut(p.out.as_mut_ptr()),
            })
            .collect();
        let total: usize = ops.iter().map(|m| m.rows).sum();
        // Decoding streams each row once and prepares the activations once per chunk: a few
        // large chunks (`DECODE_CHUNKS_PER_THREAD` per thread) beat many small ones there.
        let granularity = if tile.is_none() {
            let chunks = threads.count() * DECODE_CHUNKS_PER_THREAD;
            total.div_ceil(chunks).next_multiple_of(16)
        } else {
            16
        };
        threads.for_each_chunk(total, granularity, |range| {
            split_range(range, ops.iter().map(|m| m.rows), |i, rows| {
                if let Some(epilogue) = epilogue {
                    epilogue.before(i, rows.clone());
                }
                ops[i].run(rows.clone(), tile);
                if let Some(epilogue) = epilogue {
                    epilogue.after(i, rows, ops[i].out);
                }
            });
        });
        Ok(())
    })();
    ACTIVATIONS.set(act);
    PACKED.set(packed);
    result
}

/// One matmul's operands: weight rows, quantized activation rows and the output.
struct Operands<'a> {
    kernels: &'static Kernels,
    cols: usize,
    rows: usize,
    n_tokens: usize,
    w: &'a [u8],
    w_row: usize,
    act: &'a [u8],
    act_row: usize,
    /// The activations packed for a packed tile, `group` lines per 8 tokens (`group == 0`:
    /// the tile takes them as they are).
    packed: &'a [quant::PackLine],
    group: usize,
    out: SharedMut<f32>,
}

impl Operands<'_> {
    fn weight(&self, r: usize) -> &[u8] {
        &self.w[r * self.w_row..(r + 1) * self.w_row]
    }

    fn act(&self, t: usize) -> &[u8] {
        &self.act[t * self.act_row..(t + 1) * self.act_row]
    }

    /// Write `out[t][r]`. Every (t, r) is written by exactly one task.
    fn write(&self, t: usize, r: usize, v: f32) {
        assert!(t < self.n_tokens && r < self.rows);
        // SAFETY: t < n_tokens and r < rows, so the index is inside `out` (checked in matmul),
        // and no other task writes this element.
        unsafe { *self.out.get().add(t * self.rows + r) = v };
    }

    /// Rows `range` against every token: with a `tile`, every whole tile of its rows × its
    /// tokens, the tokens left over in each group of rows and then the rows left over with the
    /// decoding kernel; without, the decoding kernel on every row and token.
    fn run(&self, range: Range<usize>, tile: Option<TileShape>) {
        let mut r = range.start;
        if let (Some(shape), true) = (tile, self.group > 0) {
            // Packed activations are the larger operand: each group of 8 tokens is used by
            // every group of rows of the range while it is in the cache (the rows, a few KiB
            // each, are read again per group of tokens).
            let end = r + (range.end - r) / shape.rows * shape.rows;
            let t = self.packed_tiles(r..end, shape);
            self.rows_tokens(r..end, t);
            r = end;
        } else if let Some(shape) = tile {
            while r + shape.rows <= range.end {
                let t = self.tiles(r, shape);
                self.rows_tokens(r..r + shape.rows, t);
                r += shape.rows;
            }
        }
        self.rows_tokens(r..range.end, 0);
    }

    /// Rows `r0..r0 + shape.rows` against every whole group of `shape.tokens` tokens; returns
    /// the first token not done.
    fn tiles(&self, r0: usize, shape: TileShape) -> usize {
        let mut w: [&[u8]; quant::MAX_TILE_ROWS] = [&[]; quant::MAX_TILE_ROWS];
        for (i, w) in w.iter_mut().enumerate().take(shape.rows) {
            *w = self.weight(r0 + i);
        }
        self.token_groups(r0, shape, |t, out| {
            let acts = self.tile_acts(t, shape);
            let (w, acts) = (&w[..shape.rows], &acts[..shape.tokens]);
            self.kernels.dot_tile(self.cols, w, acts, out);
            true
        })
    }

    /// Rows `range` (whole groups of `shape.rows`) against every whole group of 8 tokens, token
    /// groups outermost, with the packed tile; returns the first token not done.
    fn packed_tiles(&self, range: Range<usize>, shape: TileShape) -> usize {
        let prepared = self.kernels.prepared_lines(self.cols);
        if prepared > 0 {
            return PREPARED.with_borrow_mut(|buf| self.prepared_tiles(range, prepared, buf));
        }
        let mut t = 0;
        while !range.is_empty() && t + MAX_TILE_TOKENS <= self.n_tokens {
            let packed = &self.packed[t / MAX_TILE_TOKENS * self.group..][..self.group];
            for r0 in range.clone().step_by(shape.rows) {
                let w: [&[u8]; 4] = std::array::from_fn(|i| self.weight(r0 + i));
                let Some(out) = self.kernels.dot_packed(self.cols, w, packed) else {
                    return t;
                };
                for (i, row) in out.iter().take(shape.rows).enumerate() {
                    for (k, &x) in row.iter().enumerate() {
                        self.write(t + k, r0 + i, x);
                    }
                }
            }
            t += MAX_TILE_TOKENS;
        }
        t
    }

    /// [`Operands::packed_tiles`] with rows prepared once ([`quant::Kernels::prepare`]:
    /// `prepared` lines per 4 rows) into `buf`, at most [`PREPARED_BYTES`] at a time: each
    /// part of `range` is prepared, then every group of 8 tokens is run on it.
    fn prepared_tiles(
        &self,
        range: Range<usize>,
        prepared: usize,
        buf: &mut Vec<quant::PackLine>,
    ) -> usize {
        let tile_bytes = prepared * std::mem::size_of::<quant::PackLine>();
        let tiles_per_part = (PREPARED_BYTES / tile_bytes).max(1);
        debug_assert_eq!(range.len() % 4, 0, "whole tiles of 4 rows");
        let tokens = self.n_tokens / MAX_TILE_TOKENS * MAX_TILE_TOKENS;
        // Whole tiles only (the caller passes whole ones), so that every part has one.
        let (mut r, end) = (range.start, range.start + range.len() / 4 * 4);
        while r < end {
            let tiles = ((end - r) / 4).min(tiles_per_part);
            buf.resize(tiles * prepared, quant::PackLine([0; 64]));
            for (k, out) in buf.chunks_exact_mut(prepared).enumerate() {
                let w: [&[u8]; 4] = std::array::from_fn(|i| self.weight(r + 4 * k + i));
                self.kernels.prepare(self.cols, w, out);
            }
            // Two groups of 8 tokens per pass over the rows where there are, then one.
            let mut t = 0;
            while t < tokens {
                let groups = if t + 2 * MAX_TILE_TOKENS <= tokens {
                    2
                } else {
                    1
                };
                let packed: [&[quant::PackLine]; 2] = std::array::from_fn(|g| {
                    let at = (t / MAX_TILE_TOKENS + g.min(groups - 1)) * self.group;
                    &self.packed[at..][..self.group]
                });
                for (k, rows) in buf.chunks_exact(prepared).enumerate() {
                    let packed = &packed[..groups];
                    let Some(outs) = self.kernels.dot_prepared(self.cols, rows, packed) else {
                        return 0;
                    };
                    for (g, out) in outs.iter().take(groups).enumerate() {
                        for (i, row) in out.iter().enumerate() {
                            for (j, &x) in row.iter().enumerate() {
                                self.write(t + MAX_TILE_TOKENS * g + j, r + 4 * k + i, x);
                            }
                        }
                    }
                }
                t += groups * MAX_TILE_TOKENS;
            }
            r += 4 * tiles;
        }
        tokens
    }

    /// The activation rows of tokens `t..t + shape.tokens` (the rest empty).
    fn tile_acts(&self, t: usize, shape: TileShape) -> [&[u8]; MAX_TILE_TOKENS] {
        std::array::from_fn(|k| {
            if k < shape.tokens {
                self.act(t + k)
            } else {
                &[]
            }
        })
    }

    /// Rows `r0..r0 + shape.rows` against each whole group of `shape.tokens` tokens in turn:
    /// `tile(t, out)` computes the group from token `t` into `out` (false: it cannot, and the
    /// rest is left to the caller); returns the first token not done.
    fn token_groups(
        &self,
        r0: usize,
        shape: TileShape,
        mut tile: impl FnMut(usize, &mut TileOut) -> bool,
    ) -> usize {
        let mut out: TileOut = [[0f32; MAX_TILE_TOKENS]; quant::MAX_TILE_ROWS];
        let mut t = 0;
        while t + shape.tokens <= self.n_tokens {
            if !tile(t, &mut out) {
                break;
            }
            for (i, row) in out.iter().take(shape.rows).enumerate() {
                for (k, &x) in row.iter().take(shape.tokens).enumerate() {
                    self.write(t + k, r0 + i, x);
                }
            }
            t += shape.tokens;
        }
        t
    }

    /// Rows `range` against tokens `t0..`, up to [`MAX_ROWS_TOKENS`] tokens per pass over the
    /// rows (the decoding kernel).
    fn rows_tokens(&self, range: Range<usize>, t0: usize) {
        assert!(range.end <= self.rows);
        if range.is_empty() {
            return;
        }
        let w = &self.w[range.start * self.w_row..range.end * self.w_row];
        let mut t = t0;
        while t < self.n_tokens {
            let n = (self.n_tokens - t).min(MAX_ROWS_TOKENS);
            // SAFETY: out has n_tokens * rows elements; each token's range lies within its
            // row of `out` (range.end <= rows), the tokens' rows do not overlap, and these
            // elements belong to this task only.
            let mut out: [&mut [f32]; MAX_ROWS_TOKENS] = std::array::from_fn(|k| {
                if k >= n {
                    return &mut [][..];
                }
                unsafe {
                    let at = (t + k) * self.rows + range.start;
                    std::slice::from_raw_parts_mut(self.out.get().add(at), range.len())
                }
            });
            let acts: [&[u8]; MAX_ROWS_TOKENS] =
                std::array::from_fn(|k| if k < n { self.act(t + k) } else { &[] });
            self.kernels
                .dot_rows(self.cols, w, &acts[..n], &mut out[..n]);
            t += n;
        }
    }
}

/// The host CPU's description. The CPU is always in the registry and runs every weight no
/// accelerator took (see [`super::Weight`]), so it needs no placement step of its own.
pub(crate) fn device_info() -> DeviceInfo {
    let memory = HostMemory::read();
    DeviceInfo {
        name: "CPU".to_string(),
        description: format!("{} ({})", cpu_model_name(), std::env::consts::ARCH),
        kind: DeviceKind::Cpu,
        memory_total: memory.total_bytes,
        memory_free: memory.available_bytes,
        features: vec![
            format!("simd={}", quant::simd_level()),
            format!(
                "threads={}",
                std::thread::available_parallelism().map_or(1, |n| n.get())
            ),
        ],
    }
}

fn cpu_model_name() -> String {
    std::fs::read_to_string("/proc/cpuinfo")
        .ok()
        .and_then(|s| {
            s.lines()
                .find(|l| l.starts_with("model name"))
                .and_then(|l| l.split(':').nth(1))
                .map(|v| v.trim().to_string())
        })
        .unwrap_or_else(|| "CPU".to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Random weight rows of `ty` with every block scale a small finite half.
    fn weights(ty: GgmlType, rows: usize, cols: usize, seed: &mut u64) -> Vec<u8> {
        let mut w: Vec<u8> = (0..rows * ty.row_bytes(cols as u64).unwrap() as usize)
            .map(|_| {
                *seed = seed.wrapping_mul(6364136223846793005).wrapping_add(1);
                (*seed >> 56) as u8
            })
            .collect();
        let half = half::f16::from_f32(0.01).to_bits().to_le_bytes();
        let scales: &[usize] = match ty {
            GgmlType::Q4_K | GgmlType::Q5_K | GgmlType::Q4_1 => &[0, 2],
            GgmlType::Q6_K => &[208],
            _ => &[0],
        };
        for block in w.chunks_exact_mut(ty.type_size()) {
            for &at in scales {
                block[at..at + 2].copy_from_slice(&half);
            }
        }
        w
    }

    /// A prompt matmul (row tiles over 16, 8, 4 and 1 tokens, or a few tokens per pass over the
    /// rows, then the rows left over, on two threads; on one thread, rows so long that a
    /// task's rows are prepared in several parts) gives every (token, row) exactly what the
    /// one-row kernel gives.
    #[test]
    fn prompt_matmul_equals_the_one_row_kernel_bitwise() {
        let (one, two) = (Threads::new(1).unwrap(), Threads::new(2).unwrap());
        let mut seed = 17;
        let cases = [
            (GgmlType::Q4_K, 13, 512, &two),
            (GgmlType::Q5_K, 13, 512, &two),
            (GgmlType::Q6_K, 13, 512, &two),
            (GgmlType::Q8_0, 13, 512, &two),
            // A few tokens (one per sequence of a batch) take the decoding kernel.
            (GgmlType::Q4_1, 2, 512, &two),
            (GgmlType::Q4_1, 7, 512, &two),
            (GgmlType::Q8_0, 3, 512, &two),
            (GgmlType::Q4_K, 5, 512, &two),
            // 37 rows of 16384: 84 KiB prepared per 4 Q4_K rows, 3 tiles per part.
            (GgmlType::Q4_K, 17, 16384, &one),
            (GgmlType::Q6_K, 25, 16384, &one),
            // Two groups of 8 tokens per pass, then one, then the token left over.
            (GgmlType::IQ4_XS, 25, 512, &two),
            (GgmlType::IQ2_XXS, 25, 512, &two),
            (GgmlType::IQ3_S, 17, 4096, &one),
            (GgmlType::Q5_K, 16, 512, &two),
        ];
        for (ty, n_tokens, cols, threads) in cases {
            let rows = 37;
            let w = weights(ty, rows, cols, &mut seed);
            let x: Vec<f32> = (0..cols * n_tokens)
                .map(|i| ((i * 7919 % 1013) as f32 - 506.0) / 97.0)
                .collect();
            let mut out = vec![0f32; rows * n_tokens];
            let shape = MatmulShape { ty, rows, cols };
            matmul(shape, &w, &x, n_tokens, &mut out, threads).unwrap();
            let act_ty = quant::vec_dot_type(ty);
            let mut act = vec![0u8; act_ty.row_bytes(cols as u64).unwrap() as usize];
            let w_row = ty.row_bytes(cols as u64).unwrap() as usize;
            for t in 0..n_tokens {
                quant::quantize_row(act_ty, &x[t * cols..(t + 1) * cols], &mut act).unwrap();
                for r in 0..rows {
                    let row = &w[r * w_row..(r + 1) * w_row];
                    let want = quant::kernels(ty).dot(cols, row, &act);
                    assert_eq!(
                        out[t * rows + r].to_bits(),
                        want.to_bits(),
                        "{ty} token {t} row {r}"
                    );
                }
            }
        }
    }
}
