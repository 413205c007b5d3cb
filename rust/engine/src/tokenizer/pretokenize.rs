//! BPE pre-tokenization: splitting text into words before merging, the way llama.cpp's
//! `unicode_regex_split` does for each `tokenizer.ggml.pre` type.
//!
//! llama.cpp runs a list of regexes in sequence, each refining the pieces of the previous one; the
//! common GPT-2 / Llama-3 / Qwen2 patterns use hand-written matchers there, the rest run through
//! `std::regex` on a "collapsed" text. Every pattern used by a supported pre type is implemented
//! here by hand with the same matching semantics (pieces are codepoint ranges; unmatched text
//! between matches becomes a piece of its own).
//!
//! The `std::regex` fallback has quirks the matchers reproduce: `\s` is ASCII whitespace plus the
//! non-ASCII whitespace llama.cpp replaces by U+000B before matching (so those codepoints are in
//! no bracket class, e.g. U+3000 is not in DeepSeek's `[　-。]`), and `\p{..}` classes are the
//! codepoint's major category.

use super::unicode::Flags;

/// One stage of the split pipeline.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Stage {
    /// `'s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)`.
    Gpt2,
    /// `(?i:'s|..)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+`.
    Llama3,
    /// As [`Stage::Llama3`] with `\p{N}` (single digits) instead of `\p{N}{1,3}`.
    Qwen2,
    /// As [`Stage::Qwen2`] with combining marks counted as letters (`[\p{L}\p{M}]+`).
    Qwen35,
    /// `\p{N}`: every number codepoint on its own.
    SingleNumbers,
    /// `\p{N}+`: runs of numbers.
    NumberRuns,
    /// `[\p{P}\$\+<=>\^~\|]+` (llama.cpp's default pre-tokenizer).
    PunctRuns,
    /// `[\p{P}\$\+<=>\^~\|`]+` (Falcon).
    PunctRunsFalcon,
    /// `[0-9][0-9][0-9]`: groups of three ASCII digits.
    AsciiDigitTriples,
    /// `[\r\n]`: every CR and LF on its own (DeepSeek).
    LineBreaks,
    /// `\s?[A-Za-zµÀ-Ö..]+`: DeepSeek LLM's list of cased letters ([`DEEPSEEK_LETTERS`]).
    DeepseekLetters,
    /// `\s?[!-/:-~！-／：-～‘-‟　-。]+`: ASCII and full-width punctuation (DeepSeek LLM).
    DeepseekPunct,
    /// `\s+$`: the whitespace ending a piece.
    TrailingSpace,
    /// `[一-龥ࠀ-一가-퟿]+`: runs of U+0800..=U+9FA5 and U+AC00..=U+D7FF (DeepSeek).
    CjkRuns,
    /// `\s?\p{L}+` (DeepSeek Coder).
    SpaceLetters,
    /// `\s?\p{P}+` (DeepSeek Coder).
    SpacePunct,
    /// `[^\n]+|[\n]+`: runs of newlines and runs of anything else (Gemma 4).
    NewlineRuns,
    /// Mistral's Tekken: `[^\r\n\p{L}\p{N}]?` then upper-then-lower or upper-case letter runs
    /// (`((?=[\p{L}])([^a-z]))*((?=[\p{L}])([^A-Z]))+|..+..*`), `\p{N}`, punctuation with
    /// `[\r\n/]*`, then Llama 3's whitespace rules ([`split_cased`]).
    Tekken,
    /// As [`Stage::Tekken`] with an optional `'s|'t|'re|'ve|'m|'ll|'d` after the letters and
    /// `\p{N}{1,3}` (GPT-4o, Llama 4).
    Gpt4o,
    /// As [`Stage::Gpt4o`] with combining marks counted as letters of either case (Granite
    /// Embedding multilingual 97M).
    Gpt4oMarks,
    /// As [`Stage::Gpt4o`] with letter-or-mark runs whatever their case (llama.cpp's collapsed
    /// text maps `\p{Lu}` and `\p{Ll}` alike to "letter"; Tiny Aya).
    Gpt4oRuns,
    /// As [`Stage::Gpt4oRuns`] with single digits (Youtu).
    YoutuWords,
    /// Runs of digits cut into groups of three from the right, the text before a run joined to
    /// its first group (llama.cpp's custom `\d{1,3}(?=(?:\d{3})*\b)`; Tiny Aya).
    DigitGroups,
    /// `[가-힣ㄱ-ㆎ]+|[！…“”‘’—：；，、-〿︰-﹏]+|[ㄅ-ㄯ]+|[一-龥぀-ゟ゠-ヿ]+`: Hangul, CJK
    /// punctuation, Bopomofo, and CJK/kana runs (Youtu).
    YoutuCjk,
    /// Runs of AFMoE's scripts without spaces between words ([`afmoe_script`]).
    AfmoeScripts,
    /// ` ?[^(\s|.,!?…。，、।۔،)]+`: words up to whitespace or sentence punctuation (BLOOM, Poro,
    /// GPT-3 Finnish).
    PunctBreaks,
    /// `\p{N}{1,3}`: up to three number codepoints (DeepSeek V3).
    NumberTriples,
    /// `[一-龥぀-ゟ゠-ヿ]+`: runs of U+4E00..=U+9FA5 and the kana blocks (DeepSeek V3).
    CjkKanaRuns,
    /// DeepSeek V3's last stage ([`deepseek_v3_at`]).
    DeepseekV3,
}

