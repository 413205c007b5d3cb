//! `--lora FNAME[,FNAME...]` and `--lora-scaled FNAME:SCALE[,...]` (llama.cpp's flags).

use std::sync::Arc;

use clap::Args;
use local_llm_engine::model::{ActiveLora, LoraAdapter};
use local_llm_engine::session::LoadedModel;
use local_llm_engine::{Error, Result};

/// LoRA adapters to apply.
#[derive(Args, Clone, Default)]
pub struct LoraArgs {
    /// LoRA adapter (GGUF) applied with scale 1; comma-separated or repeated for several.
    #[arg(long = "lora", value_name = "FNAME")]
    lora: Vec<String>,
    /// LoRA adapter with a scale, FNAME:SCALE; comma-separated or repeated for several.
    #[arg(long = "lora-scaled", value_name = "FNAME:SCALE")]
    lora_scaled: Vec<String>,
}

impl LoraArgs {
    /// The adapters, loaded for `model`, in the order given (`--lora` first).
    pub fn load(&self, model: &LoadedModel) -> Result<Vec<ActiveLora>> {
        let mut out = Vec::new();
        let plain = self.lora.iter().flat_map(|v| v.split(','));
        for path in plain.filter(|p| !p.is_empty()) {
            out.push((path.to_string(), 1.0));
        }
        for item in self.lora_scaled.iter().flat_map(|v| v.split(',')) {
            let bad =
                || Error::InvalidOption(format!("--lora-scaled takes FNAME:SCALE, got {item:?}"));
            let (path, scale) = item.rsplit_once(':').ok_or_else(bad)?;
            let scale: f32 = scale.trim().parse().map_err(|_| bad())?;
            out.push((path.to_string(), scale));
        }
        out.into_iter()
            .map(|(path, scale)| {
                let adapter = LoraAdapter::load(&path, model.model().config())?;
                eprintln!(
                    "LoRA adapter {path}: {} tensors, alpha {}, scale {scale}",
                    adapter.n_tensors(),
                    adapter.alpha()
                );
                Ok(ActiveLora {
                    adapter: Arc::new(adapter),
                    scale,
                })
            })
            .collect()
    }
}
