//! Building a [`Tokenizer`] from GGUF metadata, with llama.cpp's defaults and token-type fix-ups
//! (`llama_vocab::impl::load`).

use std::borrow::Cow;

use super::bpe::{self, Alphabet, Bpe};
use super::decode::KindData;
use super::pretokenize::Stage;
use super::special::SpecialTokens;
use super::ugm::Ugm;
use super::unicode::ByteLevel;
use super::vocab::{attr, attr_from_type, Vocab};
use super::wpm::Wpm;
use super::{FimTokens, Tokenizer};
use crate::gguf::{GgufFile, Value};
use crate::{Error, Result};

fn err(msg: impl Into<String>) -> Error {
    Error::Tokenizer(msg.into())
}

/// Settings llama.cpp derives from `tokenizer.ggml.pre` for the BPE pre types we implement.
struct PreType {
    stages: Vec<Stage>,
    clean_spaces: bool,
    ignore_merges: bool,
    /// Default of `tokenizer.ggml.add_bos_token`.
    add_bos: bool,
    /// SentencePiece-style BPE (`▁` for spaces, raw UTF-8, `<0xXX>` byte fallback) with
    /// newline-only words taken whole and BOS always added: llama.cpp's Gemma 4 type.
    gemma4: bool,
}

fn pre_type(pre: &str) -> Result<PreType> {
    use Stage::*;
    let p = |stages: &[Stage], clean_spaces: bool| PreType {
        stages: stages.to_vec(),
        clean_spaces,
        ignore_merges: false,
        add_bos: false,
        gemma4: false,
    };
    Ok(match pre {
        "" | "default" => p(&[PunctRuns, Gpt2, NumberRuns, AsciiDigitTriples], true),
        "llama3" | "llama-v3" | "llama-bpe" | "falcon3" | "falcon-h1" | "pixtral" | "midm-2.0"
        | "lfm2" | "jina-v5-nano" => PreType {
            ignore_merges: true,
            add_bos: true,
            ..p(&[Llama3], true)
        },
        "dbrx" | "smaug-bpe" => p(&[Llama3], true),
        "falcon" => p(&[PunctRunsFalcon, Gpt2, AsciiDigitTriples], true),
        "gpt-2" | "phi-2" | "jina-es" | "jina-de" | "gigachat" | "jina-v2-es" | "jina-v2-de"
        | "a.x-4.0" | "mellum" | "modern-bert" | "jina-v1-en" | "jina-v2-code" | "roberta-bpe"
        | "exaone4" | "mpt" | "olmo" | "jais" => p(&[Gpt2], true),
        "trillion" | "granite-docling" => p(&[Gpt2], false),
        "starcoder" | "refact" | "codeshell" | "exaone" | "minerva-7b" | "mellum2" => {
            p(&[SingleNumbers, Gpt2], true)
        }
        "command-r" | "smollm" => p(&[SingleNumbers, Gpt2], false),
        "qwen2" | "deepseek-r1-qwen" | "kormo" | "f2llmv2" | "hunyuan" | "solar-open" => {
            p(&[Qwen2], false)
        }
        "megrez" | "stablelm2" => p(&[Qwen2], true),
        "qwen35" => p(&[Qwen35], false),
        "deepseek-llm" => p(
            &[
                LineBreaks,
                DeepseekLetters,
                DeepseekPunct,
                TrailingSpace,
                CjkRuns,
                NumberRuns,
            ],
            false,
        ),
        "deepseek-coder" => p(
            &[LineBreaks, SpaceLetters, SpacePunct, CjkRuns, SingleNumbers],
            false,
        ),
        "tekken" => PreType {
            ignore_merges: true,
            add_bos: true,
            ..p(&[Tekken], false)
        },
        "gpt-4o" | "llama4" | "kanana2" | "talkie" | "minimax-m2" => p(&[Gpt4o], false),
        "deepseek-v3" | "hunyuan-dense" | "joyai-llm" | "hy_v4" => {
            p(&[NumberTriples, CjkKanaRuns, DeepseekV3], false)
        }
        "granite-embed-multi-97m" => PreType {
            ignore_merges: true,
            ..p(&[Gpt4oMarks], false)
        },
        "tiny_aya" | "cohere2moe" => p(&[DigitGroups, Gpt4oRuns], false),
        "youtu" => PreType {
            ignore_merges: true,
            ..p(&[YoutuCjk, YoutuWords], false)
        },
        "grok-2" => p(&[Qwen2], false),
        "afmoe" => p(&[DigitGroups, AfmoeScripts, DeepseekV3], false),
        "bloom" | "gpt3-finnish" => p(&[PunctBreaks], true),
        "poro-chat" => p(&[PunctBreaks], false),
        "minicpm5" => PreType {
            ignore_merges: true,
            ..p(&[NumberTriples, Llama3], true)
        },
        "gemma4" | "granite-embed-multi-311m" => PreType {
            gemma4: true,
            ..p(&[NewlineRuns], true)
        },
        other => return Err(err(format!("unsupported BPE pre-tokenizer '{other}'"))),
    })
}

