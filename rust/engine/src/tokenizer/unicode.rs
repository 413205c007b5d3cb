//! Codepoint classes, lowercase and NFD mappings and the GPT-2 byte-to-unicode mapping, as
//! llama.cpp's `unicode.cpp` defines them.
//!
//! The tables come from Unicode 15.1 (the version of llama.cpp's generated tables), so
//! pre-tokenization splits and normalizes text exactly as llama.cpp does, independently of the
//! Rust standard library's Unicode version.

#[path = "unicode_table.rs"]
mod table;

/// Major general-category class of a codepoint (the `\p{..}` classes the pre-tokenizer regexes use).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Category {
    /// Unassigned (Cn).
    Undefined,
    /// `\p{N}`.
    Number,
    /// `\p{L}`.
    Letter,
    /// `\p{Z}`.
    Separator,
    /// `\p{M}`.
    Mark,
    /// `\p{P}`.
    Punctuation,
    /// `\p{S}`.
    Symbol,
    /// `\p{C}` other than Cn.
    Control,
}

/// Category of `cp` (codepoints past U+10FFFF count as undefined).
pub(crate) fn category(cp: u32) -> Category {
    let ranges = &table::CATEGORY_RANGES;
    // Index of the last range whose start is <= cp.
    let idx = ranges.partition_point(|&r| (r >> 8) <= cp);
    let code = match idx.checked_sub(1) {
        Some(i) => ranges[i] & 0xFF,
        None => 0,
    };
    match code {
        1 => Category::Number,
        2 => Category::Letter,
        3 => Category::Separator,
        4 => Category::Mark,
        5 => Category::Punctuation,
        6 => Category::Symbol,
        7 => Category::Control,
        _ => Category::Undefined,
    }
}

/// Index of the last entry of `runs` (sorted by `start << 11 | ..`) whose start is <= `cp`.
fn run_index(runs: &[u32], cp: u32) -> Option<usize> {
    runs.partition_point(|&r| (r >> 11) <= cp).checked_sub(1)
}

/// Simple lowercase of `cp` (llama.cpp's `unicode_tolower`); codepoints without one map to
/// themselves.
pub(crate) fn to_lower(cp: u32) -> u32 {
    let Some(i) = run_index(&table::LOWER_RUNS, cp) else {
        return cp;
    };
    let run = table::LOWER_RUNS[i];
    let (start, count, stride) = (run >> 11, (run >> 1) & 0x3FF, (run & 1) + 1);
    let offset = cp - start;
    if offset.is_multiple_of(stride) && offset / stride < count {
        table::LOWER_TARGETS[i] + offset
    } else {
        cp
    }
}

/// First codepoint of the canonical decomposition (NFD) of `cp`: llama.cpp's
/// `unicode_cpts_normalize_nfd` maps each codepoint to that one codepoint (so `é` becomes `e`, and
/// the combining accent is lost rather than following it).
pub(crate) fn nfd_first(cp: u32) -> u32 {
    let Some(i) = run_index(&table::NFD_RUNS, cp) else {
        return cp;
    };
    let run = table::NFD_RUNS[i];
    if cp - (run >> 11) <= (run & 0x7FF) {
        table::NFD_TARGETS[i]
    } else {
        cp
    }
}

/// llama.cpp's whitespace set (the Unicode White_Space property).
pub(crate) fn is_whitespace(cp: u32) -> bool {
    matches!(
        cp,
        0x09..=0x0D
            | 0x20
            | 0x85
            | 0xA0
            | 0x1680
            | 0x2000..=0x200A
            | 0x2028
            | 0x2029
            | 0x202F
            | 0x205F
            | 0x3000
    )
}

/// Per-codepoint flags used by the splitters.
#[derive(Debug, Clone, Copy, Default)]
pub(crate) struct Flags {
    /// The position is inside the text (all-false flags mark "past the end").
    pub valid: bool,
    pub letter: bool,
    pub number: bool,
    pub mark: bool,
    pub punctuation: bool,
    pub symbol: bool,
    pub whitespace: bool,
}

