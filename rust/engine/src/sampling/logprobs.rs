//! Token log-probabilities, computed only when a request asks for them.
//!
//! Definition: the natural-log softmax of the model's raw logits at that step, before any
//! sampling transform (penalties, top-k/p, min-p, temperature), as OpenAI reports them. NaN
//! logits count as -inf. Sums are taken in f64.

/// Most alternatives a request may ask for per token (OpenAI's limit).
pub const MAX_TOP_LOGPROBS: usize = 20;

/// A token with its log-probability.
#[derive(Clone, Debug, PartialEq)]
pub struct TopLogprob {
    /// The token id.
    pub token: u32,
    /// Its log-probability.
    pub logprob: f32,
    /// The token's bytes (control tokens as their text).
    pub bytes: Vec<u8>,
}

/// The log-probability of one generated token and the most likely alternatives at its step.
#[derive(Clone, Debug, PartialEq)]
pub struct TokenLogprob {
    /// The generated token.
    pub token: u32,
    /// Its log-probability.
    pub logprob: f32,
    /// The token's bytes (control tokens as their text).
    pub bytes: Vec<u8>,
    /// The most likely tokens at this step, most likely first (ties: lower id first); as many
    /// as the request asked for.
    pub top: Vec<TopLogprob>,
}

/// The log-probability of `token` and the `n_top` most likely tokens under `logits`;
/// `bytes_of` gives a token's bytes.
pub fn token_logprob(
    logits: &[f32],
    token: u32,
    n_top: usize,
    bytes_of: &dyn Fn(u32) -> Vec<u8>,
) -> TokenLogprob {
    let clean = |l: f32| if l.is_nan() { f32::NEG_INFINITY } else { l };
    let max = logits
        .iter()
        .map(|&l| clean(l))
        .fold(f32::NEG_INFINITY, f32::max);
    let sum: f64 = logits
        .iter()
        .map(|&l| (f64::from(clean(l)) - f64::from(max)).exp())
        .sum();
    let log_z = f64::from(max) + sum.ln();
    let lp = |l: f32| (f64::from(clean(l)) - log_z) as f32;
    let logprob = logits
        .get(token as usize)
        .map_or(f32::NEG_INFINITY, |&l| lp(l));
    let mut ids: Vec<u32> = (0..logits.len() as u32).collect();
    let by_logit = |a: &u32, b: &u32| {
        clean(logits[*b as usize])
            .total_cmp(&clean(logits[*a as usize]))
            .then(a.cmp(b))
    };
    let n = n_top.min(ids.len());
    if n > 0 && n < ids.len() {
        ids.select_nth_unstable_by(n - 1, by_logit);
    }
    ids.truncate(n);
    ids.sort_unstable_by(by_logit);
    TokenLogprob {
        token,
        logprob,
        bytes: bytes_of(token),
        top: ids
            .into_iter()
            .map(|id| TopLogprob {
                token: id,
                logprob: lp(logits[id as usize]),
                bytes: bytes_of(id),
            })
            .collect(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn log_softmax_and_top() {
        let logits = [1.0f32, 3.0, f32::NAN, 3.0, 0.0];
        let bytes = |id: u32| vec![id as u8];
        let r = token_logprob(&logits, 4, 3, &bytes);
        let z: f64 = [1.0f64, 3.0, 3.0, 0.0].iter().map(|l| l.exp()).sum();
        assert!((f64::from(r.logprob) - (0.0 - z.ln())).abs() < 1e-6);
        assert_eq!(r.bytes, vec![4]);
        let ids: Vec<u32> = r.top.iter().map(|t| t.token).collect();
        assert_eq!(ids, vec![1, 3, 0]);
        assert!((f64::from(r.top[0].logprob) - (3.0 - z.ln())).abs() < 1e-6);
        assert_eq!(r.top[1].bytes, vec![3]);
        assert!(token_logprob(&logits, 2, 0, &bytes).logprob == f32::NEG_INFINITY);
        assert!(token_logprob(&logits, 0, 0, &bytes).top.is_empty());
        assert_eq!(token_logprob(&logits, 0, 50, &bytes).top.len(), 5);
    }
}
