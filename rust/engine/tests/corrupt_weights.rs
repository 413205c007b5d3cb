//! Well-formed models whose tensor data is corrupt (0xFF bytes, random bytes, NaN / infinite
//! blocks): generation gives text or a typed error, never token 0 forever. A NaN or infinite
//! logit is an `Error::InvalidModel` naming the non-finite value (0xFF and NaN / inf blocks
//! always; random bytes in practice too, as some block scales decode to NaN / inf); finite
//! garbage weights give finite, meaningless output. The weights' values only ever feed
//! arithmetic (block layouts and offsets come from the tensor table), so no byte pattern can
//! make a kernel read out of bounds.

mod common;

use std::path::{Path, PathBuf};

use local_llm_engine::gguf::GgufFile;
use local_llm_engine::sampling::SamplingParams;
use local_llm_engine::session::{
    Context, ContextOptions, GenerateRequest, Generation, LoadOptions, LoadedModel, Prompt,
};
use local_llm_engine::Error;

/// How to overwrite tensor data.
#[derive(Clone, Copy, Debug)]
enum Corruption {
    /// Every byte 0xFF (f16/bf16/f32 scales become NaN).
    AllFf,
    /// Every byte from a fixed pseudo-random sequence.
    Random(u64),
    /// F32 tensors only: every value pseudo-random in [-1, 1) (finite garbage).
    RandomFinite(u64),
    /// The first 4 bytes of every tensor: NaN in the tensor's float type (f32, or two f16 /
    /// bf16 halves: the scale of the first block of a quantized tensor).
    NanHead,
    /// The first 4 bytes of every tensor: +inf in the tensor's float type, likewise.
    InfHead,
}

fn xorshift(state: &mut u64) -> u64 {
    *state ^= *state << 13;
    *state ^= *state >> 7;
    *state ^= *state << 17;
    *state
}

