//! LoRA adapters in llama.cpp's GGUF format (`general.type = adapter`, `adapter.type = lora`,
//! `adapter.lora.alpha`, tensors `<base tensor>.lora_a` / `.lora_b`), applied at run time as
//! llama.cpp does (`build_lora_mm`): a matrix product `W·x` becomes
//! `W·x + s·B·(A·x)` with `s = scale · alpha / rank` (`scale` when alpha is 0). The base weights
//! are not touched, so adapters can be switched between requests without reloading.

use std::ops::Range;
use std::path::Path;
use std::sync::Arc;

use half::f16;

use super::lora_kernels::Value;
use super::ops;
use super::ModelConfig;
use crate::backend::{split_range, SharedMut, Threads};
use crate::fnv::Fnv;
use crate::gguf::GgufFile;
use crate::quant::{self, GgmlType};
use crate::{fallible, Error, Result};

/// A LoRA matrix's values: F16 when the file has them so (decoding reads every adapter value
/// once per token: F16 halves those bytes), else f32.
enum Values {
    F32(Vec<f32>),
    F16(Vec<f16>),
}

impl Values {
    /// `out[r] = Σ_i self[(first + r)·n + i]·x[i]` with `n = x.len()` ([`ops::dot`]'s
    /// arithmetic), for every `r < out.len()`.
    #[inline(always)]
    fn dots(&self, first: usize, x: &[f32], out: &mut [f32]) {
        match self {
            Values::F32(v) => f32::dots(v, first, x, out),
            Values::F16(v) => f16::dots(v, first, x, out),
        }
    }

    /// `out[c] += t[j]·self[j·stride + start + c]` for `j` in order: `out` is columns
    /// `start..start + out.len()` of a row, `self` holds `t.len()` rows of `stride` values.
    /// `out[j] = s · self[start + j]`.
    fn scaled(&self, start: usize, s: f32, out: &mut [f32]) {
        let end = start + out.len();
        match self {
            Values::F32(v) => {
                for (o, &v) in out.iter_mut().zip(&v[start..end]) {
                    *o = s * v;
                }
            }
            Values::F16(v) => {
                for (o, v) in out.iter_mut().zip(&v[start..end]) {
                    *o = s * v.to_f32();
                }
            }
        }
    }

    #[inline(always)]
    fn axpys(&self, t: &[f32], stride: usize, start: usize, out: &mut [f32]) {
        match self {
            Values::F32(v) => f32::axpys(t, &v[start..], stride, out),
            Values::F16(v) => f16::axpys(t, &v[start..], stride, out),
        }
    }
}

/// One adapted matrix: `A` (rank rows of the inputs) and `B` transposed (rank rows of the
/// outputs).
pub(crate) struct LoraPair {
    a: Values,
    bt: Values,
    rank: usize,
    n_in: usize,
    n_out: usize,
}

/// The matrices of a block a LoRA adapter may adapt, in llama.cpp's tensor names.
pub(crate) const BLOCK_TARGETS: [&str; 7] = [
    "attn_q",
    "attn_k",
    "attn_v",
    "attn_output",
    "ffn_gate",
    "ffn_up",
    "ffn_down",
];

/// A loaded LoRA adapter for one base model.
pub struct LoraAdapter {
    alpha: f32,
    /// FNV-1a of alpha and every tensor's name, shape, type and data.
    fingerprint: u64,
    /// Per block, per [`BLOCK_TARGETS`] entry.
    layers: Vec<[Option<LoraPair>; 7]>,
    output: Option<LoraPair>,
    /// The token embedding's pair: `a` holds one row of `rank` values per token.
    embedding: Option<LoraPair>,
    n_tensors: usize,
}

/// The token embedding's tensor name.
const EMBEDDING: &str = "token_embd.weight";

impl std::fmt::Debug for LoraAdapter {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("LoraAdapter")
            .field("alpha", &self.alpha)
            .field("n_tensors", &self.n_tensors)
            .finish()
    }
}

