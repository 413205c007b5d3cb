//! KL divergence of a model's next-token distributions from a saved base
//! (`local-llm perplexity --kl-divergence`): the per-position statistics llama-perplexity
//! computes and the report it prints, with the same labels and formats.

use crate::logits_file::BaseRow;

/// Running sums over scored positions (llama-perplexity's `kl_divergence_result`).
#[derive(Default)]
pub struct KldStats {
    sum_nll: f64,
    sum_nll2: f64,
    sum_nll_base: f64,
    sum_nll_base2: f64,
    sum_nll_nll_base: f64,
    sum_kld: f64,
    sum_kld2: f64,
    sum_p_diff: f64,
    sum_p_diff2: f64,
    sum_p_diff4: f64,
    max_p_diff: f32,
    n_same_top: usize,
    count: usize,
    /// Every position's KL divergence.
    kld_values: Vec<f32>,
    /// Every position's probability of the actual next token minus the base's.
    p_diff_values: Vec<f32>,
}

/// Index of the first largest value.
fn first_max(values: impl Iterator<Item = f32>) -> (usize, f32) {
    let mut best = (0, f32::NEG_INFINITY);
    for (i, v) in values.enumerate() {
        if i == 0 || v > best.1 {
            best = (i, v);
        }
    }
    best
}

impl KldStats {
    /// Adds one position: `logits` of the model under test, `base` the saved distribution,
    /// `token` the text's next token. The arithmetic (f32 where llama-perplexity uses f32)
    /// follows llama-perplexity's.
    pub fn add(&mut self, logits: &[f32], base: &BaseRow, token: usize) {
        let (imax, max_logit) = first_max(logits.iter().copied());
        let sum_exp: f64 = logits
            .iter()
            .map(|&l| f64::from((l - max_logit).exp()))
            .sum();
        let log_sum_exp = sum_exp.ln() as f32;
        let nll = max_logit + log_sum_exp - logits[token];
        let nll_base = -base.log_prob(token);
        self.sum_nll += f64::from(nll);
        self.sum_nll2 += f64::from(nll * nll);
        self.sum_nll_base += f64::from(nll_base);
        self.sum_nll_base2 += f64::from(nll_base * nll_base);
        self.sum_nll_nll_base += f64::from(nll * nll_base);

        let log_norm = max_logit + log_sum_exp;
        let mut kld = 0f64;
        for (i, &l) in logits.iter().enumerate() {
            let p_log_base = base.log_prob(i);
            if p_log_base > -16.0 {
                kld += f64::from(p_log_base.exp() * (p_log_base - l + log_norm));
            }
        }
        let (imax_base, _) = first_max((0..logits.len()).map(|i| base.log_prob(i)));
        self.sum_kld += kld;
        self.sum_kld2 += kld * kld;
        self.count += 1;
        self.n_same_top += usize::from(imax == imax_base);

        let p_diff = (-nll).exp() - (-nll_base).exp();
        self.sum_p_diff += f64::from(p_diff);
        let p_diff2 = f64::from(p_diff * p_diff);
        self.sum_p_diff2 += p_diff2;
        self.sum_p_diff4 += p_diff2 * p_diff2;
        self.max_p_diff = self.max_p_diff.max(p_diff.abs());
        self.kld_values.push(kld as f32);
        self.p_diff_values.push(p_diff);
    }

    /// Mean and its standard error of a quantity from its sum and sum of squares.
    fn mean_and_uncertainty(&self, sum: f64, sum2: f64) -> (f64, f64) {
        let count = self.count;
        if count < 1 {
            return (0.0, 0.0);
        }
        let f = sum / count as f64;
        let df = sum2 / count as f64 - f * f;
        let df = if df > 0.0 && count > 10 {
            (df / (count - 1) as f64).sqrt()
        } else {
            0.0
        };
        (f, df)
    }

    /// Covariance of the mean log-likelihoods of the model and the base.
    fn log_ppl_covariance(&self) -> f64 {
        let count = self.count as f64;
        if self.count < 10 {
            return 0.0;
        }
        let cov =
            self.sum_nll_nll_base / count - (self.sum_nll / count) * (self.sum_nll_base / count);
        cov / (count - 1.0)
    }

