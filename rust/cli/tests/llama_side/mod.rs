//! llama.cpp's side of a comparison within its own floor (`weight_formats.rs`,
//! `architectures.rs`): use with `mod common;`, `mod support;` and `mod llama_side;`.

use std::path::{Path, PathBuf};
use std::process::Command;

use crate::support::{run_llama, test_size, CHUNKS, N_CTX};

/// llama.cpp's side for `model`: the native build's logits file (`--kl-divergence-base`) and
/// report, and the AVX2 build's report scoring the same model against that file (the floor).
/// Both runs get `extra` arguments too (e.g. `-fa off`). They depend only on the pinned builds,
/// the model, the text and those arguments, so they are cached beside the model (remade when
/// the model is newer): the test then runs only `local-llm`.
pub fn llama_cpp_side(
    model: &Path,
    [native, avx2, text]: [&Path; 3],
    extra: &[&str],
) -> (PathBuf, String, String) {
    let stem = format!("{}.c{N_CTX}x{CHUNKS}{}", model.display(), extra.concat());
    let [base, native_report, floor_report] = ["logits.bin", "native.txt", "avx2-kld.txt"]
        .map(|ext| PathBuf::from(format!("{stem}.{ext}")));
    let modified = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    // Written last, so its being newer than the model means the other two are there too.
    if modified(&floor_report) < modified(model) {
        let tmp = |p: &Path| PathBuf::from(format!("{}.{}.tmp", p.display(), std::process::id()));
        let mut cmd = Command::new(native);
        test_size(&mut cmd, model);
        cmd.args(extra)
            .arg("-f")
            .arg(text)
            .arg("--kl-divergence-base")
            .arg(tmp(&base));
        let report = run_llama(&mut cmd, "Final estimate: PPL =");
        std::fs::write(tmp(&native_report), report).expect("write the report");
        let mut cmd = Command::new(avx2);
        test_size(&mut cmd, model);
        cmd.args(extra)
            .arg("--kl-divergence")
            .arg("--kl-divergence-base")
            .arg(tmp(&base));
        let report = run_llama(&mut cmd, "Same top p:");
        std::fs::write(tmp(&floor_report), report).expect("write the report");
        for file in [&base, &native_report, &floor_report] {
            std::fs::rename(tmp(file), file).expect("rename into the cache");
        }
    }
    let read = |p: &Path| std::fs::read_to_string(p).expect("read the cached report");
    (base.clone(), read(&native_report), read(&floor_report))
}
