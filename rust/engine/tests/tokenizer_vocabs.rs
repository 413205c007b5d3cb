//! Pre-tokenizer and tokenizer variants we have no real model for, checked against llama.cpp on
//! the vocab-only GGUF files from llama.cpp's own test suite (extracted from the llama.cpp source
//! bundle shipped in the node-llama-cpp package), and against the ids llama.cpp's test suite
//! expects for its own test texts (`ggml-vocab-NAME.gguf.inp` / `.out`).

mod tokenizer_support;

use local_llm_engine::gguf::GgufFile;
use local_llm_engine::tokenizer::{Tokenizer, TokenizerKind};
use serde_json::json;
use tokenizer_support::*;

/// Compares ids and detokenized text on the corpus, plus BOS/EOS/EOT and flags, and llama.cpp's
/// expected ids for its test texts.
fn check_vocab(name: &str) {
    check_vocab_with(name, Vec::new());
}

/// [`check_vocab`] with `extra` texts added to the corpus.
fn check_vocab_with(name: &str, extra: Vec<String>) {
    check_file(name, &llama_cpp_vocab(name), extra, true);
}

/// [`check_vocab_with`] on the file at `path`; `expected_files`: also compare with llama.cpp's
/// `.inp/.out` files of vocab `name`.
fn check_file(name: &str, path: &std::path::Path, extra: Vec<String>, expected_files: bool) {
    let tok = load(path);
    let mut texts = corpus();
    texts.extend(extra);
    let answer = oracle(&json!({
        "model": path.to_string_lossy(),
        "texts": texts,
        "special": [false, true],
        "info": true,
    }));
    let info = &answer["info"];
    let opt = |v: &serde_json::Value| v.as_u64().map(|x| x as u32);
    assert_eq!(tok.bos(), opt(&info["bos"]), "bos");
    assert_eq!(tok.eos(), opt(&info["eos"]), "eos");
    check_eot(&tok, opt(&info["eot"]));
    assert_eq!(tok.add_bos(), info["add_bos"].as_bool().unwrap(), "add_bos");
    let eog: Vec<u32> = (0..tok.n_vocab() as u32)
        .filter(|&id| tok.is_eog(id))
        .collect();
    assert_eq!(eog, ids_of(&info["eog"]), "EOG set");
    let results = answer["tokenized"].as_array().unwrap();
    assert_eq!(results.len(), texts.len() * 2);
    let mut failures = Vec::new();
    for r in results {
        let text = &texts[r["text"].as_u64().unwrap() as usize];
        let special = r["special"].as_bool().unwrap();
        let want = ids_of(&r["ids"]);
        let got = tok.encode(text, false, special).expect("encode");
        if got != want {
            failures.push(format!(
                "encode({text:?}, special={special}):\n  ours   {got:?}\n  llama  {want:?}"
            ));
        } else if tok.decode(&got, special) != r["detok"].as_str().unwrap() {
            failures.push(format!(
                "decode of {text:?}: ours {:?} llama {:?}",
                tok.decode(&got, special),
                r["detok"]
            ));
        }
    }
    let (n_expected, expected_failures) = if expected_files {
        check_expected_files(name, &tok)
    } else {
        (0, Vec::new())
    };
    failures.extend(expected_failures);
    assert!(
        failures.is_empty(),
        "{name}: {} mismatches:\n{}",
        failures.len(),
        failures.join("\n")
    );
    eprintln!(
        "{name}: {} corpus encodings and {n_expected} texts of the .inp/.out files match llama.cpp",
        results.len()
    );
}

/// Compares with llama.cpp's expected ids for its own test texts (`models/ggml-vocab-NAME.gguf.inp`
/// and `.out`, tokenized without BOS/EOS and without parsing special tokens as its
/// `test-tokenizer-0` does), when the bundle has them. Returns the number of texts and the
/// mismatches.
fn check_expected_files(name: &str, tok: &Tokenizer) -> (usize, Vec<String>) {
    let Some(cases) = llama_cpp_expected(name) else {
        return (0, Vec::new());
    };
    let mut failures = Vec::new();
    for (text, want) in &cases {
        let got = tok.encode(text, false, false).expect("encode");
        if &got != want {
            failures.push(format!(
                "{name}.gguf.out for {text:?}:\n  ours   {got:?}\n  llama  {want:?}"
            ));
        }
    }
    (cases.len(), failures)
}

