//! LoRA adapters in llama.cpp's GGUF format (`general.type = adapter`, `adapter.type = lora`,
//! `adapter.lora.alpha`, tensors `<base tensor>.lora_a` / `.lora_b`), applied at run time as
//! llama.cpp does (`build_lora_mm`): a matrix product `W·x` becomes
//! `W·x + s·B·(A·x)` with `s = scale · alpha / rank` (`scale` when alpha is 0). The base weights
//! are not touched, so adapters can be switched between requests without reloading.

use std::path::Path;
use std::sync::Arc;

use half::f16;

use super::ModelConfig;
use super::{lora_kernels, ops};
use crate::backend::Threads;
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
    /// `Σ self[start + i]·x[i]` over `x` ([`ops::dot`]'s arithmetic).
    #[inline(always)]
    fn dot(&self, start: usize, x: &[f32]) -> f32 {
        match self {
            Values::F32(v) => ops::dot(&v[start..start + x.len()], x),
            Values::F16(v) => lora_kernels::dot_f16(&v[start..start + x.len()], x),
        }
    }

    /// `out[i] += t · self[start + i]`.
    #[inline(always)]
    fn axpy(&self, start: usize, t: f32, out: &mut [f32]) {
        match self {
            Values::F32(v) => {
                let b = &v[start..start + out.len()];
                for (o, &b) in out.iter_mut().zip(b) {
                    *o += t * b;
                }
            }
            Values::F16(v) => {
                let b = &v[start..start + out.len()];
                lora_kernels::axpy_f16(t, b, out)
            }
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
    n_tensors: usize,
}

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
        let mut pair = |base: &str, cols: usize, rows: usize| -> Result<Option<LoraPair>> {
            let (a_name, b_name) = (format!("{base}.lora_a"), format!("{base}.lora_b"));
            match (has(&a_name), has(&b_name)) {
                (false, false) => return Ok(None),
                (true, true) => {}
                _ => return Err(bad(format!("'{base}' has only one of lora_a and lora_b"))),
            }
            let rank = gguf
                .tensor(&a_name)
                .and_then(|t| t.dims.get(1).copied())
                .unwrap_or(0) as usize;
            if rank == 0 || rank > cols.min(rows) {
                return Err(bad(format!("'{a_name}' has rank {rank}")));
            }
            n_tensors += 2;
            let a = matrix_f32(&gguf, &a_name, cols, rank)?;
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
                        && !(0..config.n_layer).any(|il| {
                            BLOCK_TARGETS
                                .iter()
                                .any(|t| base == format!("blk.{il}.{t}.weight"))
                        })
                })
                .unwrap_or("?");
            return Err(bad(format!(
                "tensor '{stray}' is not a LoRA target this engine applies (the 7 matrices of \
                 each block and output.weight)"
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
            n_tensors,
        })
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

/// An adapter applied with a scale.
#[derive(Clone, Debug)]
pub struct ActiveLora {
    /// The adapter.
    pub adapter: Arc<LoraAdapter>,
    /// Its user scale (llama.cpp's `--lora-scaled`; 1 for `--lora`).
    pub scale: f32,
}

/// Which matrix of a forward pass a LoRA delta is for.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Target {
    /// Block `layer`'s [`BLOCK_TARGETS`] entry `index`.
    Block { layer: usize, index: usize },
    /// The output head.
    Output,
}

/// Rows of a batch that share one read of the adapter's matrices.
const TILE: usize = 16;

/// Add every active adapter's delta for `target` to `out` (`n` rows of the base product of
/// `x`): `out += s · B·(A·x)`, row by row on the threads (in the calling thread for a few rows,
/// as when decoding: the products are far too small to be worth a dispatch).
pub(crate) fn apply(
    active: &[ActiveLora],
    target: Target,
    x: &[f32],
    n: usize,
    out: &mut [f32],
    threads: &Threads,
) -> Result<()> {
    for lora in active {
        let pair = match target {
            Target::Block { layer, index } => lora
                .adapter
                .layers
                .get(layer)
                .and_then(|t| t[index].as_ref()),
            Target::Output => lora.adapter.output.as_ref(),
        };
        let Some(pair) = pair else {
            continue;
        };
        let alpha = lora.adapter.alpha;
        let s = if alpha != 0.0 {
            lora.scale * alpha / pair.rank as f32
        } else {
            lora.scale
        };
        let (n_in, n_out, rank) = (pair.n_in, pair.n_out, pair.rank);
        if x.len() != n * n_in || out.len() != n * n_out {
            return Err(Error::Backend(format!(
                "LoRA shapes: {} inputs and {} outputs for {n} rows of {n_in} -> {n_out}",
                x.len(),
                out.len()
            )));
        }
        threads.for_each_rows(out, n_out, |first, rows| {
            let mut t = vec![0.0f32; TILE * rank];
            // Plain f32 loops, vectorized at the widest width (the same bits at every width).
            ops::widest(
                #[inline(always)]
                || {
                    // Tiles of rows, so that each row of A and B is read once per tile rather
                    // than once per row.
                    for (k, tile) in rows.chunks_mut(TILE * n_out).enumerate() {
                        let row0 = first + k * TILE;
                        let n_rows = tile.len() / n_out;
                        for j in 0..rank {
                            for i in 0..n_rows {
                                let xr = &x[(row0 + i) * n_in..][..n_in];
                                t[i * rank + j] = s * pair.a.dot(j * n_in, xr);
                            }
                        }
                        for j in 0..rank {
                            for (i, row) in tile.chunks_exact_mut(n_out).enumerate() {
                                pair.bt.axpy(j * n_out, t[i * rank + j], row);
                            }
                        }
                    }
                },
            )
        });
    }
    Ok(())
}
