//! JSON-schema `pattern` regular expressions to GBNF, for the subset a grammar can express:
//! anchored (`^...$`) patterns of literals, `.`, character classes, `\d \w \s` (and their
//! negations), groups (`(...)`, `(?:...)`), alternatives and the quantifiers `* + ? {m} {m,}
//! {m,n}`. A valid regex outside that subset is [`Pattern::Unsupported`] (the caller accepts any
//! string, as llama.cpp does); a malformed one is an error.

/// The outcome of translating a pattern.
pub(crate) enum Pattern {
    /// The GBNF expression for the string's characters (no quotes).
    Gbnf(String),
    /// Valid, but not expressible here (the reason).
    Unsupported(String),
}

/// Deepest group nesting accepted.
const MAX_DEPTH: usize = 100;

/// Translate `pattern`; `Err` names what makes it an invalid regular expression.
pub(crate) fn pattern_to_gbnf(pattern: &str) -> Result<Pattern, String> {
    let chars: Vec<char> = pattern.chars().collect();
    let mut t = Translator {
        chars: &chars,
        i: 0,
        unsupported: None,
    };
    let anchored = chars.len() >= 2 && chars[0] == '^' && chars[chars.len() - 1] == '$';
    if anchored {
        t.i = 1;
    }
    let end = if anchored {
        chars.len() - 1
    } else {
        chars.len()
    };
    let expr = t.alternation(end, 0)?;
    if t.i != end {
        return Err("unbalanced parentheses".into());
    }
    if !anchored {
        return Ok(Pattern::Unsupported("not anchored with '^' and '$'".into()));
    }
    Ok(match t.unsupported {
        Some(why) => Pattern::Unsupported(why),
        // A valid regex the grammar cannot hold (e.g. `[a-c]{2186}`: GBNF repetition counts stop
        // at 2000) is not an error in the pattern: like any other unsupported form, it falls
        // back to any string.
        None => match super::Grammar::parse(&format!("root ::= {expr}"), "root") {
            Ok(_) => Pattern::Gbnf(expr),
            Err(e) => Pattern::Unsupported(format!("beyond the grammar's limits ({e})")),
        },
    })
}

struct Translator<'a> {
    chars: &'a [char],
    i: usize,
    unsupported: Option<String>,
}

/// A GBNF literal for one character (inside `"..."`).
fn literal_char(c: char) -> String {
    match c {
        '"' => "\\\"".into(),
        '\\' => "\\\\".into(),
        '\n' => "\\n".into(),
        '\r' => "\\r".into(),
        '\t' => "\\t".into(),
        c if (c as u32) < 0x20 => format!("\\x{:02X}", c as u32),
        c => c.to_string(),
    }
}

/// A character for use inside a GBNF class `[...]`. GBNF has no `\^` escape: a `^` (a
/// negation only first in a class) is written as a hex escape wherever it stands.
pub(crate) fn class_char(c: char) -> String {
    match c {
        ']' | '[' | '-' | '\\' | '"' => format!("\\{c}"),
        '^' => "\\x5E".into(),
        '\n' => "\\n".into(),
        '\r' => "\\r".into(),
        '\t' => "\\t".into(),
        c if (c as u32) < 0x20 => format!("\\x{:02X}", c as u32),
        c => c.to_string(),
    }
}

/// The class body (without brackets) of a shorthand escape, and whether it is negated.
fn shorthand(c: char) -> Option<(&'static str, bool)> {
    Some(match c {
        'd' => ("0-9", false),
        'D' => ("0-9", true),
        'w' => ("a-zA-Z0-9_", false),
        'W' => ("a-zA-Z0-9_", true),
        's' => (" \\t\\n\\r\\x0B\\x0C", false),
        'S' => (" \\t\\n\\r\\x0B\\x0C", true),
        _ => return None,
    })
}

fn simple_escape(c: char) -> Option<char> {
    Some(match c {
        'n' => '\n',
        'r' => '\r',
        't' => '\t',
        'f' => '\x0C',
        'v' => '\x0B',
        '0' => '\0',
        c if !c.is_ascii_alphanumeric() => c,
        _ => return None,
    })
}

