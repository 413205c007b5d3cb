//! The quantizer's contract without llama.cpp: a quantized real model loads in the engine and
//! answers sensibly, the PyPI `gguf` reader (an independent parser) reads the output, and bad
//! input gives typed errors (never a panic, never a partial file left behind).

mod common;

use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;

use local_llm_engine::convert::{convert_file, quantize_file, FileType, QuantizeOptions};
use local_llm_engine::quant::GgmlType;
use local_llm_engine::sampling::SamplingParams;
use local_llm_engine::session::{
    Context, ContextOptions, GenerateRequest, LoadOptions, LoadedModel, Prompt,
};
use local_llm_engine::Error;

fn scratch(name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("local-llm-qcontract-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}

/// Whether `path` or any temporary sibling named after it (`.name.*.partial`) exists.
fn leftovers(path: &std::path::Path) -> bool {
    let name = path.file_name().unwrap().to_string_lossy().into_owned();
    path.exists()
        || std::fs::read_dir(path.parent().unwrap())
            .unwrap()
            .any(|e| e.unwrap().file_name().to_string_lossy().contains(&name))
}

#[test]
fn quantized_smollm2_loads_answers_and_reads_in_gguf_py() {
    let Some(src) = common::real_model("smollm2") else {
        return;
    };
    let f16 = scratch("smol-f16.gguf");
    convert_file(&src, &f16, GgmlType::F16, &QuantizeOptions::default()).unwrap();
    let out = scratch("smol-q4km.gguf");
    let report = quantize_file(&f16, &out, FileType::Q4_K_M, &QuantizeOptions::default()).unwrap();
    assert!(report.output_bytes < report.input_bytes / 2, "{report:?}");

    let model = LoadedModel::load(&out, &LoadOptions::default()).unwrap();
    let mut ctx = Context::new(model, &ContextOptions::default()).unwrap();
    let mut request = GenerateRequest::new(Prompt::Text("The capital of France is".into()));
    request.sampling = SamplingParams::greedy();
    request.max_tokens = 8;
    let text = ctx.generate(&request, &mut |_| {}, None).unwrap().text;
    assert!(text.contains("Paris"), "{text:?}");

    // The gguf package parses every tensor and reports the file type we set.
    let script = scratch("read.py");
    std::fs::write(
        &script,
        "import sys, gguf\n\
         r = gguf.GGUFReader(sys.argv[1])\n\
         ft = r.fields['general.file_type']\n\
         print(len(r.tensors), int(ft.parts[ft.data[0]][0]))\n",
    )
    .unwrap();
    let printed = common::run_python(&script, &[&out]);
    assert_eq!(printed.trim(), format!("{} 15", report.tensors.len()));
}

#[test]
fn bad_inputs_are_typed_errors_and_leave_nothing_behind() {
    let options = QuantizeOptions::default();
    let out = scratch("bad-out.gguf");

    let missing = quantize_file(scratch("missing.gguf"), &out, FileType::Q8_0, &options);
    assert!(matches!(missing, Err(Error::Io { .. })), "{missing:?}");

    let garbage = scratch("garbage.gguf");
    std::fs::write(&garbage, b"GGUF\x03\0\0\0 not really").unwrap();
    let corrupt = quantize_file(&garbage, &out, FileType::Q8_0, &options);
    assert!(matches!(corrupt, Err(Error::Gguf(_))), "{corrupt:?}");

    let bad_ty = convert_file(&garbage, &out, GgmlType::Q4_0, &options);
    assert!(matches!(bad_ty, Err(Error::InvalidOption(_))), "{bad_ty:?}");
    assert!(!leftovers(&out));

    if let Some(q41) = common::real_model("smollm2") {
        let again = quantize_file(&q41, &out, FileType::Q8_0, &options);
        assert!(matches!(again, Err(Error::Quantize(_))), "{again:?}");
        assert!(!leftovers(&out));
    }
}

#[test]
fn synthetic_models_quantize_load_and_cancel() {
    let src = common::synth_model("mistral-f32");
    let out = scratch("synth-q8.gguf");
    let report = quantize_file(&src, &out, FileType::Q8_0, &QuantizeOptions::default()).unwrap();
    assert!(report
        .tensors
        .iter()
        .any(|(_, t)| *t == GgmlType::Q8_0 || *t == GgmlType::F16));
    LoadedModel::load(&out, &LoadOptions::default()).unwrap();

    let cancelled = QuantizeOptions {
        cancel: Some(Arc::new(AtomicBool::new(true))),
        ..QuantizeOptions::default()
    };
    let out2 = scratch("synth-cancelled.gguf");
    let r = quantize_file(&src, &out2, FileType::Q4_K_M, &cancelled);
    assert!(matches!(r, Err(Error::Cancelled)), "{r:?}");
    assert!(!leftovers(&out2));

    // Requantizing needs the explicit option.
    let again = scratch("synth-requant.gguf");
    assert!(matches!(
        quantize_file(&out, &again, FileType::Q4_0, &QuantizeOptions::default()),
        Err(Error::Quantize(_))
    ));
    let requant = QuantizeOptions {
        allow_requantize: true,
        ..QuantizeOptions::default()
    };
    quantize_file(&out, &again, FileType::Q4_0, &requant).unwrap();
    LoadedModel::load(&again, &LoadOptions::default()).unwrap();
}
