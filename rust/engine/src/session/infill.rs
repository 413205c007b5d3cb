//! Fill-in-the-middle prompts for coder models, laid out as llama.cpp's server lays out an
//! `/infill` request (`format_prompt_infill`, following the repo-level pattern of the Qwen2.5-Coder
//! report):
//!
//! ```text
//! [FIM_REP]myproject\n [FIM_SEP]file0\n chunk0 ... [FIM_SEP]filename\n      (repo-level tokens only)
//! [BOS] [FIM_PRE] prefix prompt [FIM_SUF] suffix [FIM_MID]
//! ```
//!
//! With `spm` the suffix comes first (`[FIM_SUF] suffix [FIM_PRE] prefix prompt [FIM_MID]`).
//! Without a file-separator token, extra chunks are joined with a `--- snippet ---` line.
//! Prefix and suffix are cut to fit one batch (the last 3/4 of a batch of the prefix, the first
//! 1/4 of the suffix less the prompt), extra chunks to what the context leaves after a batch and
//! twice the tokens to generate, keeping their end; these are llama.cpp's choices.

use crate::tokenizer::Tokenizer;
use crate::{Error, Result};

/// A file given as context of a fill-in-the-middle request (llama.cpp's `input_extra`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct InfillChunk {
    /// The file's name (llama.cpp's default: `tmp`).
    pub filename: String,
    /// Its text.
    pub text: String,
}

/// A fill-in-the-middle request: the text before and after the hole.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Infill {
    /// The text before the hole.
    pub prefix: String,
    /// The text after the hole.
    pub suffix: String,
    /// Text the middle starts with (after the prefix; special-token text is parsed).
    pub prompt: String,
    /// Other files, oldest first, placed before the prefix.
    pub extra: Vec<InfillChunk>,
    /// Suffix before prefix (the SPM order some models were trained with).
    pub spm: bool,
}

/// The separator of extra chunks when the vocabulary has no file-separator token.
const SNIPPET: &str = "\n\n--- snippet ---\n\n";

impl Infill {
    /// The prompt tokens of this request for `tokenizer`, fitted to a batch of `n_batch` tokens
    /// and a context of `n_ctx` with `n_predict` tokens to generate.
    /// [`Error::InvalidOption`] when the vocabulary has no prefix, suffix or middle token.
    pub fn tokens(
        &self,
        tokenizer: &Tokenizer,
        n_batch: usize,
        n_predict: usize,
        n_ctx: usize,
    ) -> Result<Vec<u32>> {
        let fim = tokenizer.fim();
        let (Some(pre), Some(suf), Some(mid)) = (fim.prefix, fim.suffix, fim.middle) else {
            return Err(Error::InvalidOption(
                "this model has no fill-in-the-middle tokens (prefix, suffix and middle): it \
                 cannot infill"
                    .into(),
            ));
        };
        let plain = |text: &str| tokenizer.encode(text, false, false);
        let mut prefix = plain(&self.prefix)?;
        let mut suffix = plain(&self.suffix)?;
        let prompt = tokenizer.encode(&self.prompt, false, true)?;

        let mut extra = Vec::new();
        if let Some(rep) = fim.repo {
            extra.push(rep);
            extra.extend(plain("myproject\n")?);
        }
        for chunk in &self.extra {
            match fim.file_sep {
                Some(sep) => {
                    extra.push(sep);
                    extra.extend(plain(&format!("{}\n", chunk.filename))?);
                }
                None => extra.extend(plain(SNIPPET)?),
            }
            extra.extend(plain(&chunk.text)?);
        }
        if let Some(sep) = fim.file_sep {
            extra.push(sep);
            extra.extend(plain("filename\n")?);
        }

        let prefix_take = prefix.len().min(3 * (n_batch / 4));
        let suffix_take = suffix
            .len()
            .min((n_batch / 4).saturating_sub(2 + prompt.len()));
        let extra_take = n_ctx
            .saturating_sub(n_batch)
            .saturating_sub(2 * n_predict)
            .min(extra.len());
        prefix.drain(..prefix.len() - prefix_take);
        suffix.truncate(suffix_take);

        let mut before = vec![pre];
        before.extend(prefix);
        before.extend(prompt);
        let mut after = vec![suf];
        after.extend(suffix);
        if self.spm {
            std::mem::swap(&mut before, &mut after);
        }
        let mut out = Vec::with_capacity(extra_take + before.len() + after.len() + 2);
        out.extend_from_slice(&extra[extra.len() - extra_take..]);
        if tokenizer.add_bos() {
            out.extend(tokenizer.bos());
        }
        out.extend(before);
        out.extend(after);
        out.push(mid);
        Ok(out)
    }
}