#[test]
fn llama3_bpe() {
    check_vocab("llama-bpe");
}

#[test]
fn qwen2_bpe() {
    check_vocab("qwen2");
}

/// Qwen3.5: letters runs include combining marks.
#[test]
fn qwen35_bpe() {
    check_vocab("qwen35");
}

#[test]
fn gpt2_bpe() {
    check_vocab("gpt-2");
}

#[test]
fn mpt_bpe() {
    check_vocab("mpt");
}

/// No `tokenizer.ggml.pre`: llama.cpp's default pre-tokenizer.
#[test]
fn default_pre_gpt_neox() {
    check_vocab("gpt-neox");
}

#[test]
fn default_pre_aquila() {
    check_vocab("aquila");
}

/// Phi-3: SPM where llama.cpp strips whitespace after special tokens (rstrip).
#[test]
fn spm_phi3_rstrip() {
    check_vocab("phi-3");
}

#[test]
fn spm_baichuan() {
    check_vocab("baichuan");
}

#[test]
fn falcon_bpe() {
    check_vocab("falcon");
}

#[test]
fn starcoder_digits_bpe() {
    check_vocab("starcoder");
}

/// Refact's pre type, StarCoder's pattern (single digits).
#[test]
fn refact_bpe() {
    check_vocab("refact");
}

#[test]
fn command_r_bpe() {
    check_vocab("command-r");
}

#[test]
fn llama_spm_with_space_prefix() {
    check_vocab("llama-spm");
}