/// Reads a token-id key; out-of-range values keep the default like llama.cpp.
fn special_id(gguf: &GgufFile, key: &str, default: Option<u32>, n: usize) -> Option<u32> {
    let default = default.filter(|&d| (d as usize) < n);
    match gguf.get_u64(&format!("tokenizer.ggml.{key}")) {
        Some(v) if v <= u64::from(u32::MAX) && (v as usize) < n => Some(v as u32),
        _ => default,
    }
}

/// The raw bytes of `tokenizer.ggml.precompiled_charsmap` (an array of u8 or i8), if present.
fn charsmap(gguf: &GgufFile) -> Result<Option<&[u8]>> {
    let Some(a) = gguf.get_array("tokenizer.ggml.precompiled_charsmap") else {
        return Ok(None);
    };
    if a.element_type_name() != "u8" && a.element_type_name() != "i8" {
        return Err(err(
            "tokenizer.ggml.precompiled_charsmap is not an array of bytes",
        ));
    }
    Ok(Some(a.encoded().0))
}

/// Number array values as f32 (GGUF allows f32 or i32 scores).
fn number_f32(v: &Value) -> Option<f32> {
    v.as_f32()
}

const EOT_TEXTS: &[&str] = &[
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "<|end_of_text|>",
    "<EOT>",
    "_<EOT>",
    "[EOT]",
    "<｜end▁of▁sentence｜>",
    "<end_of_utterance>",
];
const FIM_PRE_TEXTS: &[&str] = &[
    "<|fim_prefix|>",
    "<fim-prefix>",
    "<fim_prefix>",
    "<｜fim▁begin｜>",
    "<PRE>",
    "▁<PRE>",
    "<|code_prefix|>",
    "<|prefix|>",
];
const FIM_SUF_TEXTS: &[&str] = &[
    "<|fim_suffix|>",
    "<fim-suffix>",
    "<fim_suffix>",
    "<｜fim▁hole｜>",
    "<SUF>",
    "▁<SUF>",
    "<|code_suffix|>",
    "<|suffix|>",
];
const FIM_MID_TEXTS: &[&str] = &[
    "<|fim_middle|>",
    "<fim-middle>",
    "<fim_middle>",
    "<｜fim▁end｜>",
    "<MID>",
    "▁<MID>",
    "<|code_middle|>",
    "<|middle|>",
];
const FIM_PAD_TEXTS: &[&str] = &["<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]"];
const FIM_REP_TEXTS: &[&str] = &[
    "<|fim_repo|>",
    "<|repo_name|>",
    "<fim-repo>",
    "<REPO>",
    "<reponame>",
];
const FIM_SEP_TEXTS: &[&str] = &["<|file_sep|>"];
const EOG_TEXTS: &[&str] = &[
    "<|eot_id|>",
    "<|im_end|>",
    "<|end|>",
    "<|return|>",
    "<|call|>",
    "<|flush|>",
    "<|calls|>",
    "<end_of_turn>",
    "<|endoftext|>",
    "</s>",
    "<|eom_id|>",
    "<EOT>",
    "_<EOT>",
    "[EOT]",
    "[EOS]",
    "<|end_of_text|>",
    "<end_of_utterance>",
    "<eos>",
    "<turn|>",
    "<|tool_response>",
    "<｜end▁of▁sentence｜>",
    "[e~[",
];

