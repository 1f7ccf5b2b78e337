//! The syntax of names: producerIds, environment variable and agent names, git ref names and
//! allowed URLs.

pub(super) const MAX_NAME_CHARS: usize = 200;

/// Why `id` does not match `^[a-z0-9-]{3,64}$`, if it does not.
pub fn producer_id_problem(id: &str) -> Option<String> {
    if let Some(c) = id
        .chars()
        .find(|c| !(c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '-'))
    {
        let hint = if c.is_ascii_uppercase() {
            " (use lowercase)"
        } else {
            ""
        };
        return Some(format!("contains {c:?}{hint}"));
    }
    let len = id.len();
    if len < 3 {
        return Some(format!("is {len} characters long, fewer than 3"));
    }
    if len > 64 {
        return Some(format!("is {len} characters long, more than 64"));
    }
    None
}

/// `[A-Za-z_][A-Za-z0-9_]*`.
pub(super) fn is_env_name(key: &str) -> bool {
    let mut chars = key.chars();
    chars
        .next()
        .is_some_and(|c| c.is_ascii_alphabetic() || c == '_')
        && chars.all(|c| c.is_ascii_alphanumeric() || c == '_')
}

/// `[a-z0-9_-]+`.
pub(super) fn is_agent_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-' || c == '_')
}

/// Why `name` breaks git's ref-name rules (`git check-ref-format`), if it does.
pub(super) fn ref_name_problem(name: &str) -> Option<String> {
    if name.is_empty() {
        return Some("must not be empty".to_owned());
    }
    if name == "@" {
        return Some("must not be `@` alone".to_owned());
    }
    if name.starts_with('-') {
        return Some("must not start with `-`".to_owned());
    }
    if let Some(c) = name.chars().find(|&c| {
        c.is_ascii_control() || matches!(c, ' ' | '~' | '^' | ':' | '?' | '*' | '[' | '\\')
    }) {
        let what = match c {
            ' ' => "a space".to_owned(),
            c if c.is_ascii_control() => format!("the control character {c:?}"),
            c => format!("`{c}`"),
        };
        return Some(format!("must not contain {what}"));
    }
    for (pattern, what) in [("..", "`..`"), ("//", "`//`"), ("@{", "`@{`")] {
        if name.contains(pattern) {
            return Some(format!("must not contain {what}"));
        }
    }
    if name.starts_with('/') {
        return Some("must not start with `/`".to_owned());
    }
    if name.ends_with('/') {
        return Some("must not end with `/`".to_owned());
    }
    if name.ends_with('.') {
        return Some("must not end with `.`".to_owned());
    }
    for component in name.split('/') {
        if component.starts_with('.') {
            return Some(format!("the part {component:?} must not start with `.`"));
        }
        if component.ends_with(".lock") {
            return Some(format!("the part {component:?} must not end with `.lock`"));
        }
    }
    None
}

/// Why `url` is neither an http(s) URL nor a domain pattern, if it is not.
pub(super) fn url_problem(url: &str) -> Option<String> {
    if url.is_empty() {
        return Some("must not be empty".to_owned());
    }
    if url.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Some("must not contain spaces or control characters".to_owned());
    }
    if let Some(rest) = strip_prefix_ignore_case(url, "https://")
        .or_else(|| strip_prefix_ignore_case(url, "http://"))
    {
        let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
        return (!is_host_and_port(&rest[..end]))
            .then(|| "the URL has no valid host (e.g. `https://example.com/path`)".to_owned());
    }
    if let Some((scheme, _)) = url.split_once(':') {
        if url[scheme.len()..].starts_with("://") || !is_host_and_port(url) {
            return Some(format!(
                "the scheme `{scheme}:` is not allowed, only http and https"
            ));
        }
    }
    (!is_host_and_port(url)).then(|| "not a URL or domain pattern".to_owned())
}

pub(super) fn strip_prefix_ignore_case<'s>(s: &'s str, prefix: &str) -> Option<&'s str> {
    let head = s.get(..prefix.len())?;
    head.eq_ignore_ascii_case(prefix)
        .then(|| &s[prefix.len()..])
}

/// `host` or `host:port`, where host is a domain (optionally `*.`-prefixed), an IPv4 address
/// or a bracketed IPv6 address.
pub(super) fn is_host_and_port(s: &str) -> bool {
    if let Some(inner) = s.strip_prefix('[') {
        let Some((addr, after)) = inner.split_once(']') else {
            return false;
        };
        let is_ipv6 = !addr.is_empty()
            && addr
                .chars()
                .all(|c| c.is_ascii_hexdigit() || c == ':' || c == '.');
        return is_ipv6 && (after.is_empty() || after.strip_prefix(':').is_some_and(is_port));
    }
    match s.split_once(':') {
        Some((host, port)) => is_domain_pattern(host) && is_port(port),
        None => is_domain_pattern(s),
    }
}

/// A TCP port: 1–65535.
pub(super) fn is_port(p: &str) -> bool {
    p.len() <= 5
        && p.bytes().all(|b| b.is_ascii_digit())
        && p.parse::<u32>().is_ok_and(|n| (1..=65_535).contains(&n))
}

/// `example.com`, `*.example.com`, `localhost`, `10.0.0.1`: labels of letters, digits and `-`
/// (not at either end), at most 63 characters each and 253 in all.
pub(super) fn is_domain_pattern(host: &str) -> bool {
    let domain = host.strip_prefix("*.").unwrap_or(host);
    !domain.is_empty()
        && domain.len() <= 253
        && domain.split('.').all(|label| {
            !label.is_empty()
                && label.len() <= 63
                && !label.starts_with('-')
                && !label.ends_with('-')
                && label.chars().all(|c| c.is_alphanumeric() || c == '-')
        })
}
