//! Context state saved to a file and restored: generating after the round trip equals
//! generating without it, token for token (both models); a file of another model, a flipped
//! byte or a truncated file is a typed error that leaves the context as it was.

mod common;

use std::path::{Path, PathBuf};
use std::sync::Arc;

use local_llm_engine::sampling::SamplingParams;
use local_llm_engine::session::{
    Context, ContextOptions, GenerateRequest, Generation, LoadOptions, LoadedModel, Prompt,
};
use local_llm_engine::Error;

fn temp_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("local-llm-state-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

fn context(model: &Arc<LoadedModel>, n_ctx: u32) -> Context {
    cached_as(model, n_ctx, "f16")
}

/// A context whose KV cache stores keys and values as `cache_type`.
fn cached_as(model: &Arc<LoadedModel>, n_ctx: u32, cache_type: &str) -> Context {
    let options = ContextOptions {
        n_ctx,
        threads: 2,
        cache_type_k: cache_type.into(),
        cache_type_v: cache_type.into(),
        ..ContextOptions::default()
    };
    Context::new(model.clone(), &options).unwrap()
}

fn sampled(prompt: Vec<u32>, max_tokens: usize) -> GenerateRequest {
    let mut r = GenerateRequest::new(Prompt::Tokens(prompt));
    r.sampling = SamplingParams {
        temperature: 0.8,
        seed: Some(11),
        ..SamplingParams::default()
    };
    r.max_tokens = max_tokens;
    r.stop_at_eog = false;
    r
}

fn generate(ctx: &mut Context, request: &GenerateRequest) -> Generation {
    ctx.generate(request, &mut |_| {}, None).unwrap()
}

/// Save after a first generation, then continue in the same context and in a fresh one that
/// restored the file: the same tokens. Returns the file and the first prompt's tokens.
fn round_trip(name: &str, dir: &Path) -> Option<(Arc<LoadedModel>, PathBuf, Vec<u32>)> {
    round_trip_as(name, dir, "f16")
}

/// [`round_trip`] with the KV cache stored as `cache_type`.
fn round_trip_as(
    name: &str,
    dir: &Path,
    cache_type: &str,
) -> Option<(Arc<LoadedModel>, PathBuf, Vec<u32>)> {
    let path = common::real_model(name)?;
    let model = LoadedModel::load(&path, &LoadOptions::default()).unwrap();
    let first = model
        .tokenize(
            "A short story about a robot who learns to paint:",
            true,
            false,
        )
        .unwrap();
    let mut direct = cached_as(&model, 256, cache_type);
    let g1 = generate(&mut direct, &sampled(first.clone(), 24));
    let file = dir.join(format!("{name}-{cache_type}.state"));
    let saved = direct.save_state(&file).unwrap();
    // The cache holds the prompt and every generated token but the last (not evaluated).
    assert_eq!(saved, first.len() + g1.tokens.len() - 1);
    let size = std::fs::metadata(&file).unwrap().len();
    println!("{name}: {saved} tokens saved in {size} bytes");

    let mut second = first.clone();
    second.extend(&g1.tokens);
    second.extend(model.tokenize(" Then", false, false).unwrap());
    let request = sampled(second.clone(), 32);
    let want = generate(&mut direct, &request);

    let mut restored = cached_as(&model, 256, cache_type);
    let tokens = restored.load_state(&file).unwrap();
    assert_eq!(tokens.len(), saved);
    assert_eq!(tokens[..], second[..saved]);
    let got = generate(&mut restored, &request);
    assert_eq!(
        got.tokens, want.tokens,
        "{name}: restored generation differs"
    );
    assert_eq!(got.text, want.text);
    // The restored tokens were not evaluated again.
    assert_eq!(got.timings.prompt_tokens, second.len() - saved);
    Some((model, file, first))
}

/// Every way a file can be wrong is a typed error, and the context still generates as a fresh
/// one does afterwards.
fn corrupt_files_are_typed_errors(model: &Arc<LoadedModel>, file: &Path, prompt: &[u32]) {
    let bytes = std::fs::read(file).unwrap();
    let dir = file.parent().unwrap();
    let bad = dir.join("bad.state");
    let mut ctx = context(model, 256);
    let baseline = generate(&mut context(model, 256), &sampled(prompt.to_vec(), 8)).tokens;
    let mut check = |contents: &[u8], what: &str| {
        std::fs::write(&bad, contents).unwrap();
        match ctx.load_state(&bad) {
            Err(Error::SessionFile(m)) => assert!(!m.is_empty()),
            other => panic!("{what}: expected a session file error, got {other:?}"),
        }
    };
    // A flipped bit in the magic, version, fingerprint, header, tokens, keys, values, checksum.
    let n = bytes.len();
    for at in [0, 9, 13, 25, 45, 50, 60, 1000, n / 2, n - 100, n - 1] {
        let mut b = bytes.clone();
        b[at] ^= 0x10;
        check(&b, &format!("flipped byte {at}"));
    }
    for len in [0, 7, 43, 44, 100, n / 3, n - 4, n - 1] {
        check(&bytes[..len], &format!("truncated to {len}"));
    }
    check(&[&bytes[..], b"x"].concat(), "a trailing byte");
    // A header claiming 2^31 tokens: refused before allocating anything.
    let mut b = bytes.clone();
    b[36..40].copy_from_slice(&(1u32 << 31).to_le_bytes());
    check(&b, "a huge token count");
    // The context was left as it was: generation equals a fresh context's.
    assert_eq!(
        generate(&mut ctx, &sampled(prompt.to_vec(), 8)).tokens,
        baseline
    );
    // A context too small for the saved tokens says so.
    let mut small = context(model, 16);
    assert!(matches!(
        small.load_state(file),
        Err(Error::ContextExhausted { .. })
    ));
    let _ = std::fs::remove_file(&bad);
}

#[test]
fn state_round_trip_and_corruption_smollm2() {
    let dir = temp_dir("smollm2");
    if let Some((model, file, prompt)) = round_trip("smollm2", &dir) {
        corrupt_files_are_typed_errors(&model, &file, &prompt);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn state_round_trip_and_corruption_gemma3() {
    let dir = temp_dir("gemma3");
    if let Some((model, file, prompt)) = round_trip("gemma3", &dir) {
        corrupt_files_are_typed_errors(&model, &file, &prompt);
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// A file saved with one model is refused by another (here with the same layout check
/// passing or not, the error is typed either way), and by a different quantization of the
/// same model would be too: the fingerprint covers the tensor table and data.
/// Quantized and other non-f16 caches round-trip exactly too (their bytes are saved as they
/// are), and a file refuses to load into a context caching another type, saying which.
#[test]
fn states_of_other_cache_types_round_trip_and_refuse_a_mismatch() {
    let dir = temp_dir("cache-types");
    for cache_type in ["q8_0", "bf16", "f32"] {
        let Some((model, file, _)) = round_trip_as("smollm2", &dir, cache_type) else {
            return;
        };
        let size = std::fs::metadata(&file).unwrap().len();
        for other in ["f16", "q8_0"].into_iter().filter(|&o| o != cache_type) {
            match cached_as(&model, 256, other).load_state(&file) {
                Err(Error::SessionFile(m)) => assert!(
                    m.contains(&format!("caches keys as {cache_type}"))
                        && m.contains(&format!("this context as {other}")),
                    "{m}"
                ),
                other => panic!("{cache_type} file into a context of another type: {other:?}"),
            }
        }
        println!("{cache_type}: {size} bytes");
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_state_of_another_model_is_refused() {
    let (Some(smol), Some(gemma)) = (common::real_model("smollm2"), common::real_model("gemma3"))
    else {
        return;
    };
    let dir = temp_dir("other");
    let smol = LoadedModel::load(&smol, &LoadOptions::default()).unwrap();
    let gemma = LoadedModel::load(&gemma, &LoadOptions::default()).unwrap();
    let file = dir.join("smol.state");
    let mut ctx = context(&smol, 64);
    let prompt = smol.tokenize("Hello there", true, false).unwrap();
    generate(&mut ctx, &sampled(prompt, 4));
    ctx.save_state(&file).unwrap();
    assert!(matches!(
        context(&gemma, 64).load_state(&file),
        Err(Error::SessionFile(_))
    ));
    // Same layout, other weights: a copy of the SmolLM2 file with one weight byte changed
    // past the fingerprinted data would pass, so change the fingerprinted start of a tensor.
    let copy = dir.join("smol-copy.gguf");
    let mut bytes = std::fs::read(smol.path()).unwrap();
    let t = &smol.gguf().tensors()[0];
    let at = (smol.gguf().data_offset() + t.offset) as usize;
    bytes[at] ^= 0x01;
    std::fs::write(&copy, &bytes).unwrap();
    let altered = LoadedModel::load(&copy, &LoadOptions::default()).unwrap();
    match context(&altered, 64).load_state(&file) {
        Err(Error::SessionFile(m)) => assert!(m.contains("another model"), "{m}"),
        other => panic!("expected a session file error, got {other:?}"),
    }
    let _ = std::fs::remove_dir_all(&dir);
}

/// `f` run on a thread: its result, or a panic if it takes longer than `secs` (a blocked
/// `open` of a FIFO would otherwise hang the test run).
fn within<T: Send + 'static>(secs: u64, f: impl FnOnce() -> T + Send + 'static) -> T {
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let _ = tx.send(f());
    });
    rx.recv_timeout(std::time::Duration::from_secs(secs))
        .expect("blocked: no answer within the time limit")
}

/// A FIFO, a directory or a device given as a session or model path is a typed error at once,
/// not a read that waits forever for a writer; a FIFO target of a save is left a FIFO.
#[test]
fn fifos_and_directories_are_refused_without_blocking() {
    let Some(path) = common::real_model("smollm2") else {
        return;
    };
    let model = LoadedModel::load(&path, &LoadOptions::default()).unwrap();
    let dir = temp_dir("fifo");
    let fifo = dir.join("session.fifo");
    let c = std::ffi::CString::new(fifo.to_str().unwrap()).unwrap();
    // SAFETY: a valid NUL-terminated path.
    assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0, "mkfifo");
    for target in [fifo.clone(), dir.clone(), PathBuf::from("/dev/zero")] {
        let (m, t) = (model.clone(), target.clone());
        let (loaded, saved) = within(10, move || {
            let mut ctx = context(&m, 64);
            (ctx.load_state(&t), ctx.save_state(&t))
        });
        let shown = target.display().to_string();
        match loaded {
            Err(Error::Io { path, source }) => {
                assert_eq!(path, shown);
                assert_eq!(source.kind(), std::io::ErrorKind::InvalidInput, "{source}");
            }
            other => panic!("load_state({shown}): {other:?}"),
        }
        match saved {
            Err(e @ Error::Write { .. }) => {
                assert!(e.to_string().starts_with("cannot write"), "{e}")
            }
            other => panic!("save_state({shown}): {other:?}"),
        }
        let t = target.clone();
        let opened = within(10, move || {
            let mapped = local_llm_engine::gguf::GgufFile::open_with(&t, true).map(|_| ());
            let read = local_llm_engine::gguf::GgufFile::open_with(&t, false).map(|_| ());
            (mapped, read)
        });
        for result in [opened.0, opened.1] {
            assert!(
                matches!(result, Err(Error::Io { .. })),
                "{shown}: {result:?}"
            );
        }
    }
    use std::os::unix::fs::FileTypeExt;
    assert!(std::fs::metadata(&fifo).unwrap().file_type().is_fifo());
    // Nothing but the FIFO was left in the directory.
    assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1);
    let _ = std::fs::remove_dir_all(&dir);
}
