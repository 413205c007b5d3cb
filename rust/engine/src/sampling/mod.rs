//! Logit processing, sampling and stop-string matching.