    /// The header of the per-chunk table.
    pub fn table_header() -> &'static str {
        "chunk             PPL               ln(PPL(Q)/PPL(base))          KL Divergence              Δp RMS            Same top p"
    }

    /// The running line of the per-chunk table after chunk `chunk` (1-based).
    pub fn table_row(&self, chunk: usize) -> String {
        let log_ppl = self.mean_and_uncertainty(self.sum_nll, self.sum_nll2);
        let ppl = log_ppl.0.exp();
        let log_ppl_base = self.mean_and_uncertainty(self.sum_nll_base, self.sum_nll_base2);
        let cov = self.log_ppl_covariance();
        let ratio = log_ppl.0 - log_ppl_base.0;
        let ratio_unc =
            (log_ppl.1 * log_ppl.1 + log_ppl_base.1 * log_ppl_base.1 - 2.0 * cov).sqrt();
        let kld = self.mean_and_uncertainty(self.sum_kld, self.sum_kld2);
        let mse = self.mean_and_uncertainty(self.sum_p_diff2, self.sum_p_diff4);
        let rms = mse.0.sqrt();
        let rms_unc = 0.5 / rms * mse.1;
        let top = self.n_same_top as f64 / self.count as f64;
        let top_unc = (top * (1.0 - top) / (self.count as f64 - 1.0)).sqrt();
        format!(
            "{chunk:4}    {ppl:9.4} ± {:9.4}    {ratio:10.5} ± {ratio_unc:10.5}    {:10.5} ± {:10.5}    {:6.3} ± {:6.3} %    {:6.3} ± {:6.3} %",
            ppl * log_ppl.1,
            kld.0,
            kld.1,
            100.0 * rms,
            100.0 * rms_unc,
            100.0 * top,
            100.0 * top_unc
        )
    }

    /// The final report (perplexity, KL divergence and token probability statistics), or
    /// nothing under 100 positions, as llama-perplexity does.
    pub fn report(&mut self) -> Option<String> {
        if self.count < 100 {
            return None;
        }
        let mut out = String::new();
        let mut line = |s: String| {
            out.push_str(&s);
            out.push('\n');
        };
        line("====== Perplexity statistics ======".into());
        let log_ppl = self.mean_and_uncertainty(self.sum_nll, self.sum_nll2);
        let ppl = log_ppl.0.exp();
        let ppl_unc = ppl * log_ppl.1;
        line(format!(
            "Mean PPL(Q)                   : {ppl:10.6} ± {ppl_unc:10.6}"
        ));
        let log_base = self.mean_and_uncertainty(self.sum_nll_base, self.sum_nll_base2);
        let base = log_base.0.exp();
        let base_unc = base * log_base.1;
        line(format!(
            "Mean PPL(base)                : {base:10.6} ± {base_unc:10.6}"
        ));
        let cov = self.log_ppl_covariance();
        let cor = cov / (log_ppl.1 * log_base.1);
        line(format!(
            "Cor(ln(PPL(Q)), ln(PPL(base))): {:6.2}%",
            100.0 * cor
        ));
        let ratio = log_ppl.0 - log_base.0;
        let ratio_unc = (log_ppl.1 * log_ppl.1 + log_base.1 * log_base.1 - 2.0 * cov).sqrt();
        line(format!(
            "Mean ln(PPL(Q)/PPL(base))     : {ratio:10.6} ± {ratio_unc:10.6}"
        ));
        let r = ratio.exp();
        line(format!(
            "Mean PPL(Q)/PPL(base)         : {r:10.6} ± {:10.6}",
            r * ratio_unc
        ));
        let diff_unc = (ppl_unc * ppl_unc + base_unc * base_unc - 2.0 * ppl * base * cov).sqrt();
        line(format!(
            "Mean PPL(Q)-PPL(base)         : {:10.6} ± {diff_unc:10.6}",
            ppl - base
        ));
        line(String::new());

        line("====== KL divergence statistics ======".into());
        let kld = self.mean_and_uncertainty(self.sum_kld, self.sum_kld2);
        line(format!("Mean    KLD: {:10.6} ± {:10.6}", kld.0, kld.1));
        let v = &mut self.kld_values;
        v.sort_by(f32::total_cmp);
        line(format!("Maximum KLD: {:10.6}", v[v.len() - 1]));
        for (label, f) in [
            ("99.9%", 0.999),
            ("99.0%", 0.99),
            ("95.0%", 0.95),
            ("90.0%", 0.9),
        ] {
            line(format!("{label}   KLD: {:10.6}", percentile(v, f)));
        }
        line(format!("Median  KLD: {:10.6}", median(v)));
        for (label, f) in [
            ("10.0%", 0.1),
            (" 5.0%", 0.05),
            (" 1.0%", 0.01),
            (" 0.1%", 0.001),
        ] {
            line(format!("{label}   KLD: {:10.6}", percentile(v, f)));
        }
        line(format!("Minimum KLD: {:10.6}", v[0]));
        line(String::new());

        line("====== Token probability statistics ======".into());
        let p_diff = self.mean_and_uncertainty(self.sum_p_diff, self.sum_p_diff2);
        line(format!(
            "Mean    Δp: {:6.3} ± {:5.3} %",
            100.0 * p_diff.0,
            100.0 * p_diff.1
        ));
        let v = &mut self.p_diff_values;
        v.sort_by(f32::total_cmp);
        let pct = |x: f32| 100.0 * f64::from(x);
        line(format!("Maximum Δp: {:6.3}%", pct(v[v.len() - 1])));
        for (label, f) in [
            ("99.9%", 0.999),
            ("99.0%", 0.99),
            ("95.0%", 0.95),
            ("90.0%", 0.9),
            ("75.0%", 0.75),
        ] {
            line(format!("{label}   Δp: {:6.3}%", pct(percentile(v, f))));
        }
        line(format!("Median  Δp: {:6.3}%", pct(median(v))));
        for (label, f) in [
            ("25.0%", 0.25),
            ("10.0%", 0.1),
            (" 5.0%", 0.05),
            (" 1.0%", 0.01),
            (" 0.1%", 0.001),
        ] {
            line(format!("{label}   Δp: {:6.3}%", pct(percentile(v, f))));
        }
        line(format!("Minimum Δp: {:6.3}%", pct(v[0])));
        let mse = self.mean_and_uncertainty(self.sum_p_diff2, self.sum_p_diff4);
        let rms = mse.0.sqrt();
        line(format!(
            "RMS Δp    : {:6.3} ± {:5.3} %",
            100.0 * rms,
            100.0 * 0.5 / rms * mse.1
        ));
        let top = self.n_same_top as f64 / self.count as f64;
        line(format!(
            "Same top p: {:6.3} ± {:5.3} %",
            100.0 * top,
            100.0 * (top * (1.0 - top) / (self.count as f64 - 1.0)).sqrt()
        ));
        Some(out)
    }
}