/// The letter class of DeepSeek LLM's `\s?[A-Za-zµÀ-ÖØ-öø-ƺ..]+` pattern (its tokenizer's own list of
/// cased letters, not `\p{L}`), as inclusive codepoint ranges (sorted, adjacent single letters
/// joined).
#[rustfmt::skip]
const DEEPSEEK_LETTERS: &[(u32, u32)] = &[
    (0x41, 0x5A), (0x61, 0x7A), (0xB5, 0xB5), (0xC0, 0xD6), (0xD8, 0xF6), (0xF8, 0x1BA),
    (0x1BC, 0x1BF), (0x1C4, 0x293), (0x295, 0x2AF), (0x370, 0x373), (0x376, 0x377),
    (0x37B, 0x37D), (0x37F, 0x37F), (0x386, 0x386), (0x388, 0x38A), (0x38C, 0x38C),
    (0x38E, 0x3A1), (0x3A3, 0x3F5), (0x3F7, 0x481), (0x48A, 0x52F), (0x531, 0x556),
    (0x10A0, 0x10C5), (0x13A0, 0x13F5), (0x13F8, 0x13FD), (0x1C90, 0x1CBA), (0x1CBD, 0x1CBF),
    (0x1D00, 0x1D2B), (0x1D6B, 0x1D77), (0x1D79, 0x1D9A), (0x1E00, 0x1F15), (0x1F18, 0x1F1D),
    (0x1F20, 0x1F45), (0x1F48, 0x1F4D), (0x1F50, 0x1F57), (0x1F59, 0x1F59), (0x1F5B, 0x1F5B),
    (0x1F5D, 0x1F5D), (0x1F5F, 0x1F7D), (0x1F80, 0x1FB4), (0x1FB6, 0x1FBC), (0x1FBE, 0x1FBE),
    (0x1FC2, 0x1FC4), (0x1FC6, 0x1FCC), (0x1FD0, 0x1FD3), (0x1FD6, 0x1FDB), (0x1FE0, 0x1FEC),
    (0x1FF2, 0x1FF4), (0x1FF6, 0x1FFC), (0x2102, 0x2102), (0x2107, 0x2107), (0x210A, 0x2113),
    (0x2115, 0x2115), (0x2119, 0x211D), (0x2124, 0x2124), (0x2126, 0x2126), (0x2128, 0x2128),
    (0x212A, 0x212D), (0x212F, 0x2134), (0x2139, 0x2139), (0x213C, 0x213F), (0x2145, 0x2149),
    (0x214E, 0x214E), (0x2183, 0x2184), (0x2C00, 0x2C7B), (0x2C7E, 0x2CE4), (0x2CEB, 0x2CEE),
    (0x2CF2, 0x2CF3), (0xA640, 0xA66D), (0xA680, 0xA69B), (0xA722, 0xA76F), (0xA771, 0xA787),
    (0xA78B, 0xA78E), (0xAB70, 0xABBF), (0xFB00, 0xFB06), (0xFB13, 0xFB17), (0xFF21, 0xFF3A),
    (0xFF41, 0xFF5A), (0x10400, 0x1044F), (0x104B0, 0x104D3), (0x104D8, 0x104FB),
    (0x10C80, 0x10CB2), (0x10CC0, 0x10CF2), (0x118A0, 0x118DF), (0x1E900, 0x1E943),
];

// The bracket classes below run through `std::wregex`, which sees non-ASCII whitespace as U+000B:
// whitespace is in none of them.

