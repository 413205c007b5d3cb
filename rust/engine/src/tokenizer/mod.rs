//! Tokenizers built from GGUF metadata, producing the same token ids as llama.cpp.
//!
//! Five model families are supported: SentencePiece-style vocabularies (`tokenizer.ggml.model =
//! "llama"`, e.g. Llama 2, Gemma), GPT-2 byte-level BPE (`"gpt2"`, e.g. Llama 3, Qwen2, SmolLM,
//! DeepSeek) with the pre-tokenizers llama.cpp uses for the common `tokenizer.ggml.pre` values,
//! Gemma 4's SentencePiece-style BPE (`"gemma4"`: spaces written `▁`, merges over raw UTF-8 split
//! only at newline runs, `<0xXX>` byte fallback, BOS always added), BERT's WordPiece (`"bert"`,
//! llama.cpp's WPM: lowercasing, accent-stripping normalizer, greedy longest-match, `[CLS]` and
//! `[SEP]` added) and SentencePiece's Unigram model (`"t5"`, llama.cpp's UGM: the file's
//! precompiled character map, Viterbi over token scores; T5, XLM-RoBERTa).
//!
//! Supported `tokenizer.ggml.pre` values (see `load.rs`): none/`default`, `llama3` (`llama-bpe`,
//! ..), `dbrx`, `smaug-bpe`, `falcon`, `gpt-2` (and the names llama.cpp treats alike: `mpt`,
//! `olmo`, `jais`, ..), `starcoder` (`refact`, ..), `command-r`, `smollm`, `qwen2`, `qwen35`,
//! `megrez`, `stablelm2`, `deepseek-llm`, `deepseek-coder`, `gemma4`, `tekken`, `gpt-4o` (`llama4`,
//! ..), `deepseek-v3` (`hunyuan-dense`, ..), `granite-embed-multi-97m`, `tiny_aya`, `youtu`,
//! `minicpm5`, `grok-2`, `afmoe`, `bloom` (`poro-chat`, `gpt3-finnish`). WordPiece ignores it.
//!
//! Encoding first cuts special-token text out of the input (`special.rs`), then runs the model
//! tokenizer (`spm.rs`, `bpe.rs` after `pretokenize.rs`, `wpm.rs` or `ugm.rs`) on each plain-text
//! fragment.
//! Decoding (`decode.rs`) mirrors llama.cpp's `token_to_piece` / `detokenize`, and
//! [`StreamDecoder`] turns a stream of generated tokens into UTF-8 text.
//!
//! Known differences from llama.cpp: when the metadata has no `eot_token_id` and the vocabulary
//! holds several end-of-turn texts, llama.cpp's choice depends on `std::unordered_map` order; we
//! take the first of `<|eot_id|>`, `<|im_end|>`, `<|end|>`, `<end_of_turn>`, `<|endoftext|>`, ..
//! (the end-of-generation set is identical either way). Special tokens of equal length are tried
//! in id order (llama.cpp's sort leaves their order unspecified). A WordPiece vocabulary without
//! an UNK token makes encoding a word it cannot cut an error (llama.cpp writes token id -1). Other
//! BPE pre-tokenizers (e.g. `chatglm-bpe`, `glm4`, `kimi-k2`, `sarvam-moe`) and the RWKV
//! tokenizer model are reported as [`crate::Error::Tokenizer`].

mod bpe;
mod decode;
mod load;
mod pretokenize;
mod special;
mod spm;
mod ugm;
mod unicode;
mod vocab;
mod wpm;

pub use decode::StreamDecoder;

use decode::KindData;
use special::{Fragment, SpecialTokens};
use vocab::{attr, Vocab};

