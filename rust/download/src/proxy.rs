//! The proxy of a request, from the usual environment variables: `HTTPS_PROXY` for https URLs,
//! `HTTP_PROXY` for http URLs, `ALL_PROXY` for both (lower-case names too), and `NO_PROXY`, a
//! comma-separated list of hosts (a name matches itself and its subdomains; `*` matches all).

/// Proxy settings read once from the environment (or given by a test).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct ProxyConfig {
    /// Proxy URL for `https://` requests.
    pub https: Option<String>,
    /// Proxy URL for `http://` requests.
    pub http: Option<String>,
    /// Hosts reached directly.
    pub no_proxy: Vec<String>,
}

fn env_var(names: &[&str]) -> Option<String> {
    names
        .iter()
        .filter_map(|n| std::env::var(n).ok())
        .map(|v| v.trim().to_string())
        .find(|v| !v.is_empty())
}

impl ProxyConfig {
    /// Read the environment variables.
    pub fn from_env() -> Self {
        let all = env_var(&["ALL_PROXY", "all_proxy"]);
        ProxyConfig {
            https: env_var(&["HTTPS_PROXY", "https_proxy"]).or_else(|| all.clone()),
            http: env_var(&["HTTP_PROXY", "http_proxy"]).or(all),
            no_proxy: env_var(&["NO_PROXY", "no_proxy"])
                .map(|v| {
                    v.split(',')
                        .map(|h| h.trim().trim_start_matches('.').to_ascii_lowercase())
                        .filter(|h| !h.is_empty())
                        .collect()
                })
                .unwrap_or_default(),
        }
    }

    /// The proxy for a request to `url`, if any.
    pub fn for_url(&self, url: &str) -> Option<&str> {
        let proxy = if url.starts_with("https://") {
            self.https.as_deref()
        } else {
            self.http.as_deref()
        }?;
        let host = host_of(url).to_ascii_lowercase();
        let bypass = self.no_proxy.iter().any(|entry| {
            let entry = entry.split(':').next().unwrap_or(entry);
            entry == "*"
                || host == entry
                || host
                    .strip_suffix(entry)
                    .is_some_and(|prefix| prefix.ends_with('.'))
        });
        (!bypass).then_some(proxy)
    }
}

/// The host of an absolute URL (without user info and port; IPv6 literals keep their brackets).
pub(crate) fn host_of(url: &str) -> &str {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
    let host_port = authority.rsplit('@').next().unwrap_or(authority);
    if host_port.starts_with('[') {
        return host_port
            .split(']')
            .next()
            .map_or(host_port, |h| &host_port[..=h.len()]);
    }
    host_port.split(':').next().unwrap_or(host_port)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn no_proxy_matches_hosts_and_subdomains() {
        let c = ProxyConfig {
            https: Some("http://p:3128".into()),
            http: None,
            no_proxy: vec!["example.com".into(), "10.0.0.1".into()],
        };
        assert_eq!(c.for_url("https://hf.co/x"), Some("http://p:3128"));
        assert_eq!(c.for_url("https://a.example.com/x"), None);
        assert_eq!(c.for_url("https://example.com:443/x"), None);
        assert_eq!(c.for_url("https://badexample.com/x"), Some("http://p:3128"));
        assert_eq!(c.for_url("https://u:p@10.0.0.1/x"), None);
        assert_eq!(c.for_url("http://hf.co/x"), None);
        assert_eq!(host_of("http://[::1]:8080/x"), "[::1]");
    }
}