impl Flags {
    /// Flags of one codepoint.
    pub(crate) fn of(cp: u32) -> Flags {
        let cat = category(cp);
        Flags {
            valid: true,
            letter: cat == Category::Letter,
            number: cat == Category::Number,
            mark: cat == Category::Mark,
            punctuation: cat == Category::Punctuation,
            symbol: cat == Category::Symbol,
            whitespace: is_whitespace(cp),
        }
    }
}

/// The GPT-2 byte-level alphabet: every byte is written as one printable char.
#[derive(Debug, Clone)]
pub(crate) struct ByteLevel {
    to_char: [char; 256],
    /// Indexed by codepoint (all alphabet chars are below U+0144); 256 = not in the alphabet.
    from_char: Vec<u16>,
}

impl ByteLevel {
    /// Builds both directions of the mapping.
    pub(crate) fn new() -> ByteLevel {
        let mut to_char = ['\0'; 256];
        let mut from_char = vec![256u16; 0x144];
        let mut next = 256u32;
        for b in 0u32..256 {
            let printable = (0x21..=0x7E).contains(&b)
                || (0xA1..=0xAC).contains(&b)
                || (0xAE..=0xFF).contains(&b);
            let cp = if printable {
                b
            } else {
                next += 1;
                next - 1
            };
            // cp < 0x144, a valid scalar value and index.
            to_char[b as usize] = char::from_u32(cp).unwrap_or('\u{FFFD}');
            from_char[cp as usize] = b as u16;
        }
        ByteLevel { to_char, from_char }
    }

    /// The char standing for byte `b`.
    pub(crate) fn char_of(&self, b: u8) -> char {
        self.to_char[b as usize]
    }

    /// The byte a char stands for, if it is in the alphabet.
    pub(crate) fn byte_of(&self, c: char) -> Option<u8> {
        let v = *self.from_char.get(c as usize)?;
        u8::try_from(v).ok()
    }
}

#[cfg(test)]
mod tests {
    use super::{nfd_first, to_lower};

    #[test]
    fn simple_lowercase() {
        let cases = [
            ('A', 'a'),
            ('a', 'a'),
            ('Ā', 'ā'), // stride-2 run: Latin Extended-A alternates upper and lower case
            ('ā', 'ā'),
            ('Ł', 'ł'),
            ('ł', 'ł'),
            ('İ', 'i'), // full lowercase is "i\u{307}"; the simple one is its first codepoint
            ('Σ', 'σ'),
            ('ς', 'ς'),
            ('ǅ', 'ǆ'),
            ('Ǆ', 'ǆ'),
            ('\u{2126}', 'ω'), // OHM SIGN
            ('\u{212A}', 'k'), // KELVIN SIGN
            ('Ⅻ', 'ⅻ'),
            ('Ⓐ', 'ⓐ'),
            ('𐐀', '𐐨'),
            ('ẞ', 'ß'),
            ('ß', 'ß'),
            ('1', '1'),
            ('中', '中'),
        ];
        for (c, want) in cases {
            assert_eq!(to_lower(c as u32), want as u32, "{c:?}");
        }
        assert_eq!(to_lower(0x10FFFF), 0x10FFFF);
        assert_eq!(to_lower(0x110000), 0x110000);
    }

    #[test]
    fn first_codepoint_of_nfd() {
        let cases = [
            ('é', 'e'),
            ('É', 'E'),
            ('a', 'a'),
            ('\u{212B}', 'A'), // ANGSTROM SIGN -> Å -> A + ring
            ('\u{212A}', 'K'), // KELVIN SIGN
            ('가', '\u{1100}'),
            ('힣', '\u{1112}'),
            ('ǅ', 'ǅ'), // compatibility decompositions are not applied
            ('ﬁ', 'ﬁ'),
            ('ẛ', 'ſ'),
            ('\u{344}', '\u{308}'),
            ('\u{2000}', '\u{2002}'),
            ('\u{F900}', '\u{8C48}'),
            ('\u{2FA1D}', '\u{2A600}'),
        ];
        for (c, want) in cases {
            assert_eq!(nfd_first(c as u32), want as u32, "{c:?}");
        }
        assert_eq!(nfd_first(0x2FA1E), 0x2FA1E);
        assert_eq!(nfd_first(0x110000), 0x110000);
    }
}
