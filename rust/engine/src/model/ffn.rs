//! The feed-forward pieces the block kinds share: the gated activation and a dense
//! feed-forward's weights.

use crate::backend::Weight;

/// The gated feed-forward activation.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum FfnActivation {
    /// SwiGLU (llama, qwen).
    Silu,
    /// GeGLU with tanh-approximated GELU (gemma).
    GeluTanh,
}

/// A dense feed-forward: gated (SwiGLU, GeGLU) when it has a gate.
pub(crate) struct Dense {
    /// `None`: not gated (StarCoder 2).
    pub(crate) gate: Option<Weight>,
    pub(crate) up: Weight,
    pub(crate) down: Weight,
    pub(crate) b_gate: Option<Vec<f32>>,
    pub(crate) b_up: Option<Vec<f32>>,
    pub(crate) b_down: Option<Vec<f32>>,
    /// Gemma 3n's activation sparsity of the gate ([`super::gemma3n::sparsify`]).
    pub(crate) sparse: bool,
}
