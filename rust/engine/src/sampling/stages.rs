//! The sampling stages that work on a list of candidates, one function each, with llama.cpp's
//! semantics (its `llama_sampler_init_*` of the same names). [`super::Sampler`] chains them;
//! they are public so that they can be checked one by one against llama.cpp's own sampler test
//! cases (`tests/sampling_oracle.rs`).
//!
//! Stages that filter remove candidates instead of setting their logits to -inf as llama.cpp
//! does: the distribution the final draw sees is the same. Every filter keeps at least the best
//! candidate. Candidates are never NaN (the sampler reads a NaN logit as -inf).

use std::cmp::Ordering;

/// A token id with its (processed) logit.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Candidate {
    /// Token id.
    pub id: u32,
    /// Logit after the stages so far.
    pub logit: f32,
}

/// Order by logit descending, then id ascending: a total order, so ties always resolve to the
/// lowest id.
pub(crate) fn better(a: &Candidate, b: &Candidate) -> Ordering {
    b.logit.total_cmp(&a.logit).then(a.id.cmp(&b.id))
}

/// The largest logit of `cands` (-inf when empty).
pub(crate) fn max_logit(cands: &[Candidate]) -> f32 {
    cands
        .iter()
        .map(|c| c.logit)
        .fold(f32::NEG_INFINITY, f32::max)
}

/// The softmax of `cands`' logits, in their order (all zero when no logit is finite).
pub fn softmax(cands: &[Candidate]) -> Vec<f64> {
    let max = max_logit(cands);
    if !max.is_finite() {
        return vec![0.0; cands.len()];
    }
    let weights: Vec<f64> = cands
        .iter()
        .map(|c| ((c.logit - max) as f64).exp())
        .collect();
    let total: f64 = weights.iter().sum();
    weights.into_iter().map(|w| w / total).collect()
}

/// The repetition, frequency and presence penalties of a token that occurred `count` (> 0)
/// times in the penalty window: a positive logit is divided by `repeat`, a negative one
/// multiplied, then `count * frequency + presence` is subtracted.
pub fn penalize(logit: f32, count: usize, repeat: f32, frequency: f32, presence: f32) -> f32 {
    let scaled = if logit <= 0.0 {
        logit * repeat
    } else {
        logit / repeat
    };
    scaled - (count as f32 * frequency + presence)
}

/// Keep the `k` best candidates, sorted best first; 0 keeps all (unsorted).
pub fn top_k(cands: &mut Vec<Candidate>, k: usize) {
    if k == 0 {
        return;
    }
    if k < cands.len() {
        cands.select_nth_unstable_by(k - 1, better);
        cands.truncate(k);
    }
    cands.sort_unstable_by(better);
}

/// Nucleus sampling: keep the smallest set of best candidates whose probabilities sum to at
/// least `p` (at least one); `p >= 1` keeps all. Leaves the kept candidates sorted best first.
pub fn top_p(cands: &mut Vec<Candidate>, p: f32) {
    if p >= 1.0 || cands.is_empty() {
        return;
    }
    cands.sort_unstable_by(better);
    let probs = softmax(cands);
    let mut cum = 0.0;
    let mut keep = cands.len();
    for (i, q) in probs.iter().enumerate() {
        cum += q;
        if cum >= p as f64 {
            keep = i + 1;
            break;
        }
    }
    cands.truncate(keep.max(1));
}

/// Drop candidates whose probability is below `p` times the best one's (the best always stays,
/// also for `p > 1`); `p <= 0` keeps all. Keeps the order.
pub fn min_p(cands: &mut Vec<Candidate>, p: f32) {
    if p <= 0.0 || cands.is_empty() {
        return;
    }
    let max = max_logit(cands);
    // p_i >= p * p_max  <=>  logit_i >= max + ln(p).
    let threshold = (max + p.ln()).min(max);
    cands.retain(|c| c.logit >= threshold);
}

