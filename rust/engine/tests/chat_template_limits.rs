//! Hostile chat templates (a model file's template is untrusted input): each must end in a
//! typed error within 10 s (the render limit is 2 s), with the process's peak resident set
//! grown by at most 512 MiB (the render limit is 256 MiB held).
//!
//! Before the allocation guard, doubling a list 40 times through a namespace asked for a
//! 206 GB allocation (the process aborted), the string variant grew to gigabytes, and values
//! nested in themselves printed 2^40 items. Measured in-process from `/proc/self/status`
//! (VmHWM, reset through `/proc/self/clear_refs` before each template): one test function, so
//! no other test of this binary runs meanwhile.

mod common;

use local_llm_engine::chat::{ChatMessage, ChatTemplate};
use local_llm_engine::Error;
use std::time::{Duration, Instant};

const MIB: u64 = 1 << 20;
/// Peak RSS growth allowed per render.
const RSS_BOUND: u64 = 512 * MIB;
/// Time allowed per render.
const TIME_BOUND: Duration = Duration::from_secs(10);

/// Render `source` and return the error it must end in, after checking time and memory.
fn render_bounded(source: &str) -> String {
    let template = ChatTemplate::new(source, "<s>", "</s>").expect("template parses");
    std::fs::write("/proc/self/clear_refs", "5").expect("resetting the peak RSS");
    let before = common::status_bytes("VmRSS");
    let start = Instant::now();
    let result = template.render(&[ChatMessage::new("user", "hi")], true);
    let took = start.elapsed();
    let grew = common::status_bytes("VmHWM").saturating_sub(before);
    let shown: String = source.chars().take(120).collect();
    eprintln!(
        "{took:>10.2?} {:>5} MiB  {}  <- {shown}",
        grew / MIB,
        result
            .as_ref()
            .map_or_else(|e| e.to_string(), |_| "rendered".into())
    );
    assert!(took < TIME_BOUND, "{source}: took {took:?}");
    assert!(
        grew <= RSS_BOUND,
        "{source}: peak RSS grew by {} MiB",
        grew / MIB
    );
    match result {
        Err(Error::ChatTemplate(message)) => message,
        other => panic!("{source}: expected a template error, got {other:?}"),
    }
}

#[test]
fn hostile_templates_are_bounded_in_time_and_memory() {
    let ns = "{% set ns = namespace(l=[1], s='x') %}";
    let cases: Vec<(String, &str)> = vec![
        // Growth by doubling: lists (lazily concatenated, then materialized) and strings.
        (
            format!("{ns}{{% for i in range(40) %}}{{% set ns.l = ns.l + ns.l %}}{{% endfor %}}{{{{ ns.l | length }}}}"),
            "items",
        ),
        (
            format!("{ns}{{% for i in range(40) %}}{{% set ns.s = ns.s ~ ns.s %}}{{% endfor %}}"),
            "size limit",
        ),
        (
            format!("{ns}{{% for i in range(40) %}}{{% set ns.s = ns.s + ns.s %}}{{% endfor %}}"),
            "size limit",
        ),
        // Growth in one step.
        ("{{ ([0] * 1000000000) | length }}".into(), "items"),
        ("{{ 'xy' * 100000000 }}".into(), "size limit"),
        ("{{ [1] | batch(1000000000, 0) | list | length }}".into(), "items"),
        ("{{ [1] | slice(1000000000) | list | length }}".into(), "items"),
        // A value holding itself twice per level: 2^40 items when printed or compared.
        (
            format!("{ns}{{% for i in range(40) %}}{{% set ns.l = [ns.l, ns.l] %}}{{% endfor %}}{{{{ ns.l }}}}"),
            "",
        ),
        (
            format!("{ns}{{% for i in range(40) %}}{{% set ns.l = [ns.l, ns.l] %}}{{% endfor %}}{{{{ ns.l == ns.l }}}}"),
            "",
        ),
        // Deep nesting (native recursion when printed or dropped) and a namespace in itself.
        (
            format!("{ns}{{% for i in range(100000) %}}{{% set ns.l = [ns.l] %}}{{% endfor %}}{{{{ ns.l }}}}"),
            "nest",
        ),
        (
            format!("{ns}{{% for i in range(100000) %}}{{% set ns.l = {{'a': ns.l}} %}}{{% endfor %}}"),
            "nest",
        ),
        (
            format!("{ns}{{% for i in range(100000) %}}{{% set ns.l = dict(a=ns.l) %}}{{% endfor %}}"),
            "nest",
        ),
        (
            format!("{ns}{{% for i in range(100000) %}}{{% set ns.l = ns.l | batch(1) | list %}}{{% endfor %}}{{{{ ns.l }}}}"),
            "nest",
        ),
        ("{% set ns = namespace() %}{% set ns.me = ns %}{{ ns }}".into(), "namespace"),
        (
            "{% set ns = namespace() %}{% set ns.me = [1, {'x': ns}] %}{{ ns }}".into(),
            "namespace",
        ),
        // Captures and raw text grow outside the output: the memory limit stops them.
        (
            format!("{ns}{{% for i in range(60) %}}{{% set t %}}{{{{ ns.s }}}}{{{{ ns.s }}}}{{% endset %}}{{% set ns.s = t %}}{{% endfor %}}"),
            "",
        ),
        (
            format!(
                "{{% set t %}}{{% for i in range(100000) %}}{}{{% endfor %}}{{% endset %}}{{{{ t | length }}}}",
                "x".repeat(10_000)
            ),
            "memory",
        ),
        // Printing a big value through filters that stringify it.
        (
            format!("{ns}{{% for i in range(40) %}}{{% set ns.l = [ns.l, ns.l] %}}{{% endfor %}}{{{{ ns.l | string | length }}}}"),
            "",
        ),
        (
            format!("{ns}{{% for i in range(40) %}}{{% set ns.l = [ns.l, ns.l] %}}{{% endfor %}}{{{{ ns.l | tojson | length }}}}"),
            "",
        ),
        (
            format!("{ns}{{% for i in range(40) %}}{{% set ns.l = [ns.l, ns.l] %}}{{% endfor %}}{{{{ ''.join(ns.l | map('string')) }}}}"),
            "",
        ),
        // Not Jinja, and prints the whole render state unbounded.
        ("{{ debug() }}".into(), "unknown"),
    ];
    for (source, expected) in &cases {
        let message = render_bounded(source);
        assert!(
            message.contains(expected),
            "{source}: error {message:?} does not mention {expected:?}"
        );
    }
}
