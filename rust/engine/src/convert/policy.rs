//! Which type each tensor gets for a llama-quantize file type (a "mix"), following llama.cpp's
//! `llama_tensor_get_type` without an importance matrix, for the architectures this engine
//! runs (llama, qwen2, qwen3, gemma3: no experts, no fused QKV, no Falcon special cases).

use super::QuantizeOptions;
use crate::gguf::TensorInfo;
use crate::quant::GgmlType;

/// A llama-quantize output file type (`llama_ftype`), named as llama-quantize names it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[allow(non_camel_case_types)]
pub enum FileType {
    /// Every 2-D weight Q4_0 (output / tied embeddings Q6_K).
    Q4_0,
    /// Every 2-D weight Q4_1 (output / tied embeddings Q6_K).
    Q4_1,
    /// Every 2-D weight Q5_0 (output / tied embeddings Q6_K).
    Q5_0,
    /// Every 2-D weight Q5_1 (output / tied embeddings Q6_K).
    Q5_1,
    /// Every 2-D weight Q8_0.
    Q8_0,
    /// Q2_K with Q3_K/Q4_K attention V, Q3_K FFN down and attention output.
    Q2_K,
    /// Q3_K throughout.
    Q3_K_S,
    /// Q3_K with Q4_K/Q5_K attention V, FFN down and attention output.
    Q3_K_M,
    /// Q3_K with Q5_K attention V, FFN down and attention output.
    Q3_K_L,
    /// Q4_K with Q5_K in the first attention V / FFN down layers.
    Q4_K_S,
    /// Q4_K with Q6_K in half of the attention V and FFN down layers.
    Q4_K_M,
    /// Q5_K throughout.
    Q5_K_S,
    /// Q5_K with Q6_K in half of the attention V and FFN down layers.
    Q5_K_M,
    /// Q6_K throughout.
    Q6_K,
    /// IQ4_NL (non-linear levels, 4.5 bits per weight) with Q5_K in the first eighth of the
    /// FFN down layers, and in attention V when 4 or more query heads share a KV head.
    IQ4_NL,
    /// IQ4_XS (4.25 bits per weight) with IQ4_NL's Q5_K layers; IQ4_NL for rows that are not
    /// multiples of 256.
    IQ4_XS,
}

impl FileType {
    /// Every supported file type.
    pub const ALL: [FileType; 16] = [
        FileType::Q4_0,
        FileType::Q4_1,
        FileType::Q5_0,
        FileType::Q5_1,
        FileType::Q8_0,
        FileType::Q2_K,
        FileType::Q3_K_S,
        FileType::Q3_K_M,
        FileType::Q3_K_L,
        FileType::Q4_K_S,
        FileType::Q4_K_M,
        FileType::Q5_K_S,
        FileType::Q5_K_M,
        FileType::Q6_K,
        FileType::IQ4_NL,
        FileType::IQ4_XS,
    ];

    /// llama-quantize's name (`Q4_K_M`, ...).
    pub fn name(self) -> &'static str {
        match self {
            FileType::Q4_0 => "Q4_0",
            FileType::Q4_1 => "Q4_1",
            FileType::Q5_0 => "Q5_0",
            FileType::Q5_1 => "Q5_1",
            FileType::Q8_0 => "Q8_0",
            FileType::Q2_K => "Q2_K",
            FileType::Q3_K_S => "Q3_K_S",
            FileType::Q3_K_M => "Q3_K_M",
            FileType::Q3_K_L => "Q3_K_L",
            FileType::Q4_K_S => "Q4_K_S",
            FileType::Q4_K_M => "Q4_K_M",
            FileType::Q5_K_S => "Q5_K_S",
            FileType::Q5_K_M => "Q5_K_M",
            FileType::Q6_K => "Q6_K",
            FileType::IQ4_NL => "IQ4_NL",
            FileType::IQ4_XS => "IQ4_XS",
        }
    }

    /// The file type named `name` (case-insensitive; `Q3_K` and `Q4_K`, `Q5_K` mean their
    /// `_M` mixes as in llama-quantize), or `None`.
    pub fn from_name(name: &str) -> Option<FileType> {
        let upper = name.to_ascii_uppercase();
        let alias = match upper.as_str() {
            "Q3_K" => "Q3_K_M",
            "Q4_K" => "Q4_K_M",
            "Q5_K" => "Q5_K_M",
            other => other,
        };
        FileType::ALL.into_iter().find(|t| t.name() == alias)
    }

    /// The `general.file_type` value (`llama_ftype`).
    pub fn code(self) -> u32 {
        match self {
            FileType::Q4_0 => 2,
            FileType::Q4_1 => 3,
            FileType::Q8_0 => 7,
            FileType::Q5_0 => 8,
            FileType::Q5_1 => 9,
            FileType::Q2_K => 10,
            FileType::Q3_K_S => 11,
            FileType::Q3_K_M => 12,
            FileType::Q3_K_L => 13,
            FileType::Q4_K_S => 14,
            FileType::Q4_K_M => 15,
            FileType::Q5_K_S => 16,
            FileType::Q5_K_M => 17,
            FileType::Q6_K => 18,
            FileType::IQ4_NL => 25,
            FileType::IQ4_XS => 30,
        }
    }

    /// The type of the weights the mix does not single out.
    pub fn default_type(self) -> GgmlType {
        match self {
            FileType::Q4_0 => GgmlType::Q4_0,
            FileType::Q4_1 => GgmlType::Q4_1,
            FileType::Q5_0 => GgmlType::Q5_0,
            FileType::Q5_1 => GgmlType::Q5_1,
            FileType::Q8_0 => GgmlType::Q8_0,
            FileType::Q2_K => GgmlType::Q2_K,
            FileType::Q3_K_S | FileType::Q3_K_M | FileType::Q3_K_L => GgmlType::Q3_K,
            FileType::Q4_K_S | FileType::Q4_K_M => GgmlType::Q4_K,
            FileType::Q5_K_S | FileType::Q5_K_M => GgmlType::Q5_K,
            FileType::Q6_K => GgmlType::Q6_K,
            FileType::IQ4_NL => GgmlType::IQ4_NL,
            FileType::IQ4_XS => GgmlType::IQ4_XS,
        }
    }
}

