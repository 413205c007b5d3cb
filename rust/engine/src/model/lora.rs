//! LoRA adapters in llama.cpp's GGUF format (`general.type = adapter`, `adapter.type = lora`,
//! `adapter.lora.alpha`, tensors `<base tensor>.lora_a` / `.lora_b`), applied at run time as
//! llama.cpp does (`build_lora_mm`): a matrix product `W·x` becomes
//! `W·x + s·B·(A·x)` with `s = scale · alpha / rank` (`scale` when alpha is 0). The base weights
//! are not touched, so adapters can be switched between requests without reloading.

use std::ops::Range;
use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use half::f16;

use super::lora_kernels::Value;
use super::ops;
use super::ModelConfig;
use crate::backend::{split_range, Epilogue, SharedMut, Threads, Weight};
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

    /// The number of values.
    fn len(&self) -> usize {
        match self {
            Values::F32(v) => v.len(),
            Values::F16(v) => v.len(),
        }
    }

    /// [`ops::prefetch`] of values `range` (clamped to the values).
    #[inline(always)]
    fn prefetch(&self, range: Range<usize>) {
        let end = range.end.min(self.len());
        let start = range.start.min(end);
        match self {
            Values::F32(v) => ops::prefetch(&v[start..end]),
            Values::F16(v) => ops::prefetch(&v[start..end]),
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
        let d = config.n_embd;
        // (inputs, outputs) of each block target of layer `il`.
        let dims = |il: usize| {
            let l = &config.layers[il];
            let (qd, kd) = (l.n_head * l.head_dim, l.n_head_kv * l.head_dim);
            let (vd, od) = (l.n_head_kv * l.head_dim_v, l.n_head * l.head_dim_v);
            [
                (d, qd),
                (d, kd),
                (d, vd),
                (od, d),
                (d, l.n_ff),
                (d, l.n_ff),
                (l.n_ff, d),
            ]
        };
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
                targets.iter_mut().zip(BLOCK_TARGETS.iter().zip(&dims(il)))
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

/// One adapted product of a call to [`matmul`]: an adapter's pair for one of the targets.
struct Job<'a> {
    pair: &'a LoraPair,
    /// `scale · alpha / rank` (`scale` when alpha is 0).
    s: f32,
    /// The index of its target in [`matmul`]'s `targets`.
    target: usize,
}

/// `outs[k] = weights[k]·x` ([`Weight::matmul_shared_input`], `n` input rows) plus every active
/// adapter's delta for `targets[k]`, `s · B·(A·x)`, adapters in order. The deltas are the
/// products' [`Epilogue`]: each task adds them to the output columns it has just computed, in
/// the same dispatch. Decoding (up to [`FUSED_ROWS`] rows) computes the tiny `A·x` inside the
/// tasks too: the first tasks to need a target's products share its work items between the
/// threads ([`Deltas`]); a prompt computes them first, in a dispatch of its own
/// ([`a_products_shared`]).
pub(crate) fn matmul(
    active: &[ActiveLora],
    weights: &[&Weight],
    targets: &[Target],
    x: &[f32],
    n: usize,
    outs: &mut [&mut [f32]],
    threads: &Threads,
) -> Result<()> {
    let mut jobs = Vec::new();
    for lora in active {
        for (k, (target, out)) in targets.iter().zip(outs.iter()).enumerate() {
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
        return Weight::matmul_shared_input(weights, x, n, outs, threads);
    }
    // Job k's products are t[first[k]..][..n·rank], row by row.
    let first: Vec<usize> = jobs
        .iter()
        .scan(0, |next, job| {
            let here = *next;
            *next += n * job.pair.rank;
            Some(here)
        })
        .collect();
    let len = jobs.iter().map(|job| n * job.pair.rank).sum();
    let products = Products {
        jobs: &jobs,
        first: &first,
        x,
        n,
    };
    // Decoding computes t in the tasks; a prompt in a dispatch of its own, first.
    let (mut t, progress) = if n <= FUSED_ROWS {
        let mut t = Vec::new();
        fallible::resize(&mut t, len, 0.0f32, "the LoRA products")?;
        let progress = jobs.iter().map(|_| Progress::default()).collect();
        (t, Some(progress))
    } else {
        (a_products_shared(&products, len, threads)?, None)
    };
    let deltas = Deltas {
        products,
        t: SharedMut(t.as_mut_ptr()),
        progress,
    };
    Weight::matmul_shared_input_then(weights, x, n, outs, threads, Some(&deltas))
}

/// The most rows (tokens) whose `A·x` [`matmul`] computes inside the product's tasks: decoding,
/// where those products are tiny (rank × inputs per target) and a dispatch of their own, with
/// its wait for the slowest thread, would cost more than sharing them out in the tasks.
const FUSED_ROWS: usize = 4;

/// The jobs of one [`matmul`] call and where their products `t = s·A·x` go.
struct Products<'a> {
    jobs: &'a [Job<'a>],
    /// Job k's products are `t[first[k]..][..n·rank]`, row by row.
    first: &'a [usize],
    x: &'a [f32],
    n: usize,
}

