//! Speculative decoding from the command line: llama.cpp's flags (`--model-draft` /
//! `--spec-draft-model`, `--spec-type`, `--spec-draft-n-max`, `--spec-draft-n-min`,
//! `--spec-ngram-simple-size-n`) for `run`, `chat` and `bench`, and the benchmark that compares
//! plain and speculative generation on a rewrite, a code edit and an open question.

use std::path::PathBuf;
use std::sync::Arc;

use clap::{Args, ValueEnum};
use local_llm_engine::chat::ChatMessage;
use local_llm_engine::sampling::SamplingParams;
use local_llm_engine::session::{
    Context, ContextOptions, GenerateRequest, Generation, LoadOptions, LoadedModel, Prompt,
    SpeculativeOptions,
};
use local_llm_engine::{Error, Result};

/// How to draft without a draft model (llama.cpp's `--spec-type` names).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum SpecType {
    /// No speculative decoding (even with a draft model).
    None,
    /// Draft with the draft model (`--model-draft`, which implies this type).
    DraftSimple,
    /// Prompt lookup: the last tokens are searched earlier in the prompt and output and what
    /// followed is drafted (no second model).
    NgramSimple,
}

/// Speculative decoding options.
#[derive(Args, Clone, Debug)]
pub struct SpecArgs {
    /// Draft model for speculative decoding: a smaller GGUF model with the same vocabulary
    /// (llama.cpp's `-md` is spelled `--md` here).
    #[arg(long = "model-draft", visible_aliases = ["spec-draft-model", "md"])]
    pub model_draft: Option<PathBuf>,
    /// Kind of speculative decoding: `ngram-simple` drafts by prompt lookup (no draft model),
    /// `draft-simple` with `--model-draft`, `none` turns it off.
    #[arg(long = "spec-type", value_enum)]
    pub spec_type: Option<SpecType>,
    /// Most tokens drafted per step.
    #[arg(long = "spec-draft-n-max", default_value_t = SpeculativeOptions::default().draft_n_max)]
    pub draft_n_max: u32,
    /// Drafts shorter than this are not verified.
    #[arg(long = "spec-draft-n-min", default_value_t = SpeculativeOptions::default().draft_n_min)]
    pub draft_n_min: u32,
    /// Longest n-gram prompt lookup matches (it falls back to shorter ones down to a single
    /// token; llama.cpp's ngram-simple matches exactly this many).
    #[arg(long = "spec-ngram-simple-size-n", default_value_t = 3)]
    pub ngram_size_n: u32,
}

impl SpecArgs {
    /// Whether speculative decoding is asked for.
    pub fn enabled(&self) -> bool {
        match self.spec_type {
            Some(SpecType::None) => false,
            Some(_) => true,
            None => self.model_draft.is_some(),
        }
    }

    /// The engine's options and the draft model these flags ask for (`None` when off).
    fn load(&self) -> Result<Option<(SpeculativeOptions, Option<Arc<LoadedModel>>)>> {
        if !self.enabled() {
            return Ok(None);
        }
        if self.spec_type == Some(SpecType::DraftSimple) && self.model_draft.is_none() {
            return Err(Error::InvalidOption(
                "--spec-type draft-simple needs --model-draft".into(),
            ));
        }
        let draft = match &self.model_draft {
            Some(path) => Some(LoadedModel::load(path, &LoadOptions::default())?),
            None => None,
        };
        let lookup = self.spec_type == Some(SpecType::NgramSimple);
        let options = SpeculativeOptions {
            draft_n_max: self.draft_n_max,
            draft_n_min: self.draft_n_min,
            lookup_ngram_max: if lookup { self.ngram_size_n } else { 0 },
        };
        Ok(Some((options, draft)))
    }

    /// Turn speculative decoding on in `ctx` as these flags ask (nothing when they do not).
    pub fn apply(&self, ctx: &mut Context) -> Result<()> {
        match self.load()? {
            Some((options, draft)) => ctx.set_speculative(&options, draft),
            None => Ok(()),
        }
    }
}

/// The drafting summary printed after a speculative generation.
pub fn summary(gen: &Generation) -> Option<String> {
    let t = gen.timings;
    (t.draft_tokens > 0).then(|| {
        format!(
            "speculative: {} drafted, {} accepted ({:.1}%)",
            t.draft_tokens,
            t.draft_accepted,
            t.draft_acceptance_rate() * 100.0
        )
    })
}

const PARAGRAPH: &str = "The village of Saint-Aubin lies at the foot of a long green hill, \
where the river bends twice before it reaches the sea. In the summer, fishermen mend their nets \
on the stone quay while children run between the drying sails, and the baker opens his shop \
before dawn so that the first boats can leave with warm bread. In the winter, storms close the \
harbour for days, the streets are empty, and the only light after dark comes from the windows \
of the old inn, where travellers wait for the road over the hill to open again.";

