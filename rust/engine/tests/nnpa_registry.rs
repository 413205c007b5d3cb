//! Registry rules for the NNPA: without libzdnn only the CPU is listed; `LOCAL_LLM_NNPA_EMULATE=1`
//! adds the emulated NNPA and weights are placed on it; a failing NNPA falls back to the CPU with
//! output identical to a CPU-only model.

mod common;

use std::sync::Arc;

use local_llm_engine::backend::nnpa::{self, EmulatorOptions, InjectedFailure};
use local_llm_engine::backend::{DeviceKind, Registry, Threads};
use local_llm_engine::model::Output;
use local_llm_engine::session::{LoadOptions, LoadedModel};

fn names(registry: &Registry) -> Vec<String> {
    registry.devices().into_iter().map(|d| d.name).collect()
}

/// Environment changes are process-wide: everything that touches them is in this one test.
#[test]
fn detection_follows_the_environment() {
    std::env::remove_var(nnpa::EMULATE_ENV);
    // A real NNPA only exists on s390x with libzdnn and the hardware; anywhere else (x86-64,
    // aarch64, s390x under qemu with or without the library) the CPU is alone.
    let real_nnpa = zdnn_sys::Zdnn::load().is_ok_and(|z| z.nnpa_installed());
    if !real_nnpa {
        assert_eq!(names(&Registry::detect()), ["CPU"]);
    }
    std::env::set_var(nnpa::EMULATE_ENV, "0");
    assert_eq!(
        names(&Registry::detect()).last().map(String::as_str),
        Some("CPU")
    );
    assert!(!names(&Registry::detect()).contains(&"NNPA (emulated)".to_string()));

    if real_nnpa {
        // The real device takes precedence over the emulator.
        std::env::set_var(nnpa::EMULATE_ENV, "1");
        assert_eq!(names(&Registry::detect()), ["NNPA", "CPU"]);
        std::env::remove_var(nnpa::EMULATE_ENV);
        return;
    }
    std::env::set_var(nnpa::EMULATE_ENV, "1");
    let devices = Registry::detect().devices();
    std::env::remove_var(nnpa::EMULATE_ENV);
    let emulated = devices
        .iter()
        .find(|d| d.name == "NNPA (emulated)")
        .expect("emulated NNPA listed");
    assert_eq!(emulated.kind, DeviceKind::Accelerator);
    assert!(emulated
        .description
        .starts_with("IBM Z Neural Network Processing Assist (NNPA)"));
    for f in [
        "NNPA",
        "NNPA_PARMBLKFORMAT_0",
        "NNPA_PARMBLKFORMAT_1",
        "max_dim_idx_size=32768",
    ] {
        assert!(
            emulated.features.iter().any(|x| x == f),
            "{f}: {:?}",
            emulated.features
        );
    }
    assert_eq!(devices.last().map(|d| d.name.as_str()), Some("CPU"));
}

fn load(kind: &str, registry: Registry) -> Arc<LoadedModel> {
    LoadedModel::load_on(
        common::synth_model(kind),
        &LoadOptions::default(),
        &registry,
    )
    .unwrap()
}

fn logits(model: &LoadedModel, tokens: &[u32]) -> Vec<f32> {
    let threads = Threads::new(2).unwrap();
    let mut cache = model.model().new_cache(64, Default::default()).unwrap();
    model
        .model()
        .forward(tokens, &mut cache, &threads, Output::AllLogits)
        .unwrap()
}

#[test]
fn weights_are_placed_on_the_emulated_nnpa() {
    // mistral-f32: every weight is F32, so every matmul is eligible without the quantized option.
    let model = load(
        "mistral-f32",
        Registry::with_accelerators(vec![nnpa::emulated_device(EmulatorOptions::default())]),
    );
    let placement = model.model().placement();
    let n_layer = model.model().config().n_layer;
    assert_eq!(
        placement.get("NNPA (emulated)"),
        Some(&(7 * n_layer + 1)),
        "{placement:?}"
    );
    assert_eq!(placement.get("CPU"), None, "{placement:?}");

    // llama-bpe mixes BF16/F16 (eligible) with Q8_0/Q4_1 (quantized: CPU by default).
    let mixed = load(
        "llama-bpe",
        Registry::with_accelerators(vec![nnpa::emulated_device(EmulatorOptions::default())]),
    );
    let placement = mixed.model().placement();
    assert!(
        placement.get("NNPA (emulated)").is_some_and(|&n| n > 0),
        "{placement:?}"
    );
    assert!(
        placement.get("CPU").is_some_and(|&n| n > 0),
        "{placement:?}"
    );
    let all = load(
        "llama-bpe",
        Registry::with_accelerators(vec![nnpa::emulated_device(EmulatorOptions {
            offload_quantized: true,
            ..EmulatorOptions::default()
        })]),
    );
    let placement = all.model().placement();
    assert_eq!(placement.get("CPU"), None, "{placement:?}");

    // The emulated model's logits stay close to the CPU's.
    let cpu = load("mistral-f32", Registry::with_accelerators(Vec::new()));
    let tokens = [1u32, 5, 9, 20, 3];
    let (a, b) = (logits(&model, &tokens), logits(&cpu, &tokens));
    let max_err = a
        .iter()
        .zip(&b)
        .map(|(x, y)| (x - y).abs())
        .fold(0.0f32, f32::max);
    let scale = b.iter().map(|v| v.abs()).fold(0.0f32, f32::max);
    assert!(
        max_err > 0.0 && max_err < 0.05 * scale,
        "max error {max_err} vs logit scale {scale}"
    );
}

#[test]
fn a_failing_nnpa_gives_exactly_the_cpu_output() {
    let failing = nnpa::emulated_device(EmulatorOptions {
        offload_quantized: true,
        failure: Some(InjectedFailure::Matmul(
            zdnn_sys::ZDNN_UNSUPPORTED_AIU_EXCEPTION,
        )),
        ..EmulatorOptions::default()
    });
    let model = load("llama-spm", Registry::with_accelerators(vec![failing]));
    assert_eq!(model.model().placement().get("CPU"), None);
    let cpu = load("llama-spm", Registry::with_accelerators(Vec::new()));
    let tokens = [1u32, 7, 8, 30, 2, 11];
    assert_eq!(logits(&model, &tokens), logits(&cpu, &tokens));
}
