//! The sampling chain.

use super::dry::{dry_penalties, DryBreakers, DryParams};
use super::rng::{entropy_seed, Rng};
use super::stages::{self, better, max_logit, Candidate};
use super::{SamplingParams, DEFAULT_DRY_SEQUENCE_BREAKERS};
use crate::tokenizer::Tokenizer;
use std::cmp::Ordering;

/// Mirostat 1.0's m: how many of the most likely tokens estimate the Zipf exponent (llama.cpp's
/// value).
const MIROSTAT_M: usize = 100;

/// Picks next tokens from logits with the configured chain and a seeded PRNG.
#[derive(Clone, Debug)]
pub struct Sampler {
    params: SamplingParams,
    rng: Rng,
    candidates: Vec<Candidate>,
    window: Vec<u32>,
    /// Tokens whose logit the current call changes (bias, penalties, DRY), sorted by id, with
    /// their adjusted logits.
    adjusted: Vec<(u32, f32)>,
    /// Effective logits of the current call (top-n-σ's statistics).
    scratch: Vec<f32>,
    /// The logit biases, sorted by id, repeated ids summed (with -inf for the end-of-generation
    /// tokens under `ignore_eos`).
    bias: Vec<(u32, f32)>,
    breakers: DryBreakers,
    /// Mirostat's current maximum surprise, and its value before the last draw.
    mu: f32,
    mu_before: f32,
}

impl Sampler {
    /// A sampler for validated `params` without a vocabulary: DRY has no sequence breakers,
    /// `ignore_eos` does nothing and logit-bias ids are not checked (see
    /// [`Sampler::for_vocabulary`]). A `None` seed is drawn from the clock and process entropy.
    pub fn new(params: SamplingParams) -> crate::Result<Self> {
        params.validate()?;
        let rng = Rng::new(params.seed.unwrap_or_else(entropy_seed));
        let mut bias: Vec<(u32, f32)> = params
            .logit_bias
            .iter()
            .map(|b| (b.token, b.bias))
            .collect();
        bias.sort_by_key(|&(t, _)| t);
        bias.dedup_by(|later, kept| {
            let same = later.0 == kept.0;
            if same {
                kept.1 += later.1;
            }
            same
        });
        let mu = 2.0 * params.mirostat_tau;
        Ok(Sampler {
            params,
            rng,
            candidates: Vec::new(),
            window: Vec::new(),
            adjusted: Vec::new(),
            scratch: Vec::new(),
            bias,
            breakers: DryBreakers::default(),
            mu,
            mu_before: mu,
        })
    }

    /// A sampler for `params` on `tokenizer`'s vocabulary: logit-bias ids must be in it
    /// ([`crate::Error::InvalidOption`] otherwise), `ignore_eos` bans its end-of-generation
    /// tokens and DRY's sequence breakers are resolved against it.
    pub fn for_vocabulary(params: SamplingParams, tokenizer: &Tokenizer) -> crate::Result<Self> {
        let n_vocab = tokenizer.n_vocab();
        if let Some(b) = params
            .logit_bias
            .iter()
            .find(|b| b.token as usize >= n_vocab)
        {
            return Err(crate::Error::InvalidOption(format!(
                "logit_bias names token {}, outside the vocabulary of {n_vocab} tokens",
                b.token
            )));
        }
        let mut sampler = Sampler::new(params)?;
        if sampler.params.ignore_eos {
            for &t in tokenizer.eog_tokens() {
                match sampler.bias.binary_search_by_key(&t, |&(id, _)| id) {
                    Ok(i) => sampler.bias[i].1 = f32::NEG_INFINITY,
                    Err(i) => sampler.bias.insert(i, (t, f32::NEG_INFINITY)),
                }
            }
        }
        if sampler.dry_active() {
            let breakers = match &sampler.params.dry_sequence_breakers {
                Some(b) => DryBreakers::for_vocab(b, tokenizer)?,
                None => {
                    let defaults = DEFAULT_DRY_SEQUENCE_BREAKERS.map(String::from);
                    DryBreakers::for_vocab(&defaults, tokenizer)?
                }
            };
            sampler.breakers = breakers;
        }
        Ok(sampler)
    }