fn deepseek_letter(f: Flags, cp: u32) -> bool {
    let i = DEEPSEEK_LETTERS.partition_point(|&(lo, _)| lo <= cp);
    !f.whitespace && i > 0 && cp <= DEEPSEEK_LETTERS[i - 1].1
}

fn deepseek_punct(f: Flags, cp: u32) -> bool {
    !f.whitespace
        && matches!(cp, 0x21..=0x2F | 0x3A..=0x7E | 0x2018..=0x201F | 0x3000..=0x3002
            | 0xFF01..=0xFF0F | 0xFF1A..=0xFF5E)
}

fn cjk(f: Flags, cp: u32) -> bool {
    !f.whitespace && matches!(cp, 0x0800..=0x9FA5 | 0xAC00..=0xD7FF)
}

/// The text being split: codepoints with their flags and byte offsets.
struct Text<'a> {
    cps: &'a [u32],
    flags: &'a [Flags],
}

impl Text<'_> {
    /// Codepoint at `pos` if it is inside `[.., end)`.
    fn cp(&self, pos: usize, end: usize) -> Option<u32> {
        if pos < end {
            self.cps.get(pos).copied()
        } else {
            None
        }
    }

    /// Flags at `pos`, or all-false outside the piece.
    fn fl(&self, pos: usize, end: usize) -> Flags {
        if pos < end {
            self.flags.get(pos).copied().unwrap_or_default()
        } else {
            Flags::default()
        }
    }
}

