//! LoRA adapters in a context: switching sets empties the cache, a session file remembers the
//! adapters it was saved with, bad scales and files are errors. (The adapted model itself is
//! compared with llama.cpp's in rust/cli/tests/perplexity.rs.)

mod common;

use std::sync::Arc;

use local_llm_engine::model::{ActiveLora, LoraAdapter, Output};
use local_llm_engine::session::{Context, ContextOptions, LoadOptions, LoadedModel};
use local_llm_engine::Error;

/// A test's temporary folder, removed when dropped (when the test fails too).
struct TempDir(std::path::PathBuf);

impl TempDir {
    fn new(test: &str) -> Self {
        let dir = std::env::temp_dir().join(format!(
            "local-llm-lora-engine-{test}-{}",
            std::process::id()
        ));
        std::fs::create_dir_all(&dir).unwrap();
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn adapter_for(
    dir: &TempDir,
    model: &std::path::Path,
    name: &str,
    seed: &str,
) -> std::path::PathBuf {
    let out = dir.0.join(name);
    let script = common::repo_root().join("tools/synth/make_lora.py");
    common::run_python(
        &script,
        &[
            model.to_str().unwrap(),
            out.to_str().unwrap(),
            "--seed",
            seed,
            "--type",
            "f16",
        ],
    );
    out
}

#[test]
fn adapter_sets_switch_cleanly_and_session_files_remember_them() {
    let Some(path) = common::real_model("smollm2") else {
        return;
    };
    let model = LoadedModel::load(&path, &LoadOptions::default()).unwrap();
    let config = model.model().config().clone();
    let dir = TempDir::new("sets");
    let (first, second) = (
        adapter_for(&dir, &path, "a.gguf", "1"),
        adapter_for(&dir, &path, "b.gguf", "2"),
    );
    let load = |p: &std::path::Path, scale| ActiveLora {
        adapter: Arc::new(LoraAdapter::load(p, &config).unwrap()),
        scale,
    };
    let options = ContextOptions {
        n_ctx: 128,
        threads: 1,
        ..ContextOptions::default()
    };
    let mut ctx = Context::new(model.clone(), &options).unwrap();
    let tokens = model
        .tokenize("The capital of France is", true, true)
        .unwrap();
    let plain = ctx
        .eval(&tokens, Output::LastLogits, &mut |_, _| {}, None)
        .unwrap();

    ctx.set_lora(vec![load(&first, 1.0)]).unwrap();
    let adapted = ctx
        .eval(&tokens, Output::LastLogits, &mut |_, _| {}, None)
        .unwrap();
    assert_ne!(plain, adapted);
    // The same set again keeps the cache; another set (or scale) empties it.
    let again = ctx.lora().to_vec();
    ctx.set_lora(again).unwrap();
    let file = dir.0.join("state.bin");
    assert_eq!(ctx.save_state(&file).unwrap(), tokens.len());

    // The file loads where the same adapter (loaded again: same contents) is applied ...
    let mut same = Context::new(model.clone(), &options).unwrap();
    same.set_lora(vec![load(&first, 1.0)]).unwrap();
    assert_eq!(same.load_state(&file).unwrap(), tokens);
    // ... and not without it, with another adapter or another scale.
    for set in [vec![], vec![load(&second, 1.0)], vec![load(&first, 0.5)]] {
        let mut other = Context::new(model.clone(), &options).unwrap();
        other.set_lora(set).unwrap();
        match other.load_state(&file) {
            Err(Error::SessionFile(m)) => assert!(m.contains("LoRA"), "{m}"),
            r => panic!("expected a session-file error, got {r:?}"),
        }
    }

    ctx.set_lora(vec![load(&first, 0.5)]).unwrap();
    let scaled = ctx
        .eval(&tokens, Output::LastLogits, &mut |_, _| {}, None)
        .unwrap();
    assert_ne!(
        scaled, adapted,
        "a new scale empties the cache and changes the output"
    );
    ctx.set_lora(Vec::new()).unwrap();
    let back = ctx
        .eval(&tokens, Output::LastLogits, &mut |_, _| {}, None)
        .unwrap();
    assert_eq!(
        back, plain,
        "removing the adapters gives the plain model back, bit for bit"
    );
    assert!(matches!(
        ctx.set_lora(vec![load(&first, f32::NAN)]),
        Err(Error::InvalidOption(_))
    ));
}

/// The adapted products split over 1 or 2 threads give the same bits, when decoding one token
/// at a time and for a whole prompt, with F16 and f32 adapter values.
#[test]
fn adapted_logits_do_not_depend_on_the_thread_count() {
    let Some(path) = common::real_model("smollm2") else {
        return;
    };
    let model = LoadedModel::load(&path, &LoadOptions::default()).unwrap();
    let config = model.model().config().clone();
    let tokens = model
        .tokenize("A short prompt, then one token at a time.", true, true)
        .unwrap();
    let dir = TempDir::new("threads");
    for ty in ["f16", "f32"] {
        let file = adapter_for(&dir, &path, &format!("threads-{ty}.gguf"), "3");
        let file = if ty == "f16" {
            file
        } else {
            let out = file.with_file_name("threads-f32-values.gguf");
            let script = common::repo_root().join("tools/synth/make_lora.py");
            let args = [path.to_str().unwrap(), out.to_str().unwrap(), "--seed", "3"];
            common::run_python(&script, &args);
            out
        };
        let adapter = Arc::new(LoraAdapter::load(&file, &config).unwrap());
        let run = |threads: u32| {
            let options = ContextOptions {
                n_ctx: 128,
                threads,
                ..ContextOptions::default()
            };
            let mut ctx = Context::new(model.clone(), &options).unwrap();
            ctx.set_lora(vec![ActiveLora {
                adapter: adapter.clone(),
                scale: 0.7,
            }])
            .unwrap();
            let prompt = ctx
                .eval(&tokens, Output::AllLogits, &mut |_, _| {}, None)
                .unwrap();
            let mut steps = Vec::new();
            for &t in &tokens[..6] {
                steps.extend(
                    ctx.eval(&[t], Output::LastLogits, &mut |_, _| {}, None)
                        .unwrap(),
                );
            }
            (prompt, steps)
        };
        let (one, two) = (run(1), run(2));
        let bits = |v: &[f32]| v.iter().map(|x| x.to_bits()).collect::<Vec<_>>();
        assert!(bits(&one.0) == bits(&two.0), "{ty}: prompt logits differ");
        assert!(bits(&one.1) == bits(&two.1), "{ty}: decoding logits differ");
    }
}
