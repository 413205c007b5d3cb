//! The sampling chain.

use super::rng::{entropy_seed, Rng};
use super::SamplingParams;
use std::cmp::Ordering;

/// A token id with its (processed) logit.
#[derive(Clone, Copy, Debug)]
struct Candidate {
    id: u32,
    logit: f32,
}

/// Order by logit descending, then id ascending: a total order, so ties always resolve to the
/// lowest id.
fn better(a: &Candidate, b: &Candidate) -> Ordering {
    b.logit.total_cmp(&a.logit).then(a.id.cmp(&b.id))
}

/// Picks next tokens from logits with the configured chain and a seeded PRNG.
#[derive(Clone, Debug)]
pub struct Sampler {
    params: SamplingParams,
    rng: Rng,
    candidates: Vec<Candidate>,
    window: Vec<u32>,
    /// Penalized tokens of the current call, sorted by id, with their adjusted logits.
    penalized: Vec<(u32, f32)>,
}

impl Sampler {
    /// A sampler for validated `params`; a `None` seed is drawn from the clock and process
    /// entropy.
    pub fn new(params: SamplingParams) -> crate::Result<Self> {
        params.validate()?;
        let rng = Rng::new(params.seed.unwrap_or_else(entropy_seed));
        Ok(Sampler {
            params,
            rng,
            candidates: Vec::new(),
            window: Vec::new(),
            penalized: Vec::new(),
        })
    }

    /// The parameters this sampler uses.
    pub fn params(&self) -> &SamplingParams {
        &self.params
    }

    /// Pick the next token. `history` = previously accepted tokens (prompt + generated) for the
    /// penalties. Temperature 0 → greedy argmax (ties → lowest id). NaN logits count as -inf;
    /// empty `logits` yield token 0. Top-k uses partial selection, so a 262k vocabulary costs
    /// O(V + k log k) per call.
    pub fn sample(&mut self, logits: &[f32], history: &[u32]) -> u32 {
        if logits.is_empty() {
            return 0;
        }
        self.compute_penalties(logits, history);
        let mut cands = std::mem::take(&mut self.candidates);
        cands.clear();
        let greedy = self.params.temperature <= 0.0;
        let k = match self.params.top_k {
            _ if greedy => 1,
            0 => logits.len(),
            k => (k as usize).min(logits.len()),
        };
        if k < logits.len() {
            select_top(logits, &self.penalized, k, &mut cands);
        } else {
            for_each_effective(logits, &self.penalized, |c| cands.push(c));
        }
        let token = if greedy {
            cands.first().map_or(0, |c| c.id)
        } else {
            self.sample_chain(&mut cands)
        };
        self.candidates = cands;
        token
    }

    /// Repetition, frequency and presence penalties over the last `penalty_last_n` tokens:
    /// fills `self.penalized` with (id, adjusted logit), sorted by id. Ids outside the
    /// vocabulary are ignored.
    fn compute_penalties(&mut self, logits: &[f32], history: &[u32]) {
        self.penalized.clear();
        let p = &self.params;
        let active =
            p.repeat_penalty != 1.0 || p.frequency_penalty != 0.0 || p.presence_penalty != 0.0;
        if !active || p.penalty_last_n == 0 {
            return;
        }
        let start = history.len().saturating_sub(p.penalty_last_n as usize);
        self.window.clear();
        self.window.extend_from_slice(&history[start..]);
        self.window.sort_unstable();
        for run in self.window.chunk_by(|a, b| a == b) {
            let id = run[0];
            let Some(&raw) = logits.get(id as usize) else {
                continue;
            };
            let mut logit = if raw.is_nan() { f32::NEG_INFINITY } else { raw };
            if logit <= 0.0 {
                logit *= p.repeat_penalty;
            } else {
                logit /= p.repeat_penalty;
            }
            logit -= run.len() as f32 * p.frequency_penalty + p.presence_penalty;
            self.penalized.push((id, logit));
        }
    }

    /// Typical, top-p, min-p, temperature, then a draw from the softmax (top-k was applied by
    /// the caller).
    fn sample_chain(&mut self, cands: &mut Vec<Candidate>) -> u32 {
        let p = &self.params;
        let mut max = max_logit(cands);
        if !max.is_finite() {
            // All -inf, or +inf present: the best candidate is the only sensible pick.
            return cands.iter().min_by(|a, b| better(a, b)).map_or(0, |c| c.id);
        }
        if p.typical_p < 1.0 {
            keep_typical(cands, max, p.typical_p);
            // The most likely token may be gone: later stages are relative to the best kept one.
            max = max_logit(cands);
        }
        if p.top_p < 1.0 {
            // Only this stage needs the full order (O(n log n) for the n surviving candidates).
            cands.sort_unstable_by(better);
            let total: f64 = cands.iter().map(|c| ((c.logit - max) as f64).exp()).sum();
            let mut cum = 0.0;
            let mut keep = cands.len();
            for (i, c) in cands.iter().enumerate() {
                cum += ((c.logit - max) as f64).exp() / total;
                if cum >= p.top_p as f64 {
                    keep = i + 1;
                    break;
                }
            }
            cands.truncate(keep);
        }
        if p.min_p > 0.0 {
            // p_i >= min_p * p_max  <=>  logit_i >= max + ln(min_p); the best token always stays.
            let threshold = max + p.min_p.ln();
            cands.retain(|c| c.logit >= threshold);
        }
        let t = p.temperature as f64;
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
}

/// The largest logit of `cands` (-inf when empty).
fn max_logit(cands: &[Candidate]) -> f32 {
    cands
        .iter()
        .map(|c| c.logit)
        .fold(f32::NEG_INFINITY, f32::max)
}

/// Locally typical sampling (Meister et al., "Locally Typical Sampling", 2022; the stage
/// llama.cpp calls `typical`): with p_i the softmax of `cands` and H its entropy, order tokens by
/// how far their surprise -ln p_i is from H, and keep the shortest prefix of that order whose
/// probabilities sum to more than `mass` (at least one token). The kept tokens are left best
/// first. `max` is the largest logit (finite).
fn keep_typical(cands: &mut Vec<Candidate>, max: f32, mass: f32) {
    let weights: Vec<f64> = cands
        .iter()
        .map(|c| ((c.logit - max) as f64).exp())
        .collect();
    let total: f64 = weights.iter().sum();
    let entropy: f64 = weights
        .iter()
        .map(|w| w / total)
        .filter(|&q| q > 0.0)
        .map(|q| -q * q.ln())
        .sum();
    // (distance of the surprise from the entropy, probability, candidate); ties keep the
    // better candidate first so the result does not depend on the incoming order.
    cands.sort_unstable_by(better);
    let mut order: Vec<(f64, f64, Candidate)> = cands
        .iter()
        .zip(cands.iter().map(|c| ((c.logit - max) as f64).exp() / total))
        .map(|(&c, q)| {
            let distance = if q > 0.0 {
                (-q.ln() - entropy).abs()
            } else {
                f64::INFINITY
            };
            (distance, q, c)
        })
        .collect();
    order.sort_by(|a, b| a.0.total_cmp(&b.0));
    let mut cum = 0.0;
    let mut keep = order.len();
    for (i, &(_, q, _)) in order.iter().enumerate() {
        cum += q;
        if cum > mass as f64 {
            keep = i + 1;
            break;
        }
    }
    cands.clear();
    cands.extend(order[..keep].iter().map(|&(_, _, c)| c));
    cands.sort_unstable_by(better);
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