/// Splits `text` into words (byte ranges) by running `stages` in order.
pub(crate) fn split(text: &str, stages: &[Stage]) -> Vec<(usize, usize)> {
    let mut cps = Vec::with_capacity(text.len());
    let mut byte_offsets = Vec::with_capacity(text.len() + 1);
    for (i, c) in text.char_indices() {
        cps.push(c as u32);
        byte_offsets.push(i);
    }
    byte_offsets.push(text.len());
    let flags: Vec<Flags> = cps.iter().map(|&cp| Flags::of(cp)).collect();
    let t = Text {
        cps: &cps,
        flags: &flags,
    };

    let mut lengths = vec![cps.len()];
    for &stage in stages {
        let mut out = Vec::with_capacity(lengths.len() * 2);
        let mut start = 0;
        for &len in &lengths {
            let end = start + len;
            match stage {
                Stage::Gpt2 => split_gpt2(&t, start, end, &mut out),
                Stage::Llama3 => split_llama3(&t, start, end, 3, false, &mut out),
                Stage::Qwen2 => split_llama3(&t, start, end, 1, false, &mut out),
                Stage::Qwen35 => split_llama3(&t, start, end, 1, true, &mut out),
                Stage::SingleNumbers => isolate(&t, start, end, &mut out, |t, p, e| {
                    (p..e).find(|&i| t.flags[i].number).map(|i| (i, i + 1))
                }),
                Stage::NumberRuns => isolate(&t, start, end, &mut out, |t, p, e| {
                    run(t, p, e, |f, _| f.number)
                }),
                Stage::PunctRuns => isolate(&t, start, end, &mut out, |t, p, e| {
                    run(t, p, e, |f, cp| {
                        f.punctuation
                            || matches!(cp, 0x24 | 0x2B | 0x3C..=0x3E | 0x5E | 0x7E | 0x7C)
                    })
                }),
                Stage::PunctRunsFalcon => isolate(&t, start, end, &mut out, |t, p, e| {
                    run(t, p, e, |f, cp| {
                        f.punctuation
                            || matches!(cp, 0x24 | 0x2B | 0x3C..=0x3E | 0x5E | 0x7E | 0x7C | 0x60)
                    })
                }),
                Stage::AsciiDigitTriples => isolate(&t, start, end, &mut out, |t, p, e| {
                    let digit = |i: usize| t.cps[i].wrapping_sub(0x30) < 10;
                    (p..e.saturating_sub(2))
                        .find(|&i| digit(i) && digit(i + 1) && digit(i + 2))
                        .map(|i| (i, i + 3))
                }),
                Stage::LineBreaks => isolate(&t, start, end, &mut out, |t, p, e| {
                    (p..e)
                        .find(|&i| matches!(t.cps[i], 0x0D | 0x0A))
                        .map(|i| (i, i + 1))
                }),
                Stage::DeepseekLetters => isolate(&t, start, end, &mut out, |t, p, e| {
                    space_then_run(t, p, e, deepseek_letter)
                }),
                Stage::DeepseekPunct => isolate(&t, start, end, &mut out, |t, p, e| {
                    space_then_run(t, p, e, deepseek_punct)
                }),
                Stage::TrailingSpace => isolate(&t, start, end, &mut out, |t, p, e| {
                    let s = (p..e).rev().take_while(|&i| t.flags[i].whitespace).last()?;
                    Some((s, e))
                }),
                Stage::CjkRuns => isolate(&t, start, end, &mut out, |t, p, e| run(t, p, e, cjk)),
                Stage::SpaceLetters => isolate(&t, start, end, &mut out, |t, p, e| {
                    space_then_run(t, p, e, |f, _| f.letter)
                }),
                Stage::SpacePunct => isolate(&t, start, end, &mut out, |t, p, e| {
                    space_then_run(t, p, e, |f, _| f.punctuation)
                }),
                Stage::NewlineRuns => isolate(&t, start, end, &mut out, |t, p, e| {
                    run(t, p, e, |_, cp| cp == 0x0A)
                }),
                Stage::Tekken => split_cased(&t, start, end, (Letters::Case, 1, false), &mut out),
                Stage::Gpt4o => split_cased(&t, start, end, (Letters::Case, 3, true), &mut out),
                Stage::Gpt4oMarks => {
                    split_cased(&t, start, end, (Letters::CaseMarks, 3, true), &mut out)
                }
                Stage::Gpt4oRuns => split_cased(&t, start, end, (Letters::Runs, 3, true), &mut out),
                Stage::YoutuWords => {
                    split_cased(&t, start, end, (Letters::Runs, 1, true), &mut out)
                }
                Stage::DigitGroups => digit_groups(&t, start, end, &mut out),
                Stage::AfmoeScripts => isolate(&t, start, end, &mut out, |t, p, e| {
                    run(t, p, e, |_, cp| afmoe_script(cp))
                }),
                Stage::PunctBreaks => isolate(&t, start, end, &mut out, |t, p, e| {
                    let word = |i: usize| i < e && punct_break_word(t.flags[i], t.cps[i]);
                    // The optional prefix is a space (U+0020) only.
                    let s = (p..e).find(|&i| word(i) || (t.cps[i] == 0x20 && word(i + 1)))?;
                    let first = if word(s) { s } else { s + 1 };
                    Some((s, (first..e).find(|&i| !word(i)).unwrap_or(e)))
                }),
                Stage::YoutuCjk => isolate(&t, start, end, &mut out, |t, p, e| {
                    let s = (p..e).find(|&i| youtu_class(t.cps[i]).is_some())?;
                    let class = youtu_class(t.cps[s]);
                    let end = (s..e)
                        .find(|&i| youtu_class(t.cps[i]) != class)
                        .unwrap_or(e);
                    Some((s, end))
                }),
                Stage::NumberTriples => isolate(&t, start, end, &mut out, |t, p, e| {
                    let (s, run_end) = run(t, p, e, |f, _| f.number)?;
                    Some((s, run_end.min(s + 3)))
                }),
                Stage::CjkKanaRuns => isolate(&t, start, end, &mut out, |t, p, e| {
                    run(
                        t,
                        p,
                        e,
                        |_, cp| matches!(cp, 0x4E00..=0x9FA5 | 0x3040..=0x309F | 0x30A0..=0x30FF),
                    )
                }),
                Stage::DeepseekV3 => isolate(&t, start, end, &mut out, |t, p, e| {
                    (p..e).find_map(|i| Some((i, deepseek_v3_at(t, i, e)?)))
                }),
            }
            start = end;
        }
        lengths = out;
    }

    let mut words = Vec::with_capacity(lengths.len());
    let mut start = 0;
    for len in lengths {
        words.push((byte_offsets[start], byte_offsets[start + len]));
        start += len;
    }
    words
}

/// The first maximal run of codepoints satisfying `pred` in `[p, e)`.
fn run(
    t: &Text<'_>,
    p: usize,
    e: usize,
    pred: impl Fn(Flags, u32) -> bool,
) -> Option<(usize, usize)> {
    let s = (p..e).find(|&i| pred(t.flags[i], t.cps[i]))?;
    let end = (s..e).find(|&i| !pred(t.flags[i], t.cps[i])).unwrap_or(e);
    Some((s, end))
}