impl Products<'_> {
    /// Work item `item` of job `k` ([`item_rows`]): its products, written through `t` (the
    /// caller makes sure no other thread writes or reads them meanwhile).
    #[inline(always)]
    fn item(&self, k: usize, item: usize, t: SharedMut<f32>) {
        let job = &self.jobs[k];
        let (i, rows) = item_rows(job, item);
        let at = self.first[k] + i * job.pair.rank + rows.start;
        // SAFETY: these products of job k, row i lie inside `t` (job k has n rows of `rank`
        // from first[k]), and the caller gives them to this call alone.
        let ti = unsafe { std::slice::from_raw_parts_mut(t.get().add(at), rows.len()) };
        a_products(job, self.x, i, rows.start, ti);
    }

    /// `out += B·t` for columns `cols` of `target`'s output (`n` rows of its outputs), every
    /// job of it in order, with `target`'s products read through `t` (the caller makes sure
    /// they are all written and no thread writes them any more).
    #[inline(always)]
    fn add(&self, t: SharedMut<f32>, target: usize, cols: Range<usize>, out: SharedMut<f32>) {
        for (k, job) in self.jobs.iter().enumerate() {
            if job.target != target {
                continue;
            }
            let (rank, n_out) = (job.pair.rank, job.pair.n_out);
            assert!(cols.end <= n_out, "LoRA columns out of range");
            for i in 0..self.n {
                // SAFETY: columns `cols` (checked above) of row i < n lie inside this target's
                // output (n rows of n_out: checked in `matmul`), and the epilogue may write them
                // (its contract).
                let row = unsafe {
                    std::slice::from_raw_parts_mut(
                        out.get().add(i * n_out + cols.start),
                        cols.len(),
                    )
                };
                // SAFETY: job k's products of row i lie inside `t` (see `item`), written and
                // read-only now (the caller's contract).
                let ti = unsafe {
                    std::slice::from_raw_parts(t.get().add(self.first[k] + i * rank), rank)
                };
                job.pair.bt.axpys(ti, n_out, cols.start, row);
            }
        }
    }
}

/// How far one job's decoding products are: work items handed out, work items written.
#[derive(Default)]
struct Progress {
    claimed: AtomicUsize,
    done: AtomicUsize,
}

/// Counts a claimed work item as written when dropped, even by a panic's unwinding (which
/// the thread pool re-raises), so that no thread waits for it for ever.
struct Written<'a>(&'a AtomicUsize);

impl Drop for Written<'_> {
    fn drop(&mut self) {
        self.0.fetch_add(1, Ordering::Release);
    }
}