const CODE: &str = "def calc(items, rate):\n    total = 0\n    for item in items:\n        \
price = item[\"price\"] * item[\"quantity\"]\n        if item.get(\"taxable\"):\n            \
price = price * (1 + rate)\n        total = total + price\n    return round(total, 2)\n\n\n\
def report(orders, rate):\n    lines = []\n    for order in orders:\n        \
amount = calc(order[\"items\"], rate)\n        lines.append(f\"{order['id']}: {amount}\")\n    \
return \"\\n\".join(lines)\n";

/// The benchmark's tasks: (name, user message).
fn tasks() -> [(&'static str, String); 3] {
    [
        (
            "rewrite",
            format!(
                "Rewrite this paragraph, replacing \"village\" with \"town\" and keeping every \
                 other word:\n\n{PARAGRAPH}"
            ),
        ),
        (
            "code",
            format!(
                "Rename the function `calc` to `order_total` in this Python code and show the \
                 whole code:\n\n```python\n{CODE}```"
            ),
        ),
        (
            "open",
            "Write a short story about a robot who learns to paint.".to_string(),
        ),
    ]
}

/// Generation tokens per second of each run, sorted; the median.
fn median(rates: &mut [f64]) -> f64 {
    rates.sort_by(f64::total_cmp);
    rates[rates.len() / 2]
}

/// `local-llm bench` with speculative flags: each task generated greedily `n_gen` tokens
/// plainly and speculatively (after a warm-up of each), `repetitions` times alternating;
/// median generation tok/s of both, the speed-up, the acceptance rate, and whether the
/// outputs were identical (an error when they were not).
pub fn bench(
    model: &Arc<LoadedModel>,
    spec: &SpecArgs,
    threads: &[usize],
    n_gen: usize,
    repetitions: usize,
    json: bool,
) -> Result<()> {
    let Some((options, draft)) = spec.load()? else {
        return Err(Error::InvalidOption(
            "speculative bench needs --spec-type ngram-simple or --model-draft".into(),
        ));
    };
    if !json {
        println!(
            "speculative: draft {}, lookup n-gram {}, draft-n-max {}, {n_gen} tokens, median of {repetitions}",
            draft
                .as_ref()
                .map_or("none".into(), |d| d.path().display().to_string()),
            options.lookup_ngram_max,
            options.draft_n_max
        );
        println!(
            "| threads | task    | plain t/s | spec t/s | speed-up | drafted | accepted | rate  |"
        );
        println!(
            "|--------:|:--------|----------:|---------:|---------:|--------:|---------:|------:|"
        );
    }
    for &threads in threads {
        let context_options = ContextOptions {
            n_ctx: 2048,
            threads: u32::try_from(threads).unwrap_or(u32::MAX),
            ..ContextOptions::default()
        };
        let mut plain = Context::new(model.clone(), &context_options)?;
        let mut fast = Context::new(model.clone(), &context_options)?;
        fast.set_speculative(&options, draft.clone())?;
        let threads = plain.threads();
        for (task, text) in tasks() {
            let mut request =
                GenerateRequest::new(Prompt::Chat(vec![ChatMessage::new("user", text)]));
            request.sampling = SamplingParams::greedy();
            request.max_tokens = n_gen;
            let reference = plain.generate(&request, &mut |_| {}, None)?;
            let mut last = fast.generate(&request, &mut |_| {}, None)?;
            let (mut slow_rates, mut fast_rates) = (Vec::new(), Vec::new());
            for _ in 0..repetitions {
                let p = plain.generate(&request, &mut |_| {}, None)?;
                slow_rates.push(p.timings.generation_tokens_per_second());
                last = fast.generate(&request, &mut |_| {}, None)?;
                fast_rates.push(last.timings.generation_tokens_per_second());
                if last.tokens != reference.tokens || p.tokens != reference.tokens {
                    return Err(Error::Backend(format!(
                        "task {task}: speculative output differs from plain decoding"
                    )));
                }
            }
            let (slow, quick) = (median(&mut slow_rates), median(&mut fast_rates));
            let t = last.timings;
            let rate = t.draft_acceptance_rate() * 100.0;
            let speedup = quick / slow;
            if json {
                println!(
                    "{{\"threads\":{threads},\"task\":\"{task}\",\"tokens\":{},\"plain_tps\":{slow:.3},\"spec_tps\":{quick:.3},\"speedup\":{speedup:.3},\"drafted\":{},\"accepted\":{},\"acceptance\":{:.4}}}",
                    last.tokens.len(),
                    t.draft_tokens,
                    t.draft_accepted,
                    rate / 100.0
                );
            } else {
                println!(
                    "| {threads:7} | {task:<7} | {slow:9.2} | {quick:8.2} | {speedup:7.2}× | {:7} | {:8} | {rate:4.1}% |",
                    t.draft_tokens, t.draft_accepted
                );
            }
        }
    }
    Ok(())
}
