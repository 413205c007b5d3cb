//! One block of the shared transformer (`transformer.rs`): its weights and settings, with
//! the blocks whose attention a recurrent mixer replaces (LFM2's short convolution, Qwen 3.5's
//! gated delta net).

use super::batch::SeqTokens;
use super::delta_net::DeltaNet;
use super::ffn::Dense;
use super::gemma3n::AltUpBlock;
use super::gemma4::{DenseAndExperts, PerLayerBlock};
use super::mamba2::Mamba2;
use super::mixer::MixerBuffers;
use super::moe::Moe;
use super::norm::Norm;
use super::ops::Rope;
use super::short_conv::ShortConv;
use crate::backend::{Threads, Weight};
use crate::Result;

/// One transformer block's weights and settings.
pub(crate) struct Layer {
    /// Norm of the attention input (`None`: the block's input as it is, OLMo 2).
    pub(crate) attn_norm: Option<Norm>,
    pub(crate) wq: Weight,
    /// None in a layer that reads another layer's cache.
    pub(crate) wk: Option<Weight>,
    /// None also where the keys' projection gives the values (Gemma 4).
    pub(crate) wv: Option<Weight>,
    pub(crate) wo: Weight,
    pub(crate) bq: Option<Vec<f32>>,
    pub(crate) bk: Option<Vec<f32>>,
    pub(crate) bv: Option<Vec<f32>>,
    pub(crate) bo: Option<Vec<f32>>,
    /// Norms of each query and key head (or of the whole query and key rows, OLMo 2).
    pub(crate) q_norm: Option<Norm>,
    pub(crate) k_norm: Option<Norm>,
    pub(crate) post_attn_norm: Option<Norm>,
    /// Norm of the feed-forward input (`None`: as it is; StableLM then feeds the attention's
    /// normalised input, a parallel block).
    pub(crate) ffn_norm: Option<Norm>,
    pub(crate) ffn: Ffn,
    pub(crate) post_ffn_norm: Option<Norm>,
    /// The layer's rotary embedding (`None`: no positions in this layer, SmolLM3).
    pub(crate) rope: Option<Rope>,
    /// LongRoPE's rotation for contexts longer than [`Transformer::long_from`] (Phi-3).
    pub(crate) rope_long: Option<Rope>,
    /// Sliding attention window in positions (`None`: full causal attention).
    pub(crate) window: Option<usize>,
    /// Apply `post_attn_norm` and `post_ffn_norm` to the residual sums instead of to the
    /// attention and feed-forward outputs (BERT's post-LN block).
    pub(crate) norm_sums: bool,
    /// After the normalised attention sum, add the block's input again and normalise with
    /// this (jina-bert-v2's `attn_norm_2`; a block without `attn_norm`, so its input is `h`).
    pub(crate) attn_norm_2: Option<Norm>,
    /// The values' norm (Gemma 4: per head, weights of 1).
    pub(crate) v_norm: Option<Norm>,
    /// Gemma 4's per-layer input block after the feed-forward.
    pub(crate) per_layer: Option<PerLayerBlock>,
    /// Gemma 4's `layer_output_scale`: multiplies the block's output.
    pub(crate) out_scale: Option<f32>,
    /// LFM2: a short convolution instead of attention (`wq` is its `in_proj`, `wo` its
    /// `out_proj`; no keys or values).
    pub(crate) conv: Option<ShortConv>,
    /// Gemma 3n's AltUp and LAuReL weights (its `per_layer` block then feeds AltUp's
    /// inactive streams).
    pub(crate) altup: Option<AltUpBlock>,
    /// A recurrent mixer with a matrix state instead of attention (`wq` and `wo` are its
    /// input and output projections; no keys or values).
    pub(crate) mixer: Option<Box<Mixer>>,
    /// Qwen 3.5's attention layers: `wq` gives each head's query followed by its gate, and
    /// the attention's output is multiplied by the gates' sigmoid.
    pub(crate) attn_gate: bool,
}

