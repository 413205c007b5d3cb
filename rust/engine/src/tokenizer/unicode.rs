//! Codepoint classes and the GPT-2 byte-to-unicode mapping, as llama.cpp's `unicode.cpp` defines them.
//!
//! Categories come from Unicode 15.1 (the version of llama.cpp's generated tables), so pre-tokenization
//! splits text exactly where llama.cpp does, independently of the Rust standard library's Unicode version.

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