/// `\s?X+` for a class X that holds no whitespace: the first X run, with the whitespace codepoint
/// just before it when there is one.
fn space_then_run(
    t: &Text<'_>,
    p: usize,
    e: usize,
    class: impl Fn(Flags, u32) -> bool,
) -> Option<(usize, usize)> {
    let is = |i: usize| i < e && class(t.flags[i], t.cps[i]);
    let s = (p..e).find(|&i| is(i) || (t.flags[i].whitespace && is(i + 1)))?;
    let first = if is(s) { s } else { s + 1 };
    let end = (first..e).find(|&i| !is(i)).unwrap_or(e);
    Some((s, end))
}

/// Regex-iterator semantics: matches found by `next_match` and the gaps between them become pieces.
fn isolate(
    t: &Text<'_>,
    ini: usize,
    end: usize,
    out: &mut Vec<usize>,
    next_match: impl Fn(&Text<'_>, usize, usize) -> Option<(usize, usize)>,
) {
    let mut pos = ini;
    while let Some((s, e)) = next_match(t, pos, end) {
        if s > pos {
            out.push(s - pos);
        }
        out.push(e - s);
        pos = e;
    }
    if pos < end {
        out.push(end - pos);
    }
}

/// Records piece boundaries; `prev` is the end of the last emitted piece.
struct Emitter<'o> {
    out: &'o mut Vec<usize>,
    prev: usize,
}

impl Emitter<'_> {
    fn token(&mut self, end: usize) {
        if end > self.prev {
            self.out.push(end - self.prev);
        }
        self.prev = end;
    }
}

fn is_contraction1(c: Option<u32>) -> bool {
    matches!(c, Some(0x73 | 0x74 | 0x6D | 0x64)) // s t m d
}

fn is_contraction2(c1: Option<u32>, c2: Option<u32>) -> bool {
    matches!(
        (c1, c2),
        (Some(0x72), Some(0x65)) | (Some(0x76), Some(0x65)) | (Some(0x6C), Some(0x6C))
    ) // re ve ll
}

fn ascii_lower(c: Option<u32>) -> Option<u32> {
    c.map(|c| {
        if (0x41..=0x5A).contains(&c) {
            c + 0x20
        } else {
            c
        }
    })
}

/// Trailing-whitespace handling shared by all three custom matchers. Returns the new position.
fn whitespace_tail(t: &Text<'_>, pos: usize, end: usize, newline_rule: bool) -> usize {
    let mut n = 0;
    let mut last_newline_end = 0;
    while t.fl(pos + n, end).whitespace {
        if newline_rule && matches!(t.cp(pos + n, end), Some(0x0D | 0x0A)) {
            last_newline_end = pos + n + 1;
        }
        n += 1;
    }
    if last_newline_end > 0 {
        // \s*[\r\n]+
        last_newline_end
    } else if n > 1 && t.cp(pos + n, end).is_some() {
        // \s+(?!\S)
        pos + n - 1
    } else if n > 0 {
        // \s+
        pos + n
    } else {
        // no match: a single codepoint
        pos + 1
    }
}

fn split_gpt2(t: &Text<'_>, ini: usize, end: usize, out: &mut Vec<usize>) {
    let mut em = Emitter { out, prev: ini };
    let mut pos = ini;
    while pos < end {
        let cp = t.cp(pos, end);
        if cp == Some(0x27) && pos + 1 < end {
            let c1 = t.cp(pos + 1, end);
            if is_contraction1(c1) {
                pos += 2;
                em.token(pos);
                continue;
            }
            if pos + 2 < end && is_contraction2(c1, t.cp(pos + 2, end)) {
                pos += 3;
                em.token(pos);
                continue;
            }
        }
        let space = cp == Some(0x20);
        let f2 = if space {
            t.fl(pos + 1, end)
        } else {
            t.fl(pos, end)
        };
        let class: Option<fn(Flags) -> bool> = if f2.letter {
            Some(|f| f.letter)
        } else if f2.number {
            Some(|f| f.number)
        } else if f2.valid && !(f2.whitespace || f2.letter || f2.number) {
            Some(|f| f.valid && !(f.whitespace || f.letter || f.number))
        } else {
            None
        };
        if let Some(class) = class {
            pos += usize::from(space);
            while class(t.fl(pos, end)) {
                pos += 1;
            }
            em.token(pos);
            continue;
        }
        pos = whitespace_tail(t, pos, end, false);
        em.token(pos);
    }
}