/// Tensor `name` as `rows` rows of `cols` values (GGUF dims `[cols, rows]`), dequantized to f32.
fn matrix_f32(gguf: &GgufFile, name: &str, cols: usize, rows: usize) -> Result<Vec<f32>> {
    let info = gguf
        .tensor(name)
        .ok_or_else(|| Error::InvalidModel(format!("missing tensor '{name}'")))?;
    if info.dims != [cols as u64, rows as u64] {
        return Err(Error::InvalidModel(format!(
            "tensor '{name}' has shape {:?}, expected [{cols}, {rows}]",
            info.dims
        )));
    }
    let mut out = Vec::new();
    fallible::resize(&mut out, cols.saturating_mul(rows), 0.0, name)?;
    quant::dequantize(info.ty, gguf.tensor_data(info), &mut out)?;
    Ok(out)
}

impl LoraAdapter {
    /// Read the adapter at `path` for a base model of `config` (architecture and shapes must
    /// match; [`Error::InvalidModel`] otherwise, or for a file that is not a LoRA adapter, a
    /// tensor it cannot apply (e.g. to the token embedding) or one without its pair).
    pub fn load(path: impl AsRef<Path>, config: &ModelConfig) -> Result<Self> {
        let path = path.as_ref();
        let gguf = Arc::new(GgufFile::open(path)?);
        let bad = |what: String| Error::InvalidModel(format!("{}: {what}", path.display()));
        if gguf.get_str("general.type") != Some("adapter") {
            return Err(bad(
                "not an adapter (general.type is not \"adapter\")".into()
            ));
        }
        if gguf.get_str("adapter.type") != Some("lora") {
            return Err(bad(
                "not a LoRA adapter (adapter.type is not \"lora\")".into()
            ));
        }
        let arch = gguf.get_str("general.architecture").unwrap_or_default();
        if arch != config.architecture {
            return Err(bad(format!(
                "the adapter is for architecture '{arch}', the model is '{}'",
                config.architecture
            )));
        }
        let alpha = gguf.get_f32("adapter.lora.alpha").unwrap_or(0.0);
        if !alpha.is_finite() {
            return Err(bad(format!("adapter.lora.alpha is {alpha}")));
        }
        let has = |name: &str| gguf.tensor(name).is_some();
        let (qd, kd) = (
            config.n_head * config.head_dim,
            config.n_head_kv * config.head_dim,
        );
        let (vd, od) = (
            config.n_head_kv * config.head_dim_v,
            config.n_head * config.head_dim_v,
        );
        let d = config.n_embd;
        // (inputs, outputs) of each block target.
        let dims = [
            (d, qd),
            (d, kd),
            (d, vd),
            (od, d),
            (d, config.n_ff),
            (d, config.n_ff),
            (config.n_ff, d),
        ];
        let mut n_tensors = 0;
        // The pair for `base` (`cols` inputs, `rows` outputs). The token embedding's A is
        // flipped (llama.cpp's layout): one row of `rank` values per token, gathered rather
        // than multiplied.
        let mut pair = |base: &str, cols: usize, rows: usize| -> Result<Option<LoraPair>> {
            let (a_name, b_name) = (format!("{base}.lora_a"), format!("{base}.lora_b"));
            match (has(&a_name), has(&b_name)) {
                (false, false) => return Ok(None),
                (true, true) => {}
                _ => return Err(bad(format!("'{base}' has only one of lora_a and lora_b"))),
            }
            let gathered = base == EMBEDDING;
            let rank = gguf
                .tensor(&a_name)
                .and_then(|t| t.dims.get(usize::from(!gathered)).copied())
                .unwrap_or(0) as usize;
            if rank == 0 || rank > cols.min(rows) {
                return Err(bad(format!("'{a_name}' has rank {rank}")));
            }
            n_tensors += 2;
            let a = if gathered {
                matrix_f32(&gguf, &a_name, rank, cols)?
            } else {
                matrix_f32(&gguf, &a_name, cols, rank)?
            };
            let b = matrix_f32(&gguf, &b_name, rank, rows)?;
            let mut bt = Vec::new();
            fallible::resize(&mut bt, b.len(), 0.0, "the LoRA B matrix")?;
            for (o, row) in b.chunks_exact(rank).enumerate() {
                for (j, &v) in row.iter().enumerate() {
                    bt[j * rows + o] = v;
                }
            }
            let is_f16 = |name: &str| gguf.tensor(name).is_some_and(|t| t.ty == GgmlType::F16);
            // F16 values round-trip exactly through f32.
            let keep = |v: Vec<f32>, f16: bool| {
                if f16 {
                    Values::F16(v.iter().map(|&x| f16::from_f32(x)).collect())
                } else {
                    Values::F32(v)
                }
            };
            Ok(Some(LoraPair {
                a: keep(a, is_f16(&a_name)),
                bt: keep(bt, is_f16(&b_name)),
                rank,
                n_in: cols,
                n_out: rows,
            }))
        };
        let mut layers = Vec::new();
        fallible::reserve(&mut layers, config.n_layer, "the adapter's layers")?;
        for il in 0..config.n_layer {
            let mut targets: [Option<LoraPair>; 7] = Default::default();
            for (slot, (name, &(cols, rows))) in
                targets.iter_mut().zip(BLOCK_TARGETS.iter().zip(&dims))
            {
                *slot = pair(&format!("blk.{il}.{name}.weight"), cols, rows)?;
            }
            layers.push(targets);
        }
        let output = pair("output.weight", d, config.n_vocab)?;
        let embedding = pair(EMBEDDING, config.n_vocab, d)?;
        let seen = n_tensors;
        let all = gguf.tensors().len();
        if seen != all {
            let stray = gguf
                .tensors()
                .iter()
                .map(|t| t.name.as_str())
                .find(|name| {
                    let Some(base) = name
                        .strip_suffix(".lora_a")
                        .or_else(|| name.strip_suffix(".lora_b"))
                    else {
                        return true;
                    };
                    base != "output.weight"
                        && base != EMBEDDING
                        && !(0..config.n_layer).any(|il| {
                            BLOCK_TARGETS
                                .iter()
                                .any(|t| base == format!("blk.{il}.{t}.weight"))
                        })
                })
                .unwrap_or("?");
            return Err(bad(format!(
                "tensor '{stray}' is not a LoRA target this engine applies (the 7 matrices of \
                 each block, output.weight and token_embd.weight)"
            )));
        }
        if n_tensors == 0 {
            return Err(bad("the adapter has no LoRA tensors".into()));
        }
        let mut h = Fnv::new();
        h.update(&alpha.to_bits().to_le_bytes());
        for t in gguf.tensors() {
            h.update(t.name.as_bytes());
            for d in &t.dims {
                h.update(&d.to_le_bytes());
            }
            h.update(t.ty.name().as_bytes());
            h.update(gguf.tensor_data(t));
        }
        Ok(LoraAdapter {
            alpha,
            fingerprint: h.0,
            layers,
            output,
            embedding,
            n_tensors,
        })
    }

