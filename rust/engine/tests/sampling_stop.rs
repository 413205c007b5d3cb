//! Stop-string matching over streamed text.

use local_llm_engine::sampling::StopMatcher;

fn matcher(stops: &[&str]) -> StopMatcher {
    StopMatcher::new(&stops.iter().map(|s| s.to_string()).collect::<Vec<_>>())
}

/// Push every piece; returns everything emitted (including the flush if no stop) and whether
/// a stop matched.
fn run(stops: &[&str], pieces: &[&str]) -> (String, bool) {
    let mut m = matcher(stops);
    let mut out = String::new();
    for p in pieces {
        let (emit, stop) = m.push(p);
        out.push_str(&emit);
        if stop {
            assert_eq!(m.push("more"), (String::new(), true));
            assert_eq!(m.flush(), "");
            return (out, true);
        }
    }
    out.push_str(&m.flush());
    (out, false)
}

#[test]
fn stop_split_across_many_pushes() {
    let mut m = matcher(&["<|im_end|>"]);
    assert_eq!(m.push("Hello <"), ("Hello ".to_string(), false));
    assert_eq!(m.push("|im"), (String::new(), false));
    assert_eq!(m.push("_"), (String::new(), false));
    assert_eq!(m.push("end|"), (String::new(), false));
    assert_eq!(m.push(">tail"), (String::new(), true));
    assert_eq!(
        run(
            &["<|im_end|>"],
            &["a", "<", "|", "i", "m", "_", "e", "n", "d", "|", ">", "b"]
        ),
        ("a".into(), true)
    );
}

#[test]
fn partial_prefix_that_fails_is_emitted_later() {
    let mut m = matcher(&["STOP"]);
    assert_eq!(m.push("go ST"), ("go ".to_string(), false));
    assert_eq!(m.push("OR"), ("STOR".to_string(), false));
    assert_eq!(m.push("y S"), ("y ".to_string(), false));
    assert_eq!(m.flush(), "S");
    assert_eq!(
        run(&["STOP"], &["ST", "ST", "STO", "P!"]),
        ("STST".into(), true)
    );
}

#[test]
fn overlapping_and_multiple_stops() {
    // Both complete in the same push: the earliest starting match wins.
    assert_eq!(run(&["abcd", "bc"], &["xab", "cd"]), ("x".into(), true));
    // "bc" completes while "abcd" is still only a prefix: stop at "bc" right away.
    assert_eq!(
        run(&["abcd", "bc"], &["xab", "c", "d"]),
        ("xa".into(), true)
    );
    assert_eq!(run(&["bcd", "abc"], &["xab", "cd"]), ("x".into(), true));
    // Self-overlapping stop: "aab" inside "aaab".
    assert_eq!(run(&["aab"], &["a", "a", "a", "b"]), ("a".into(), true));
    assert_eq!(
        run(&["\n\n", "User:"], &["Hi\n", "User", ": x"]),
        ("Hi\n".into(), true)
    );
    assert_eq!(
        run(&["\n\n", "User:"], &["Hi\n", "\nUser:"]),
        ("Hi".into(), true)
    );
    assert_eq!(run(&["xyz", "yq"], &["xy", "z"]), ("".into(), true));
    assert_eq!(
        run(&["END"], &["no stop here"]),
        ("no stop here".into(), false)
    );
}

#[test]
fn unicode_stops_and_text() {
    assert_eq!(
        run(&["終わり"], &["こんにちは終", "わ", "り。"]),
        ("こんにちは".into(), true)
    );
    assert_eq!(run(&["🎉!"], &["ok 🎉", "🎉", "!"]), ("ok 🎉".into(), true));
    assert_eq!(
        run(&["é"], &["caf", "e\u{301}"]),
        ("cafe\u{301}".into(), false)
    );
    let mut m = matcher(&["日本"]);
    assert_eq!(m.push("a日"), ("a".to_string(), false));
    assert_eq!(m.push("x"), ("日x".to_string(), false));
}

#[test]
fn stop_at_the_very_start_and_edge_cases() {
    assert_eq!(run(&["<eos>"], &["<eos>hello"]), ("".into(), true));
    assert_eq!(run(&["<eos>"], &["", "<e", "os>"]), ("".into(), true));
    // Empty stop strings are ignored; no stops means everything passes straight through.
    let mut m = matcher(&[""]);
    assert_eq!(m.push("abc"), ("abc".to_string(), false));
    assert_eq!(run(&[], &["a", "b"]), ("ab".into(), false));
}