    /// The parameters this sampler uses.
    pub fn params(&self) -> &SamplingParams {
        &self.params
    }

    /// Undo the feedback of the last [`Sampler::sample`] (Mirostat's surprise estimate), for a
    /// draw that was not used (a grammar rejected it and the sampler draws again).
    pub(crate) fn rewind(&mut self) {
        self.mu = self.mu_before;
    }

    fn dry_active(&self) -> bool {
        let p = &self.params;
        p.dry_multiplier != 0.0 && p.dry_base >= 1.0 && p.dry_penalty_last_n != 0
    }

    /// Pick the next token. `history` = previously accepted tokens (prompt + generated) for the
    /// penalties and DRY. Temperature 0 → greedy argmax (ties → lowest id). NaN logits count as
    /// -inf; empty `logits` yield token 0. Top-k uses partial selection, so a 262k vocabulary
    /// costs O(V + k log k) per call.
    pub fn sample(&mut self, logits: &[f32], history: &[u32]) -> u32 {
        if logits.is_empty() {
            return 0;
        }
        self.mu_before = self.mu;
        if self.params.mirostat != 0 {
            return self.sample_mirostat(logits);
        }
        self.adjust(logits, history, true);
        let mut cands = std::mem::take(&mut self.candidates);
        cands.clear();
        let p = &self.params;
        // Greedy is the best candidate unless XTC may remove it (then the chain runs and the
        // temperature stage keeps the best of what is left, as in llama.cpp).
        let greedy = p.temperature <= 0.0 && !(p.xtc_probability > 0.0 && p.xtc_threshold <= 0.5);
        let floor = if greedy {
            None
        } else {
            self.scratch.clear();
            let scratch = &mut self.scratch;
            if p.top_n_sigma > 0.0 {
                for_each_effective(logits, &self.adjusted, |c| scratch.push(c.logit));
            }
            stages::top_n_sigma_floor(scratch.iter().copied(), p.top_n_sigma)
        };
        let k = match p.top_k {
            _ if greedy => 1,
            0 => logits.len(),
            k => (k as usize).min(logits.len()),
        };
        if k < logits.len() {
            select_top(logits, &self.adjusted, k, &mut cands);
        } else {
            for_each_effective(logits, &self.adjusted, |c| cands.push(c));
        }
        if let Some(floor) = floor {
            // Filtering before or after top-k keeps the same set (the floor is a logit).
            cands.retain(|c| c.logit >= floor);
        }
        let token = if greedy {
            cands.first().map_or(0, |c| c.id)
        } else {
            self.sample_chain(&mut cands)
        };
        self.candidates = cands;
        token
    }

    /// The logit changes of this call in `self.adjusted`: the logit biases, then (with
    /// `penalties`) the repetition, frequency and presence penalties over the last
    /// `penalty_last_n` tokens of `history` and DRY over its last `dry_penalty_last_n`. Ids
    /// outside the vocabulary are ignored.
    fn adjust(&mut self, logits: &[f32], history: &[u32], penalties: bool) {
        self.adjusted.clear();
        let p = &self.params;
        let last = |n: i32| {
            &history[history
                .len()
                .saturating_sub(if n < 0 { usize::MAX } else { n as usize })..]
        };
        self.window.clear();
        let repeat_active =
            p.repeat_penalty != 1.0 || p.frequency_penalty != 0.0 || p.presence_penalty != 0.0;
        if penalties && repeat_active && p.penalty_last_n != 0 {
            self.window.extend_from_slice(last(p.penalty_last_n));
            self.window.sort_unstable();
        }
        let dry = if penalties && self.dry_active() {
            let params = DryParams {
                multiplier: p.dry_multiplier,
                base: p.dry_base,
                allowed_length: p.dry_allowed_length as usize,
            };
            dry_penalties(last(p.dry_penalty_last_n), &self.breakers, &params)
        } else {
            Vec::new()
        };
        if self.bias.is_empty() && self.window.is_empty() && dry.is_empty() {
            return;
        }
        let mut ids: Vec<u32> = self.bias.iter().map(|b| b.0).collect();
        ids.extend_from_slice(&self.window);
        ids.extend(dry.iter().map(|d| d.0));
        ids.sort_unstable();
        ids.dedup();
        for id in ids {
            let Some(&raw) = logits.get(id as usize) else {
                continue;
            };
            let mut logit = if raw.is_nan() { f32::NEG_INFINITY } else { raw };
            if let Ok(i) = self.bias.binary_search_by_key(&id, |b| b.0) {
                logit += self.bias[i].1;
            }
            let count = self.window.partition_point(|&t| t <= id)
                - self.window.partition_point(|&t| t < id);
            if count > 0 {
                logit = stages::penalize(
                    logit,
                    count,
                    p.repeat_penalty,
                    p.frequency_penalty,
                    p.presence_penalty,
                );
            }
            if let Ok(i) = dry.binary_search_by_key(&id, |d| d.0) {
                logit -= dry[i].1;
            }
            self.adjusted.push((id, logit));
        }
    }

