//! The transformer shared by every architecture. `archs.rs` describes each architecture's
//! features and `build.rs` reads a file's metadata and tensors into a [`Transformer`] with
//! those features set (biases, QK-norms, pre- and post-norms, sliding windows, layers without
//! RoPE, activation, scales and soft-caps; for encoders, bidirectional attention, learned
//! positions and norms after each residual sum).

use std::cell::Cell;

use super::attention::{attention, AttentionShape, SeqAttention};
use super::batch::SeqTokens;
use super::config::LayerShape;
use super::embedding::Embedding;
pub(crate) use super::ffn::{Dense, FfnActivation};
use super::gemma3n::{self, AltUp, Streams};
pub(crate) use super::gemma4::{DenseAndExperts, PerLayerBlock, PerLayerInputs};
pub(crate) use super::layer::{Ffn, Layer};
use super::lora::{self, ActiveLora, Target};
use super::mixer::MixerBuffers;
use super::norm::Norm;
use super::ops::{self, Rope};
use super::pooling::{Classifier, DenseOut, Pooling};
use super::ModelConfig;
use crate::backend::{Threads, Weight};
use crate::{fallible, Error, Result};

/// What a forward pass returns.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Output {
    /// Logits of the last token (`n_vocab` values).
    LastLogits,
    /// Logits of every token (`n_tokens × n_vocab`).
    AllLogits,
    /// Final normalised hidden states of every token (`n_tokens × n_embd`), for embeddings.
    Hidden,
}

/// What an encoder adds to its token embeddings before the first block (BERT family).
pub(crate) struct EncoderInput {
    /// Token type 0's embedding ("sentence A"; llama.cpp gives every token that type).
    pub(crate) type_row: Option<Vec<f32>>,
    /// Learned absolute position embeddings (BERT), one row per position.
    pub(crate) positions: Option<Embedding>,
    /// The norm of the sum.
    pub(crate) norm: Norm,
}

/// A complete model: a decoder (logits), or an encoder (hidden states to pool).
pub(crate) struct Transformer {
    pub(crate) config: ModelConfig,
    pub(crate) embedding: Embedding,
    /// Encoders' input additions (`None`: decoders).
    pub(crate) encoder: Option<EncoderInput>,
    /// Tokens attend only to earlier ones (false: encoders, to their whole sequence).
    pub(crate) causal: bool,
    /// How the file says to pool hidden states into one embedding per sequence.
    pub(crate) pooling: Pooling,
    /// A reranker's classification head over the pooled state.
    pub(crate) classifier: Option<Classifier>,
    /// Projections of pooled embeddings (EmbeddingGemma).
    pub(crate) dense_out: Option<DenseOut>,
    /// Multiply embeddings by this (gemma: √n_embd; granite: its embedding multiplier).
    pub(crate) embed_scale: Option<f32>,
    /// Scale rotated queries by this (gemma, phi3).
    pub(crate) query_scale: Option<f32>,
    /// Multiplier of the query-key dot products (1/√head_dim unless the model says otherwise;
    /// 1 when `query_scale` did the scaling).
    pub(crate) kq_scale: f32,
    /// Soft-cap of the attention scores: `cap · tanh(score / cap)` (Gemma 2).
    pub(crate) attn_softcap: Option<f32>,
    /// ALiBi's maximum bias (jina-bert-v2).
    pub(crate) alibi: Option<f32>,
    /// Llama 4's attention temperature (Mistral 3): queries at position `p` are multiplied by
    /// `ln(⌊p / floor⌋ + 1) · scale + 1`, as `(scale, floor)`.
    pub(crate) attn_temperature: Option<(f32, f32)>,
    /// Contexts longer than this use each layer's `rope_long`.
    pub(crate) long_from: usize,
    /// Apply the QK-norms after RoPE instead of before (Hunyuan).
    pub(crate) qk_norm_after_rope: bool,
    /// Multiply each block's attention and feed-forward outputs by this before adding them to
    /// the residual stream (granite).
    pub(crate) residual_scale: Option<f32>,
    pub(crate) activation: FfnActivation,
    pub(crate) layers: Vec<Layer>,
    /// Gemma 4's per-layer inputs, if the file has them.
    pub(crate) per_layer_inputs: Option<PerLayerInputs>,
    /// Gemma 3n's AltUp projections (with the LAuReL rank).
    pub(crate) altup: Option<(AltUp, usize)>,
    /// The norm of the last hidden states (`None`: encoders, whose blocks end with one).
    pub(crate) output_norm: Option<Norm>,
    /// The output head (`None`: encoders, which compute no logits).
    pub(crate) output: Option<Weight>,
    /// Added to the logits (`output.bias`, phi3).
    pub(crate) output_bias: Option<Vec<f32>>,
    /// Multiply the logits by this (granite: 1 / its logit scale).
    pub(crate) logit_scale: Option<f32>,
    /// Soft-cap of the logits: `cap · tanh(logit / cap)` (Gemma 2).
    pub(crate) final_softcap: Option<f32>,
}

