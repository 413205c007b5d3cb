//! Every supported architecture as a description over the shared transformer block
//! (`transformer.rs`): which optional parts its files carry and which metadata it reads.
//! `build.rs` turns a description and a GGUF file into a model; nothing here runs tensors.
//!
//! The names are llama.cpp's `general.architecture` values, and each description follows
//! that architecture's graph in llama.cpp's `src/models/<name>.cpp` (commit 0c1e570).

use super::ffn::FfnActivation;
use super::ops::RopeStyle;

/// Whether the attention's query, key and value projections have biases.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Biases {
    /// Used when the file has them.
    Optional,
    /// Always (Qwen 2).
    Required,
}

/// RMS norms of queries and keys.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum QkNorm {
    None,
    /// One norm per head, before RoPE (Qwen 3, Gemma 3, EXAONE 4).
    Heads,
    /// One norm per head, after RoPE (Hunyuan).
    HeadsAfterRope,
    /// One norm over all heads of a token together (OLMo 2).
    Rows,
    /// When the file has them: one norm per head with each head's own weights, before RoPE
    /// (StableLM 2).
    OptionalHeadWeights,
    /// When the file has them: one LayerNorm (with bias) over all heads of a token together
    /// (jina-bert-v2).
    OptionalRowsLayer,
}

/// Which layers attend within a sliding window instead of the whole context.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SlidingWhen {
    /// Whenever the file gives a window (`attention.sliding_window`), else with `window`.
    Always { window: usize },
    /// Only when the file gives a window larger than 0.
    IfWindowKey,
    /// Only for models of this many layers (EXAONE 4's 32B), with a window of `window`.
    IfLayers { n_layer: usize, window: usize },
}

/// Sliding-window attention: layer `i` is local when `i % pattern < pattern - 1` (the file's
/// `attention.sliding_window_pattern` overrides `pattern`).
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Sliding {
    pub(crate) when: SlidingWhen,
    pub(crate) pattern: usize,
    /// RoPE base of local layers when the file has no `rope.freq_base_swa` (`None`: the
    /// global base).
    pub(crate) local_base: Option<f32>,
    /// Local layers use the global RoPE frequency scale (otherwise 1).
    pub(crate) local_scaled: bool,
    /// Only local layers use RoPE (EXAONE 4).
    pub(crate) rope_local_only: bool,
    /// The first layer of each `pattern` is global and the others local (ModernBERT), instead
    /// of the last.
    pub(crate) dense_first: bool,
}

/// Multipliers and soft-caps an architecture reads from its metadata.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Scalars {
    /// Granite's embedding, residual, attention and logit multipliers.
    pub(crate) granite: bool,
    /// Gemma 2's attention and final logit soft-caps (Gemma 3: the final one if present).
    pub(crate) attn_softcap: bool,
    pub(crate) final_softcap: bool,
    /// Hunyuan's NTK `rope.scaling.alpha`, which raises the RoPE base.
    pub(crate) rope_alpha: bool,
    /// Mistral 3's YaRN keys and Llama 4 attention temperature.
    pub(crate) mistral3: bool,
    /// Layers with a router (`ffn_gate_inp`) are mixtures of experts.
    pub(crate) moe: bool,
}

/// What makes an architecture an encoder (BERT family): bidirectional attention, token type
/// embeddings, a norm of the embeddings, LayerNorms of the residual sums (`attn_output_norm`,
/// `layer_output_norm`), and pooled hidden states instead of logits.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Encoder {
    /// Learned absolute positions (`position_embd`, BERT) instead of RoPE (nomic-bert).
    pub(crate) learned_positions: bool,
    /// BERT's post-LN block: LayerNorms of the residual sums and no final norm. Otherwise a
    /// pre-LN block as decoders have (ModernBERT: no attention norm on layer 0, a final
    /// `output_norm`).
    pub(crate) post_ln: bool,
    /// ALiBi attention biases (jina-bert-v2, maximum bias 8) instead of positions.
    pub(crate) alibi: bool,
}

