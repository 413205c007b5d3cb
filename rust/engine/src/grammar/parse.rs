//! The GBNF parser: llama.cpp's grammar syntax into rules of alternatives of element sequences.
//!
//! Syntax: `name ::= alternatives` one rule per line (a rule continues on the next line after
//! `::=`, after `|` and inside parentheses), string literals `"..."`, character classes `[a-z]`
//! and `[^...]`, `.` (any character), rule references, groups `( ... )`, repetitions `*` `+` `?`
//! `{m}` `{m,}` `{m,n}`, comments from `#` to the end of the line and the escapes `\n \r \t \\ \"
//! \[ \] \- \xHH \uHHHH \UHHHHHHHH`. Repetitions are rewritten into helper rules as llama.cpp
//! does. Token references (`<...>`) are not supported.

use std::collections::HashMap;

use crate::{Error, Result};

/// Most repetitions one `{m,n}` may ask for (llama.cpp's limit).
const MAX_REPETITIONS: u64 = 2000;
/// Most elements a grammar may hold once repetitions are expanded.
const MAX_ELEMENTS: usize = 200_000;
/// Deepest nesting of parentheses.
const MAX_NESTING: usize = 256;

/// One element of a sequence.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Elem {
    /// One code point in one of the inclusive `ranges` (with `negated`: in none of them).
    Char {
        /// Inclusive code point ranges.
        ranges: Vec<(u32, u32)>,
        /// Whether the class is negated (`[^...]`, and `.` as the negation of nothing).
        negated: bool,
    },
    /// The rule with this index.
    Rule(u32),
}

impl Elem {
    /// Whether code point `c` matches this character element (false for rule references).
    pub(crate) fn matches(&self, c: u32) -> bool {
        match self {
            Elem::Char { ranges, negated } => {
                ranges.iter().any(|&(lo, hi)| lo <= c && c <= hi) != *negated
            }
            Elem::Rule(_) => false,
        }
    }

    /// Whether some code point in `lo..=hi` matches this character element.
    pub(crate) fn matches_any_in(&self, lo: u32, hi: u32) -> bool {
        match self {
            Elem::Char {
                ranges,
                negated: false,
            } => ranges.iter().any(|&(a, b)| a <= hi && lo <= b),
            // A negated class misses part of `lo..=hi` unless its ranges cover all of it.
            Elem::Char {
                ranges,
                negated: true,
            } => !covered(ranges, lo, hi),
            Elem::Rule(_) => false,
        }
    }
}

/// Whether the union of `ranges` covers every code point of `lo..=hi`.
fn covered(ranges: &[(u32, u32)], lo: u32, hi: u32) -> bool {
    let mut sorted = ranges.to_vec();
    sorted.sort_unstable();
    let mut next = lo;
    for (a, b) in sorted {
        if a > next {
            return false;
        }
        if b >= next {
            match b.checked_add(1) {
                Some(n) => next = n,
                None => return true,
            }
        }
        if next > hi {
            return true;
        }
    }
    false
}

/// A rule: its alternatives, each a sequence of elements (an empty sequence matches nothing).
pub(crate) type Rule = Vec<Vec<Elem>>;

/// A parsed, validated grammar: every referenced rule defined, no left recursion.
#[derive(Clone, Debug)]
pub struct Grammar {
    pub(crate) rules: Vec<Rule>,
    pub(crate) names: Vec<String>,
    pub(crate) root: u32,
    loops: bool,
}