/// The forward pass's working buffers, kept per thread between calls so that decoding does
/// not allocate (and the kernel does not zero fresh pages) for every token.
#[derive(Default)]
struct Scratch {
    x: Vec<f32>,
    h: Vec<f32>,
    q: Vec<f32>,
    k: Vec<f32>,
    v: Vec<f32>,
    attn: Vec<f32>,
    proj: Vec<f32>,
    gate: Vec<f32>,
    up: Vec<f32>,
    /// RoPE tables: for each distinct rotation among the layers, one row of `n_dims / 2`
    /// (cos, sin) pairs per token.
    rope: Vec<(f32, f32)>,
}

impl Scratch {
    /// Size every buffer for `n` tokens ([`Error::InsufficientMemory`] when they do not fit),
    /// `gate` also for Gemma 4's `per_layer` input values per token. Their contents are not
    /// cleared: the forward pass writes every element before reading it.
    fn size_for(&mut self, n: usize, c: &ModelConfig, per_layer: usize) -> Result<()> {
        let widest = |f: fn(&LayerShape) -> usize| c.layers.iter().map(f).max().unwrap_or(0);
        let qw = widest(|l| l.n_head * l.head_dim);
        let kvw = widest(|l| l.n_head_kv * l.head_dim);
        let vw = widest(|l| l.n_head_kv * l.head_dim_v);
        let ow = widest(|l| l.n_head * l.head_dim_v);
        // LFM2's short convolutions: `in_proj`'s three rows in `gate`, their output in `up`.
        let conv = match c.layers.iter().any(|l| l.short_conv.is_some()) {
            true => c.n_embd,
            false => 0,
        };
        // Qwen 3.5: the delta nets' convolution inputs in `gate` and outputs in `up`, their
        // gates in `attn`, head outputs in `q`, β and g in `k` ([`DeltaBuffers`]); the
        // attention layers' queries with their gates in `gate`, the gates then in `up`.
        let nets = c.layers.iter().filter_map(|l| l.delta_net);
        let (channels, values, betas) = nets.fold((0, 0, 0), |(c, v, b), dn| {
            let values = dn.v_heads * dn.head_dim;
            (
                c.max(dn.conv_channels()),
                v.max(values),
                b.max(2 * dn.v_heads),
            )
        });
        // Granite 4 hybrid: the Mamba-2 layers' input projection in `gate`, convolution
        // outputs in `up`, head outputs in `q`, gated outputs in `attn`, time steps in `k`.
        let mambas = c.layers.iter().filter_map(|l| l.mamba2);
        let (m_in, m_conv, m_inner, m_heads) = mambas.fold((0, 0, 0, 0), |(a, b, c, e), m| {
            let (inp, conv) = (m.in_proj(), m.conv_channels());
            (a.max(inp), b.max(conv), c.max(m.inner), e.max(m.heads))
        });
        // Every model sizes `gate` for gated queries too: a file of attention layers only
        // must not read past it (it is the feed-forward's width or more in real models).
        let gated = 2 * qw;
        let (channels, values) = (channels.max(m_conv), values.max(m_inner));
        let (gated, betas) = (gated.max(m_in), betas.max(m_heads));
        for (buf, width) in [
            (&mut self.x, c.n_embd),
            (&mut self.h, c.n_embd),
            (&mut self.q, qw.max(values)),
            (&mut self.k, kvw.max(betas)),
            (&mut self.v, vw),
            (&mut self.attn, ow.max(values)),
            (&mut self.proj, c.n_embd),
            (
                &mut self.gate,
                c.n_ff.max(per_layer).max(3 * conv).max(channels).max(gated),
            ),
            (&mut self.up, c.n_ff.max(conv).max(channels).max(qw)),
        ] {
            let len = n.saturating_mul(width);
            fallible::resize(buf, len, 0.0, "the forward pass's activations")?;
        }
        Ok(())
    }