/// Which tokenization algorithm a model uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum TokenizerKind {
    /// SentencePiece-style score-based merging with byte fallback (`tokenizer.ggml.model = "llama"`).
    SentencePiece,
    /// GPT-2 byte-level BPE with merge ranks (`tokenizer.ggml.model = "gpt2"`).
    Bpe,
    /// BERT's WordPiece: greedy longest-match after normalization (`tokenizer.ggml.model =
    /// "bert"`).
    WordPiece,
    /// SentencePiece's Unigram model: Viterbi over token scores after the file's normalization
    /// (`tokenizer.ggml.model = "t5"`: T5, XLM-RoBERTa).
    Unigram,
}

/// The fill-in-the-middle tokens of a vocabulary (from `tokenizer.ggml.fim_*_token_id`, else
/// found by their text as llama.cpp does: `<|fim_prefix|>`, `<fim_prefix>`, `<PRE>`, ...).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FimTokens {
    /// Starts the text before the hole.
    pub prefix: Option<u32>,
    /// Starts the text after the hole.
    pub suffix: Option<u32>,
    /// Asks for the middle.
    pub middle: Option<u32>,
    /// Padding (an end-of-generation token).
    pub pad: Option<u32>,
    /// Starts the repository name of repo-level FIM (an end-of-generation token).
    pub repo: Option<u32>,
    /// Starts a file of repo-level FIM (an end-of-generation token).
    pub file_sep: Option<u32>,
}

/// A model's tokenizer: vocabulary, merge rules, special tokens and flags.
#[derive(Debug, Clone)]
pub struct Tokenizer {
    vocab: Vocab,
    kind_data: KindData,
    special: SpecialTokens,
    /// SentencePiece byte-fallback token for each byte.
    byte_tokens: [Option<u32>; 256],
    bos: Option<u32>,
    eos: Option<u32>,
    eot: Option<u32>,
    /// Separator (`tokenizer.ggml.seperator_token_id`; `[SEP]` by default for WordPiece).
    sep: Option<u32>,
    add_bos: bool,
    add_eos: bool,
    /// `tokenizer.ggml.add_sep_token` (by default true for WordPiece), as llama.cpp reads it.
    add_sep: bool,
    add_space_prefix: bool,
    clean_spaces: bool,
    /// End-of-generation token ids, sorted.
    eog: Vec<u32>,
    fim: FimTokens,
}

impl Tokenizer {
    /// Tokenizes `text`. With `add_special`, BOS/EOS are added as the model's flags say (WordPiece:
    /// BOS and SEP, whatever the flags say, as llama.cpp does); with `parse_special`, control-token
    /// text in `text` becomes those tokens (user-defined tokens are always recognised, as in
    /// llama.cpp).
    pub fn encode(
        &self,
        text: &str,
        add_special: bool,
        parse_special: bool,
    ) -> crate::Result<Vec<u32>> {
        let mut out = Vec::with_capacity(text.len() / 3 + 2);
        let is_wpm = matches!(self.kind_data, KindData::Wpm(_));
        if add_special && (self.add_bos || is_wpm) {
            out.push(self.bos.ok_or_else(|| {
                crate::Error::Tokenizer("model adds BOS but has no BOS token".into())
            })?);
        }
        let mut prev_special = true;
        let mut buf = String::new();
        for frag in self.special.partition(&self.vocab, text, parse_special) {
            match frag {
                Fragment::Token(id) => {
                    out.push(id);
                    prev_special = true;
                }
                Fragment::Text(s, e) => {
                    let piece = &text[s..e];
                    match &self.kind_data {
                        KindData::Spm => {
                            buf.clear();
                            if self.add_space_prefix && prev_special {
                                buf.push('\u{2581}');
                            }
                            for c in piece.chars() {
                                buf.push(if c == ' ' { '\u{2581}' } else { c });
                            }
                            spm::tokenize(&self.vocab, &self.byte_tokens, &buf, &mut out)?;
                        }
                        KindData::Bpe(bpe) => bpe.tokenize(&self.vocab, piece, &mut out),
                        KindData::Wpm(wpm) => wpm.tokenize(&self.vocab, piece, &mut out)?,
                        KindData::Ugm(ugm) => ugm.tokenize(&self.vocab, piece, &mut out)?,
                    }
                    prev_special = false;
                }
            }
        }
        if add_special && is_wpm {
            out.push(self.sep.ok_or_else(|| {
                crate::Error::Tokenizer("WordPiece model has no SEP token".into())
            })?);
        } else if add_special && self.add_eos {
            out.push(self.eos.ok_or_else(|| {
                crate::Error::Tokenizer("model adds EOS but has no EOS token".into())
            })?);
        }
        Ok(out)
    }