    /// Typical, top-p, min-p, XTC, temperature, then a draw from the softmax (top-k and top-n-σ
    /// were applied by the caller).
    fn sample_chain(&mut self, cands: &mut Vec<Candidate>) -> u32 {
        let p = &self.params;
        let max = max_logit(cands);
        if !max.is_finite() {
            // All -inf, or +inf present: the best candidate is the only sensible pick.
            return cands.iter().min_by(|a, b| better(a, b)).map_or(0, |c| c.id);
        }
        stages::typical(cands, p.typical_p);
        stages::top_p(cands, p.top_p);
        stages::min_p(cands, p.min_p);
        if p.xtc_probability > 0.0 && p.xtc_threshold <= 0.5 && cands.len() >= 2 {
            let draw = self.rng.next_f64() as f32;
            stages::xtc(cands, p.xtc_probability, p.xtc_threshold, draw);
        }
        let t = self.params.temperature;
        self.draw(cands, t)
    }

    /// Draw from the softmax of `cands`' logits divided by `t` (`t <= 0`: the best).
    fn draw(&mut self, cands: &[Candidate], t: f32) -> u32 {
        let max = max_logit(cands);
        if t <= 0.0 || !max.is_finite() {
            return cands.iter().min_by(|a, b| better(a, b)).map_or(0, |c| c.id);
        }
        let t = t as f64;
        let weights_total: f64 = cands
            .iter()
            .map(|c| ((c.logit - max) as f64 / t).exp())
            .sum();
        let mut target = self.rng.next_f64() * weights_total;
        for c in cands.iter() {
            target -= ((c.logit - max) as f64 / t).exp();
            if target < 0.0 {
                return c.id;
            }
        }
        // Rounding left a sliver: the last remaining candidate takes it.
        cands.last().map_or(0, |c| c.id)
    }

    /// Mirostat (1.0 or 2.0, as llama.cpp chains it): logit bias, temperature, Mirostat's
    /// truncation, a draw, then the feedback of the drawn token's surprise into `mu`.
    fn sample_mirostat(&mut self, logits: &[f32]) -> u32 {
        self.adjust(logits, &[], false);
        let mut cands = std::mem::take(&mut self.candidates);
        cands.clear();
        for_each_effective(logits, &self.adjusted, |c| cands.push(c));
        let p = &self.params;
        stages::temperature(&mut cands, p.temperature);
        if max_logit(&cands).is_finite() {
            if p.mirostat == 1 {
                stages::mirostat_truncate(&mut cands, self.mu, logits.len(), MIROSTAT_M);
            } else {
                stages::mirostat_v2_truncate(&mut cands, self.mu);
            }
        }
        let probs = stages::softmax(&cands);
        let mut target = self.rng.next_f64();
        let mut pick = cands.len().saturating_sub(1);
        for (i, q) in probs.iter().enumerate() {
            target -= q;
            if target < 0.0 {
                pick = i;
                break;
            }
        }
        let token = match cands.get(pick) {
            Some(c) if probs[pick] > 0.0 => {
                self.mu =
                    stages::mirostat_update(self.mu, probs[pick], p.mirostat_tau, p.mirostat_eta);
                c.id
            }
            // No finite logit: the best candidate, and no feedback.
            _ => cands.iter().min_by(|a, b| better(a, b)).map_or(0, |c| c.id),
        };
        self.candidates = cands;
        token
    }
}