/// Median of sorted, non-empty `v` (the mean of the middle two for an even length).
fn median(v: &[f32]) -> f32 {
    let n = v.len();
    if n.is_multiple_of(2) {
        0.5 * (v[n / 2] + v[n / 2 - 1])
    } else {
        v[n / 2]
    }
}

/// Linear interpolation at `fraction` of sorted, non-empty `v`, in f32 as llama-perplexity.
fn percentile(v: &[f32], fraction: f32) -> f32 {
    if fraction <= 0.0 {
        return v[0];
    }
    if fraction >= 1.0 {
        return v[v.len() - 1];
    }
    let p = fraction * (v.len() - 1) as f32;
    let ip = p as usize;
    let p = p - ip as f32;
    (1.0 - p) * v[ip] + p * v[(ip + 1).min(v.len() - 1)]
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::logits_file::{encode_row, row_words};

    #[test]
    fn identical_distributions_have_zero_divergence_and_the_same_top() {
        let logits: Vec<f32> = (0..50).map(|i| ((i * 37) % 11) as f32 * 0.7).collect();
        let mut row = vec![0u16; row_words(logits.len())];
        encode_row(&logits, 3, &mut row);
        let mut stats = KldStats::default();
        for _ in 0..100 {
            stats.add(&logits, &BaseRow::new(&row, logits.len()), 3);
        }
        let kld = stats.mean_and_uncertainty(stats.sum_kld, stats.sum_kld2).0;
        // Only the 16-bit quantization of the base separates them (steps of 7/65535 in the
        // log-probabilities here).
        assert!(kld.abs() < 1e-4, "{kld}");
        assert_eq!(stats.n_same_top, 100);
        let report = stats.report().expect("100 positions give a report");
        assert!(report.contains("Same top p: 100.000 ±"), "{report}");
    }

    #[test]
    fn divergence_of_a_shifted_distribution_is_the_analytic_value() {
        // Base p = (1/2, 1/2), model q = (e/(1+e), 1/(1+e)):
        // KL(p||q) = ½ ln(½/q0) + ½ ln(½/q1).
        let base_logits = [0.0f32, 0.0];
        let logits = [1.0f32, 0.0];
        let mut row = vec![0u16; row_words(2)];
        encode_row(&base_logits, 0, &mut row);
        let mut stats = KldStats::default();
        stats.add(&logits, &BaseRow::new(&row, 2), 0);
        let e = std::f64::consts::E;
        let (q0, q1) = (e / (1.0 + e), 1.0 / (1.0 + e));
        let want = 0.5 * (0.5 / q0).ln() + 0.5 * (0.5 / q1).ln();
        assert!(
            (stats.sum_kld - want).abs() < 1e-5,
            "{} vs {want}",
            stats.sum_kld
        );
        assert!((f64::from(stats.p_diff_values[0]) - (q0 - 0.5)).abs() < 1e-5);
    }
}