    /// Number of tokens in the vocabulary.
    pub fn n_vocab(&self) -> usize {
        self.vocab.len()
    }

    /// The raw vocabulary string of token `id`.
    pub fn token_text(&self, id: u32) -> Option<&str> {
        self.vocab
            .text(id)
            .and_then(|t| std::str::from_utf8(t).ok())
    }

    /// Bytes token `id` contributes to output text (llama.cpp `token_to_piece`): byte-fallback
    /// tokens give their byte, SentencePiece and WordPiece `▁` becomes a space, byte-level BPE
    /// text is mapped back to bytes; control tokens give nothing unless `special` (then their
    /// text). Unknown ids give nothing.
    pub fn token_bytes(&self, id: u32, special: bool) -> Vec<u8> {
        self.piece(id, special)
    }

    /// Detokenizes `ids` like llama.cpp's `detokenize` (leading-space removal for models with
    /// `add_space_prefix`, BPE clean-up of spaces before punctuation where the model asks for it),
    /// decoding UTF-8 lossily. Control tokens are rendered only with `special`.
    pub fn decode(&self, ids: &[u32], special: bool) -> String {
        String::from_utf8_lossy(&self.detokenize(ids, special)).into_owned()
    }

    /// Beginning-of-sequence token.
    pub fn bos(&self) -> Option<u32> {
        self.bos
    }

    /// End-of-sequence token.
    pub fn eos(&self) -> Option<u32> {
        self.eos
    }

    /// End-of-turn token (from metadata, or detected by text such as `<|im_end|>`).
    pub fn eot(&self) -> Option<u32> {
        self.eot
    }

    /// Separator token (`tokenizer.ggml.seperator_token_id`; WordPiece's `[SEP]`, which
    /// `encode(.., add_special = true, ..)` appends to WordPiece tokenizations).
    pub fn sep(&self) -> Option<u32> {
        self.sep
    }

    /// Whether the model adds its separator between the texts of a pair (`add_sep_token`, as
    /// llama.cpp reports it; rerankers lay out query and document with it).
    pub fn add_sep(&self) -> bool {
        self.add_sep
    }

    /// Whether `encode(.., add_special = true, ..)` prepends BOS: the model's flag, as llama.cpp
    /// reports it (WordPiece encodings get BOS whatever it says).
    pub fn add_bos(&self) -> bool {
        self.add_bos
    }

    /// Whether `encode(.., add_special = true, ..)` appends EOS: the model's flag, as llama.cpp
    /// reports it (WordPiece encodings end with SEP instead, whatever it says).
    pub fn add_eos(&self) -> bool {
        self.add_eos
    }

    /// Whether generating `id` ends generation (EOS, EOT, EOM and the end tokens llama.cpp
    /// recognises by text, e.g. `<|im_end|>`, `<end_of_turn>`, `<|endoftext|>`).
    pub fn is_eog(&self, id: u32) -> bool {
        self.eog.binary_search(&id).is_ok()
    }

    /// The fill-in-the-middle tokens.
    pub fn fim(&self) -> FimTokens {
        self.fim
    }

    /// The end-of-generation token ids (see [`Tokenizer::is_eog`]), sorted.
    pub fn eog_tokens(&self) -> &[u32] {
        &self.eog
    }

    /// Whether `id` is a control token.
    pub fn is_control(&self, id: u32) -> bool {
        self.vocab.attr(id) & attr::CONTROL != 0
    }

    /// The tokenization algorithm.
    pub fn kind(&self) -> TokenizerKind {
        self.kind_data.kind()
    }
}