/// Llama-3 (`max_digits` 3), Qwen2 (`max_digits` 1) and Qwen3.5 (also `marks`: combining marks
/// count as letters) matchers.
fn split_llama3(
    t: &Text<'_>,
    ini: usize,
    end: usize,
    max_digits: usize,
    marks: bool,
    out: &mut Vec<usize>,
) {
    let lm = |f: Flags| f.letter || (marks && f.mark);
    let mut em = Emitter { out, prev: ini };
    let mut pos = ini;
    while pos < end {
        let cp = t.cp(pos, end);
        let f = t.fl(pos, end);
        if cp == Some(0x27) && pos + 1 < end {
            let c1 = ascii_lower(t.cp(pos + 1, end));
            if is_contraction1(c1) {
                pos += 2;
                em.token(pos);
                continue;
            }
            if pos + 2 < end && is_contraction2(c1, ascii_lower(t.cp(pos + 2, end))) {
                pos += 3;
                em.token(pos);
                continue;
            }
        }
        // [^\r\n\p{L}\p{N}]?\p{L}+
        if !(matches!(cp, Some(0x0D | 0x0A)) || f.number) && (lm(f) || lm(t.fl(pos + 1, end))) {
            pos += 1;
            while lm(t.fl(pos, end)) {
                pos += 1;
            }
            em.token(pos);
            continue;
        }
        // \p{N}{1,max_digits}
        if f.number {
            let mut group_start = pos;
            while t.fl(pos, end).number {
                pos += 1;
                if pos - group_start >= max_digits {
                    em.token(pos);
                    group_start = pos;
                }
            }
            em.token(pos);
            continue;
        }
        // <space>?[^\s\p{L}\p{N}]+[\r\n]*
        let space = cp == Some(0x20);
        let mut f2 = if space { t.fl(pos + 1, end) } else { f };
        if !(f2.whitespace || lm(f2) || f2.number) && f.valid {
            pos += usize::from(space);
            while !(f2.whitespace || lm(f2) || f2.number) && f2.valid {
                pos += 1;
                f2 = t.fl(pos, end);
            }
            while matches!(t.cp(pos, end), Some(0x0D | 0x0A)) {
                pos += 1;
            }
            em.token(pos);
            continue;
        }
        pos = whitespace_tail(t, pos, end, true);
        em.token(pos);
    }
}

/// The first position from `i` whose codepoint is not in `class` (which is false past the
/// piece's end).
fn run_end(mut i: usize, class: &dyn Fn(usize) -> bool) -> usize {
    while class(i) {
        i += 1;
    }
    i
}

/// The contraction `'s|'t|'re|'ve|'m|'ll|'d` (either case) at `pos`: its end.
fn contraction_at(t: &Text<'_>, pos: usize, end: usize) -> Option<usize> {
    if t.cp(pos, end) != Some(0x27) {
        return None;
    }
    let c1 = ascii_lower(t.cp(pos + 1, end));
    if is_contraction1(c1) {
        return Some(pos + 2);
    }
    is_contraction2(c1, ascii_lower(t.cp(pos + 2, end))).then_some(pos + 3)
}

/// Which codepoints [`split_cased`] counts as upper- (`U`) and lower-case (`L`) letters.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Letters {
    /// Letters; `U` not `a-z`, `L` not `A-Z`.
    Case,
    /// As [`Letters::Case`] over letters and combining marks.
    CaseMarks,
    /// Letters and marks, `U` and `L` alike.
    Runs,
}

/// [`Stage::DigitGroups`], as llama.cpp's `unicode_regex_split_custom_afmoe`: each run of
/// numbers is cut into its first `len % 3` codepoints (if any) and groups of three, and the
/// text since the previous cut goes with the run's first piece.
fn digit_groups(t: &Text<'_>, ini: usize, end: usize, out: &mut Vec<usize>) {
    let mut em = Emitter { out, prev: ini };
    let mut pos = ini;
    while pos < end {
        if !t.flags[pos].number {
            pos += 1;
            continue;
        }
        let run = pos;
        while t.fl(pos, end).number {
            pos += 1;
        }
        let mut cut = run + (pos - run) % 3;
        if cut > run {
            em.token(cut);
        }
        while cut < pos {
            cut += 3;
            em.token(cut);
        }
    }
    em.token(end);
}

