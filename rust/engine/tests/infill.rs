//! Fill-in-the-middle against llama.cpp: on a synthetic Qwen2.5-Coder-style model (FIM tokens
//! found by their text), our FIM tokens and greedy infills equal node-llama-cpp's
//! (`LlamaCompletion.generateInfillCompletion`, whose layout `[BOS] PRE prefix SUF suffix MID`
//! is llama-server's for a vocabulary without repo-level tokens); the SPM order, the batch
//! budget and a model without FIM tokens behave as stated in `session/infill.rs`.

mod common;

use local_llm_engine::sampling::SamplingParams;
use local_llm_engine::session::{
    Context, ContextOptions, FinishReason, GenerateRequest, Infill, LoadOptions, LoadedModel,
    Prompt,
};
use local_llm_engine::Error;
use serde_json::json;

const PAIRS: [(&str, &str); 4] = [
    ("def add(a, b):\n    ", "\n    return c\n"),
    ("the cat sat", " on the mat"),
    ("fn main() {", "}"),
    ("", "only a suffix"),
];

fn context(path: &std::path::Path) -> Context {
    let model = LoadedModel::load(path, &LoadOptions::default()).unwrap();
    Context::new(
        model,
        &ContextOptions {
            n_ctx: 512,
            threads: 1,
            ..ContextOptions::default()
        },
    )
    .unwrap()
}

#[test]
fn greedy_infills_equal_llama_cpps() {
    let path = common::synth_model("qwen2-fim");
    let oracle = common::run_oracle(&json!({
        "cmd": "infill",
        "model": path,
        "n_predict": 24,
        "context_size": 512,
        "infills": PAIRS.iter().map(|(p, s)| json!({"prefix": p, "suffix": s})).collect::<Vec<_>>(),
    }));
    let mut ctx = context(&path);
    let fim = ctx.model().tokenizer().fim();
    assert_eq!(
        [fim.prefix, fim.suffix, fim.middle].map(|t| t.map(u64::from)),
        ["prefix", "suffix", "middle"].map(|k| oracle["fim"][k].as_u64()),
        "FIM tokens"
    );
    assert!(fim.pad.is_some_and(|p| ctx.model().tokenizer().is_eog(p)));
    let mut compared = 0;
    for (i, (prefix, suffix)) in PAIRS.iter().enumerate() {
        let infill = Infill {
            prefix: prefix.to_string(),
            suffix: suffix.to_string(),
            ..Infill::default()
        };
        let tokens = infill
            .tokens(ctx.model().tokenizer(), ctx.n_batch(), 24, ctx.n_ctx())
            .unwrap();
        let mut request = GenerateRequest::new(Prompt::Tokens(tokens));
        request.sampling = SamplingParams::greedy();
        request.max_tokens = 24;
        ctx.clear();
        let ours = ctx.generate(&request, &mut |_| {}, None).unwrap();
        // node-llama-cpp reports tokens (onToken) only once their text is whole UTF-8, and its
        // maxTokens does not count a generated control token: the shorter list must be the start
        // of the longer.
        let theirs: Vec<u32> = oracle["results"][i]["tokens"]
            .as_array()
            .unwrap()
            .iter()
            .map(|t| t.as_u64().unwrap() as u32)
            .collect();
        let n = ours.tokens.len().min(theirs.len());
        assert_eq!(
            ours.tokens[..n],
            theirs[..n],
            "infill {i}: {prefix:?} | {suffix:?}"
        );
        if ours.finish_reason == FinishReason::EndOfGeneration {
            // Both stopped at the same end-of-generation token.
            assert!(
                theirs.len() <= n + 1,
                "infill {i}: llama.cpp went on: {theirs:?}"
            );
        }
        compared += n;
    }
    assert!(compared >= 40, "only {compared} tokens compared");
}

#[test]
fn layout_order_and_batch_budget() {
    let path = common::synth_model("qwen2-fim");
    let ctx = context(&path);
    let tok = ctx.model().tokenizer();
    let fim = tok.fim();
    let (pre, suf, mid) = (
        fim.prefix.unwrap(),
        fim.suffix.unwrap(),
        fim.middle.unwrap(),
    );
    let plain = |s: &str| tok.encode(s, false, false).unwrap();
    let infill = Infill {
        prefix: "the cat".into(),
        suffix: "sat on".into(),
        prompt: " the".into(),
        ..Infill::default()
    };
    let psm = infill.tokens(tok, 512, 16, 512).unwrap();
    let want: Vec<u32> = [
        &[pre][..],
        &plain("the cat"),
        &plain(" the"),
        &[suf],
        &plain("sat on"),
        &[mid],
    ]
    .concat();
    assert_eq!(psm, want);
    let spm = Infill {
        spm: true,
        ..infill.clone()
    }
    .tokens(tok, 512, 16, 512)
    .unwrap();
    let want: Vec<u32> = [
        &[suf][..],
        &plain("sat on"),
        &[pre],
        &plain("the cat"),
        &plain(" the"),
        &[mid],
    ]
    .concat();
    assert_eq!(spm, want);
    // A batch of 16 keeps the last 12 prefix tokens and the first 16/4 - 2 = 2 suffix tokens.
    let long = Infill {
        prefix: "a b c d e f g h i j k l m n o p q r s t".into(),
        suffix: "u v w x y z".into(),
        ..Infill::default()
    };
    let cut = long.tokens(tok, 16, 16, 512).unwrap();
    let prefix = plain(&long.prefix);
    let suffix = plain(&long.suffix);
    let want: Vec<u32> = [
        &[pre][..],
        &prefix[prefix.len() - 12..],
        &[suf],
        &suffix[..2],
        &[mid],
    ]
    .concat();
    assert_eq!(cut, want);
}

#[test]
fn a_model_without_fim_tokens_cannot_infill() {
    let Some(path) = common::real_model("smollm2") else {
        return;
    };
    let model = LoadedModel::load(&path, &LoadOptions::default()).unwrap();
    let err = Infill::default()
        .tokens(model.tokenizer(), 512, 16, 512)
        .unwrap_err();
    assert!(
        matches!(&err, Error::InvalidOption(m) if m.contains("fill-in-the-middle")),
        "{err}"
    );
}
