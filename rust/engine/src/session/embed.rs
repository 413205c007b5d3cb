//! Embeddings and reranking on a context: texts tokenized, run as sequences of one forward pass
//! (as many as fit the context's batch size), pooled and normalised (`model::pooling`).
//! One implementation for the CLI, the FFI and so TypeScript.

use std::sync::atomic::{AtomicBool, Ordering};

use super::Context;
use crate::model::{normalize, pool, Output, Pooling, SeqTokens};
use crate::{Error, Result};

/// How [`Context::embed_many`] pools and normalises.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EmbedOptions {
    /// `None`: the model's own ([`crate::model::Model::pooling`]).
    pub pooling: Option<Pooling>,
    /// llama.cpp's `--embd-normalize` ([`crate::model::normalize`]): 2 (Euclidean) by
    /// default, -1 for none.
    pub normalize: i32,
    /// Read special-token text in the texts as those tokens (llama-embedding does); by
    /// default it is plain text, as user input should be.
    pub parse_special: bool,
}

impl Default for EmbedOptions {
    fn default() -> Self {
        EmbedOptions {
            pooling: None,
            normalize: 2,
            parse_special: false,
        }
    }
}

impl Context {
    /// A sentence embedding of `text` as the model pools it (mean unless its file says
    /// otherwise), L2-normalized (all zeros stay zeros). The context's KV cache is not
    /// touched; `cancel` stops it with [`Error::Cancelled`].
    pub fn embed(&mut self, text: &str, cancel: Option<&AtomicBool>) -> Result<Vec<f32>> {
        let pooling = match self.model().model().pooling() {
            Pooling::None | Pooling::Rank => Some(Pooling::Mean),
            own => Some(own),
        };
        let options = EmbedOptions {
            pooling,
            ..EmbedOptions::default()
        };
        let mut out = self.embed_many(&[text], &options, cancel)?;
        out.pop()
            .ok_or_else(|| Error::Backend("no embedding computed".into()))
    }

    /// The embeddings of `texts` (each tokenized with the model's special tokens added;
    /// special-token text parsed if `options` say so): one vector per text, or with
    /// [`Pooling::None`] one per token (concatenated), or with [`Pooling::Rank`] the
    /// classification head's scores. Texts run several per forward pass (up to the context's
    /// batch size in tokens); each must fit the context. A decoder runs a text longer than
    /// the batch size in batch-sized passes (`cancel` is checked between them); an encoder
    /// needs all of a text in one pass.
    pub fn embed_many<S: AsRef<str>>(
        &mut self,
        texts: &[S],
        options: &EmbedOptions,
        cancel: Option<&AtomicBool>,
    ) -> Result<Vec<Vec<f32>>> {
        let model = self.model().clone();
        let inputs = texts
            .iter()
            .map(|t| model.tokenize(t.as_ref(), true, options.parse_special))
            .collect::<Result<Vec<_>>>()?;
        self.embed_tokens(&inputs, options, cancel)
    }

