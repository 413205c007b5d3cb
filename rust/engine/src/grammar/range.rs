//! GBNF for the decimal integers of a range (JSON-schema `minimum` / `maximum`), written without
//! leading zeros, with at most 16 digits when the range is unbounded (as the `integer` rule).

/// Most digits an unbounded integer may have.
const MAX_DIGITS: usize = 16;

/// An expression matching exactly the integers in `lo..=hi` (`None`: unbounded on that side).
/// The caller guarantees `lo <= hi` when both are set.
pub(crate) fn int_range(lo: Option<i128>, hi: Option<i128>) -> String {
    let mut alts = Vec::new();
    if lo.is_none_or(|l| l < 0) {
        // Negative values: "-" then a magnitude from -top to -lo.
        let top = hi.map_or(-1, |h| h.min(-1));
        if lo.is_none_or(|l| l <= top) {
            alts.push(format!("\"-\" ({})", non_negative(-top, lo.map(|l| -l))));
        }
    }
    if hi.is_none_or(|h| h >= 0) {
        alts.push(non_negative(lo.map_or(0, |l| l.max(0)), hi));
    }
    alts.join(" | ")
}

fn digits(n: i128) -> usize {
    n.to_string().len()
}

/// Integers from `lo >= 0` to `hi` (or unbounded), no leading zeros.
fn non_negative(lo: i128, hi: Option<i128>) -> String {
    let mut alts = Vec::new();
    let first = digits(lo);
    let last = hi.map_or(first, digits);
    for d in first..=last {
        let floor = if d == 1 { 0 } else { 10i128.pow(d as u32 - 1) };
        let ceil = 10i128.pow(d as u32) - 1;
        let a = lo.max(floor);
        let b = hi.map_or(ceil, |h| h.min(ceil));
        if a <= b {
            alts.push(same_length(&a.to_string(), &b.to_string()));
        }
    }
    if hi.is_none() && first < MAX_DIGITS {
        alts.push(format!("[1-9] [0-9]{{{first},{}}}", MAX_DIGITS - 1));
    }
    alts.join(" | ")
}

/// Digit strings from `a` to `b` (same length, `a <= b`), leading zeros as given.
fn same_length(a: &str, b: &str) -> String {
    if a.is_empty() {
        return String::new();
    }
    if a == b {
        return format!("\"{a}\"");
    }
    let (a0, b0) = (a.as_bytes()[0], b.as_bytes()[0]);
    let (ar, br) = (&a[1..], &b[1..]);
    let rest = ar.len();
    let tail = if rest == 0 {
        String::new()
    } else {
        format!(" [0-9]{{{rest}}}")
    };
    if a0 == b0 {
        return format!("\"{}\" {}", a0 as char, same_length(ar, br));
    }
    let all = |s: &str, c: char| s.chars().all(|x| x == c);
    let mut alts = Vec::new();
    let mut lo_first = a0;
    if !all(ar, '0') {
        alts.push(format!(
            "\"{}\" ({})",
            a0 as char,
            same_length(ar, &"9".repeat(rest))
        ));
        lo_first = a0 + 1;
    }
    let mut hi_first = b0;
    let mut high_alt = None;
    if !all(br, '9') {
        high_alt = Some(format!(
            "\"{}\" ({})",
            b0 as char,
            same_length(&"0".repeat(rest), br)
        ));
        hi_first = b0 - 1;
    }
    if lo_first <= hi_first {
        alts.push(format!("[{}-{}]{tail}", lo_first as char, hi_first as char));
    }
    alts.extend(high_alt);
    format!("({})", alts.join(" | "))
}

#[cfg(test)]
mod tests {
    use super::int_range;
    use crate::grammar::{Grammar, Matcher};
    use std::sync::Arc;

    fn matches(expr: &str, text: &str) -> bool {
        let g = Arc::new(Grammar::parse(&format!("root ::= {expr}"), "root").unwrap());
        let mut m = Matcher::new(g);
        m.accept_str(text) && m.is_complete()
    }

    /// Every integer in a window around each range is accepted exactly when it is inside
    /// (the oracle is plain integer comparison), and leading zeros are rejected.
    #[test]
    fn ranges_match_exactly_their_integers() {
        let cases: &[(Option<i128>, Option<i128>)] = &[
            (Some(0), Some(0)),
            (Some(-5), Some(5)),
            (Some(7), Some(1234)),
            (Some(-1234), Some(-7)),
            (Some(10), Some(99)),
            (Some(19), Some(201)),
            (None, Some(-3)),
            (Some(-3), None),
            (Some(95), None),
            (None, Some(120)),
        ];
        for &(lo, hi) in cases {
            let expr = int_range(lo, hi);
            for v in -1300i128..1300 {
                let inside = lo.is_none_or(|l| v >= l) && hi.is_none_or(|h| v <= h);
                assert_eq!(
                    matches(&expr, &v.to_string()),
                    inside,
                    "{v} in {lo:?}..={hi:?}: {expr}"
                );
            }
            assert!(!matches(&expr, "007"), "{expr}");
        }
    }
}