impl Layer {
    /// An LFM2 block with a short convolution instead of attention: `attn_norm`, the
    /// convolution with its `in_proj` and `out_proj`, `ffn_norm` and the feed-forward.
    pub(crate) fn short_conv(
        norms: (Norm, Norm),
        (conv, in_proj, out_proj): (ShortConv, Weight, Weight),
        ffn: Dense,
    ) -> Layer {
        Layer {
            conv: Some(conv),
            ..Layer::recurrent(norms, (in_proj, out_proj), Ffn::Dense(ffn))
        }
    }

    /// A Qwen 3.5 block with a gated delta net instead of attention: `attn_norm`, the net
    /// with its `attn_qkv` and `ssm_out`, the feed-forward's norm and the feed-forward.
    pub(crate) fn delta_net(
        norms: (Norm, Norm),
        (net, qkv, out): (DeltaNet, Weight, Weight),
        ffn: Dense,
    ) -> Layer {
        Layer {
            mixer: Some(Box::new(Mixer::Delta(net))),
            ..Layer::recurrent(norms, (qkv, out), Ffn::Dense(ffn))
        }
    }

    /// A Granite 4 hybrid block with a Mamba-2 layer instead of attention: `attn_norm`, the
    /// layer with its `ssm_in` and `ssm_out`, `ffn_norm` and the feed-forward.
    pub(crate) fn mamba2(
        norms: (Norm, Norm),
        (mamba, ssm_in, ssm_out): (Mamba2, Weight, Weight),
        ffn: Ffn,
    ) -> Layer {
        Layer {
            mixer: Some(Box::new(Mixer::Mamba2(mamba))),
            ..Layer::recurrent(norms, (ssm_in, ssm_out), ffn)
        }
    }

    /// A block whose attention is replaced by a recurrent mixer with the input and output
    /// projections `wq` and `wo` (set by the caller).
    fn recurrent(
        (attn_norm, ffn_norm): (Norm, Norm),
        (wq, wo): (Weight, Weight),
        ffn: Ffn,
    ) -> Layer {
        Layer {
            attn_norm: Some(attn_norm),
            wq,
            wk: None,
            wv: None,
            wo,
            bq: None,
            bk: None,
            bv: None,
            bo: None,
            q_norm: None,
            k_norm: None,
            post_attn_norm: None,
            ffn_norm: Some(ffn_norm),
            ffn,
            post_ffn_norm: None,
            rope: None,
            rope_long: None,
            window: None,
            norm_sums: false,
            attn_norm_2: None,
            v_norm: None,
            per_layer: None,
            out_scale: None,
            conv: None,
            altup: None,
            mixer: None,
            attn_gate: false,
        }
    }
}

/// A block's feed-forward.
pub(crate) enum Ffn {
    Dense(Dense),
    /// A mixture of experts (Qwen 3 MoE, Granite MoE).
    Moe(Moe),
    /// A dense feed-forward and a mixture of experts side by side (Gemma 4 26B A4B).
    DenseAndExperts(Box<DenseAndExperts>),
}

/// A layer's recurrent mixer with a matrix state, in place of attention.
pub(crate) enum Mixer {
    /// Qwen 3.5's gated delta net.
    Delta(DeltaNet),
    /// Granite 4 hybrid's Mamba-2 layer.
    Mamba2(Mamba2),
}

impl Mixer {
    /// The mixer of layer `il` for the `n` normalised rows `h` of `seqs` (of `d` values), with
    /// its input and output projections `ws`: its output in `b.proj`.
    pub(crate) fn forward(
        &self,
        ws: (&Weight, &Weight),
        shape: (usize, usize, usize),
        h: &[f32],
        seqs: &mut [SeqTokens<'_>],
        b: MixerBuffers<'_>,
        threads: &Threads,
    ) -> Result<()> {
        match self {
            Mixer::Delta(net) => net.forward(ws, shape, h, seqs, b, threads),
            Mixer::Mamba2(mamba) => mamba.forward(ws, shape, h, seqs, b, threads),
        }
    }
}