    /// [`Context::embed_many`] on token sequences.
    pub fn embed_tokens(
        &mut self,
        inputs: &[Vec<u32>],
        options: &EmbedOptions,
        cancel: Option<&AtomicBool>,
    ) -> Result<Vec<Vec<f32>>> {
        let loaded = self.model().clone();
        let model = loaded.model();
        let pooling = options.pooling.unwrap_or(model.pooling());
        if pooling == Pooling::Rank && !model.can_rank() {
            return Err(Error::InvalidOption(
                "rank pooling needs a reranker: this model has no classification head".into(),
            ));
        }
        normalize(&mut [], options.normalize)?;
        let n_ctx = self.n_ctx();
        for (i, tokens) in inputs.iter().enumerate() {
            if tokens.is_empty() {
                return Err(Error::InvalidOption(format!(
                    "input {i} has no tokens to embed"
                )));
            }
            if tokens.len() > n_ctx {
                return Err(Error::ContextExhausted {
                    needed: tokens.len(),
                    capacity: n_ctx,
                });
            }
        }
        let d = model.config().n_embd;
        let types = self.seqs[0].cache.types();
        let max_seqs = super::MAX_SEQUENCES as usize;
        let mut out = Vec::with_capacity(inputs.len());
        let mut start = 0;
        while start < inputs.len() {
            if cancel.is_some_and(|c| c.load(Ordering::Relaxed)) {
                return Err(Error::Cancelled);
            }
            // As many of the next inputs as fit a batch (the first always goes).
            let (mut end, mut total) = (start + 1, inputs[start].len());
            while end < inputs.len()
                && end - start < max_seqs
                && total + inputs[end].len() <= self.n_batch
            {
                total += inputs[end].len();
                end += 1;
            }
            let group = &inputs[start..end];
            let mut caches = group
                .iter()
                .map(|t| model.new_cache(t.len(), types))
                .collect::<Result<Vec<_>>>()?;
            let mut hidden = Vec::new();
            if group.len() == 1 && total > self.n_batch && model.is_causal() {
                // One long text of a causal model: batch-sized passes on its cache, as a
                // prompt is evaluated (cancellable between them).
                let runner = super::Runner {
                    model,
                    threads: &self.threads,
                    n_batch: self.n_batch,
                    lora: &self.lora,
                };
                let seq = super::SeqState {
                    cache: &mut caches[0],
                    cached: &mut Vec::new(),
                };
                hidden = runner.eval(seq, &group[0], Output::Hidden, &mut |_, _| {}, cancel)?;
            } else {
                let mut seqs: Vec<SeqTokens<'_>> = group
                    .iter()
                    .zip(caches.iter_mut())
                    .map(|(tokens, cache)| SeqTokens { tokens, cache })
                    .collect();
                model.forward_batch_with(
                    &mut seqs,
                    &self.threads,
                    Output::Hidden,
                    &mut hidden,
                    &self.lora,
                )?;
            }
            let mut row = 0;
            for tokens in group {
                let states = &hidden[row * d..(row + tokens.len()) * d];
                row += tokens.len();
                let mut v = match pooling {
                    Pooling::Rank => {
                        let at = model.rank_pooling();
                        model.classify(&pool(states, d, at), &self.threads)?
                    }
                    Pooling::None => {
                        // Each token's state through the dense projections, normalised.
                        let mut all = Vec::with_capacity(states.len());
                        for token in states.chunks_exact(d) {
                            let mut t = model.project(token.to_vec(), &self.threads)?;
                            normalize(&mut t, options.normalize)?;
                            all.extend(t);
                        }
                        all
                    }
                    other => model.project(pool(states, d, other), &self.threads)?,
                };
                if pooling != Pooling::None {
                    normalize(&mut v, options.normalize)?;
                }
                out.push(v);
            }
            start = end;
        }
        Ok(out)
    }
}

impl Context {
    /// Relevance scores of `documents` for `query` from a reranker (a model with a
    /// classification head): each pair laid out by [`rerank_text`] (whose separator token
    /// text is parsed), ranked with [`Pooling::Rank`], unnormalised (higher is more
    /// relevant), in the documents' order.
    pub fn rerank<S: AsRef<str>>(
        &mut self,
        query: &str,
        documents: &[S],
        cancel: Option<&AtomicBool>,
    ) -> Result<Vec<f32>> {
        let model = self.model().clone();
        let texts: Vec<String> = documents
            .iter()
            .map(|d| rerank_text(&model, query, d.as_ref()))
            .collect();
        let options = EmbedOptions {
            pooling: Some(Pooling::Rank),
            normalize: -1,
            parse_special: true,
        };
        let scores = self.embed_many(&texts, &options, cancel)?;
        Ok(scores.into_iter().map(|s| s[0]).collect())
    }
}

/// A query and a document as one reranker input, as llama.cpp lays them out: the model's
/// `tokenizer.chat_template.rerank` with `{query}` and `{document}` replaced when it has one,
/// else the query, the EOS text (if the tokenizer adds EOS), the separator text (if it adds
/// one, [`crate::tokenizer::Tokenizer::add_sep`]: BERT's `[SEP]`) and the document.
pub fn rerank_text(model: &super::LoadedModel, query: &str, document: &str) -> String {
    if let Some(template) = model.gguf().get_str("tokenizer.chat_template.rerank") {
        return template
            .replace("{query}", query)
            .replace("{document}", document);
    }
    let tok = model.tokenizer();
    let text = |id: Option<u32>| id.and_then(|i| tok.token_text(i)).unwrap_or("");
    let mut out = query.to_string();
    if tok.add_eos() {
        out.push_str(text(tok.eos()));
    }
    if tok.add_sep() {
        out.push_str(text(tok.sep()));
    }
    out.push_str(document);
    out
}