/// A copy of `src` with the data of every tensor whose name contains `which` corrupted.
fn corrupt_copy(src: &Path, which: &str, how: Corruption, tag: &str) -> PathBuf {
    let gguf = GgufFile::open(src).expect("the source model loads");
    let mut bytes = std::fs::read(src).unwrap();
    let mut seed = match how {
        Corruption::Random(s) | Corruption::RandomFinite(s) => s | 1,
        _ => 1,
    };
    for t in gguf.tensors().iter().filter(|t| t.name.contains(which)) {
        let start = (gguf.data_offset() + t.offset) as usize;
        let data = &mut bytes[start..start + t.n_bytes as usize];
        match how {
            Corruption::AllFf => data.fill(0xFF),
            Corruption::Random(_) => data.iter_mut().for_each(|b| *b = xorshift(&mut seed) as u8),
            Corruption::RandomFinite(_) => {
                assert_eq!(t.ty.to_string(), "F32", "{}", t.name);
                for v in data.chunks_exact_mut(4) {
                    let x = (xorshift(&mut seed) >> 40) as f32 / (1u64 << 23) as f32 - 1.0;
                    v.copy_from_slice(&x.to_le_bytes());
                }
            }
            Corruption::NanHead | Corruption::InfHead => {
                let nan = matches!(how, Corruption::NanHead);
                // The leading scale (block types) or first value, in the tensor's float type.
                let head = match (t.ty.to_string().as_str(), nan) {
                    ("F32", true) => f32::NAN.to_le_bytes(),
                    ("F32", false) => f32::INFINITY.to_le_bytes(),
                    // 0x7FC0 is a NaN as f16 and as bf16.
                    (_, true) => [0xC0, 0x7F, 0xC0, 0x7F],
                    ("BF16", false) => [0x80, 0x7F, 0x80, 0x7F],
                    (_, false) => [0x00, 0x7C, 0x00, 0x7C],
                };
                data[..4].copy_from_slice(&head);
            }
        }
    }
    let dir = std::env::temp_dir().join(format!("local-llm-corrupt-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join(format!("{tag}-{which}-{how:?}.gguf").replace(['(', ')'], "_"));
    std::fs::write(&path, bytes).unwrap();
    path
}

/// Greedy generation of 8 tokens from the model at `path` (deleted afterwards).
fn generate(path: &Path) -> Result<Generation, Error> {
    let result = (|| {
        let model = LoadedModel::load(path, &LoadOptions::default())?;
        let options = ContextOptions {
            n_ctx: 64,
            threads: 1,
            ..ContextOptions::default()
        };
        let mut ctx = Context::new(model, &options)?;
        let mut request = GenerateRequest::new(Prompt::Text("the cat sat on the".into()));
        request.sampling = SamplingParams::greedy();
        request.max_tokens = 8;
        request.stop_at_eog = false;
        ctx.generate(&request, &mut |_| {}, None)
    })();
    std::fs::remove_file(path).ok();
    result
}

fn assert_non_finite_error(result: Result<Generation, Error>, what: &str) {
    match result {
        Err(Error::InvalidModel(m)) if m.contains("non-finite") => {}
        other => panic!("{what}: expected a non-finite InvalidModel error, got {other:?}"),
    }
}

/// Output (8 tokens) or the non-finite error; never any other outcome.
fn assert_output_or_non_finite(result: Result<Generation, Error>, what: &str) {
    match result {
        Ok(g) => {
            assert_eq!(g.tokens.len(), 8, "{what}");
            eprintln!("{what}: output {:?}", g.tokens);
        }
        Err(Error::InvalidModel(m)) if m.contains("non-finite") => eprintln!("{what}: {m}"),
        Err(e) => panic!("{what}: unexpected error {e}"),
    }
}

#[test]
fn all_ff_weights_are_a_non_finite_error() {
    for kind in common::SYNTH_KINDS {
        let src = common::synth_model(kind);
        // Every tensor, or only the output head / only a feed-forward matrix.
        for which in ["", "output.weight", "ffn_down"] {
            let path = corrupt_copy(&src, which, Corruption::AllFf, kind);
            assert_non_finite_error(generate(&path), &format!("{kind} {which:?} 0xFF"));
        }
    }
}

#[test]
fn nan_and_inf_blocks_are_a_non_finite_error() {
    for kind in common::SYNTH_KINDS {
        let src = common::synth_model(kind);
        for how in [Corruption::NanHead, Corruption::InfHead] {
            // The output head: every token's logits use its first row.
            let path = corrupt_copy(&src, "output", how, kind);
            assert_non_finite_error(generate(&path), &format!("{kind} {how:?}"));
        }
    }
}

#[test]
fn random_weights_give_output_or_a_non_finite_error() {
    for kind in common::SYNTH_KINDS {
        let src = common::synth_model(kind);
        for seed in 1..=3 {
            let path = corrupt_copy(&src, "", Corruption::Random(seed), kind);
            assert_output_or_non_finite(generate(&path), &format!("{kind} random {seed}"));
        }
    }
}

#[test]
fn finite_garbage_weights_give_output() {
    let src = common::synth_model("mistral-f32");
    for seed in 1..=3 {
        let path = corrupt_copy(&src, "", Corruption::RandomFinite(seed), "mistral-f32");
        match generate(&path) {
            Ok(g) => assert_eq!(g.tokens.len(), 8),
            Err(e) => panic!("finite weights {seed}: {e}"),
        }
    }
}

#[test]
fn corrupt_real_models_give_output_or_a_typed_error() {
    for name in ["smollm2", "gemma3"] {
        let Some(src) = common::real_model(name) else {
            return;
        };
        let ff = corrupt_copy(&src, "", Corruption::AllFf, name);
        assert_non_finite_error(generate(&ff), &format!("{name} 0xFF"));
        let random = corrupt_copy(&src, "", Corruption::Random(7), name);
        assert_output_or_non_finite(generate(&random), &format!("{name} random"));
    }
}
