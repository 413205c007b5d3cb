//! Stop-string matching over streamed text.

/// Stop-string matcher for streamed text: text that may still be the start of a stop string is
/// held back until it is known not to be one.
#[derive(Clone, Debug)]
pub struct StopMatcher {
    stops: Vec<String>,
    held: String,
    stopped: bool,
}

impl StopMatcher {
    /// A matcher for the given stop strings (empty strings are ignored).
    pub fn new(stops: &[String]) -> Self {
        StopMatcher {
            stops: stops.iter().filter(|s| !s.is_empty()).cloned().collect(),
            held: String::new(),
            stopped: false,
        }
    }

    /// Feed newly generated text. Returns the text that is safe to emit now and whether a stop
    /// string matched; on a match, the stop string and everything after it are dropped. Once a
    /// stop has matched, further pushes return `("", true)`.
    pub fn push(&mut self, text: &str) -> (String, bool) {
        if self.stopped {
            return (String::new(), true);
        }
        self.held.push_str(text);
        let earliest = self
            .stops
            .iter()
            .filter_map(|s| self.held.find(s.as_str()))
            .min();
        if let Some(at) = earliest {
            self.held.truncate(at);
            self.stopped = true;
            return (std::mem::take(&mut self.held), true);
        }
        let keep = self.partial_suffix_len();
        let emit = self.held[..self.held.len() - keep].to_string();
        self.held.drain(..self.held.len() - keep);
        (emit, false)
    }

    /// The held-back text at the end of generation (empty after a stop matched).
    pub fn flush(&mut self) -> String {
        std::mem::take(&mut self.held)
    }

    /// Length of the longest suffix of the held text that is a proper prefix of a stop string.
    fn partial_suffix_len(&self) -> usize {
        let max_len = self.stops.iter().map(String::len).max().unwrap_or(0);
        let held = self.held.as_str();
        let min_start = held.len().saturating_sub(max_len.saturating_sub(1));
        held.char_indices()
            .map(|(i, _)| i)
            .filter(|&i| i >= min_start)
            .find(|&i| {
                let tail = &held[i..];
                self.stops
                    .iter()
                    .any(|s| s.len() > tail.len() && s.starts_with(tail))
            })
            .map_or(0, |i| held.len() - i)
    }
}
