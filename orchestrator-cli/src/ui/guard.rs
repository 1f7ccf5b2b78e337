//! Who may use the dashboard: requests must name the dashboard by its own loopback address
//! (Host), come from its own pages if they come from a page at all (Origin, Sec-Fetch-Site),
//! and carry the token printed at start (`?token=` or `Authorization: Bearer`). A web page on
//! another site can neither read nor drive it, DNS rebinding included (its Host is foreign).

use hyper::header::{HeaderMap, AUTHORIZATION, HOST, ORIGIN};

/// Why a request is turned away.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Refusal {
    /// The token is missing or wrong: 401.
    Token,
    /// The Host is not the dashboard's own address: 403.
    Host,
    /// The request comes from another site's page: 403.
    Origin,
}

/// The dashboard's address and token.
#[derive(Debug, Clone)]
pub struct Guard {
    token: String,
    port: u16,
}

impl Guard {
    /// A guard for the dashboard on `127.0.0.1:port` with `token`.
    pub fn new(token: String, port: u16) -> Self {
        Guard { token, port }
    }

    /// The token.
    pub fn token(&self) -> &str {
        &self.token
    }

    /// Checks a request's headers and query string.
    pub fn check(&self, headers: &HeaderMap, query: Option<&str>) -> Result<(), Refusal> {
        let host = headers.get(HOST).and_then(|h| h.to_str().ok());
        if !host.is_some_and(|h| self.own_host(h)) {
            return Err(Refusal::Host);
        }
        if let Some(origin) = headers.get(ORIGIN) {
            let own = origin
                .to_str()
                .ok()
                .and_then(|o| o.strip_prefix("http://"))
                .is_some_and(|h| self.own_host(h));
            if !own {
                return Err(Refusal::Origin);
            }
        }
        // A browser says where a request comes from even when it sends no Origin (a GET).
        if let Some(site) = headers.get("sec-fetch-site").and_then(|s| s.to_str().ok()) {
            if site == "cross-site" || site == "same-site" {
                return Err(Refusal::Origin);
            }
        }
        let bearer = headers
            .get(AUTHORIZATION)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| v.strip_prefix("Bearer "));
        let from_query = query_param(query, "token");
        let given = bearer.or(from_query.as_deref());
        match given {
            Some(t) if same(t.as_bytes(), self.token.as_bytes()) => Ok(()),
            _ => Err(Refusal::Token),
        }
    }

    /// Whether `host` (`name:port`) is this dashboard: `127.0.0.1` or `localhost` on its port.
    fn own_host(&self, host: &str) -> bool {
        let Some((name, port)) = host.rsplit_once(':') else {
            return false;
        };
        port.parse::<u16>().ok() == Some(self.port) && matches!(name, "127.0.0.1" | "localhost")
    }
}

/// Compares in time independent of where the strings differ.
fn same(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// The value of `name` in a query string, percent-decoded (`+` is a space).
pub fn query_param(query: Option<&str>, name: &str) -> Option<String> {
    let raw = query?
        .split('&')
        .filter_map(|pair| pair.split_once('='))
        .find(|(k, _)| *k == name)
        .map(|(_, v)| v)?;
    let bytes = raw.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match bytes[i] {
            b'%' if i + 2 < bytes.len() => match (hex(bytes[i + 1]), hex(bytes[i + 2])) {
                (Some(h), Some(l)) => {
                    out.push((h * 16 + l) as u8);
                    i += 3;
                    continue;
                }
                _ => out.push(b'%'),
            },
            b'+' => out.push(b' '),
            b => out.push(b),
        }
        i += 1;
    }
    Some(String::from_utf8_lossy(&out).into_owned())
}

#[cfg(test)]
mod tests {
    use super::*;
    use hyper::header::HeaderValue;

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut h = HeaderMap::new();
        for (k, v) in pairs {
            h.insert(
                *k,
                HeaderValue::from_str(v).unwrap_or(HeaderValue::from_static("")),
            );
        }
        h
    }

    #[test]
    fn the_token_host_and_origin_are_all_checked() {
        let g = Guard::new("t0k".into(), 4000);
        let host = ("host", "127.0.0.1:4000");
        assert_eq!(g.check(&headers(&[host]), Some("token=t0k")), Ok(()));
        assert_eq!(
            g.check(
                &headers(&[("host", "localhost:4000")]),
                Some("a=1&token=t0k")
            ),
            Ok(())
        );
        assert_eq!(
            g.check(&headers(&[host, ("authorization", "Bearer t0k")]), None),
            Ok(())
        );
        assert_eq!(g.check(&headers(&[host]), None), Err(Refusal::Token));
        assert_eq!(
            g.check(&headers(&[host]), Some("token=t0")),
            Err(Refusal::Token)
        );
        assert_eq!(
            g.check(&headers(&[host]), Some("token=t0kk")),
            Err(Refusal::Token)
        );
        assert_eq!(
            g.check(&headers(&[]), Some("token=t0k")),
            Err(Refusal::Host)
        );
        for bad in [
            "evil.example:4000",
            "127.0.0.1:4001",
            "127.0.0.1",
            "127.0.0.1.evil:4000",
        ] {
            assert_eq!(
                g.check(&headers(&[("host", bad)]), Some("token=t0k")),
                Err(Refusal::Host),
                "{bad}"
            );
        }
        for bad in [
            "http://evil.example",
            "https://127.0.0.1:4000",
            "null",
            "http://127.0.0.1:80",
        ] {
            assert_eq!(
                g.check(&headers(&[host, ("origin", bad)]), Some("token=t0k")),
                Err(Refusal::Origin),
                "{bad}"
            );
        }
        assert_eq!(
            g.check(
                &headers(&[host, ("origin", "http://127.0.0.1:4000")]),
                Some("token=t0k")
            ),
            Ok(())
        );
        assert_eq!(
            g.check(
                &headers(&[host, ("sec-fetch-site", "cross-site")]),
                Some("token=t0k")
            ),
            Err(Refusal::Origin)
        );
        assert_eq!(
            query_param(Some("live=plan%3Aab+c&x=1"), "live").as_deref(),
            Some("plan:ab c")
        );
        assert_eq!(query_param(Some("a=%zz%4"), "a").as_deref(), Some("%zz%4"));
        assert_eq!(query_param(Some("a=1"), "b"), None);
    }
}