/// Whether `cp` is in AFMoE's `[一-鿿㐀-䶿豈-﫿぀-ゟ゠-ヿ･-ﾟ⼀-⿟เ-๿຀-໿ក-៿က-႟ꩠ-ꩿꧠ-꧿가-힯ᄀ-ᇿ]`
/// (CJK, kana, half-width kana, Kangxi radicals, Thai, Lao, Khmer, Myanmar, Hangul) with the
/// codepoints as they stand in llama.cpp's source: its `豈` is U+8C48, not U+F900, so one range
/// runs from U+8C48 to U+FAFF and swallows the CJK, Javanese, Myanmar-B and Hangul ones after
/// U+8C48 (the ranges below are the union).
fn afmoe_script(cp: u32) -> bool {
    matches!(
        cp,
        0x0E40..=0x0EFF
            | 0x1000..=0x109F
            | 0x1100..=0x11FF
            | 0x1780..=0x17FF
            | 0x2F00..=0x2FDF
            | 0x3040..=0x30FF
            | 0x3400..=0x4DBF
            | 0x4E00..=0xFAFF
            | 0xFF65..=0xFF9F
    )
}

/// Whether `cp` is in [`Stage::PunctBreaks`]' words: not whitespace, not `(|.,!?…。，、।۔،)`.
fn punct_break_word(f: Flags, cp: u32) -> bool {
    !f.whitespace
        && !matches!(
            cp,
            0x28 | 0x29
                | 0x7C
                | 0x2E
                | 0x2C
                | 0x21
                | 0x3F
                | 0x2026
                | 0x3002
                | 0xFF0C
                | 0x3001
                | 0x0964
                | 0x06D4
                | 0x060C
        )
}

/// Which of [`Stage::YoutuCjk`]'s four classes `cp` is in.
fn youtu_class(cp: u32) -> Option<u8> {
    match cp {
        0xAC00..=0xD7A3 | 0x3131..=0x318E => Some(0),
        0xFF01
        | 0x2026
        | 0x201C
        | 0x201D
        | 0x2018
        | 0x2019
        | 0x2014
        | 0xFF1A
        | 0xFF1B
        | 0xFF0C
        | 0x3001..=0x303F
        | 0xFE30..=0xFE4F => Some(1),
        0x3105..=0x312F => Some(2),
        0x4E00..=0x9FA5 | 0x3040..=0x309F | 0x30A0..=0x30FF => Some(3),
        _ => None,
    }
}

/// Tekken's and GPT-4o's pattern, which llama.cpp runs through `std::regex` on its collapsed
/// text (every non-ASCII letter is one byte that is neither `a-z` nor `A-Z`), first alternative
/// that matches at each position:
/// 1. `P?U*L+` and 2. `P?U+L*`, `P` = `[^\r\n\p{L}\p{N}]`, `U` a letter not `a-z`, `L` a
///    letter not `A-Z` (a non-ASCII letter is both), then (GPT-4o) an optional contraction;
/// 3. `\p{N}{1,max_digits}`; 4. ` ?[^\s\p{L}\p{N}]+[\r\n/]*`; 5.-7. the whitespace rules.
fn split_cased(
    t: &Text<'_>,
    ini: usize,
    end: usize,
    (letters, max_digits, contractions): (Letters, usize, bool),
    out: &mut Vec<usize>,
) {
    let cp_is = |i: usize, lo: u32, hi: u32| t.cp(i, end).is_some_and(|c| (lo..=hi).contains(&c));
    let letter = |i: usize| {
        let f = t.fl(i, end);
        f.letter || (letters != Letters::Case && f.mark)
    };
    let cased = letters != Letters::Runs;
    let upper = |i: usize| letter(i) && !(cased && cp_is(i, 0x61, 0x7A));
    let lower = |i: usize| letter(i) && !(cased && cp_is(i, 0x41, 0x5A));
    // U*L+ from s: the greedy U* gives back codepoints until an L can start.
    let upper_lower = |s: usize| {
        let k = (s..=run_end(s, &upper)).rev().find(|&k| lower(k))?;
        Some(run_end(k, &lower))
    };
    // U+L* from s.
    let upper_then = |s: usize| upper(s).then(|| run_end(run_end(s, &upper), &lower));
    let other = |i: usize| {
        let f = t.fl(i, end);
        f.valid && !(f.whitespace || f.letter || f.number)
    };
    let mut em = Emitter { out, prev: ini };
    let mut pos = ini;
    while pos < end {
        let (cp, f) = (t.cp(pos, end), t.fl(pos, end));
        // Where the letters start: after a `P` codepoint, else here (a mark is both).
        let prefix = !(matches!(cp, Some(0x0D | 0x0A)) || f.letter || f.number);
        let starts = [prefix.then_some(pos + 1), Some(pos)];
        let starts = starts.iter().flatten();
        let matched = starts.clone().find_map(|&s| upper_lower(s));
        if let Some(mut e) = matched.or_else(|| starts.clone().find_map(|&s| upper_then(s))) {
            if contractions {
                e = contraction_at(t, e, end).unwrap_or(e);
            }
            pos = e;
        } else if f.number {
            pos = (pos..end)
                .take(max_digits)
                .find(|&i| !t.fl(i, end).number)
                .unwrap_or((pos + max_digits).min(end));
        } else if other(pos) || (cp == Some(0x20) && other(pos + 1)) {
            pos = run_end(pos + usize::from(!other(pos)), &other);
            while matches!(t.cp(pos, end), Some(0x0D | 0x0A | 0x2F)) {
                pos += 1;
            }
        } else {
            pos = whitespace_tail(t, pos, end, true);
        }
        em.token(pos);
    }
}