    /// The pair adapting `target`, if the adapter has one.
    fn pair(&self, target: Target) -> Option<&LoraPair> {
        match target {
            Target::Block { layer, index } => {
                self.layers.get(layer).and_then(|t| t[index].as_ref())
            }
            Target::Output => self.output.as_ref(),
        }
    }

    /// `adapter.lora.alpha` (0: the scale is used as given).
    pub fn alpha(&self) -> f32 {
        self.alpha
    }

    /// A fingerprint of the adapter's contents (alpha and tensors).
    pub fn fingerprint(&self) -> u64 {
        self.fingerprint
    }

    /// How many tensors (A and B matrices) the adapter holds.
    pub fn n_tensors(&self) -> usize {
        self.n_tensors
    }
}

/// Whether any of `lora` adapts `target`.
pub(crate) fn adapts(lora: &[ActiveLora], target: Target) -> bool {
    lora.iter().any(|a| a.adapter.pair(target).is_some())
}

/// An adapter applied with a scale.
#[derive(Clone, Debug)]
pub struct ActiveLora {
    /// The adapter.
    pub adapter: Arc<LoraAdapter>,
    /// Its user scale (llama.cpp's `--lora-scaled`; 1 for `--lora`).
    pub scale: f32,
}

impl ActiveLora {
    /// The factor of `pair`'s products: `scale · alpha / rank` (`scale` when alpha is 0).
    fn scale_for(&self, pair: &LoraPair) -> f32 {
        let alpha = self.adapter.alpha;
        if alpha != 0.0 {
            self.scale * alpha / pair.rank as f32
        } else {
            self.scale
        }
    }
}

/// Which matrix of a forward pass a LoRA delta is for.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Target {
    /// Block `layer`'s [`BLOCK_TARGETS`] entry `index`.
    Block { layer: usize, index: usize },
    /// The output head.
    Output,
}

