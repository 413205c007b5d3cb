//! Fuzz target: the session-file (saved KV state) reader on arbitrary bytes, restoring into a
//! context of the tiny one-layer llama model of the `gguf` corpus. Input: one flag byte, then
//! the file. Flag bit 0 writes this model's fingerprint into the header and bit 1 a correct
//! CRC-32 trailer, so the fuzzer also reaches the reading that follows those checks. The
//! reader must return the restored tokens (no more than the context holds, each in the
//! vocabulary) or a typed error; a panic, an abort or an oversized allocation is a bug.
#![no_main]

use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock};

use libfuzzer_sys::fuzz_target;
use local_llm_engine::session::{Context, ContextOptions, LoadOptions, LoadedModel};

/// Header offset of the model fingerprint (after the 8-byte magic and the 4-byte version).
const FINGERPRINT_AT: usize = 12;

struct Harness {
    context: Context,
    fingerprint: [u8; 8],
    n_vocab: usize,
    file: PathBuf,
}

fn harness() -> &'static Mutex<Harness> {
    static H: OnceLock<Mutex<Harness>> = OnceLock::new();
    H.get_or_init(|| {
        let dir = std::env::temp_dir().join(format!("local-llm-fuzz-state-{}", std::process::id()));
        std::fs::create_dir_all(&dir).expect("temporary folder");
        let model_path = dir.join("tiny.gguf");
        std::fs::write(
            &model_path,
            include_bytes!("../corpus/gguf/tiny-llama-bpe.gguf"),
        )
        .expect("write the tiny model");
        let model: Arc<LoadedModel> =
            LoadedModel::load(&model_path, &LoadOptions::default()).expect("tiny model loads");
        let options = ContextOptions {
            n_ctx: 32,
            threads: 1,
            ..ContextOptions::default()
        };
        let context = Context::new(model.clone(), &options).expect("context");
        // The fingerprint as the engine writes it: from a saved empty state.
        let file = dir.join("state.bin");
        context.save_state(&file).expect("save an empty state");
        let saved = std::fs::read(&file).expect("read it back");
        let fingerprint = saved[FINGERPRINT_AT..FINGERPRINT_AT + 8]
            .try_into()
            .unwrap();
        let n_vocab = model.model().config().n_vocab;
        Mutex::new(Harness {
            context,
            fingerprint,
            n_vocab,
            file,
        })
    })
}

fuzz_target!(|data: &[u8]| {
    let Some((&flags, rest)) = data.split_first() else {
        return;
    };
    let mut h = harness().lock().unwrap();
    let mut bytes = rest.to_vec();
    if flags & 1 != 0 && bytes.len() >= FINGERPRINT_AT + 8 {
        bytes[FINGERPRINT_AT..FINGERPRINT_AT + 8].copy_from_slice(&h.fingerprint);
    }
    if flags & 2 != 0 && bytes.len() >= 4 {
        let body = bytes.len() - 4;
        let crc = crc32fast::hash(&bytes[..body]);
        bytes[body..].copy_from_slice(&crc.to_le_bytes());
    }
    std::fs::write(&h.file, &bytes).expect("write the input");
    let file = h.file.clone();
    if let Ok(tokens) = h.context.load_state(&file) {
        assert!(tokens.len() <= h.context.n_ctx());
        assert!(tokens.iter().all(|&t| (t as usize) < h.n_vocab));
    }
});
