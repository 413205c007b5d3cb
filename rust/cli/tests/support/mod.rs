//! Helpers shared by the CLI tests that run llama.cpp's tools (built from the pinned PyPI sdist
//! `llama-cpp-python==0.3.36` by `scripts/setup/build-llama.sh`) beside `local-llm`:
//! `perplexity.rs`, `weight_formats.rs` and `architectures.rs`. Use with `mod common;` (the engine's test helpers,
//! by `#[path]`) and `mod support;`.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Mutex;

use crate::common;

/// Tokens per chunk and chunks of the CI-sized perplexity runs ([`test_size`]).
pub const N_CTX: &str = "128";
pub const CHUNKS: &str = "4";

/// Whether `LOCAL_LLM_SKIP_LLAMA_SOURCES=1` asks to skip what needs llama.cpp's sources (it
/// says so on stderr).
pub fn skip() -> bool {
    if std::env::var("LOCAL_LLM_SKIP_LLAMA_SOURCES").is_ok_and(|v| v == "1") {
        eprintln!("LOCAL_LLM_SKIP_LLAMA_SOURCES=1: skipping the comparison with llama.cpp's tools");
        return true;
    }
    false
}

/// Runs a script of `scripts/setup` and returns the paths it prints, one a line (the llama.cpp
/// tools it runs get [`run`]'s environment).
pub fn script_paths(script: &str, args: &[&str]) -> Vec<PathBuf> {
    let out = Command::new(common::repo_root().join("scripts/setup").join(script))
        .args(args)
        .env("LLAMA_ARG_REPACK", "0")
        .env("OMP_WAIT_POLICY", "passive")
        .output()
        .unwrap_or_else(|e| panic!("cannot run {script}: {e}"));
    assert!(
        out.status.success(),
        "{script} failed (set LOCAL_LLM_SKIP_LLAMA_SOURCES=1 to skip):\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .expect("utf-8 paths")
        .lines()
        .map(|line| PathBuf::from(line.trim()))
        .collect()
}

/// Runs a script of `scripts/setup` that prints one path and returns it.
pub fn script_path(script: &str, args: &[&str]) -> PathBuf {
    let mut paths = script_paths(script, args);
    assert_eq!(paths.len(), 1, "{script} printed {paths:?}");
    paths.remove(0)
}

/// Runs a command; returns stdout and stderr together (llama-perplexity and `local-llm
/// perplexity` split their report between them the same way).
///
/// llama.cpp's tools run with weight repacking off (`LLAMA_ARG_REPACK=0`, their `--no-repack`):
/// on CPUs with AMX, the native build's AMX matrix product crashes (SIGSEGV) on these small
/// synthetic models (seen on a Sapphire Rapids VM), and without repacking every CPU runs
/// llama.cpp's plain `vec_dot` kernels, the ones ours are compared with. And with OpenMP's
/// idle threads sleeping (`OMP_WAIT_POLICY=passive`) instead of spinning on both cores, the
/// tools' log thread gets to print the report before the process exits (see [`run_llama`]).
/// The commands of a test binary run one at a time: with the tests of a binary running two
/// commands at once on two cores, that log thread lost llama-embedding's report ten runs in a
/// row.
pub fn run(cmd: &mut Command) -> String {
    static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());
    let _turn = ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    let out = cmd
        .env("LLAMA_ARG_REPACK", "0")
        .env("OMP_WAIT_POLICY", "passive")
        .output()
        .expect("start the command");
    let text = format!(
        "{}\n{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.status.success(), "{cmd:?} failed:\n{text}");
    text
}

/// Runs a llama.cpp tool until its report holds `marker` (at most ten times). Its log goes
/// through a worker thread that the process never joins (`common_log_main()` is leaked), so a
/// fast run (a tiny model) can exit with status 0 before the last lines are written: on this
/// 2-core machine under load, half of the runs of a synthetic model lost them.
pub fn run_llama(cmd: &mut Command, marker: &str) -> String {
    run_llama_until(cmd, marker, |report| report.contains(marker))
}

/// Runs a llama.cpp tool until `accept` takes its report (at most ten times), for reports whose
/// loss is not a missing line: the log thread has also been seen to garble a long report (a
/// number written twice in llama-embedding's JSON, on a CI run).
///
/// The tool runs with [`linger`] preloaded when it could be built: its log thread then has
/// time to write the report before the process ends (a busy second process on this 2-core
/// machine otherwise cut llama-embedding's JSON of 66 vectors in 10 runs of 10).
pub fn run_llama_until(cmd: &mut Command, what: &str, accept: impl Fn(&str) -> bool) -> String {
    if let Some(lib) = linger() {
        cmd.env("LD_PRELOAD", lib);
    }
    let mut report = run(cmd);
    for _ in 0..9 {
        if accept(&report) {
            return report;
        }
        report = run(cmd);
    }
    assert!(
        accept(&report),
        "{cmd:?}: no {what} in ten runs, the last:\n{report}"
    );
    report
}

/// The number after `label` in `text`.
pub fn number_after(text: &str, label: &str) -> f64 {
    let at = text
        .find(label)
        .unwrap_or_else(|| panic!("no {label:?} in:\n{text}"));
    let rest = text[at + label.len()..].trim_start();
    let end = rest
        .find(|c: char| !(c.is_ascii_digit() || c == '.' || c == '-'))
        .unwrap_or(rest.len());
    rest[..end]
        .parse()
        .unwrap_or_else(|_| panic!("no number after {label:?} in:\n{text}"))
}

/// The model and the CI test size (chunks of [`N_CTX`] tokens, [`CHUNKS`] of them, 2 threads).
pub fn test_size(cmd: &mut Command, model: &Path) {
    cmd.arg("-m")
        .arg(model)
        .args(["-c", N_CTX, "--chunks", CHUNKS, "-t", "2"]);
}

/// A shared library whose destructor waits 300 ms when the process exits, built once with the
/// C compiler (`cc`) into the temporary directory (`local-llm-linger.so`, kept for later runs);
/// `None` without a compiler. Preloaded into a llama.cpp tool, it lets the tool's log thread,
/// which the process never joins, write the report's last lines before the process ends. It
/// changes nothing else: the tool's computation is over.
fn linger() -> Option<&'static Path> {
    static LIB: std::sync::OnceLock<Option<PathBuf>> = std::sync::OnceLock::new();
    LIB.get_or_init(|| {
        let lib = std::env::temp_dir().join("local-llm-linger.so");
        if lib.is_file() {
            return Some(lib);
        }
        // Built beside it under this process's name, then renamed: parallel test binaries
        // never see half a library.
        let tmp = std::env::temp_dir().join(format!("local-llm-linger-{}", std::process::id()));
        std::fs::create_dir_all(&tmp).ok()?;
        let (src, built) = (tmp.join("linger.c"), tmp.join("linger.so"));
        let code = "#include <unistd.h>\n\
                    __attribute__((destructor)) static void linger(void) { usleep(300000); }\n";
        let ok = std::fs::write(&src, code).is_ok()
            && Command::new("cc")
                .args(["-shared", "-fPIC", "-o"])
                .arg(&built)
                .arg(&src)
                .status()
                .is_ok_and(|s| s.success())
            && std::fs::rename(&built, &lib).is_ok();
        let _ = std::fs::remove_dir_all(&tmp);
        ok.then_some(lib)
    })
    .as_deref()
}