impl std::fmt::Display for FileType {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(self.name())
    }
}

/// The roles of tensors the mixes treat specially (llama.cpp's `tensor_category`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Category {
    Output,
    TokenEmbd,
    /// The values' projection: `attn_v`, or a fused `attn_qkv` (Phi-3; Qwen 3.5's delta
    /// nets), counted together as llama.cpp's `category_is_attn_v` does.
    AttnV,
    AttnOutput,
    FfnDown,
    Other,
}

fn category(name: &str) -> Category {
    if name == "output.weight" {
        Category::Output
    } else if name == "token_embd.weight" || name == "per_layer_token_embd.weight" {
        Category::TokenEmbd
    } else if name.contains("attn_qkv.weight") || name.contains("attn_v.weight") {
        Category::AttnV
    } else if name.contains("attn_output.weight") {
        Category::AttnOutput
    } else if name.contains("ffn_down") {
        Category::FfnDown
    } else {
        Category::Other
    }
}

/// Whether llama-quantize quantizes a tensor at all: 2-D or more, named `*weight`, not a norm.
fn quantizable(t: &TensorInfo) -> bool {
    let n = &t.name;
    let dims = t.dims.iter().rposition(|&d| d > 1).map_or(1, |i| i + 1);
    dims >= 2
        && n.ends_with("weight")
        && !n.contains("_norm.weight")
        && !n.contains("ffn_gate_inp.weight")
        && !n.contains("altup")
        && !n.contains("laurel")
        && !n.contains("per_layer_model_proj")
        && !n.contains("ssm_conv1d")
        && !n.contains("shortconv.conv.weight")
        && n != "position_embd.weight"
        && n != "token_types.weight"
}

/// The model facts the mixes depend on.
pub(super) struct ModelFacts {
    /// `block_count`.
    pub n_layer: usize,
    /// `head_count / head_count_kv` (grouped-query attention factor).
    pub n_gqa: usize,
}

/// "Use more bits" layers of the `_M` mixes: the first and last eighth and every third between.
fn use_more_bits(i: usize, n: usize) -> bool {
    let (i, n) = (i as i64, n as i64);
    i < n / 8 || i >= 7 * n / 8 || (i - n / 8) % 3 == 2
}

/// The fallback when the row length is not a whole number of blocks of `ty` (llama.cpp's
/// `tensor_type_fallback`): 256-element types fall back to 32-element types, then F16.
fn fallback(ty: GgmlType, ncols: u64) -> GgmlType {
    if ncols.is_multiple_of(ty.block_size() as u64) {
        return ty;
    }
    let to = match ty {
        GgmlType::Q2_K | GgmlType::Q3_K => GgmlType::Q4_0,
        GgmlType::Q4_K => GgmlType::Q5_0,
        GgmlType::Q5_K => GgmlType::Q5_1,
        GgmlType::Q6_K => GgmlType::Q8_0,
        GgmlType::IQ4_XS => GgmlType::IQ4_NL,
        other => other,
    };
    if ncols.is_multiple_of(to.block_size() as u64) {
        to
    } else {
        GgmlType::F16
    }
}