/// One architecture.
#[derive(Clone, Copy, Debug, PartialEq)]
pub(crate) struct Arch {
    pub(crate) name: &'static str,
    pub(crate) rope: RopeStyle,
    pub(crate) biases: Biases,
    pub(crate) qk_norm: QkNorm,
    /// RMS norms before attention and feed-forward (OLMo 2 and EXAONE 4 have none).
    pub(crate) pre_norms: bool,
    /// RMS norms of the attention and feed-forward outputs (`post_attention_norm`,
    /// `post_ffw_norm`).
    pub(crate) post_norms: bool,
    /// LayerNorm with biases instead of RMS norm (StableLM, StarCoder 2).
    pub(crate) layer_norm: bool,
    pub(crate) activation: FfnActivation,
    /// Whether the feed-forward is gated (false: `ffn_up`, the activation, `ffn_down`).
    pub(crate) gated_ffn: bool,
    /// Gemma's scaling: embeddings × √n_embd, queries × 1/√head_dim after RoPE.
    pub(crate) gemma_scales: bool,
    /// Queries × 1/√head_dim after RoPE, scores unscaled (Phi-3).
    pub(crate) query_scaled: bool,
    pub(crate) sliding: Option<Sliding>,
    /// Every this-many-th layer has no RoPE (SmolLM3).
    pub(crate) no_rope_every: Option<usize>,
    /// With this many layers (the 27B models), Gemma's query scale is 1/√(n_embd/n_head).
    pub(crate) wide_query_scale_at: Option<usize>,
    pub(crate) scalars: Scalars,
    /// An embedding model: hidden states only, no output head (so no text generation).
    pub(crate) embeddings_only: bool,
    /// Bidirectional attention unless the file's `attention.causal` says otherwise (causal
    /// unless it says otherwise when false).
    pub(crate) bidirectional: bool,
    /// BERT's parts ([`Encoder`]); implies `embeddings_only`.
    pub(crate) encoder: Option<Encoder>,
    /// The file's `{arch}.hidden_activation` chooses the activation (ModernBERT: "gelu" or
    /// "silu").
    pub(crate) activation_key: bool,
    /// Gemma 4's parts: embeddings × √n_embd and an attention scale of 1; values RMS-normed
    /// per head without weights (the keys' projection before its norm when a layer has no
    /// `attn_v`); RoPE frequency factors on global layers only; per-layer inputs
    /// (`per_layer_token_embd`, `inp_gate`, `proj`) and a `layer_output_scale` when the file
    /// has them.
    pub(crate) gemma4: bool,
    /// Gemma 3n's parts (`gemma3n.rs`) on top of Gemma 4's (`gemma4` is set too): four AltUp
    /// streams of the hidden state, LAuReL beside the attention, activation sparsity in the
    /// first layers' feed-forward, per-layer inputs added to the inactive streams.
    pub(crate) gemma3n: bool,
    /// LFM2's parts: layers of 0 KV heads have a short convolution instead of attention
    /// (`short_conv.rs`); the final norm is `token_embd_norm`.
    pub(crate) lfm2: bool,
    /// Qwen 3.5's parts: gated delta nets instead of attention in the recurrent layers
    /// (`delta_net.rs`); attention layers whose queries come with output gates; the
    /// feed-forward's norm named `post_attention_norm`.
    pub(crate) qwen35: bool,
}

const LLAMA: Arch = Arch {
    name: "llama",
    rope: RopeStyle::Normal,
    biases: Biases::Optional,
    qk_norm: QkNorm::None,
    pre_norms: true,
    post_norms: false,
    layer_norm: false,
    activation: FfnActivation::Silu,
    gated_ffn: true,
    gemma_scales: false,
    query_scaled: false,
    sliding: None,
    no_rope_every: None,
    wide_query_scale_at: None,
    scalars: Scalars {
        granite: false,
        attn_softcap: false,
        final_softcap: false,
        rope_alpha: false,
        mistral3: false,
        moe: false,
    },
    embeddings_only: false,
    bidirectional: false,
    encoder: None,
    activation_key: false,
    gemma4: false,
    gemma3n: false,
    lfm2: false,
    qwen35: false,
};

const GEMMA: Arch = Arch {
    name: "gemma",
    rope: RopeStyle::Neox,
    activation: FfnActivation::GeluTanh,
    gemma_scales: true,
    ..LLAMA
};

/// Gemma's 512-position windows on five layers of six (the file's pattern may say otherwise),
/// the local RoPE base from the file.
const GEMMA_WINDOW_512: Sliding = Sliding {
    when: SlidingWhen::Always { window: 512 },
    pattern: 6,
    local_base: None,
    local_scaled: false,
    rope_local_only: false,
    dense_first: false,
};