/// Call `f` with every token's effective logit (penalized value if penalized, NaN as -inf), in
/// id order.
fn for_each_effective(logits: &[f32], penalized: &[(u32, f32)], mut f: impl FnMut(Candidate)) {
    let mut pen = penalized.iter().peekable();
    for (i, &raw) in logits.iter().enumerate() {
        let id = i as u32;
        let logit = match pen.peek() {
            Some(&&(pid, l)) if pid == id => {
                pen.next();
                l
            }
            _ if raw.is_nan() => f32::NEG_INFINITY,
            _ => raw,
        };
        f(Candidate { id, logit });
    }
}

/// Heap entry ordered so that the worse candidate is the greater one.
struct Worst(Candidate);

impl PartialEq for Worst {
    fn eq(&self, other: &Self) -> bool {
        self.cmp(other) == Ordering::Equal
    }
}
impl Eq for Worst {}
impl PartialOrd for Worst {
    fn partial_cmp(&self, other: &Self) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}
impl Ord for Worst {
    fn cmp(&self, other: &Self) -> Ordering {
        better(&self.0, &other.0)
    }
}

/// Bounded heap keeping the `k` best candidates seen so far.
struct TopK {
    heap: std::collections::BinaryHeap<Worst>,
    k: usize,
    /// Logit of the worst kept candidate once the heap is full (-inf before).
    worst: f32,
}

impl TopK {
    fn offer(&mut self, c: Candidate) {
        let c = Candidate {
            id: c.id,
            logit: if c.logit.is_nan() {
                f32::NEG_INFINITY
            } else {
                c.logit
            },
        };
        if self.heap.len() < self.k {
            self.heap.push(Worst(c));
        } else if better(&c, &self.heap.peek().map_or(c, |w| w.0)) == Ordering::Less {
            if let Some(mut top) = self.heap.peek_mut() {
                *top = Worst(c);
            }
        } else {
            return;
        }
        if self.heap.len() == self.k {
            self.worst = self.heap.peek().map_or(f32::NEG_INFINITY, |w| w.0.logit);
        }
    }
}

/// Logits per block of [`select_top`]'s fast rejection.
const SKIP: usize = 64;

/// The largest of `xs`, ignoring NaNs, in eight lanes (so that it vectorizes).
fn block_max(xs: &[f32; SKIP]) -> f32 {
    let mut lanes = [f32::NEG_INFINITY; 8];
    for c in xs.chunks_exact(8) {
        for (m, &v) in lanes.iter_mut().zip(c) {
            *m = m.max(v);
        }
    }
    lanes.iter().fold(f32::NEG_INFINITY, |m, &v| m.max(v))
}

/// The `k` best candidates (logit descending, ties to lower ids) in one pass with a bounded
/// heap: O(V) comparisons plus O(log k) per heap update; the result is sorted best first.
fn select_top(logits: &[f32], penalized: &[(u32, f32)], k: usize, out: &mut Vec<Candidate>) {
    let mut top = TopK {
        heap: std::collections::BinaryHeap::with_capacity(k + 1),
        k,
        worst: f32::NEG_INFINITY,
    };
    let mut next = 0usize;
    let end_marker = (logits.len() as u32, 0.0);
    for &(pid, plogit) in penalized.iter().chain(std::iter::once(&end_marker)) {
        let end = (pid as usize).min(logits.len());
        let run = &logits[next.min(end)..end];
        for (b, block) in run.chunks(SKIP).enumerate() {
            // Once full, a whole block whose largest logit does not beat the worst kept one
            // is skipped; then only a logit above it enters (NaN fails `>`; ids only grow, so
            // an equal logit never wins the tie).
            if top.heap.len() == k
                && <&[f32; SKIP]>::try_from(block).is_ok_and(|b| block_max(b) <= top.worst)
            {
                continue;
            }
            for (j, &raw) in block.iter().enumerate() {
                if top.heap.len() < k || raw > top.worst {
                    top.offer(Candidate {
                        id: (next + b * SKIP + j) as u32,
                        logit: raw,
                    });
                }
            }
        }
        if end < logits.len() {
            top.offer(Candidate {
                id: pid,
                logit: plogit,
            });
        }
        next = end + 1;
    }
    out.extend(top.heap.into_sorted_vec().into_iter().map(|w| w.0));
}