/// Chooses the type of every tensor, in the order given (llama-quantize's order: by layer,
/// then by name, which its attention-V and FFN-down counters depend on). `None` means the
/// tensor is copied unchanged.
pub(super) fn choose_types(
    tensors: &[&TensorInfo],
    ftype: FileType,
    facts: &ModelFacts,
    options: &QuantizeOptions,
) -> Vec<Option<GgmlType>> {
    use FileType as F;
    use GgmlType as G;
    let n_attn_v = tensors
        .iter()
        .filter(|t| category(&t.name) == Category::AttnV)
        .count();
    let tied = !tensors.iter().any(|t| t.name == "output.weight");
    let (mut i_attn_v, mut i_ffn_down) = (0usize, 0usize);
    let n_layer = facts.n_layer;
    tensors
        .iter()
        .map(|t| {
            let cat = category(&t.name);
            if !quantizable(t) || (cat == Category::Output && !options.quantize_output_tensor) {
                return None;
            }
            let ncols = t.dims.first().copied().unwrap_or(0);
            let mut ty = ftype.default_type();
            if options.pure {
                // No per-tensor choices; the shape fallback still applies.
            } else if cat == Category::Output || (tied && cat == Category::TokenEmbd) {
                if !ncols.is_multiple_of(ty.block_size() as u64) {
                    ty = G::Q8_0;
                } else if ty != G::Q8_0 {
                    ty = G::Q6_K;
                }
            } else if cat == Category::AttnV {
                ty = match ftype {
                    F::Q2_K if facts.n_gqa >= 4 => G::Q4_K,
                    F::Q2_K => G::Q3_K,
                    F::Q3_K_M if i_attn_v < 2 => G::Q5_K,
                    F::Q3_K_M => G::Q4_K,
                    F::Q3_K_L => G::Q5_K,
                    F::Q4_K_M | F::Q5_K_M if use_more_bits(i_attn_v, n_attn_v) => G::Q6_K,
                    F::Q4_K_S if i_attn_v < 4 => G::Q5_K,
                    F::IQ4_NL | F::IQ4_XS if facts.n_gqa >= 4 => G::Q5_K,
                    _ => ty,
                };
                i_attn_v += 1;
            } else if cat == Category::FfnDown {
                let i = i_ffn_down;
                ty = match ftype {
                    F::Q2_K => G::Q3_K,
                    F::Q3_K_M if i < n_layer / 16 => G::Q5_K,
                    F::Q3_K_M => G::Q4_K,
                    F::Q3_K_L => G::Q5_K,
                    F::Q4_K_M | F::Q5_K_M if use_more_bits(i, n_layer) => G::Q6_K,
                    F::Q4_K_S | F::IQ4_NL | F::IQ4_XS if i < n_layer / 8 => G::Q5_K,
                    _ => ty,
                };
                i_ffn_down += 1;
            } else if cat == Category::AttnOutput {
                ty = match ftype {
                    F::Q2_K => G::Q3_K,
                    F::Q3_K_M => G::Q4_K,
                    F::Q3_K_L => G::Q5_K,
                    _ => ty,
                };
            }
            Some(fallback(ty, ncols))
        })
        .collect()
}

/// llama-quantize's tensor order: tensors outside the blocks first, then block by block, by
/// name within each.
pub(super) fn tensor_order(a: &TensorInfo, b: &TensorInfo) -> std::cmp::Ordering {
    fn layer(name: &str) -> i64 {
        name.strip_prefix("blk.")
            .and_then(|r| r.split('.').next())
            .and_then(|n| n.parse().ok())
            .unwrap_or(-1)
    }
    (layer(&a.name), &a.name).cmp(&(layer(&b.name), &b.name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_aliases() {
        for t in FileType::ALL {
            assert_eq!(FileType::from_name(t.name()), Some(t));
        }
        assert_eq!(FileType::from_name("q4_k"), Some(FileType::Q4_K_M));
        assert_eq!(FileType::from_name("Q4_2"), None);
    }

    #[test]
    fn more_bits_pattern_of_thirty_layers() {
        let picked: Vec<usize> = (0..30).filter(|&i| use_more_bits(i, 30)).collect();
        assert_eq!(picked, [0, 1, 2, 5, 8, 11, 14, 17, 20, 23, 26, 27, 28, 29]);
    }

    #[test]
    fn fallbacks_follow_the_row_length() {
        assert_eq!(fallback(GgmlType::Q4_K, 576), GgmlType::Q5_0);
        assert_eq!(fallback(GgmlType::Q6_K, 576), GgmlType::Q8_0);
        assert_eq!(fallback(GgmlType::Q4_K, 1536), GgmlType::Q4_K);
        assert_eq!(fallback(GgmlType::Q3_K, 40), GgmlType::F16);
        assert_eq!(fallback(GgmlType::IQ4_XS, 576), GgmlType::IQ4_NL);
        assert_eq!(fallback(GgmlType::IQ4_XS, 40), GgmlType::F16);
        assert_eq!(fallback(GgmlType::IQ4_NL, 40), GgmlType::F16);
    }
}