    /// Fill `self.rope` with the tables of `ropes` (one block of `n` rows each) for the tokens
    /// of `seqs`, at the positions following each sequence's cache.
    fn rope_tables(&mut self, ropes: &[&Rope], seqs: &[SeqTokens<'_>], n: usize) -> Result<()> {
        self.rope.clear();
        let entries: usize = ropes.iter().map(|r| r.n_dims / 2).sum();
        fallible::reserve(&mut self.rope, n.saturating_mul(entries), "the RoPE tables")?;
        let mut row = Vec::new();
        for rope in ropes {
            for seq in seqs {
                let pos0 = seq.cache.len();
                for t in 0..seq.tokens.len() {
                    rope.angles(pos0 + t, &mut row);
                    self.rope.extend_from_slice(&row);
                }
            }
        }
        Ok(())
    }
}

thread_local! {
    static SCRATCH: Cell<Scratch> = Cell::new(Scratch::default());
}

/// Split rows of heads that hold a query of `head_dim` values followed by its gate (Qwen 3.5)
/// into the queries `q` and the gates `gates`.
fn split_gates(both: &[f32], head_dim: usize, q: &mut [f32], gates: &mut [f32]) {
    let pairs = both.chunks_exact(2 * head_dim);
    for ((pair, q), g) in pairs
        .zip(q.chunks_exact_mut(head_dim))
        .zip(gates.chunks_exact_mut(head_dim))
    {
        q.copy_from_slice(&pair[..head_dim]);
        g.copy_from_slice(&pair[head_dim..]);
    }
}

fn add_bias(x: &mut [f32], bias: &Option<Vec<f32>>) {
    if let Some(b) = bias {
        for row in x.chunks_exact_mut(b.len()) {
            for (v, bv) in row.iter_mut().zip(b) {
                *v += bv;
            }
        }
    }
}

/// `h = norm(x)` on rows of `d` values (`h = x` without a norm; `x` is only read).
fn norm_into(h: &mut [f32], x: &mut [f32], d: usize, norm: Option<&Norm>, threads: &Threads) {
    threads.for_each_rows2(h, d, x, d, |_, h, x| {
        h.copy_from_slice(x);
        if let Some(n) = norm {
            n.rows(h);
        }
    });
}

/// The residual step on rows of `d` values: `x += norm(proj)` (`x += proj` without a norm),
/// with `proj` first multiplied by `scale` if there is one; with `norm_sum`, `x =
/// norm(x + proj)` instead.
fn add_residual(
    x: &mut [f32],
    proj: &mut [f32],
    d: usize,
    (norm, scale, norm_sum): (Option<&Norm>, Option<f32>, bool),
    threads: &Threads,
) {
    threads.for_each_rows2(x, d, proj, d, |_, x, proj| {
        if let (Some(n), false) = (norm, norm_sum) {
            n.rows(proj);
        }
        match scale {
            Some(s) => x.iter_mut().zip(proj.iter()).for_each(|(a, b)| *a += b * s),
            None => x.iter_mut().zip(proj.iter()).for_each(|(a, b)| *a += b),
        }
        if let (Some(n), true) = (norm, norm_sum) {
            n.rows(x);
        }
    });
}

impl Transformer {
    /// `proj = down(act(gate(h)) · up(h))` (with biases and LoRA deltas) for `n` rows of `h`, a
    /// feed-forward of `n_ff` in layer `il`; `gate` and `up` are working buffers.
    fn dense_ffn(
        &self,
        dense: &Dense,
        h: &[f32],
        (n, n_ff): (usize, usize),
        (lora, il): (&[ActiveLora], usize),
        (gate, up, proj): (&mut [f32], &mut [f32], &mut [f32]),
        threads: &Threads,
    ) -> Result<()> {
        let block = |index| Target::Block { layer: il, index };
        let (gate, up) = (&mut gate[..n * n_ff], &mut up[..n * n_ff]);
        if let Some(w_gate) = &dense.gate {
            let outs: &mut [&mut [f32]] = &mut [gate, up];
            let (weights, targets) = ([w_gate, &dense.up], [block(4), block(5)]);
            lora::matmul(lora, &weights, &targets, h, n, outs, threads)?;
            add_bias(gate, &dense.b_gate);
            add_bias(up, &dense.b_up);
            threads.for_each_rows2(gate, n_ff, up, n_ff, |_, g, u| {
                if dense.sparse {
                    g.chunks_exact_mut(n_ff).for_each(gemma3n::sparsify);
                }
                match self.activation {
                    FfnActivation::Silu => ops::silu_mul(g, u),
                    FfnActivation::GeluTanh => ops::gelu_mul(g, u),
                }
            });
        } else {
            // Not gated (StarCoder 2): the activation of `up`, in the gate's buffer.
            lora::matmul(lora, &[&dense.up], &[block(5)], h, n, &mut [gate], threads)?;
            add_bias(gate, &dense.b_up);
            threads.for_each_rows(gate, n_ff, |_, g| match self.activation {
                FfnActivation::Silu => g.iter_mut().for_each(|v| *v /= 1.0 + ops::exp(-*v)),
                FfnActivation::GeluTanh => ops::gelu(g),
            });
        }
        let down = &[&dense.down];
        lora::matmul(lora, down, &[block(6)], gate, n, &mut [proj], threads)?;
        add_bias(proj, &dense.b_down);
        Ok(())
    }