/// The supported architectures.
pub(crate) const ARCHS: &[Arch] = &[
    LLAMA,
    Arch {
        name: "qwen2",
        rope: RopeStyle::Neox,
        biases: Biases::Required,
        ..LLAMA
    },
    Arch {
        name: "qwen3",
        rope: RopeStyle::Neox,
        qk_norm: QkNorm::Heads,
        ..LLAMA
    },
    GEMMA,
    Arch {
        name: "gemma2",
        post_norms: true,
        wide_query_scale_at: Some(46),
        sliding: Some(Sliding {
            when: SlidingWhen::Always { window: 4096 },
            pattern: 2,
            local_base: None,
            local_scaled: true,
            rope_local_only: false,
            dense_first: false,
        }),
        scalars: Scalars {
            attn_softcap: true,
            final_softcap: true,
            ..LLAMA.scalars
        },
        ..GEMMA
    },
    Arch {
        name: "gemma3",
        qk_norm: QkNorm::Heads,
        post_norms: true,
        wide_query_scale_at: Some(62),
        sliding: Some(Sliding {
            when: SlidingWhen::IfWindowKey,
            pattern: 6,
            local_base: Some(10_000.0),
            local_scaled: false,
            rope_local_only: false,
            dense_first: false,
        }),
        scalars: Scalars {
            final_softcap: true,
            ..LLAMA.scalars
        },
        ..GEMMA
    },
    // Gemma 4's dense models: per-layer head sizes and KV heads (`config.rs`), the last
    // layers reading earlier layers' caches, per-layer inputs (E2B, E4B).
    Arch {
        name: "gemma4",
        qk_norm: QkNorm::Heads,
        post_norms: true,
        gemma_scales: false,
        gemma4: true,
        sliding: Some(GEMMA_WINDOW_512),
        scalars: Scalars {
            final_softcap: true,
            ..LLAMA.scalars
        },
        ..GEMMA
    },
    // Gemma 3n (E2B, E4B): Gemma 4's attention and per-layer inputs (it came first) with
    // AltUp, LAuReL and activation sparsity; local layers on four of five.
    Arch {
        name: "gemma3n",
        qk_norm: QkNorm::Heads,
        post_norms: true,
        gemma_scales: false,
        gemma4: true,
        gemma3n: true,
        sliding: Some(Sliding {
            pattern: 5,
            ..GEMMA_WINDOW_512
        }),
        scalars: Scalars {
            final_softcap: true,
            ..LLAMA.scalars
        },
        ..GEMMA
    },
    // LFM2: with `attention.sliding_window` above 0 (LFM2-VL's larger models), every
    // attention layer is local, with the global RoPE.
    Arch {
        name: "lfm2",
        rope: RopeStyle::Neox,
        qk_norm: QkNorm::Heads,
        lfm2: true,
        sliding: Some(Sliding {
            when: SlidingWhen::IfWindowKey,
            pattern: 0,
            local_base: None,
            local_scaled: true,
            rope_local_only: false,
            dense_first: false,
        }),
        ..LLAMA
    },
    // Qwen 3.5 (dense): gated delta nets in three layers of four, gated attention with
    // partial NeoX RoPE (its interleaved M-RoPE on text) in the fourth.
    Arch {
        name: "qwen35",
        rope: RopeStyle::Neox,
        qk_norm: QkNorm::Heads,
        qwen35: true,
        ..LLAMA
    },
    Arch {
        name: "phi3",
        rope: RopeStyle::Neox,
        query_scaled: true,
        ..LLAMA
    },
    Arch {
        name: "qwen3moe",
        rope: RopeStyle::Neox,
        qk_norm: QkNorm::Heads,
        scalars: Scalars {
            moe: true,
            ..LLAMA.scalars
        },
        ..LLAMA
    },
    Arch {
        name: "smollm3",
        no_rope_every: Some(4),
        ..LLAMA
    },
    Arch {
        name: "granite",
        scalars: Scalars {
            granite: true,
            ..LLAMA.scalars
        },
        ..LLAMA
    },
    Arch {
        name: "granitemoe",
        scalars: Scalars {
            granite: true,
            moe: true,
            ..LLAMA.scalars
        },
        ..LLAMA
    },
    // Granite 4 hybrid: Granite's multipliers, Mamba-2 layers where the file gives 0 KV
    // heads (`mamba2.rs`), dense or mixture-of-experts feed-forwards.
    Arch {
        name: "granitehybrid",
        scalars: Scalars {
            granite: true,
            moe: true,
            ..LLAMA.scalars
        },
        ..LLAMA
    },
    Arch {
        name: "olmo2",
        rope: RopeStyle::Neox,
        qk_norm: QkNorm::Rows,
        pre_norms: false,
        post_norms: true,
        sliding: Some(Sliding {
            when: SlidingWhen::IfWindowKey,
            pattern: 4,
            local_base: None,
            local_scaled: false,
            rope_local_only: false,
            dense_first: false,
        }),
        ..LLAMA
    },
    Arch {
        name: "exaone4",
        rope: RopeStyle::Neox,
        qk_norm: QkNorm::Heads,
        pre_norms: false,
        post_norms: true,
        sliding: Some(Sliding {
            when: SlidingWhen::IfLayers {
                n_layer: 64,
                window: 4096,
            },
            pattern: 4,
            local_base: None,
            local_scaled: true,
            rope_local_only: true,
            dense_first: false,
        }),
        ..LLAMA
    },
    Arch {
        name: "ernie4_5",
        ..LLAMA
    },
    Arch {
        name: "mistral3",
        scalars: Scalars {
            mistral3: true,
            ..LLAMA.scalars
        },
        ..LLAMA
    },
    Arch {
        name: "stablelm",
        rope: RopeStyle::Neox,
        qk_norm: QkNorm::OptionalHeadWeights,
        layer_norm: true,
        ..LLAMA
    },
    Arch {
        name: "starcoder2",
        rope: RopeStyle::Neox,
        layer_norm: true,
        activation: FfnActivation::GeluTanh,
        gated_ffn: false,
        ..LLAMA
    },
    Arch {
        name: "hunyuan-dense",
        rope: RopeStyle::Neox,
        qk_norm: QkNorm::HeadsAfterRope,
        scalars: Scalars {
            rope_alpha: true,
            ..LLAMA.scalars
        },
        ..LLAMA
    },
    Arch {
        name: "bert",
        pre_norms: false,
        layer_norm: true,
        activation: FfnActivation::GeluTanh,
        gated_ffn: false,
        embeddings_only: true,
        bidirectional: true,
        encoder: Some(Encoder {
            learned_positions: true,
            post_ln: true,
            alibi: false,
        }),
        ..LLAMA
    },
    Arch {
        name: "nomic-bert",
        rope: RopeStyle::Neox,
        pre_norms: false,
        layer_norm: true,
        embeddings_only: true,
        bidirectional: true,
        encoder: Some(Encoder {
            learned_positions: false,
            post_ln: true,
            alibi: false,
        }),
        ..LLAMA
    },
    // ModernBERT: a pre-LN encoder (LayerNorms without biases), fused QKV, NEOX RoPE with a
    // local base on sliding-window layers (a symmetric window on two layers of three, the
    // first global), GeGLU (or SwiGLU) from one fused `ffn_up`, a final norm.
    Arch {
        name: "modern-bert",
        rope: RopeStyle::Neox,
        layer_norm: true,
        activation: FfnActivation::GeluTanh,
        sliding: Some(Sliding {
            when: SlidingWhen::IfWindowKey,
            pattern: 3,
            local_base: None,
            local_scaled: false,
            rope_local_only: false,
            dense_first: true,
        }),
        embeddings_only: true,
        bidirectional: true,
        encoder: Some(Encoder {
            learned_positions: false,
            post_ln: false,
            alibi: false,
        }),
        activation_key: true,
        ..LLAMA
    },
    // Jina embeddings v2: BERT's block with ALiBi instead of positions, optional LayerNorms
    // of queries and keys, an optional second norm of the attention sum, and a GeGLU
    // feed-forward (separate gate, or fused into `ffn_up`).
    Arch {
        name: "jina-bert-v2",
        qk_norm: QkNorm::OptionalRowsLayer,
        pre_norms: false,
        layer_norm: true,
        activation: FfnActivation::GeluTanh,
        embeddings_only: true,
        bidirectional: true,
        encoder: Some(Encoder {
            learned_positions: false,
            post_ln: true,
            alibi: true,
        }),
        ..LLAMA
    },
    // EmbeddingGemma: Gemma 3's block, bidirectional, with a symmetric sliding window on five
    // layers of six, and optional dense projections after pooling (`dense_2`, `dense_3`).
    Arch {
        name: "gemma-embedding",
        qk_norm: QkNorm::Heads,
        post_norms: true,
        sliding: Some(GEMMA_WINDOW_512),
        embeddings_only: true,
        bidirectional: true,
        ..GEMMA
    },
    // Llama's block as an embedding model (llama.cpp's llama-embed).
    Arch {
        name: "llama-embed",
        embeddings_only: true,
        ..LLAMA
    },
];

/// The names of [`ARCHS`], in order.
pub(crate) const fn names() -> [&'static str; ARCHS.len()] {
    let mut out = [""; ARCHS.len()];
    let mut i = 0;
    while i < ARCHS.len() {
        out[i] = ARCHS[i].name;
        i += 1;
    }
    out
}

/// The description of architecture `name`, if supported.
pub(crate) fn find(name: &str) -> Option<&'static Arch> {
    ARCHS.iter().find(|a| a.name == name)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_are_unique_and_found() {
        for (i, a) in ARCHS.iter().enumerate() {
            assert!(ARCHS[..i].iter().all(|b| b.name != a.name), "{}", a.name);
            assert_eq!(find(a.name), Some(a));
            assert_eq!(names()[i], a.name);
        }
    }
}