/// The epilogue of a [`matmul`]: the deltas of the output columns a task computed.
struct Deltas<'a> {
    products: Products<'a>,
    /// All jobs' products `t` (owned by [`matmul`], which outlives the dispatch).
    t: SharedMut<f32>,
    /// Decoding: per job, its products not computed before the dispatch; the first tasks to
    /// need a target's products claim its work items one by one, then wait for the items
    /// other threads claimed. None (a prompt): every product is there.
    progress: Option<Vec<Progress>>,
}

impl Deltas<'_> {
    /// Make sure `target`'s products are all written (decoding): compute the work items of its
    /// jobs nobody has claimed yet, then wait for the ones other threads are computing.
    fn products_of(&self, target: usize, progress: &[Progress]) {
        let products = &self.products;
        for (k, (job, p)) in products.jobs.iter().zip(progress).enumerate() {
            if job.target != target {
                continue;
            }
            let items = products.n * groups(job);
            if p.done.load(Ordering::Acquire) == items {
                continue;
            }
            loop {
                let item = p.claimed.fetch_add(1, Ordering::Relaxed);
                if item >= items {
                    break;
                }
                let _written = Written(&p.done);
                ops::widest(
                    #[inline(always)]
                    || products.item(k, item, self.t),
                );
            }
            let mut spins = 0u32;
            while p.done.load(Ordering::Acquire) < items {
                spins += 1;
                if spins.is_multiple_of(1024) {
                    std::thread::yield_now();
                } else {
                    std::hint::spin_loop();
                }
            }
        }
    }
}

impl Epilogue for Deltas<'_> {
    /// Prefetch the values [`Epilogue::after`] reads: they come from the last-level cache or
    /// memory (the weights streamed through since the previous token). `B` in short strided
    /// pieces (the task's columns of each of its rows) the hardware does not prefetch; `A`
    /// whole, once per target while decoding (before its work items are claimed), so that it
    /// arrives while the task's products run (SmolLM2 135M rank 8, 1 thread: 0.87× → 0.89×
    /// of the speed without the adapter; prefetching it in every task measured no faster).
    fn before(&self, target: usize, cols: Range<usize>) {
        if let Some(progress) = &self.progress {
            for (job, p) in self.products.jobs.iter().zip(progress) {
                if job.target == target && p.claimed.load(Ordering::Relaxed) == 0 {
                    job.pair.a.prefetch(0..job.pair.rank * job.pair.n_in);
                }
            }
        }
        for job in self.products.jobs.iter().filter(|job| job.target == target) {
            let n_out = job.pair.n_out;
            for j in 0..job.pair.rank {
                job.pair
                    .bt
                    .prefetch(j * n_out + cols.start..j * n_out + cols.end);
            }
        }
    }

    fn after(&self, target: usize, cols: Range<usize>, out: SharedMut<f32>) {
        if let Some(progress) = &self.progress {
            self.products_of(target, progress);
        }
        // This target's products are all written (above, or before the dispatch), and no
        // thread writes them any more.
        let (products, t) = (&self.products, self.t);
        ops::widest(
            #[inline(always)]
            || products.add(t, target, cols, out),
        );
    }
}

/// Every job's `t = s·A·x` (`len` values) on every thread: work items of (job, row, group of
/// four rank rows).
fn a_products_shared(products: &Products<'_>, len: usize, threads: &Threads) -> Result<Vec<f32>> {
    let items: Vec<usize> = products
        .jobs
        .iter()
        .map(|job| products.n * groups(job))
        .collect();
    let mut t = Vec::new();
    fallible::resize(&mut t, len, 0.0f32, "the LoRA products")?;
    let pt = SharedMut(t.as_mut_ptr());
    threads.for_each_chunk(items.iter().sum(), 1, |range| {
        ops::widest(
            #[inline(always)]
            // Each work item is in one chunk: its products are written by this call alone.
            || {
                split_range(range, items.iter().copied(), |k, range| {
                    range.for_each(|item| products.item(k, item, pt))
                })
            },
        )
    });
    Ok(t)
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