    /// The rotation `layer` uses in a context of `n_ctx` positions (LongRoPE's long one
    /// beyond `long_from`).
    pub(crate) fn rope_of<'a>(&self, layer: &'a Layer, n_ctx: usize) -> Option<&'a Rope> {
        match &layer.rope_long {
            Some(long) if n_ctx > self.long_from => Some(long),
            _ => layer.rope.as_ref(),
        }
    }

    /// Add an encoder's token type and position embeddings to the embedded tokens `x` of
    /// `seqs` (positions from each sequence's cache length) and normalise the sums.
    fn encoder_input(
        &self,
        enc: &EncoderInput,
        seqs: &[SeqTokens<'_>],
        x: &mut [f32],
        threads: &Threads,
    ) -> Result<()> {
        let d = self.config.n_embd;
        let mut rows = x.chunks_exact_mut(d);
        let mut pos_row = vec![0f32; d];
        for seq in seqs {
            let pos0 = seq.cache.len();
            for (t, row) in (0..seq.tokens.len()).zip(&mut rows) {
                if let Some(type_row) = &enc.type_row {
                    row.iter_mut().zip(type_row).for_each(|(v, t)| *v += t);
                }
                if let Some(positions) = &enc.positions {
                    if pos0 + t >= positions.rows() {
                        return Err(Error::ContextExhausted {
                            needed: pos0 + seq.tokens.len(),
                            capacity: positions.rows(),
                        });
                    }
                    positions.row((pos0 + t) as u32, &mut pos_row)?;
                    row.iter_mut().zip(&pos_row).for_each(|(v, p)| *v += p);
                }
            }
        }
        enc.norm.rows_par(x, threads);
        Ok(())
    }

    /// Run each sequence's tokens at the positions following its cache's contents, append
    /// their keys and values to its cache, and return what `output` asks for, sequence after
    /// sequence ([`Output::LastLogits`]: the last token of each sequence). The tokens of all
    /// sequences go through every matrix product together; RoPE positions and attention are
    /// each sequence's own.
    pub(crate) fn forward(
        &self,
        seqs: &mut [SeqTokens<'_>],
        threads: &Threads,
        output: Output,
        out: &mut Vec<f32>,
        lora: &[ActiveLora],
    ) -> Result<()> {
        let c = &self.config;
        if seqs.is_empty() || seqs.iter().any(|s| s.tokens.is_empty()) {
            return Err(Error::InvalidOption("forward pass with no tokens".into()));
        }
        for s in seqs.iter() {
            let needed = s.cache.len() + s.tokens.len();
            if needed > s.cache.capacity() {
                return Err(Error::ContextExhausted {
                    needed,
                    capacity: s.cache.capacity(),
                });
            }
        }
        if output != Output::Hidden && self.output.is_none() {
            return Err(Error::InvalidOption(
                "this is an embedding model (an encoder): it computes embeddings, not logits, \
                 and cannot generate text"
                    .into(),
            ));
        }
        let n = seqs.iter().map(|s| s.tokens.len()).sum();
        let mut buffers = SCRATCH.take();
        let result = buffers
            .size_for(n, c, self.per_layer_inputs.as_ref().map_or(0, |p| p.width))
            .and_then(|()| self.forward_with(seqs, threads, output, &mut buffers, out, lora));
        SCRATCH.set(buffers);
        result
    }

    /// [`Transformer::forward`] with its working buffers sized for the tokens of `seqs`.
    fn forward_with(
        &self,
        seqs: &mut [SeqTokens<'_>],
        threads: &Threads,
        output: Output,
        buffers: &mut Scratch,
        out: &mut Vec<f32>,
        lora: &[ActiveLora],
    ) -> Result<()> {
        let n = seqs.iter().map(|s| s.tokens.len()).sum();
        let c = &self.config;
        let d = c.n_embd;
        // Each layer's RoPE table block (layers with the same rotation share one).
        let n_ctx = seqs.first().map_or(0, |s| s.cache.capacity());
        let mut ropes: Vec<&Rope> = Vec::new();
        let mut rope_of = Vec::with_capacity(self.layers.len());
        for layer in &self.layers {
            let Some(layer_rope) = self.rope_of(layer, n_ctx) else {
                rope_of.push((0, 0));
                continue;
            };
            let i = match ropes.iter().position(|r| *r == layer_rope) {
                Some(i) => i,
                None => {
                    ropes.push(layer_rope);
                    ropes.len() - 1
                }
            };
            let start: usize = ropes[..i].iter().map(|r| n * (r.n_dims / 2)).sum();
            rope_of.push((start, layer_rope.n_dims / 2));
        }
        buffers.rope_tables(&ropes, seqs, n)?;
        let pos0: Vec<usize> = seqs.iter().map(|s| s.cache.len()).collect();
        // Each sequence's first row in the batch.
        let first_token: Vec<usize> = seqs
            .iter()
            .scan(0, |next, seq| {
                let first = *next;
                *next += seq.tokens.len();
                Some(first)
            })
            .collect();
        let Scratch {
            x,
            h,
            q,
            k,
            v,
            attn,
            proj,
            gate,
            up,
            rope,
        } = buffers;
        let tokens = seqs.iter().flat_map(|s| s.tokens.iter());
        for (row, &id) in x.chunks_exact_mut(d).zip(tokens.clone()) {
            self.embedding.row(id, row)?;
        }
        if !lora.is_empty() {
            lora::add_embedding(lora, tokens.clone().copied(), x, d)?;
        }
        if let Some(s) = self.embed_scale {
            x.iter_mut().for_each(|v| *v *= s);
        }
        if let Some(enc) = &self.encoder {
            self.encoder_input(enc, seqs, x, threads)?;
        }
        let per_layer = match &self.per_layer_inputs {
            Some(p) => Some(p.rows(tokens.copied(), x, (n, self.layers.len()), threads)?),
            None => None,
        };
        let mut streams = match &self.altup {
            Some((altup, rank)) => Some(Streams::new(altup, x, (n, d, *rank), threads)?),
            None => None,
        };
        for (il, layer) in self.layers.iter().enumerate() {
            let block = |index| Target::Block { layer: il, index };
            let ls = &c.layers[il];
            let (qw, kw) = (ls.n_head * ls.head_dim, ls.n_head_kv * ls.head_dim);
            let (vw, ow) = (ls.n_head_kv * ls.head_dim_v, ls.n_head * ls.head_dim_v);
            let altup = layer.altup.as_ref().zip(streams.as_mut());
            if let Some((block, streams)) = altup {
                streams.predict(block, x, threads)?;
            }
            norm_into(h, x, d, layer.attn_norm.as_ref(), threads);
            if let Some((block, streams)) = layer.altup.as_ref().zip(streams.as_mut()) {
                streams.laurel(block, h, threads)?;
            }
            if let Some(conv) = &layer.conv {
                let bufs = (&mut gate[..], &mut up[..], &mut proj[..]);
                let ws = (&layer.wq, &layer.wo);
                conv.forward(ws, (il, n, d), h, seqs, bufs, threads)?;
            } else if let Some(mixer) = &layer.mixer {
                let bufs = MixerBuffers {
                    proj_in: &mut gate[..],
                    conv: &mut up[..],
                    gated: &mut attn[..],
                    heads: &mut q[..],
                    per_head: &mut k[..],
                    proj: &mut proj[..],
                };
                let ws = (&layer.wq, &layer.wo);
                mixer.forward(ws, (il, n, d), h, seqs, bufs, threads)?;
            } else {
                let (q, k, v, attn) = (
                    &mut q[..n * qw],
                    &mut k[..n * kw],
                    &mut v[..n * vw],
                    &mut attn[..n * ow],
                );
                // Queries (with their gates: in `gate` first), and the keys and values the
                // layer has.
                let mut weights = vec![&layer.wq];
                let mut outs: Vec<&mut [f32]> = match layer.attn_gate {
                    true => vec![&mut gate[..n * 2 * qw]],
                    false => vec![&mut *q],
                };
                let mut targets = vec![block(0)];
                if let Some(wk) = &layer.wk {
                    weights.push(wk);
                    outs.push(&mut *k);
                    targets.push(block(1));
                }
                if let Some(wv) = &layer.wv {
                    weights.push(wv);
                    outs.push(&mut *v);
                    targets.push(block(2));
                }
                lora::matmul(lora, &weights, &targets, h, n, &mut outs, threads)?;
                drop(outs);
                if layer.attn_gate {
                    split_gates(&gate[..n * 2 * qw], ls.head_dim, q, &mut up[..n * qw]);
                }
                add_bias(q, &layer.bq);
                let own_kv = ls.has_kv(il);
                if own_kv {
                    add_bias(k, &layer.bk);
                    add_bias(v, &layer.bv);
                    if layer.wv.is_none() {
                        // Gemma 4: the values are the keys' projection (before the keys' norm).
                        v.copy_from_slice(k);
                    }
                    if let Some(norm) = &layer.v_norm {
                        norm.rows_par(v, threads);
                    }
                }
                if !self.qk_norm_after_rope {
                    if let Some(n) = &layer.q_norm {
                        n.rows_par(q, threads);
                    }
                    if let Some(n) = &layer.k_norm {
                        n.rows_par(k, threads);
                    }
                }
                let shape = AttentionShape {
                    n_head: ls.n_head,
                    n_head_kv: ls.n_head_kv,
                    head_dim: ls.head_dim,
                    head_dim_v: ls.head_dim_v,
                    scale: self.kq_scale,
                    softcap: self.attn_softcap,
                    window: layer.window,
                    causal: self.causal,
                    // The sequences of a batch are one context's: their caches share types.
                    types: seqs
                        .first()
                        .map_or_else(Default::default, |s| s.cache.types()),
                    alibi: self.alibi,
                    store: own_kv,
                };
                let (start, half) = rope_of[il];
                let tables = &rope[start..start + n * half];
                let layer_rope = self.rope_of(layer, n_ctx);
                let rotate = |i: usize, t: usize, q: &mut [f32], k: &mut [f32]| {
                    if let Some(layer_rope) = layer_rope {
                        let row = first_token[i] + t;
                        let table = &tables[row * half..(row + 1) * half];
                        for head in q.chunks_exact_mut(ls.head_dim) {
                            layer_rope.apply(head, table);
                        }
                        if !k.is_empty() {
                            layer_rope.apply(k, table);
                        }
                    }
                    if self.qk_norm_after_rope {
                        if let Some(n) = &layer.q_norm {
                            n.rows(q);
                        }
                        if let Some(n) = &layer.k_norm {
                            n.rows(k);
                        }
                    }
                    if let Some(s) = self.query_scale {
                        q.iter_mut().for_each(|v| *v *= s);
                    }
                    if let Some((scale, floor)) = self.attn_temperature {
                        let p = (pos0[i] + t) as f32;
                        let s = ((p / floor).floor() + 1.0).ln() * scale + 1.0;
                        q.iter_mut().for_each(|v| *v *= s);
                    }
                };
                // Every sequence's attention in one dispatch (which also rotates and caches).
                let (mut qs, mut ks, mut vs, mut outs) =
                    (&mut q[..], &mut k[..], &v[..], &mut attn[..]);
                let mut parts = Vec::with_capacity(seqs.len());
                for seq in seqs.iter_mut() {
                    let ns = seq.tokens.len();
                    let (sq, rest) = std::mem::take(&mut qs).split_at_mut(ns * qw);
                    qs = rest;
                    let (sk, rest) = std::mem::take(&mut ks).split_at_mut(ns * kw);
                    ks = rest;
                    let (sv, rest) = vs.split_at(ns * vw);
                    vs = rest;
                    let (out, rest) = std::mem::take(&mut outs).split_at_mut(ns * ow);
                    outs = rest;
                    let pos0 = seq.cache.len();
                    let (keys, values) = seq.cache.layer_mut(ls.kv_layer);
                    let (sk, sv) = match own_kv {
                        true => (sk, sv),
                        false => (&mut [][..], &[][..]),
                    };
                    parts.push(SeqAttention {
                        q: sq,
                        k: sk,
                        v: sv,
                        keys,
                        values,
                        n: ns,
                        pos0,
                        out,
                    });
                }
                attention(&shape, &mut parts, &rotate, threads)?;
                if layer.attn_gate {
                    threads.for_each_rows2(attn, ow, &mut up[..n * qw], qw, |_, a, g| {
                        for (a, g) in a.iter_mut().zip(g.iter()) {
                            *a *= 1.0 / (1.0 + ops::exp(-*g));
                        }
                    });
                }
                lora::matmul(
                    lora,
                    &[&layer.wo],
                    &[block(3)],
                    attn,
                    n,
                    &mut [proj],
                    threads,
                )?;
                add_bias(proj, &layer.bo);
            }
            let norm = layer.post_attn_norm.as_ref();
            let sums = layer.norm_sums;
            add_residual(x, proj, d, (norm, self.residual_scale, sums), threads);
            if let Some(streams) = &streams {
                streams.add_laurel(x);
            }
            if let Some(norm2) = &layer.attn_norm_2 {
                // `h` still holds the block's input (no attention norm: checked when built).
                threads.for_each_rows2(x, d, h, d, |_, x, h| {
                    x.iter_mut().zip(h.iter()).for_each(|(a, b)| *a += b);
                    norm2.rows(x);
                });
            }
            // Without an FFN norm after an attention norm (StableLM's parallel block), the
            // feed-forward reads the attention's normalised input, still in `h`.
            if layer.ffn_norm.is_some() || layer.attn_norm.is_none() {
                norm_into(h, x, d, layer.ffn_norm.as_ref(), threads);
            }
            let bufs = (&mut gate[..], &mut up[..], &mut proj[..]);
            let moe_lora = || {
                if (4..7).any(|i| lora::adapts(lora, block(i))) {
                    return Err(Error::InvalidOption(
                        "LoRA adapters of a mixture-of-experts feed-forward are not supported"
                            .into(),
                    ));
                }
                Ok(())
            };
            let sums = match &layer.ffn {
                Ffn::Dense(dense) => {
                    self.dense_ffn(dense, h, (n, ls.n_ff), (lora, il), bufs, threads)?;
                    layer.norm_sums
                }
                Ffn::Moe(moe) => {
                    moe_lora()?;
                    moe.forward((h, h), n, d, proj, threads)?;
                    false
                }
                Ffn::DenseAndExperts(both) => {
                    moe_lora()?;
                    self.dense_ffn(&both.dense, h, (n, ls.n_ff), (lora, il), bufs, threads)?;
                    both.add_experts(x, proj, (n, d), threads)?;
                    false
                }
            };
            let norm = layer.post_ffn_norm.as_ref();
            add_residual(x, proj, d, (norm, self.residual_scale, sums), threads);
            match (&layer.per_layer, &per_layer, &layer.altup, streams.as_mut()) {
                (Some(block), Some(inputs), Some(altup), Some(streams)) => {
                    let per_layer = (block, inputs, il);
                    streams.correct(altup, x, per_layer, &mut *gate, threads)?;
                }
                (Some(block), Some(inputs), None, _) => {
                    block.add(x, inputs, (il, n, d), (&mut *gate, &mut *proj), threads)?;
                }
                _ => {}
            }
            if let Some(s) = layer.out_scale {
                x.iter_mut().for_each(|v| *v *= s);
            }
        }
        if let (Some((altup, _)), Some(streams)) = (&self.altup, streams.as_mut()) {
            streams.merge(altup, x, threads)?;
        }
        for seq in seqs.iter_mut() {
            let len = seq.cache.len() + seq.tokens.len();
            seq.cache.advance(len);
        }

        // The rows asked for: each sequence's last, or all of them.
        let mut rows: Vec<f32> = match output {
            Output::LastLogits => {
                let mut last = Vec::new();
                fallible::reserve(&mut last, seqs.len() * d, "the output rows")?;
                let mut end = 0;
                for seq in seqs.iter() {
                    end += seq.tokens.len();
                    last.extend_from_slice(&x[(end - 1) * d..end * d]);
                }
                last
            }
            Output::AllLogits | Output::Hidden => {
                let mut all = Vec::new();
                fallible::reserve(&mut all, x.len(), "the output rows")?;
                all.extend_from_slice(x);
                all
            }
        };
        if let Some(norm) = &self.output_norm {
            norm.rows(&mut rows);
        }
        let Some(head) = self.output.as_ref().filter(|_| output != Output::Hidden) else {
            *out = rows;
            return Ok(());
        };
        let n_out = rows.len() / d;
        let n_logits = n_out.saturating_mul(c.n_vocab);
        // Every element is written by the product: a reused buffer is not cleared.
        fallible::resize(out, n_logits, 0.0f32, "the logits")?;
        lora::matmul(
            lora,
            &[head],
            &[Target::Output],
            &rows,
            n_out,
            &mut [out],
            threads,
        )?;
        add_bias(out, &self.output_bias);
        if self.logit_scale.is_some() || self.final_softcap.is_some() {
            threads.for_each_rows(out, c.n_vocab, |_, rows| {
                if let Some(s) = self.logit_scale {
                    rows.iter_mut().for_each(|v| *v *= s);
                }
                if let Some(cap) = self.final_softcap {
                    rows.iter_mut().for_each(|v| *v = cap * (*v / cap).tanh());
                }
            });
        }
        Ok(())
    }
}