impl Translator<'_> {
    fn unsupported(&mut self, why: &str) {
        if self.unsupported.is_none() {
            self.unsupported = Some(why.to_string());
        }
    }

    fn alternation(&mut self, end: usize, depth: usize) -> Result<String, String> {
        let mut alts = vec![self.sequence(end, depth)?];
        while self.i < end && self.chars[self.i] == '|' {
            self.i += 1;
            alts.push(self.sequence(end, depth)?);
        }
        Ok(if alts.len() == 1 {
            alts.pop().unwrap_or_default()
        } else {
            format!("({})", alts.join(" | "))
        })
    }

    fn sequence(&mut self, end: usize, depth: usize) -> Result<String, String> {
        let mut items: Vec<String> = Vec::new();
        while self.i < end {
            let c = self.chars[self.i];
            let item = match c {
                '|' | ')' => break,
                '(' => {
                    self.i += 1;
                    if self.chars.get(self.i) == Some(&'?') {
                        if self.chars.get(self.i + 1) == Some(&':') {
                            self.i += 2;
                        } else {
                            // Lookaround, named group, inline flags: skip the syntax, note it.
                            self.unsupported("unsupported group syntax");
                            self.i += 1;
                            match (self.chars.get(self.i), self.chars.get(self.i + 1)) {
                                (Some('<'), Some('=' | '!')) => self.i += 2,
                                (Some('<'), _) => {
                                    while self.i < end && self.chars[self.i] != '>' {
                                        self.i += 1;
                                    }
                                    self.i += 1;
                                }
                                _ => self.i += 1,
                            }
                        }
                    }
                    if depth + 1 > MAX_DEPTH {
                        return Err("pattern nesting too deep".into());
                    }
                    let inner = self.alternation(end, depth + 1)?;
                    if self.chars.get(self.i) != Some(&')') || self.i >= end {
                        return Err("unbalanced parentheses".into());
                    }
                    self.i += 1;
                    format!("({inner})")
                }
                '[' => self.class(end)?,
                '.' => {
                    self.i += 1;
                    "[^\\n\\r]".into()
                }
                '^' | '$' => {
                    self.i += 1;
                    self.unsupported("anchor inside the pattern");
                    String::new()
                }
                '*' | '+' | '?' | '{' => return Err("nothing to repeat".into()),
                '\\' => self.escape(end)?,
                c => {
                    self.i += 1;
                    format!("\"{}\"", literal_char(c))
                }
            };
            let item = self.quantified(item, end)?;
            if !item.is_empty() {
                items.push(item);
            }
        }
        Ok(if items.is_empty() {
            "\"\"".into()
        } else {
            items.join(" ")
        })
    }

    fn escape(&mut self, end: usize) -> Result<String, String> {
        let Some(&e) = self.chars.get(self.i + 1).filter(|_| self.i + 1 < end) else {
            return Err("trailing backslash".into());
        };
        self.i += 2;
        if let Some((body, neg)) = shorthand(e) {
            return Ok(format!("[{}{body}]", if neg { "^" } else { "" }));
        }
        match simple_escape(e) {
            Some(c) => Ok(format!("\"{}\"", literal_char(c))),
            None => {
                self.unsupported(&format!("unsupported escape \\{e}"));
                Ok(String::new())
            }
        }
    }

    fn class(&mut self, end: usize) -> Result<String, String> {
        self.i += 1;
        let mut out = String::from("[");
        if self.chars.get(self.i) == Some(&'^') {
            out.push('^');
            self.i += 1;
        }
        let mut first = true;
        loop {
            if self.i >= end {
                return Err("unterminated character class".into());
            }
            let c = self.chars[self.i];
            if c == ']' && !first {
                self.i += 1;
                break;
            }
            first = false;
            if c == '\\' {
                let Some(&e) = self.chars.get(self.i + 1).filter(|_| self.i + 1 < end) else {
                    return Err("unterminated character class".into());
                };
                self.i += 2;
                if let Some((body, neg)) = shorthand(e) {
                    if neg {
                        self.unsupported("negated shorthand inside a class");
                    }
                    out.push_str(body);
                } else if let Some(ch) = simple_escape(e) {
                    out.push_str(&class_char(ch));
                } else {
                    self.unsupported(&format!("unsupported escape \\{e} in a class"));
                }
            } else if c == '-' && self.i + 1 < end && self.chars[self.i + 1] != ']' && out.len() > 1
            {
                out.push('-');
                self.i += 1;
            } else {
                out.push_str(&class_char(c));
                self.i += 1;
            }
        }
        out.push(']');
        Ok(out)
    }

    fn quantified(&mut self, item: String, end: usize) -> Result<String, String> {
        let mut item = item;
        while self.i < end {
            let q = match self.chars[self.i] {
                '*' | '+' | '?' => {
                    self.i += 1;
                    self.chars[self.i - 1].to_string()
                }
                '{' => {
                    let close = (self.i..end).find(|&j| self.chars[j] == '}');
                    let Some(close) = close else {
                        self.unsupported("unterminated curly brackets");
                        self.i = end;
                        return Ok(item);
                    };
                    let body: String = self.chars[self.i + 1..close].iter().collect();
                    self.i = close + 1;
                    let ok = body.split(',').count() <= 2
                        && body
                            .split(',')
                            .all(|p| p.trim().chars().all(|c| c.is_ascii_digit()))
                        && !body.trim().starts_with(',');
                    if !ok {
                        self.unsupported("invalid curly-bracket quantifier");
                        return Ok(item);
                    }
                    // `{m,n}` with n < m is an error in regex engines (and in GBNF).
                    let mut bounds = body.split(',').map(|p| p.trim().parse::<u64>().ok());
                    if let (Some(Some(min)), Some(Some(max))) = (bounds.next(), bounds.next()) {
                        if max < min {
                            return Err(format!("min repeat {min} greater than max repeat {max}"));
                        }
                    }
                    format!("{{{}}}", body.replace(' ', ""))
                }
                _ => break,
            };
            if item.is_empty() {
                return Err("nothing to repeat".into());
            }
            // Lazy / possessive suffixes change nothing about the language.
            if self.i < end && matches!(self.chars[self.i], '?' | '+') && q != "?" {
                self.i += 1;
            }
            item = format!("({item}){q}");
        }
        Ok(item)
    }
}