impl Grammar {
    /// Parse GBNF `source` with start rule `root`. Errors ([`Error::Grammar`]) name the line and
    /// column and what is wrong; undefined rules, a missing root rule, left recursion and
    /// repetition counts above 2000 are errors too.
    pub fn parse(source: &str, root: &str) -> Result<Grammar> {
        let mut p = Parser {
            src: source,
            pos: 0,
            symbols: HashMap::new(),
            names: Vec::new(),
            rules: Vec::new(),
            first_use: Vec::new(),
            elements: 0,
            depth: 0,
            chains: HashMap::new(),
        };
        p.skip_space(true);
        while p.pos < p.src.len() {
            p.parse_rule()?;
        }
        for (id, rule) in p.rules.iter().enumerate() {
            if rule.is_none() {
                return Err(p.error_at(
                    p.first_use[id],
                    &format!("undefined rule '{}'", p.names[id]),
                ));
            }
        }
        let root_id = match p.symbols.get(root) {
            Some(&id) => id,
            None => {
                return Err(Error::Grammar(format!(
                    "the grammar has no '{root}' rule to start from"
                )))
            }
        };
        let mut grammar = Grammar {
            rules: p.rules.into_iter().map(Option::unwrap_or_default).collect(),
            names: p.names,
            root: root_id,
            loops: false,
        };
        grammar.check_left_recursion()?;
        Ok(grammar)
    }

    /// Number of rules (named and generated).
    pub fn n_rules(&self) -> usize {
        self.rules.len()
    }

    /// Which rules can match the empty string.
    fn nullable(&self) -> Vec<bool> {
        let mut nullable = vec![false; self.rules.len()];
        let mut changed = true;
        while changed {
            changed = false;
            for (i, rule) in self.rules.iter().enumerate() {
                if nullable[i] {
                    continue;
                }
                let empty = rule.iter().any(|alt| {
                    alt.iter()
                        .all(|e| matches!(e, Elem::Rule(r) if nullable[*r as usize]))
                });
                if empty {
                    nullable[i] = true;
                    changed = true;
                }
            }
        }
        nullable
    }

    /// Reject left recursion: a rule that can reach itself without consuming a character
    /// through a reference that is not the last element of its alternative (each such step
    /// grows the matcher's stack without bound; llama.cpp rejects these grammars too). Cycles
    /// made only of references in last position (as `( x* )*` produces) do not grow the stack:
    /// they are allowed and make [`Grammar::loops`] true so the matcher removes repeated states.
    fn check_left_recursion(&mut self) -> Result<()> {
        let nullable = self.nullable();
        // Edges rule -> rule it may start with, and whether the reference ends its alternative.
        let mut edges: Vec<Vec<(u32, bool)>> = vec![Vec::new(); self.rules.len()];
        for (i, rule) in self.rules.iter().enumerate() {
            for alt in rule {
                for (k, e) in alt.iter().enumerate() {
                    match e {
                        Elem::Rule(r) => {
                            edges[i].push((*r, k + 1 == alt.len()));
                            if !nullable[*r as usize] {
                                break;
                            }
                        }
                        Elem::Char { .. } => break,
                    }
                }
            }
        }
        let scc = components(&edges);
        for (from, out) in edges.iter().enumerate() {
            for &(to, last) in out {
                if scc[from] == scc[to as usize] {
                    if !last {
                        return Err(Error::Grammar(format!(
                            "left recursion in rule '{}' (it can start with itself)",
                            self.names[to as usize]
                        )));
                    }
                    self.loops = true;
                }
            }
        }
        Ok(())
    }

    /// Whether rules can reach themselves without consuming input (in last position only).
    pub(crate) fn loops(&self) -> bool {
        self.loops
    }
}