impl Tokenizer {
    /// Builds the tokenizer described by the GGUF file's `tokenizer.ggml.*` metadata.
    pub fn from_gguf(gguf: &GgufFile) -> Result<Tokenizer> {
        let model = gguf
            .get_str("tokenizer.ggml.model")
            .ok_or_else(|| err("missing tokenizer.ggml.model"))?;
        // llama.cpp's "gemma4" model is BPE with its own pre type, whatever the file says.
        let (is_spm, is_wpm, forced_pre) = match model {
            "llama" => (true, false, None),
            "gpt2" => (false, false, None),
            "gemma4" => (false, false, Some("gemma4")),
            "bert" => (false, true, None),
            "t5" => (false, false, None),
            other => return Err(err(format!("unsupported tokenizer model '{other}'"))),
        };
        let is_ugm = model == "t5";
        let tokens = gguf
            .get_array("tokenizer.ggml.tokens")
            .ok_or_else(|| err("missing tokenizer.ggml.tokens"))?
            .strings()
            .ok_or_else(|| err("tokenizer.ggml.tokens is not an array of strings"))?;
        let n = tokens.len();
        let mut texts: Vec<Cow<'_, str>> = Vec::with_capacity(n);
        for (i, s) in tokens.enumerate() {
            texts.push(if s.is_empty() {
                Cow::Owned(format!("[EMPTY_{i}]"))
            } else {
                Cow::Borrowed(s)
            });
        }
        let scores = match gguf.get_array("tokenizer.ggml.scores") {
            Some(a) if a.len() < n => {
                return Err(err(format!("{} scores for {n} tokens", a.len())))
            }
            Some(a) => a
                .iter()
                .take(n)
                .map(|v| number_f32(&v).ok_or_else(|| err("score is not a number")))
                .collect::<Result<_>>()?,
            None => vec![0.0; n],
        };
        let mut attrs: Vec<u16> = match gguf.get_array("tokenizer.ggml.token_type") {
            Some(a) if a.len() < n => {
                return Err(err(format!("{} token types for {n} tokens", a.len())))
            }
            Some(a) => a
                .iter()
                .take(n)
                .map(|v| {
                    v.as_i64()
                        .map(attr_from_type)
                        .ok_or_else(|| err("token type is not an integer"))
                })
                .collect::<Result<_>>()?,
            None => vec![attr::NORMAL; n],
        };
        // Fix-ups below change attributes, so build the index from a temporary copy first.
        let mut vocab = Vocab::new(&texts, scores, attrs.clone())?;
        drop(texts);

        // Default special tokens: (BOS, EOS, UNK, SEP).
        let (def_bos, def_eos, def_unk, def_sep) = match model {
            "llama" => (Some(1), Some(2), Some(0), None),
            "gemma4" => (None, None, None, None),
            "bert" => (Some(101), None, Some(100), Some(102)),
            "t5" => (None, Some(1), Some(2), None),
            _ => (Some(11), Some(11), None, None),
        };
        let unk = special_id(gguf, "unknown_token_id", def_unk, n);
        let sep = special_id(gguf, "seperator_token_id", def_sep, n);

        let pre = forced_pre.unwrap_or_else(|| gguf.get_str("tokenizer.ggml.pre").unwrap_or(""));
        let mut force_bos = false;
        let (kind_data, mut add_bos, clean_spaces) = if is_spm {
            (KindData::Spm, true, false)
        } else if is_ugm {
            // Built once the attributes are final (below).
            (KindData::Spm, false, false)
        } else if is_wpm {
            // llama.cpp's BertNormalizer options: accents are stripped when lowercasing unless the
            // file says otherwise.
            let lowercase = gguf
                .get_bool("tokenizer.ggml.normalizer.lowercase")
                .unwrap_or(true);
            let strip_accents = gguf
                .get_bool("tokenizer.ggml.normalizer.strip_accents")
                .unwrap_or(lowercase);
            let wpm = Wpm::new(&vocab, lowercase, strip_accents, unk);
            (KindData::Wpm(Box::new(wpm)), true, true)
        } else {
            let pt = pre_type(pre)?;
            let merges = gguf
                .get_array("tokenizer.ggml.merges")
                .ok_or_else(|| err("missing tokenizer.ggml.merges"))?
                .strings()
                .ok_or_else(|| err("tokenizer.ggml.merges is not an array of strings"))?;
            let ranks = bpe::parse_merges(&mut vocab, merges)?;
            let alphabet = if pt.gemma4 {
                let mut byte_tokens = Box::new([None; 256]);
                for (b, slot) in byte_tokens.iter_mut().enumerate() {
                    *slot = vocab.token_id(format!("<0x{b:02X}>").as_bytes());
                }
                Alphabet::Escaped { byte_tokens }
            } else {
                Alphabet::ByteLevel(ByteLevel::new())
            };
            force_bos = pt.gemma4;
            let bpe = Bpe {
                ranks,
                stages: pt.stages,
                ignore_merges: pt.ignore_merges,
                whole_newlines: pt.gemma4,
                alphabet,
            };
            (KindData::Bpe(Box::new(bpe)), pt.add_bos, pt.clean_spaces)
        };
        let add_space_prefix = gguf
            .get_bool("tokenizer.ggml.add_space_prefix")
            .unwrap_or(is_spm);

        let bos = special_id(gguf, "bos_token_id", def_bos, n);
        let eos = special_id(gguf, "eos_token_id", def_eos, n);
        let mut eot = special_id(gguf, "eot_token_id", None, n);
        let mut eom = special_id(gguf, "eom_token_id", None, n);
        let fim = |key: &str, old: &str, prev: Option<u32>| {
            special_id(gguf, old, special_id(gguf, key, prev, n), n)
        };
        let mut fim_pre = fim("fim_pre_token_id", "prefix_token_id", None);
        let mut fim_suf = fim("fim_suf_token_id", "suffix_token_id", None);
        let mut fim_mid = fim("fim_mid_token_id", "middle_token_id", None);
        let mut fim_pad = special_id(gguf, "fim_pad_token_id", None, n);
        let mut fim_rep = special_id(gguf, "fim_rep_token_id", None, n);
        let mut fim_sep = special_id(gguf, "fim_sep_token_id", None, n);
        add_bos = force_bos
            || gguf
                .get_bool("tokenizer.ggml.add_bos_token")
                .unwrap_or(add_bos);
        let add_eos = gguf
            .get_bool("tokenizer.ggml.add_eos_token")
            .unwrap_or(is_ugm);

        // Auto-detection by text. When several candidates exist llama.cpp takes the first one in its
        // hash map's iteration order (an accident of std::unordered_map); we take the first in list
        // order, which prefers the turn-end tokens (`<|eot_id|>`, `<|im_end|>`, ..) chat models use.
        let find_first =
            |vocab: &Vocab, list: &[&str]| list.iter().find_map(|t| vocab.token_id(t.as_bytes()));
        for (slot, list) in [
            (&mut eot, EOT_TEXTS),
            (&mut eom, &["<|eom_id|>"][..]),
            (&mut fim_pre, FIM_PRE_TEXTS),
            (&mut fim_suf, FIM_SUF_TEXTS),
            (&mut fim_mid, FIM_MID_TEXTS),
            (&mut fim_pad, FIM_PAD_TEXTS),
            (&mut fim_rep, FIM_REP_TEXTS),
            (&mut fim_sep, FIM_SEP_TEXTS),
        ] {
            if slot.is_none() {
                *slot = find_first(&vocab, list);
                if let Some(id) = *slot {
                    attrs[id as usize] |= attr::CONTROL;
                }
            }
        }

        // End-of-generation set.
        let mut eog: Vec<u32> = [fim_pad, fim_rep, fim_sep].into_iter().flatten().collect();
        for t in EOG_TEXTS {
            if let Some(id) = vocab.token_id(t.as_bytes()) {
                eog.push(id);
                attrs[id as usize] |= attr::CONTROL;
            }
        }
        for t in ["<|channel|>", "<|message|>", "<|start|>", "<|constrain|>"] {
            if let Some(id) = vocab.token_id(t.as_bytes()) {
                attrs[id as usize] = attr::USER_DEFINED;
            }
        }
        eog.extend([eos, eot, eom].into_iter().flatten());
        eog.sort_unstable();
        eog.dedup();
        let text_of = |id: u32| vocab.text(id).unwrap_or_default();
        let has =
            |t: &str, eog: &[u32]| eog.iter().copied().find(|&id| text_of(id) == t.as_bytes());
        if let Some(end) = has("<|end|>", &eog) {
            let call = has("<|call|>", &eog).is_some() || has("<|calls|>", &eog).is_some();
            if call && (has("<|return|>", &eog).is_some() || has("<|flush|>", &eog).is_some()) {
                eog.retain(|&id| id != end);
                attrs[end as usize] = attr::USER_DEFINED;
            }
        }
        if let (Some(_), Some(s)) = (has("<|tool_response>", &eog), has("</s>", &eog)) {
            eog.retain(|&id| id != s);
            attrs[s as usize] = attr::NORMAL;
        }
        vocab.attrs = attrs;

        let mut byte_tokens = [None; 256];
        if is_spm {
            for (b, slot) in byte_tokens.iter_mut().enumerate() {
                *slot = vocab
                    .token_id(format!("<0x{b:02X}>").as_bytes())
                    .or_else(|| vocab.token_id(&[b as u8]));
            }
        }
        let kind_data = match is_ugm {
            true => KindData::Ugm(Box::new(Ugm::new(
                &vocab,
                charsmap(gguf)?,
                unk,
                add_space_prefix,
                gguf.get_bool("tokenizer.ggml.remove_extra_whitespaces")
                    .unwrap_or(false),
            )?)),
            false => kind_data,
        };
        let special = SpecialTokens::new(&vocab);
        strip_attrs(gguf, &mut vocab, &special);
        Ok(Tokenizer {
            vocab,
            kind_data,
            special,
            byte_tokens,
            bos,
            eos,
            eot,
            sep,
            add_bos,
            add_eos,
            add_sep: gguf
                .get_bool("tokenizer.ggml.add_sep_token")
                .unwrap_or(is_wpm),
            add_space_prefix,
            clean_spaces,
            eog,
            fim: FimTokens {
                prefix: fim_pre,
                suffix: fim_suf,
                middle: fim_mid,
                pad: fim_pad,
                repo: fim_rep,
                file_sep: fim_sep,
            },
        })
    }
}

/// Per-model lstrip/rstrip attributes llama.cpp sets by model name (only Phi-3 among the
/// tokenizer types we support): special tokens swallow the whitespace after them.
fn strip_attrs(gguf: &GgufFile, vocab: &mut Vocab, special: &SpecialTokens) {
    let name = gguf
        .get_str("general.name")
        .unwrap_or("")
        .to_ascii_lowercase();
    if !(name.contains("phi-3") || name.contains("phi3")) {
        return;
    }
    for id in special.ids() {
        vocab.attrs[id as usize] |= attr::RSTRIP;
    }
    let mut set = |text: &str, on: bool| {
        if let Some(id) = vocab.token_id(text.as_bytes()) {
            let a = &mut vocab.attrs[id as usize];
            *a = if on {
                *a | attr::RSTRIP
            } else {
                *a & !attr::RSTRIP
            };
        }
    };
    set("</s>", true);
    for t in ["<unk>", "<s>", "<|endoftext|>"] {
        set(t, false);
    }
}