/// Add every active adapter's token-embedding delta to `x` (one row of `n_embd` per token of
/// `tokens`, the rows the embedding lookup wrote): `row += s · B·A[token]`, as llama.cpp's
/// `build_inp_embd` (before any embedding scale). A few values per token: on the calling thread.
pub(crate) fn add_embedding(
    active: &[ActiveLora],
    tokens: impl Iterator<Item = u32> + Clone,
    x: &mut [f32],
    n_embd: usize,
) -> Result<()> {
    for lora in active {
        let Some(pair) = lora.adapter.embedding.as_ref() else {
            continue;
        };
        let (rank, n_vocab) = (pair.rank, pair.n_in);
        let s = lora.scale_for(pair);
        let mut t = vec![0.0f32; rank];
        for (row, id) in x.chunks_exact_mut(n_embd).zip(tokens.clone()) {
            let id = id as usize;
            if id >= n_vocab || row.len() != pair.n_out {
                return Err(Error::Backend(format!(
                    "LoRA embedding: token {id} of {n_vocab}, rows of {n_embd}"
                )));
            }
            pair.a.scaled(id * rank, s, &mut t);
            ops::widest(
                #[inline(always)]
                || pair.bt.axpys(&t, n_embd, 0, row),
            );
        }
    }
    Ok(())
}

/// One adapted product of a call to [`apply`]: an adapter's pair for one of the targets.
struct Job<'a> {
    pair: &'a LoraPair,
    /// `scale · alpha / rank` (`scale` when alpha is 0).
    s: f32,
    /// The index of its target in [`apply`]'s `targets`.
    target: usize,
}

/// Add every active adapter's delta to each of `targets` (`n` rows of the base product of the
/// same input `x`, e.g. q, k and v): `out += s · B·(A·x)`, adapters in order, all the targets
/// in one dispatch per phase ([`apply_jobs`]).
pub(crate) fn apply(
    active: &[ActiveLora],
    x: &[f32],
    n: usize,
    targets: &mut [(Target, &mut [f32])],
    threads: &Threads,
) -> Result<()> {
    let mut jobs = Vec::new();
    for lora in active {
        for (k, (target, out)) in targets.iter().enumerate() {
            let Some(pair) = lora.adapter.pair(*target) else {
                continue;
            };
            if x.len() != n * pair.n_in || out.len() != n * pair.n_out {
                return Err(Error::Backend(format!(
                    "LoRA shapes: {} inputs and {} outputs for {n} rows of {} -> {}",
                    x.len(),
                    out.len(),
                    pair.n_in,
                    pair.n_out
                )));
            }
            let s = lora.scale_for(pair);
            jobs.push(Job { pair, s, target: k });
        }
    }
    if jobs.is_empty() || n == 0 {
        return Ok(());
    }
    apply_jobs(&jobs, x, n, targets, threads)
}

/// The most rows (tokens) [`apply_jobs`] runs in one dispatch, each task computing every
/// `A·x` itself: decoding, where those products are tiny (rank × inputs per target) and a second
/// dispatch, with its wait for the slowest thread, cost more than computing them twice.
const FUSED_ROWS: usize = 4;