/// Locally typical sampling (Meister et al., "Locally Typical Sampling", 2022): with p_i the
/// softmax of `cands` and H its entropy, order tokens by how far their surprise -ln p_i is from
/// H, and keep the shortest prefix of that order whose probabilities sum to more than `mass` (at
/// least one token); `mass >= 1` keeps all. The kept tokens are left best first.
pub fn typical(cands: &mut Vec<Candidate>, mass: f32) {
    if mass >= 1.0 || cands.is_empty() {
        return;
    }
    // Ties keep the better candidate first so the result does not depend on the incoming order.
    cands.sort_unstable_by(better);
    let probs = softmax(cands);
    let entropy: f64 = probs
        .iter()
        .filter(|&&q| q > 0.0)
        .map(|&q| -q * q.ln())
        .sum();
    // (distance of the surprise from the entropy, probability, candidate)
    let mut order: Vec<(f64, f64, Candidate)> = cands
        .iter()
        .zip(&probs)
        .map(|(&c, &q)| {
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

/// The logit below which top-n-σ (Tang et al., "Top-nσ: Not All Logits Are You Need", 2024)
/// drops a token: the largest logit minus `n` standard deviations of the logits, counting only
/// those above -inf (as llama.cpp does). `None` when `n <= 0` (off).
pub fn top_n_sigma_floor(logits: impl Iterator<Item = f32> + Clone, n: f32) -> Option<f32> {
    if n <= 0.0 {
        return None;
    }
    let (mut max, mut sum, mut count) = (f32::NEG_INFINITY, 0.0f64, 0usize);
    for l in logits.clone().filter(|&l| l > f32::NEG_INFINITY) {
        max = max.max(l);
        sum += l as f64;
        count += 1;
    }
    if count == 0 {
        return None;
    }
    let mean = sum / count as f64;
    let var = logits
        .filter(|&l| l > f32::NEG_INFINITY)
        .map(|l| (l as f64 - mean).powi(2))
        .sum::<f64>()
        / count as f64;
    Some((max as f64 - n as f64 * var.sqrt()) as f32)
}

/// Top-n-σ: drop candidates whose logit is below [`top_n_sigma_floor`] of theirs; `n <= 0`
/// keeps all. Keeps the order.
pub fn top_n_sigma(cands: &mut Vec<Candidate>, n: f32) {
    if cands.len() <= 1 {
        return;
    }
    if let Some(floor) = top_n_sigma_floor(cands.iter().map(|c| c.logit), n) {
        cands.retain(|c| c.logit >= floor);
    }
}

/// Exclude Top Choices (XTC, from text-generation-webui): when `draw` (uniform in [0, 1)) is at
/// most `probability`, remove every candidate whose probability is at least `threshold` except
/// the least likely of them, so that a less obvious choice is made. Off when `probability <= 0`,
/// `threshold > 0.5` (then at most one token can pass it) or fewer than two candidates. Leaves
/// the candidates sorted best first when it acts. Returns whether it consumed `draw` (llama.cpp
/// draws only when the stage is on).
pub fn xtc(cands: &mut Vec<Candidate>, probability: f32, threshold: f32, draw: f32) -> bool {
    if probability <= 0.0 || threshold > 0.5 || cands.len() < 2 {
        return false;
    }
    if draw > probability {
        return true;
    }
    cands.sort_unstable_by(better);
    let probs = softmax(cands);
    let above = probs.iter().take_while(|&&q| q >= threshold as f64).count();
    if above > 1 {
        cands.drain(..above - 1);
    }
    true
}

/// Temperature: divide the logits by `t`; `t <= 0` keeps only the best candidate.
pub fn temperature(cands: &mut Vec<Candidate>, t: f32) {
    if t <= 0.0 {
        if let Some(best) = cands.iter().copied().min_by(better) {
            cands.clear();
            cands.push(best);
        }
        return;
    }
    for c in cands.iter_mut() {
        c.logit /= t;
    }
}

/// Mirostat 1.0 (Basu et al., "Mirostat", 2020) truncation: estimate the Zipf exponent s from
/// the `m` most likely tokens, derive the k that gives a surprise near `mu` bits over a
/// vocabulary of `n_vocab`, and keep the k best (sorted best first).
pub fn mirostat_truncate(cands: &mut Vec<Candidate>, mu: f32, n_vocab: usize, m: usize) {
    if cands.is_empty() {
        return;
    }
    let head = m.min(cands.len());
    top_k_prefix(cands, head);
    let probs = softmax(cands);
    let (mut sum_ti_bi, mut sum_ti_sq) = (0.0f64, 0.0f64);
    for i in 0..head.saturating_sub(1).min(m.saturating_sub(1)) {
        let t = ((i + 2) as f64 / (i + 1) as f64).ln();
        let b = (probs[i] / probs[i + 1]).ln();
        sum_ti_bi += t * b;
        sum_ti_sq += t * t;
    }
    let s_hat = sum_ti_bi / sum_ti_sq;
    let epsilon = s_hat - 1.0;
    let k = ((epsilon * 2f64.powf(mu as f64)) / (1.0 - (n_vocab as f64).powf(-epsilon)))
        .powf(1.0 / s_hat);
    // NaN (a flat or one-token head) and anything below 1 keep one token, as llama.cpp's int cast
    // and max(k, 1) do for the values it can produce.
    let k = if k.is_finite() && k >= 1.0 {
        (k as usize).min(cands.len())
    } else {
        1
    };
    top_k(cands, k);
}

/// Mirostat 2.0 truncation: keep the candidates whose surprise -log2 p is at most `mu` bits
/// (at least the best), sorted best first.
pub fn mirostat_v2_truncate(cands: &mut Vec<Candidate>, mu: f32) {
    if cands.is_empty() {
        return;
    }
    cands.sort_unstable_by(better);
    let probs = softmax(cands);
    let keep = probs
        .iter()
        .take_while(|&&q| -q.log2() <= mu as f64)
        .count();
    cands.truncate(keep.max(1));
}

/// Mirostat's feedback after a token of probability `p` (within the truncated set) was chosen:
/// `mu` moves by `eta` times the error between its surprise and the target `tau`.
pub fn mirostat_update(mu: f32, p: f64, tau: f32, eta: f32) -> f32 {
    let surprise = -p.log2();
    (mu as f64 - eta as f64 * (surprise - tau as f64)) as f32
}

/// Move the `n` best candidates to the front, sorted best first (the rest stay behind them, in
/// no particular order).
fn top_k_prefix(cands: &mut [Candidate], n: usize) {
    if n == 0 {
        return;
    }
    if n < cands.len() {
        cands.select_nth_unstable_by(n - 1, better);
    }
    cands[..n].sort_unstable_by(better);
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cands(logits: &[f32]) -> Vec<Candidate> {
        logits
            .iter()
            .enumerate()
            .map(|(id, &logit)| Candidate {
                id: id as u32,
                logit,
            })
            .collect()
    }

    #[test]
    fn filters_keep_the_best_candidate() {
        let mut c = cands(&[0.0, 1.0, 2.0]);
        min_p(&mut c, 1.5);
        assert_eq!(c.iter().map(|c| c.id).collect::<Vec<_>>(), [2]);
        let mut c = cands(&[0.0, 1.0, 2.0]);
        top_p(&mut c, 0.0);
        assert_eq!(c.iter().map(|c| c.id).collect::<Vec<_>>(), [2]);
        let mut c = cands(&[0.0, 1.0, 2.0]);
        mirostat_v2_truncate(&mut c, 0.0);
        assert_eq!(c.iter().map(|c| c.id).collect::<Vec<_>>(), [2]);
    }

    #[test]
    fn mirostat_feedback_moves_mu_towards_the_target() {
        // A surprising pick (1/64: 6 bits > tau 5) lowers mu; an obvious one raises it.
        assert!(mirostat_update(10.0, 1.0 / 64.0, 5.0, 0.1) < 10.0);
        assert!(mirostat_update(10.0, 0.5, 5.0, 0.1) > 10.0);
        assert!((mirostat_update(10.0, 1.0 / 32.0, 5.0, 0.1) - 10.0).abs() < 1e-6);
    }

    #[test]
    fn mirostat_keeps_more_tokens_for_a_higher_mu() {
        let logits: Vec<f32> = (0..1000).map(|i| -(i as f32 + 1.0).ln()).collect();
        let sizes: Vec<usize> = [2.0, 6.0, 10.0]
            .iter()
            .map(|&mu| {
                let mut c = cands(&logits);
                mirostat_truncate(&mut c, mu, 1000, 100);
                c.len()
            })
            .collect();
        assert!(sizes[0] < sizes[1] && sizes[1] < sizes[2], "{sizes:?}");
    }
}
