//! The session's public contract: one cancellation shape, the default context size rule and
//! memory estimates, on a synthetic model.

mod common;

use std::sync::atomic::{AtomicBool, Ordering};

use local_llm_engine::gguf::GgufFile;
use local_llm_engine::model::{KvTypes, Pooling};
use local_llm_engine::sampling::SamplingParams;
use local_llm_engine::session::{
    Context, ContextOptions, EmbedOptions, FinishReason, GenerateRequest, LoadOptions, LoadedModel,
    MemoryEstimate, Prompt,
};

fn context() -> Context {
    let path = common::synth_model("llama-bpe");
    let model = LoadedModel::load(&path, &LoadOptions::default()).unwrap();
    Context::new(
        model,
        &ContextOptions {
            threads: 1,
            ..ContextOptions::default()
        },
    )
    .unwrap()
}

fn greedy(max_tokens: usize) -> GenerateRequest {
    let mut request = GenerateRequest::new(Prompt::Text("the cat sat on the".into()));
    request.sampling = SamplingParams::greedy();
    request.max_tokens = max_tokens;
    request.stop_at_eog = false;
    request
}

#[test]
fn cancelled_before_or_during_the_prompt_is_a_cancelled_result() {
    let mut ctx = context();
    let cancel = AtomicBool::new(true);
    let g = ctx
        .generate(&greedy(8), &mut |_| {}, Some(&cancel))
        .expect("a cancel is a result, not an error");
    assert_eq!(g.finish_reason, FinishReason::Cancelled);
    assert!(g.tokens.is_empty() && g.text.is_empty());
    assert!(g.prompt_tokens > 0);
}

#[test]
fn cancelled_while_decoding_keeps_the_partial_text() {
    let mut ctx = context();
    let full = ctx.generate(&greedy(12), &mut |_| {}, None).unwrap();
    assert_eq!(full.finish_reason, FinishReason::MaxTokens);
    ctx.clear();
    let cancel = AtomicBool::new(false);
    let g = ctx
        .generate(
            &greedy(12),
            &mut |_| cancel.store(true, Ordering::Relaxed),
            Some(&cancel),
        )
        .unwrap();
    assert_eq!(g.finish_reason, FinishReason::Cancelled);
    assert!(!g.tokens.is_empty() && g.tokens.len() < full.tokens.len());
    assert_eq!(g.tokens[..], full.tokens[..g.tokens.len()]);
}

#[test]
fn finish_reason_names() {
    use FinishReason::*;
    let names: Vec<_> = [
        EndOfGeneration,
        StopString,
        MaxTokens,
        ContextFull,
        Cancelled,
    ]
    .into_iter()
    .map(|r| (r.name(), r.openai_name()))
    .collect();
    assert_eq!(
        names,
        [
            ("eog", "stop"),
            ("stop_string", "stop"),
            ("max_tokens", "length"),
            ("context_full", "length"),
            ("cancelled", "stop"),
        ]
    );
}

#[test]
fn default_context_and_memory_estimate_follow_the_metadata() {
    let path = common::synth_model("llama-bpe");
    let gguf = GgufFile::open_with(&path, true).unwrap();
    let arch = gguf.get_str("general.architecture").unwrap().to_string();
    let meta = |k: &str| gguf.get(&format!("{arch}.{k}")).and_then(|v| v.as_u64());
    let n_ctx_train = meta("context_length").unwrap();
    let n_layer = meta("block_count").unwrap();
    let n_embd = meta("embedding_length").unwrap();
    let n_head = meta("attention.head_count").unwrap();
    let n_head_kv = meta("attention.head_count_kv").unwrap_or(n_head);
    let head_dim = n_embd / n_head;
    let weights: u64 = gguf.tensors().iter().map(|t| t.n_bytes).sum();

    let ctx = context();
    assert_eq!(ctx.n_ctx() as u64, n_ctx_train.min(4096));
    for n_ctx in [0u32, 100] {
        let want_ctx = if n_ctx == 0 {
            n_ctx_train.min(4096)
        } else {
            100
        };
        // f16 K and V: 2 bytes each, per layer, position and KV head.
        let want_kv = n_layer * want_ctx * n_head_kv * 2 * head_dim * 2;
        let from_file = MemoryEstimate::for_file(&gguf, n_ctx).unwrap();
        assert_eq!(
            from_file,
            ctx.model()
                .estimate_memory(n_ctx, KvTypes::default())
                .unwrap()
        );
        assert_eq!(u64::from(from_file.context_size), want_ctx);
        assert_eq!(from_file.kv_cache_bytes, want_kv);
        assert_eq!(from_file.weights_bytes, weights);
        assert_eq!(from_file.total_bytes, weights + want_kv);
    }
}

#[test]
fn embeddings_are_unit_means_and_the_benchmark_reports_each_run() {
    let mut ctx = context();
    let n_embd = ctx.model().model().config().n_embd;
    let cat = ctx.embed("the cat sat on the mat", None).unwrap();
    assert_eq!(cat.len(), n_embd);
    let norm = cat.iter().map(|v| v * v).sum::<f32>().sqrt();
    assert!((norm - 1.0).abs() < 1e-4, "norm {norm}");
    // The cache is cleared around each: the same text gives the same bits.
    assert_eq!(ctx.embed("the cat sat on the mat", None).unwrap(), cat);
    assert_ne!(ctx.embed("a dog ran", None).unwrap(), cat);
    let cancel = AtomicBool::new(true);
    assert!(matches!(
        ctx.embed("the cat", Some(&cancel)),
        Err(local_llm_engine::Error::Cancelled)
    ));

    // Several texts in one forward pass give each one's vector alone, bit for bit; other
    // poolings and normalisations are what they say.
    let texts = [
        "the cat sat on the mat",
        "a dog ran",
        "the sea was calm this morning",
    ];
    let many = ctx
        .embed_many(&texts, &EmbedOptions::default(), None)
        .unwrap();
    for (text, v) in texts.iter().zip(&many) {
        assert_eq!(&ctx.embed(text, None).unwrap(), v, "{text}");
    }
    let raw = EmbedOptions {
        pooling: Some(Pooling::None),
        normalize: -1,
        ..EmbedOptions::default()
    };
    let states = ctx.embed_many(&texts[..1], &raw, None).unwrap().remove(0);
    let last = EmbedOptions {
        pooling: Some(Pooling::Last),
        ..raw
    };
    let last = ctx.embed_many(&texts[..1], &last, None).unwrap().remove(0);
    assert_eq!(states.len() % n_embd, 0);
    assert_eq!(&states[states.len() - n_embd..], &last[..]);
    let rank = EmbedOptions {
        pooling: Some(Pooling::Rank),
        ..raw
    };
    assert!(matches!(
        ctx.embed_many(&texts, &rank, None),
        Err(local_llm_engine::Error::InvalidOption(_))
    ));

    let runs = ctx.benchmark(16, 4, 2).unwrap();
    assert_eq!(runs.len(), 2);
    for t in &runs {
        assert_eq!((t.prompt_tokens, t.generated_tokens), (16, 4));
    }
    assert_eq!(
        ctx.benchmark(1, 1, 1000).unwrap().len(),
        local_llm_engine::session::MAX_BENCHMARK_ITERATIONS as usize
    );
    assert!(matches!(
        ctx.benchmark(ctx.n_ctx(), 1, 1),
        Err(local_llm_engine::Error::ContextExhausted { .. })
    ));
}