/// Strongly connected component of every node (Tarjan's algorithm, iterative).
fn components(edges: &[Vec<(u32, bool)>]) -> Vec<usize> {
    let n = edges.len();
    let (mut index, mut low, mut comp) = (vec![usize::MAX; n], vec![0; n], vec![usize::MAX; n]);
    let (mut on_stack, mut stack) = (vec![false; n], Vec::new());
    let (mut next_index, mut next_comp) = (0, 0);
    for start in 0..n {
        if index[start] != usize::MAX {
            continue;
        }
        let mut work = vec![(start, 0usize)];
        index[start] = next_index;
        low[start] = next_index;
        next_index += 1;
        stack.push(start);
        on_stack[start] = true;
        while let Some(&mut (v, ref mut i)) = work.last_mut() {
            if let Some(&(w, _)) = edges[v].get(*i) {
                *i += 1;
                let w = w as usize;
                if index[w] == usize::MAX {
                    index[w] = next_index;
                    low[w] = next_index;
                    next_index += 1;
                    stack.push(w);
                    on_stack[w] = true;
                    work.push((w, 0));
                } else if on_stack[w] {
                    low[v] = low[v].min(index[w]);
                }
            } else {
                work.pop();
                if let Some(&(parent, _)) = work.last() {
                    low[parent] = low[parent].min(low[v]);
                }
                if low[v] == index[v] {
                    while let Some(w) = stack.pop() {
                        on_stack[w] = false;
                        comp[w] = next_comp;
                        if w == v {
                            break;
                        }
                    }
                    next_comp += 1;
                }
            }
        }
    }
    comp
}

struct Parser<'a> {
    src: &'a str,
    pos: usize,
    symbols: HashMap<String, u32>,
    names: Vec<String>,
    rules: Vec<Option<Rule>>,
    /// Byte offset of each symbol's first mention (for "undefined rule" errors).
    first_use: Vec<usize>,
    elements: usize,
    depth: usize,
    /// Generated rules `S'(k) ::= S S'(k-1) | ε` (S{0,k}) by id, with their item S: an
    /// optional S right after one extends the chain (see [`Parser::repeat`]).
    chains: HashMap<u32, Vec<Elem>>,
}

fn is_word(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'-'
}