/// [`apply`]'s jobs on every thread: `t = s·A·x` over (job, row, group of four rank rows), then
/// `out += B·t` split over the targets' output columns (each column taking the jobs in order).
/// Up to [`FUSED_ROWS`] rows, in one dispatch whose tasks each compute all of `t` first;
/// otherwise in two, `t` shared. A split over columns rather than rows keeps every thread busy
/// when decoding one token; every value is computed the same way whatever the split and the
/// path, so the bits do not depend on the thread count.
fn apply_jobs(
    jobs: &[Job<'_>],
    x: &[f32],
    n: usize,
    targets: &mut [(Target, &mut [f32])],
    threads: &Threads,
) -> Result<()> {
    // Job k's products are t[first[k]..][..n·rank], row by row; its work items are groups of
    // up to four rows of A against one row of x (four sums at once).
    let first: Vec<usize> = jobs
        .iter()
        .scan(0, |next, job| {
            let here = *next;
            *next += n * job.pair.rank;
            Some(here)
        })
        .collect();
    let items: Vec<usize> = jobs.iter().map(|job| n * groups(job)).collect();
    let len = jobs.iter().map(|job| n * job.pair.rank).sum();
    let widths: Vec<usize> = targets.iter().map(|(_, out)| out.len() / n).collect();
    let outs: Vec<SharedMut<f32>> = targets
        .iter_mut()
        .map(|(_, out)| SharedMut(out.as_mut_ptr()))
        .collect();
    let cols: usize = widths.iter().sum();
    // out += B·t on columns `range` of the targets side by side.
    let add = |t: &[f32], range: Range<usize>| {
        split_range(range, widths.iter().copied(), |target, cols| {
            let n_out = widths[target];
            for (k, job) in jobs.iter().enumerate() {
                if job.target != target {
                    continue;
                }
                let rank = job.pair.rank;
                for i in 0..n {
                    // SAFETY: columns `cols` of row i < n lie inside this target's output (n
                    // rows of n_out), and the tasks' column ranges are disjoint.
                    let row = unsafe {
                        std::slice::from_raw_parts_mut(
                            outs[target].get().add(i * n_out + cols.start),
                            cols.len(),
                        )
                    };
                    let ti = &t[first[k] + i * rank..][..rank];
                    job.pair.bt.axpys(ti, n_out, cols.start, row);
                }
            }
        })
    };
    if n <= FUSED_ROWS {
        // One block of columns per thread (of at least 64), each task computing t itself.
        let blocks = threads.count().min(cols.div_ceil(64)).max(1);
        let per = cols.div_ceil(blocks);
        threads.for_each_chunk(blocks, 1, |range| {
            ops::widest(
                #[inline(always)]
                || {
                    let mut t = vec![0f32; len];
                    let all = 0..items.iter().sum();
                    split_range(all, items.iter().copied(), |k, range| {
                        for item in range {
                            let (i, rows) = item_rows(&jobs[k], item);
                            let at = first[k] + i * jobs[k].pair.rank;
                            let ti = &mut t[at + rows.start..at + rows.end];
                            a_products(&jobs[k], x, i, rows.start, ti);
                        }
                    });
                    for block in range {
                        add(&t, block * per..((block + 1) * per).min(cols));
                    }
                },
            )
        });
        return Ok(());
    }
    let mut t = Vec::new();
    fallible::resize(&mut t, len, 0.0f32, "the LoRA products")?;
    let pt = SharedMut(t.as_mut_ptr());
    threads.for_each_chunk(items.iter().sum(), 1, |range| {
        ops::widest(
            #[inline(always)]
            || {
                split_range(range, items.iter().copied(), |k, range| {
                    for item in range {
                        let (i, rows) = item_rows(&jobs[k], item);
                        let at = first[k] + i * jobs[k].pair.rank + rows.start;
                        // SAFETY: these products of job k, row i lie inside `t` (job k has n
                        // rows of `rank` from first[k]), and no other item writes them.
                        let ti =
                            unsafe { std::slice::from_raw_parts_mut(pt.get().add(at), rows.len()) };
                        a_products(&jobs[k], x, i, rows.start, ti);
                    }
                })
            },
        )
    });
    threads.for_each_chunk(cols, 64, |range| {
        ops::widest(
            #[inline(always)]
            || add(&t, range),
        )
    });
    Ok(())
}

/// Job `job`'s work items: one per group of up to four rank rows per input row.
fn groups(job: &Job<'_>) -> usize {
    job.pair.rank.div_ceil(4)
}

/// Work item `item` of `job`: its input row and its group of up to four rank rows.
fn item_rows(job: &Job<'_>, item: usize) -> (usize, Range<usize>) {
    let (i, g) = (item / groups(job), item % groups(job));
    (i, 4 * g..(4 * g + 4).min(job.pair.rank))
}

/// `ti[r] = s·(A row first + r)·(input row i)` for the rows of one work item of `job`.
#[inline(always)]
fn a_products(job: &Job<'_>, x: &[f32], i: usize, first: usize, ti: &mut [f32]) {
    let Job { pair, s, .. } = *job;
    let n_in = pair.n_in;
    pair.a.dots(first, &x[i * n_in..][..n_in], ti);
    ti.iter_mut().for_each(|v| *v *= s);
}