/// DeepSeek V3's (and Hunyuan's) last pattern at `pos`, through `std::regex` on llama.cpp's
/// collapsed text, first alternative that matches: `[!-/:-@[-`{-~][A-Za-z]+`,
/// `[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+`, ` ?[\p{P}\p{S}]+[\r\n]*`, then the whitespace
/// rules. Returns the match's end; `None` where nothing matches (a digit or an unassigned or
/// control codepoint not before a letter: the gaps become pieces of their own).
fn deepseek_v3_at(t: &Text<'_>, pos: usize, end: usize) -> Option<usize> {
    let cp = t.cp(pos, end)?;
    let f = t.fl(pos, end);
    let ascii_letter = |i: usize| matches!(t.cp(i, end), Some(0x41..=0x5A | 0x61..=0x7A));
    let letter_mark = |i: usize| {
        let f = t.fl(i, end);
        f.letter || f.mark
    };
    let punct_symbol = |i: usize| {
        let f = t.fl(i, end);
        f.punctuation || f.symbol
    };
    if matches!(cp, 0x21..=0x2F | 0x3A..=0x40 | 0x5B..=0x60 | 0x7B..=0x7E) && ascii_letter(pos + 1)
    {
        return Some(run_end(pos + 1, &ascii_letter));
    }
    let prefix = !(matches!(cp, 0x0D | 0x0A) || f.letter || f.punctuation || f.symbol);
    if prefix && letter_mark(pos + 1) {
        return Some(run_end(pos + 1, &letter_mark));
    }
    if letter_mark(pos) {
        return Some(run_end(pos, &letter_mark));
    }
    if punct_symbol(pos) || (cp == 0x20 && punct_symbol(pos + 1)) {
        let mut e = run_end(pos + usize::from(cp == 0x20), &punct_symbol);
        while matches!(t.cp(e, end), Some(0x0D | 0x0A)) {
            e += 1;
        }
        return Some(e);
    }
    f.whitespace.then(|| whitespace_tail(t, pos, end, true))
}

#[cfg(test)]
mod tests {
    use super::{split, Stage::*};

    fn pieces<'a>(text: &'a str, stages: &[super::Stage]) -> Vec<&'a str> {
        split(text, stages)
            .into_iter()
            .map(|(s, e)| &text[s..e])
            .collect()
    }

    const TEXT: &str = "Hello 世界\u{3000}123  \nÅ×  ";

    #[test]
    fn deepseek_llm_stages() {
        let stages = [
            LineBreaks,
            DeepseekLetters,
            DeepseekPunct,
            TrailingSpace,
            CjkRuns,
            NumberRuns,
        ];
        assert_eq!(
            pieces(TEXT, &stages),
            ["Hello", " ", "世界", "\u{3000}", "123", "  ", "\n", "Å", "×", "  "]
        );
        // Whitespace joins the punctuation after it; U+3000 is whitespace, in neither `[　-。]` nor
        // the CJK class (which holds `。`).
        assert_eq!(
            pieces("a ,b。\u{3000}。 ！x", &stages),
            ["a", " ,", "b", "。", "\u{3000}", "。", " ！", "x"]
        );
    }

    #[test]
    fn deepseek_coder_stages() {
        let stages = [LineBreaks, SpaceLetters, SpacePunct, CjkRuns, SingleNumbers];
        assert_eq!(
            pieces(TEXT, &stages),
            ["Hello", " ", "世界", "\u{3000}", "1", "2", "3", "  ", "\n", "Å", "×  "]
        );
    }

    #[test]
    fn gemma4_newline_runs() {
        assert_eq!(
            pieces("a\u{2581}b\n\n\nc\n", &[NewlineRuns]),
            ["a\u{2581}b", "\n\n\n", "c", "\n"]
        );
    }
}
