//! `local-llm quantize IN OUT TYPE [NTHREADS]`: llama-quantize's arguments, a file the PyPI
//! `gguf` reader accepts, and clean failures for bad arguments.

#[path = "../../engine/tests/common/mod.rs"]
mod common;

use std::path::Path;
use std::process::{Command, Output};

fn local_llm(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_local-llm"))
        .args(args)
        .output()
        .expect("run local-llm")
}

/// `general.file_type` and the tensor types of a GGUF, as the gguf package reads them.
fn gguf_py_summary(path: &Path, dir: &Path) -> String {
    let script = dir.join("summary.py");
    std::fs::write(
        &script,
        "import sys, gguf\n\
         r = gguf.GGUFReader(sys.argv[1])\n\
         ft = r.fields['general.file_type']\n\
         print(int(ft.parts[ft.data[0]][0]), sorted({t.tensor_type.name for t in r.tensors}))\n",
    )
    .unwrap();
    common::run_python(&script, &[path]).trim().to_string()
}

#[test]
fn quantize_writes_a_model_and_rejects_bad_arguments() {
    let dir = std::env::temp_dir().join(format!("local-llm-cli-quantize-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let src = common::synth_model("mistral-f32");
    let src = src.to_str().unwrap();
    let q8 = dir.join("q8.gguf");
    let out = local_llm(&["quantize", src, q8.to_str().unwrap(), "q8_0", "1"]);
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    assert!(
        stderr.contains("Q8_0") && stderr.contains("MiB"),
        "{stderr}"
    );
    // llama_ftype MOSTLY_Q8_0 is 7; norms stay F32.
    let summary = gguf_py_summary(&q8, &dir);
    assert!(
        summary.starts_with("7 ") && summary.contains("'F32'"),
        "{summary}"
    );

    let q4 = dir.join("q4.gguf");
    let q4s = q4.to_str().unwrap();
    let again = local_llm(&["quantize", q8.to_str().unwrap(), q4s, "Q4_0"]);
    assert!(!again.status.success());
    assert!(String::from_utf8_lossy(&again.stderr).contains("already Q8_0"));
    let q8s = q8.to_str().unwrap();
    let allowed = local_llm(&["quantize", "--allow-requantize", q8s, q4s, "Q4_0"]);
    assert!(
        allowed.status.success(),
        "{}",
        String::from_utf8_lossy(&allowed.stderr)
    );
    assert!(gguf_py_summary(&q4, &dir).starts_with("2 "));

    // llama_ftype MOSTLY_IQ4_XS is 30; rows of 64 and 128 fall back to IQ4_NL.
    let xs = dir.join("iq4xs.gguf");
    let out = local_llm(&["quantize", src, xs.to_str().unwrap(), "iq4_xs"]);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let summary = gguf_py_summary(&xs, &dir);
    assert!(
        summary.starts_with("30 ") && summary.contains("'IQ4_NL'"),
        "{summary}"
    );

    for (args, expected) in [
        (
            vec!["quantize", src, q4s, "IQ2_XXS"],
            "unknown quantization type",
        ),
        (
            vec!["quantize", "/nonexistent.gguf", q4s, "Q4_0"],
            "cannot read",
        ),
        (vec!["quantize", src, q4s], "TYPE"),
    ] {
        let out = local_llm(&args);
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert!(!out.status.success(), "{args:?}");
        assert!(stderr.contains(expected), "{args:?}: {stderr}");
        assert!(!stderr.contains("panicked"), "{args:?}: {stderr}");
    }
}