/// Texts probing the DeepSeek pre-tokenizers' classes: non-ASCII whitespace (replaced by U+000B in
/// llama.cpp's `std::regex` fallback, so in no bracket class), the edges of DeepSeek LLM's letter
/// list, full-width and curly punctuation, trailing whitespace after symbols and line breaks.
fn deepseek_texts() -> Vec<String> {
    [
        "你好\u{3000}世界 \u{3000}end",
        "\u{2003}中\u{2028}文\u{205F}한국어\u{1680}x\u{85}y",
        "😀  \n🧠 \t",
        "×÷ ±  ¶§  ",
        "ǅ ǈ ʔ ʰ ß Ω K Å ℃ ℮ ⅎ Ⅻ ǅungla Ωmega",
        "𐐀𐐨 𞤀 𑢠 ᏸᏹ Ⴀ ꙁ ᴀᴁ ᵫ ꭰ",
        "ﬀ ﬁ ﬆ ﬓ Ａｂｃ！？（）＠［］｛｝～ ｟",
        "‘quoted’ “double” „low‟ —dash… 。、「」",
        "x  \t\u{B}\u{C}y\u{1C}\u{1D}\u{1E}\u{1F}z",
        "12\u{3000}34 ٣٤\u{A0}56 ",
        "a\r\nb\n\rc\r\r\n",
        "trailing tab\t",
        "emoji end 😀 ",
        "if (a<=b && c!=d) { return x->y[0]; } // 注释 \n",
        "\u{300}\u{301}a\u{308} ̈b",
        "é® ",
        "× \t?\r¶ #",
        "こ—ʰ  \u{3000}🏽",
        "~__    \u{3000}]™",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

/// DeepSeek LLM: six `std::regex` stages (line breaks, a fixed letter list, ASCII/full-width
/// punctuation, trailing whitespace, CJK runs, number runs).
#[test]
fn deepseek_llm_bpe() {
    check_vocab_with("deepseek-llm", deepseek_texts());
}

/// DeepSeek Coder: line breaks, `\s?\p{L}+`, `\s?\p{P}+`, CJK runs, single digits.
#[test]
fn deepseek_coder_bpe() {
    check_vocab_with("deepseek-coder", deepseek_texts());
}

/// Gemma 4: model `gemma4`, SentencePiece-style BPE (`▁` for spaces, raw UTF-8 merges, `<0xXX>`
/// byte fallback) split only at newline runs; BOS always added. Newline runs of every length up to
/// 40 (llama.cpp takes a run that is a token whole), runs of spaces and tabs, a literal `▁`, its
/// chat and tool-call control tokens.
#[test]
fn gemma4_spm_style_bpe() {
    let mut extra: Vec<String> = (1..=40).map(|n| "\n".repeat(n)).collect();
    extra.extend((1..=40).map(|n| format!("a{}b", " ".repeat(n))));
    extra.extend(
        [
            "\n \n\n \n\n\n x \n",
            "\t\t\t\n\t\t\n\n",
            "\u{2581}literal ▁▁ x",
            "\r\n\r\n\n\r",
            "<|turn>user\nhi <|image|> there<turn|>\n<|turn>model\n<|channel>thought\n<channel|>",
            "<|tool_call>call:f{a:<|\"|>x y<|\"|>}<tool_call|><|tool_response>r<tool_response|><eos>",
        ]
        .iter()
        .map(|s| s.to_string()),
    );
    check_vocab_with("gemma-4", extra);
}

/// Texts probing WordPiece's normalizer and splitter: NFD reduced to its first codepoint (accents
/// dropped, Hangul syllables to their leading jamo, compatibility characters kept), simple
/// lowercasing (`İ`, title-case digraphs, final sigma), dropped characters (NUL, U+FFFD, format and
/// private-use characters, marks), ASCII symbols split but other symbols kept in words, CJK
/// ideographs (and the Extension E range llama.cpp starts at U+2B920) split, special-token text,
/// and words that cannot be cut (one UNK each), some very long.
fn wordpiece_texts() -> Vec<String> {
    let mut texts: Vec<String> = [
        "Ünïcödé ÀÉÎÕÜ àéîõü Ǆ ǅ ǆ Ǳ İstanbul ΣΑΣ σας Ωmega K Å Ⅻ ⓐ",
        "e\u{301}\u{302}x \u{20DD}y \u{300} a\u{0}b\u{FFFD}c \u{200B}d\u{200D}e \u{E000}f\u{AD}g",
        "한국어 가나다 ᄀ 각 힣 ｱｲｳ ｶﾞ Ａｂｃ！ ﬁ ﬀ ｟ ㄅ",
        "你好世界 𠀀𪜀 龥 〇 々 〆 \u{2B81F}\u{2B820}\u{2B91F}\u{2B920} \u{F900}\u{FA6D}\u{2F800}",
        "a$b+c<d>e^f`g|h~i=j ½ × ÷ € £ ¥ © ® ™ ° ± § ¶ ¬ ¦ ¨ ´ ¸ ˆ ˜",
        "don't can't it's 'quoted' \"double\" (paren) [bracket] {brace} a.b,c;d:e!f?g",
        "[CLS] hello [SEP] [MASK] [UNK] [PAD] x[SEP]y [cls] ##ing ▁ ▁▁hello",
        "supercalifragilisticexpialidocious antidisestablishmentarianism 𓀀𓀁 x😀y 🧠",
        "\u{1F}\u{7F}\u{80}\u{9F}a\u{85}b\u{2028}c\u{2029}d\u{3000}e\u{A0}f\u{1680}g",
        "Mañana ñandú façade Ångström Øresund Łódź Ærø Þór ǲ ǳ ß ẞ ﬆ ŉ",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect();
    texts.push("a".repeat(3000));
    texts.push("ab".repeat(1500) + " " + &"x".repeat(2000) + "😀");
    texts.push("é".repeat(1000) + &"〆".repeat(500));
    texts
}

/// BERT's WordPiece (llama.cpp's WPM): BERT-BGE's vocabulary, lowercased and accent-stripped.
/// With special tokens added, llama.cpp puts `[CLS]` (BOS) first and `[SEP]` last.
#[test]
fn bert_bge_wpm() {
    check_vocab_with("bert-bge", wordpiece_texts());
    let tok = load(&llama_cpp_vocab("bert-bge"));
    assert_eq!(tok.kind(), TokenizerKind::WordPiece);
    assert_eq!(
        (tok.bos(), tok.sep(), tok.eos()),
        (Some(101), Some(102), None)
    );
    let plain = tok.encode("Hello, world!", false, false).expect("encode");
    let with = tok.encode("Hello, world!", true, false).expect("encode");
    assert_eq!(with, [&[101], &plain[..], &[102]].concat());
    assert_eq!(tok.encode("", true, false).expect("encode"), [101, 102]);
}

/// Pre-tokenizers we don't implement are typed errors naming them: a pre-tokenizer name
/// llama.cpp does not know either (the DeepSeek LLM file with its `tokenizer.ggml.pre` value
/// overwritten). (The UGM vocabulary `nomic-bert-moe`, once such an error, is compared with
/// llama.cpp in `tokenizer_oracle.rs`.)
#[test]
fn unsupported_tokenizers_are_errors() {
    let files = [(vocab_with_pre("deepseek-llm", "no-such-pre"), "no-such-pre")];
    for (path, needle) in files {
        let gguf = GgufFile::open(&path).expect("open");
        let name = path.display();
        match Tokenizer::from_gguf(&gguf) {
            Err(local_llm_engine::Error::Tokenizer(msg)) => {
                assert!(msg.contains(needle), "{name}: {msg}")
            }
            Err(e) => panic!("{name}: wrong error kind {e}"),
            Ok(_) => panic!("{name}: expected an error"),
        }
    }
}

/// A copy of llama.cpp's vocab `base` with `tokenizer.ggml.pre` set to `pre` (vocab-only files
/// hold no tensors, so the bytes after the value can move), in the test's temp dir.
fn vocab_with_pre(base: &str, pre: &str) -> std::path::PathBuf {
    let bytes = std::fs::read(llama_cpp_vocab(base)).expect("read");
    assert_eq!(
        u64::from_le_bytes(bytes[8..16].try_into().unwrap()),
        0,
        "{base}: a vocab-only file has no tensors"
    );
    let key = b"tokenizer.ggml.pre";
    let at = bytes
        .windows(key.len())
        .position(|w| w == key)
        .expect("pre key")
        + key.len();
    // Value type (string = 8), length (u64), then the text.
    assert_eq!(u32::from_le_bytes(bytes[at..at + 4].try_into().unwrap()), 8);
    let len = u64::from_le_bytes(bytes[at + 4..at + 12].try_into().unwrap()) as usize;
    let mut out = bytes[..at + 4].to_vec();
    out.extend_from_slice(&(pre.len() as u64).to_le_bytes());
    out.extend_from_slice(pre.as_bytes());
    out.extend_from_slice(&bytes[at + 12 + len..]);
    let path =
        std::path::PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("{base}-{pre}.gguf"));
    std::fs::write(&path, out).expect("write");
    path
}

/// Texts where case changes inside words, contractions in both cases, digits and punctuation
/// runs with slashes and line breaks: what the Tekken and GPT-4o patterns split differently.
fn cased_texts() -> Vec<String> {
    [
        "HelloWorld iPhone McDonald's HTTPServer ABCdef aBC",
        "ÉCOLE École ÉtÉ naïveÉtÉ ÅngströmÖL Straße STRASSE",
        "I'M you'RE we'Ve THEY'LL it's He'd DON'T",
        "日本Word Привет МИР мИр ΑΒΓδε",
        "12345 1.5e10 ²³ ١٢٣",
        "a/b//c\n!!/\n\r\n ?!/x  \t\n\n  end  ",
        "camelCaseIdentifier snake_case_id SCREAMING_CASE __init__",
        "x\u{301}y ÀÁ\u{300}b",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

/// Mistral's Tekken (Ministral, Mistral Small 3): llama.cpp's `std::regex` pattern on its
/// collapsed text, on the Llama 3 vocabulary relabelled `tekken`.
#[test]
fn tekken_bpe() {
    check_file(
        "tekken",
        &vocab_with_pre("llama-bpe", "tekken"),
        cased_texts(),
        false,
    );
}

/// GPT-4o's pattern (also `llama4`): Tekken's with contractions and up to three digits.
#[test]
fn gpt4o_bpe() {
    check_file(
        "gpt-4o",
        &vocab_with_pre("llama-bpe", "gpt-4o"),
        cased_texts(),
        false,
    );
}

/// DeepSeek V3 and Hunyuan Dense: up to three digits, CJK and kana runs, then punctuation
/// before ASCII words, letters with marks, punctuation runs, whitespace.
#[test]
fn deepseek_v3_bpe() {
    let mut extra = deepseek_texts();
    extra.extend(cased_texts());
    extra.extend(
        [
            "ひらがなカタカナ漢字 ﾊﾝｶｸ 한국어 #include <stdio.h> $HOME @user",
            "x = a+b; // 注释。\n\n  y",
            "«Bonjour» „Hallo“ ¿Qué? ¡Hola! .Привет +día $привет ,niño (ñandú)",
            "漢字かなWordカナ123abc 日本語の文章。English text、中文",
            "\u{300}\u{301}a 5a 5 a5 \u{200d}x \u{85}x",
        ]
        .iter()
        .map(|s| s.to_string()),
    );
    // On DeepSeek LLM's vocabulary (CJK merges) and on Llama 3's, whose merges cross the
    // boundaries this pattern draws (`.get`, `(self`), so that a wrong split changes the ids.
    for (base, pre) in [
        ("deepseek-llm", "deepseek-v3"),
        ("llama-bpe", "deepseek-v3"),
        ("deepseek-llm", "hunyuan-dense"),
    ] {
        check_file(pre, &vocab_with_pre(base, pre), extra.clone(), false);
    }
}

/// Scripts with combining marks, digit runs of every length and CJK punctuation, Hangul and
/// Bopomofo: what the patterns below treat differently.
fn marks_digits_cjk_texts() -> Vec<String> {
    [
        "हिन्दी भाषा বাংলা ভাষা ไทย ภาษา తెలుగు Tiếng Việt",
        "1 12 123 1234 12345 123456 1234567 abc1234 x123y 1,234,567.89 ١٢٣٤ 二〇二六",
        "한국어 문장입니다。ㄱㄴㄷ ㄅㄆㄇ 「引用」『書名』！…“Quote”‘q’—：；，、〜︰﹏",
        "ÀÁ\u{300}b x\u{301}Y I'M it's 日本語Word",
        "ภาษาไทยดี ພາສາລາວ ភាសាខ្មែរ မြန်မာစာ ꦗꦮ ｶﾀｶﾅ 豈更 ⼀⼆ 鿿 ꀀꀁ",
        "Hei.Mitä kuuluu?Hyvää!(sulut)|pipe…loppu。中文，逗号、顿号।हिंदी۔اردو،عربي",
    ]
    .iter()
    .map(|s| s.to_string())
    .collect()
}

/// More `tokenizer.ggml.pre` values on relabelled llama.cpp vocabularies: Granite Embedding
/// multilingual 97M (GPT-4o's pattern with marks), Tiny Aya (digit groups from the right, then
/// letter-and-mark runs), Youtu (Hangul/CJK classes, then letter-and-mark runs with single
/// digits), MiniCPM 5 (digit triples, then Llama 3's pattern), Grok 2 (Qwen 2's pattern), AFMoE
/// (digit groups, its scripts, then DeepSeek V3's pattern), BLOOM, Poro and GPT-3 Finnish (words
/// up to whitespace or sentence punctuation).
#[test]
fn more_bpe_pre_types() {
    let mut extra = cased_texts();
    extra.extend(marks_digits_cjk_texts());
    for (base, pre) in [
        ("llama-bpe", "granite-embed-multi-97m"),
        ("llama-bpe", "tiny_aya"),
        ("llama-bpe", "youtu"),
        ("deepseek-llm", "youtu"),
        ("llama-bpe", "minicpm5"),
        ("llama-bpe", "grok-2"),
        ("llama-bpe", "afmoe"),
        ("deepseek-llm", "afmoe"),
        ("llama-bpe", "bloom"),
        ("llama-bpe", "poro-chat"),
        ("llama-bpe", "gpt3-finnish"),
    ] {
        check_file(pre, &vocab_with_pre(base, pre), extra.clone(), false);
    }
}