impl Parser<'_> {
    fn error_at(&self, pos: usize, what: &str) -> Error {
        let before = &self.src[..pos.min(self.src.len())];
        let line = before.matches('\n').count() + 1;
        let col = before
            .rfind('\n')
            .map_or(before.chars().count(), |i| before[i + 1..].chars().count())
            + 1;
        Error::Grammar(format!("{line}:{col}: {what}"))
    }

    fn error(&self, what: &str) -> Error {
        self.error_at(self.pos, what)
    }

    fn peek(&self) -> Option<u8> {
        self.src.as_bytes().get(self.pos).copied()
    }

    fn peek_at(&self, ahead: usize) -> Option<u8> {
        self.src.as_bytes().get(self.pos + ahead).copied()
    }

    fn skip_space(&mut self, newline_ok: bool) {
        while let Some(b) = self.peek() {
            match b {
                b' ' | b'\t' => self.pos += 1,
                b'\r' | b'\n' if newline_ok => self.pos += 1,
                b'#' => {
                    while !matches!(self.peek(), None | Some(b'\r' | b'\n')) {
                        self.pos += 1;
                    }
                }
                _ => break,
            }
        }
    }

    fn symbol(&mut self, name: &str, at: usize) -> u32 {
        if let Some(&id) = self.symbols.get(name) {
            return id;
        }
        let id = self.names.len() as u32;
        self.symbols.insert(name.to_string(), id);
        self.names.push(name.to_string());
        self.rules.push(None);
        self.first_use.push(at);
        id
    }

    fn generated(&mut self, base: &str) -> u32 {
        let mut n = self.names.len();
        loop {
            let name = format!("{base}_{n}");
            if !self.symbols.contains_key(&name) {
                return self.symbol(&name, self.pos);
            }
            n += 1;
        }
    }

    fn name(&mut self) -> Result<&str> {
        let start = self.pos;
        while self.peek().is_some_and(is_word) {
            self.pos += 1;
        }
        if self.pos == start {
            return Err(self.error("expected a rule name"));
        }
        Ok(&self.src[start..self.pos])
    }

    fn parse_rule(&mut self) -> Result<()> {
        let start = self.pos;
        let name = self.name()?.to_string();
        self.skip_space(false);
        if !self.src[self.pos..].starts_with("::=") {
            return Err(self.error("expected '::='"));
        }
        self.pos += 3;
        self.skip_space(true);
        let id = self.symbol(&name, start);
        let rule = self.parse_alternates(&name, false)?;
        self.rules[id as usize] = Some(rule);
        match self.peek() {
            Some(b'\r') => {
                self.pos += if self.peek_at(1) == Some(b'\n') { 2 } else { 1 };
            }
            Some(b'\n') => self.pos += 1,
            None => {}
            Some(_) => return Err(self.error("expected the end of the line")),
        }
        self.skip_space(true);
        Ok(())
    }

    fn parse_alternates(&mut self, name: &str, nested: bool) -> Result<Rule> {
        let mut rule = vec![self.parse_sequence(name, nested)?];
        while self.peek() == Some(b'|') {
            self.pos += 1;
            self.skip_space(true);
            rule.push(self.parse_sequence(name, nested)?);
        }
        Ok(rule)
    }

    fn count(&mut self, n: usize) -> Result<()> {
        self.elements += n;
        if self.elements > MAX_ELEMENTS {
            return Err(self.error(&format!(
                "the grammar is too large (more than {MAX_ELEMENTS} elements once repetitions are expanded)"
            )));
        }
        Ok(())
    }

    fn parse_sequence(&mut self, name: &str, nested: bool) -> Result<Vec<Elem>> {
        let mut seq: Vec<Elem> = Vec::new();
        let mut last_start: Option<usize> = None;
        // Rules the last item stands for (a group's generated rules, times the repetitions
        // already applied to it), to bound nested repetitions as llama.cpp does.
        let mut last_rules: u64 = 1;
        while let Some(b) = self.peek() {
            let rules_before = self.names.len() as u64;
            let mut item_rules = 1;
            match b {
                b'"' => {
                    self.pos += 1;
                    let start = seq.len();
                    loop {
                        match self.peek() {
                            None => return Err(self.error("unterminated string literal")),
                            Some(b'"') => break,
                            Some(_) => {
                                let c = self.parse_char()?;
                                seq.push(Elem::Char {
                                    ranges: vec![(c, c)],
                                    negated: false,
                                });
                            }
                        }
                    }
                    self.count(seq.len() - start)?;
                    self.pos += 1;
                    last_start = Some(start);
                }
                b'[' => {
                    let start = seq.len();
                    self.pos += 1;
                    let negated = self.peek() == Some(b'^');
                    if negated {
                        self.pos += 1;
                    }
                    let mut ranges = Vec::new();
                    loop {
                        match self.peek() {
                            None => return Err(self.error("unterminated character class")),
                            Some(b']') => break,
                            Some(_) => {
                                let lo = self.parse_char()?;
                                let mut hi = lo;
                                if self.peek() == Some(b'-') && self.peek_at(1) != Some(b']') {
                                    self.pos += 1;
                                    if self.peek().is_none() {
                                        return Err(self.error("unterminated character class"));
                                    }
                                    hi = self.parse_char()?;
                                    if hi < lo {
                                        return Err(self.error(&format!(
                                            "character range end U+{hi:04X} is below its start U+{lo:04X}"
                                        )));
                                    }
                                }
                                ranges.push((lo, hi));
                            }
                        }
                    }
                    self.pos += 1;
                    self.count(1)?;
                    seq.push(Elem::Char { ranges, negated });
                    last_start = Some(start);
                }
                b'.' => {
                    self.pos += 1;
                    self.count(1)?;
                    last_start = Some(seq.len());
                    seq.push(Elem::Char {
                        ranges: Vec::new(),
                        negated: true,
                    });
                }
                b'(' => {
                    let open = self.pos;
                    self.pos += 1;
                    self.depth += 1;
                    if self.depth > MAX_NESTING {
                        return Err(self.error("parentheses nested too deeply"));
                    }
                    self.skip_space(true);
                    let id = self.generated(name);
                    let rule = self.parse_alternates(name, true)?;
                    self.rules[id as usize] = Some(rule);
                    if self.peek() != Some(b')') {
                        return Err(self.error_at(open, "unclosed '(' (expected ')')"));
                    }
                    self.depth -= 1;
                    self.pos += 1;
                    item_rules = (self.names.len() as u64 - rules_before).max(1);
                    self.count(1)?;
                    last_start = Some(seq.len());
                    seq.push(Elem::Rule(id));
                }
                b'<' => return Err(self.error("token references (<...>) are not supported")),
                b'*' | b'+' | b'?' | b'{' => {
                    let Some(start) = last_start else {
                        return Err(
                            self.error(&format!("'{}' must follow an item to repeat", b as char))
                        );
                    };
                    let (min, max) = match b {
                        b'*' => {
                            self.pos += 1;
                            (0, None)
                        }
                        b'+' => {
                            self.pos += 1;
                            (1, None)
                        }
                        b'?' => {
                            self.pos += 1;
                            (0, Some(1))
                        }
                        _ => self.parse_braces(nested)?,
                    };
                    let total = match max {
                        Some(m) if m > 0 => m,
                        _ => min.max(1),
                    };
                    last_rules = last_rules.saturating_mul(total);
                    if last_rules > MAX_REPETITIONS {
                        return Err(self.error(&format!(
                            "nested repetitions multiply to more than {MAX_REPETITIONS} rules"
                        )));
                    }
                    self.repeat(&mut seq, start, min, max, name)?;
                    self.skip_space(nested);
                    continue;
                }
                _ if is_word(b) => {
                    let at = self.pos;
                    let n = self.name()?.to_string();
                    let id = self.symbol(&n, at);
                    self.count(1)?;
                    last_start = Some(seq.len());
                    seq.push(Elem::Rule(id));
                }
                _ => break,
            }
            last_rules = item_rules;
            self.skip_space(nested);
        }
        Ok(seq)
    }

    /// `{m}`, `{m,}` or `{m,n}` (the cursor is on `{`).
    fn parse_braces(&mut self, nested: bool) -> Result<(u64, Option<u64>)> {
        self.pos += 1;
        self.skip_space(nested);
        let min = self.parse_int()?.unwrap_or(0);
        self.skip_space(nested);
        let max = match self.peek() {
            Some(b'}') => Some(min),
            Some(b',') => {
                self.pos += 1;
                self.skip_space(nested);
                let max = self.parse_int()?;
                self.skip_space(nested);
                if self.peek() != Some(b'}') {
                    return Err(self.error("expected '}'"));
                }
                max
            }
            _ => return Err(self.error("expected ',' or '}' in a repetition")),
        };
        self.pos += 1;
        if min > MAX_REPETITIONS || max.is_some_and(|m| m > MAX_REPETITIONS) {
            return Err(self.error(&format!(
                "repetition count above the limit of {MAX_REPETITIONS}"
            )));
        }
        if let Some(m) = max.filter(|&m| m < min) {
            return Err(self.error(&format!(
                "repetition maximum {m} is below its minimum {min}"
            )));
        }
        Ok((min, max))
    }

    fn parse_int(&mut self) -> Result<Option<u64>> {
        let start = self.pos;
        while self.peek().is_some_and(|b| b.is_ascii_digit()) {
            self.pos += 1;
        }
        if start == self.pos {
            return Ok(None);
        }
        // Saturate: anything this large is rejected by the repetition limit.
        Ok(Some(self.src[start..self.pos].parse().unwrap_or(u64::MAX)))
    }

    /// Rewrite `seq[start..]` (the item S) repeated `min..=max` times (`None`: unbounded):
    /// S{m,n} → S×m then S'(n-m), S'(k) ::= S S'(k-1) | ε; S{m,} → S×m then S' ::= S S' | ε.
    fn repeat(
        &mut self,
        seq: &mut Vec<Elem>,
        start: usize,
        min: u64,
        max: Option<u64>,
        name: &str,
    ) -> Result<()> {
        let mut item: Vec<Elem> = seq[start..].to_vec();
        // (S | ε){m,n} is S{0,n} and (S | ε){m,} is S{0,}: the same language, but the left
        // form is ambiguous (`[a-z]?{2000}`: a letter may be any of the 2,000 copies, so the
        // matcher follows up to 2,000 continuations per character), the right one is not.
        let mut min = min;
        if let [Elem::Rule(r)] = item[..] {
            if let Some(Some(alts)) = self.rules.get(r as usize) {
                if let [body, empty] = &alts[..] {
                    if empty.is_empty() && !body.is_empty() {
                        item = body.clone();
                        min = 0;
                    }
                }
            }
        }
        let optional = match max {
            None => 1,
            Some(m) => m - min,
        };
        let copies = (min.max(1) + optional) as usize;
        self.count(item.len().saturating_mul(copies))?;
        seq.truncate(start);
        // S{0,j} S{0,k} is S{0,j+k}: written out (`[a-z]? [a-z]? ...`) the left form is as
        // ambiguous as (S | ε){n}, so a bounded optional S right after a chain of S extends
        // that chain instead of starting another.
        let mut last: Option<u32> = None;
        if min == 0 && max.is_some() {
            if let Some(&Elem::Rule(prev)) = seq.last() {
                if self.chains.get(&prev) == Some(&item) {
                    seq.pop();
                    last = Some(prev);
                }
            }
        }
        for _ in 0..min {
            seq.extend_from_slice(&item);
        }
        for _ in 0..optional {
            let id = self.generated(name);
            let mut body = item.clone();
            match (max, last) {
                (None, _) => body.push(Elem::Rule(id)),
                (Some(_), Some(prev)) => body.push(Elem::Rule(prev)),
                (Some(_), None) => {}
            }
            self.rules[id as usize] = Some(vec![body, Vec::new()]);
            last = Some(id);
        }
        if let Some(id) = last {
            seq.push(Elem::Rule(id));
            if max.is_some() {
                self.chains.insert(id, item);
            }
        }
        Ok(())
    }

    fn hex(&mut self, digits: usize) -> Result<u32> {
        let start = self.pos;
        let text = self.src.get(start..start + digits);
        match text.filter(|t| t.bytes().all(|b| b.is_ascii_hexdigit())) {
            Some(t) => {
                self.pos += digits;
                let v = u32::from_str_radix(t, 16).unwrap_or(u32::MAX);
                if char::from_u32(v).is_none() {
                    return Err(
                        self.error_at(start, &format!("U+{v:X} is not a Unicode scalar value"))
                    );
                }
                Ok(v)
            }
            None => Err(self.error_at(start, &format!("expected {digits} hex digits"))),
        }
    }

    /// One character of a literal or class, escapes decoded.
    fn parse_char(&mut self) -> Result<u32> {
        let rest = &self.src[self.pos..];
        let Some(c) = rest.chars().next() else {
            return Err(self.error("unexpected end of input"));
        };
        if c != '\\' {
            self.pos += c.len_utf8();
            return Ok(c as u32);
        }
        let Some(e) = rest[1..].chars().next() else {
            return Err(self.error("unexpected end of input after '\\'"));
        };
        let at = self.pos;
        self.pos += 1 + e.len_utf8();
        Ok(match e {
            'x' => self.hex(2)?,
            'u' => self.hex(4)?,
            'U' => self.hex(8)?,
            't' => '\t' as u32,
            'r' => '\r' as u32,
            'n' => '\n' as u32,
            '\\' | '"' | '[' | ']' | '-' => e as u32,
            _ => return Err(self.error_at(at, &format!("unknown escape '\\{e}'"))),
        })
    }
}
