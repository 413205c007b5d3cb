//! Fuzz target: the GGUF reader on arbitrary bytes, then everything that reads a parsed file
//! (metadata listing, tensor data, model hyper-parameters, tokenizer, weights, memory estimate).
//! Any outcome but a typed error or a value is a bug: a panic, an abort, or an allocation over
//! libFuzzer's `-rss_limit_mb` / `-malloc_limit_mb`.
#![no_main]

use std::sync::Arc;

use libfuzzer_sys::fuzz_target;
use local_llm_engine::backend::Registry;
use local_llm_engine::gguf::GgufFile;
use local_llm_engine::model::{Model, ModelConfig};
use local_llm_engine::session::MemoryEstimate;
use local_llm_engine::tokenizer::Tokenizer;

fuzz_target!(|data: &[u8]| {
    let Ok(file) = GgufFile::from_bytes(data.to_vec()) else {
        return;
    };
    for (_, value) in file.metadata() {
        let _ = value.display_short();
        // Arrays were validated at open: every element decodes.
        if let Some(array) = value.as_array() {
            assert_eq!(array.iter().count(), array.len());
        }
    }
    for t in file.tensors() {
        assert_eq!(file.tensor_data(t).len() as u64, t.n_bytes);
    }
    let _ = ModelConfig::from_gguf(&file);
    let _ = MemoryEstimate::for_file(&file, 0);
    if let Ok(tokenizer) = Tokenizer::from_gguf(&file) {
        if let Ok(ids) = tokenizer.encode("Hello world <s>", true, true) {
            let _ = tokenizer.decode(&ids, true);
        }
    }
    let _ = Model::from_gguf(&Arc::new(file), &Registry::with_accelerators(Vec::new()));
});
