//! Header checks that need no protocol knowledge: one `Host` and one `Origin` at most (two are
//! ambiguous: a proxy and this server could each read a different one), an `Origin` that is a
//! loopback one or allowed, and on a loopback bind a loopback `Host` (DNS rebinding: a web page
//! whose name resolves to 127.0.0.1 sends its own name as `Host`).

use http::header::{HOST, ORIGIN};
use http::HeaderMap;

use super::answer::Refusal;
use super::limits::Limits;

const LOOPBACK_HOSTS: [&str; 4] = ["localhost", "127.0.0.1", "::1", "[::1]"];

/// `Ok(())` or the refusal to answer.
pub fn check(headers: &HeaderMap, limits: &Limits) -> Result<(), Refusal> {
    for name in [HOST, ORIGIN] {
        if headers.get_all(&name).iter().nth(1).is_some() {
            return Err(Refusal::closing(
                400,
                format!("the request has more than one {name} header"),
            ));
        }
    }
    if let Some(origin) = headers.get(ORIGIN) {
        let origin = String::from_utf8_lossy(origin.as_bytes());
        if !limits.allowed_origins.iter().any(|o| *o == origin) && !loopback_origin(&origin) {
            return Err(Refusal::new(403, format!("Origin {origin} is not allowed")));
        }
    }
    if limits.loopback {
        let host = headers.get(HOST).map(|h| h.as_bytes()).unwrap_or(b"");
        let shown = String::from_utf8_lossy(host);
        if !LOOPBACK_HOSTS.contains(&host_name(&shown)) {
            return Err(Refusal::new(
                403,
                format!("Host {shown:?} is not this server"),
            ));
        }
    }
    Ok(())
}

/// `http://localhost:3000` and the like: scheme http(s), a loopback host, any port.
fn loopback_origin(origin: &str) -> bool {
    let rest = origin
        .strip_prefix("http://")
        .or_else(|| origin.strip_prefix("https://"));
    match rest {
        Some(rest) => {
            let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
            LOOPBACK_HOSTS.contains(&host_name(authority))
        }
        None => false,
    }
}

/// The host of `host[:port]` or `[v6]:port`, brackets kept.
fn host_name(authority: &str) -> &str {
    if authority.starts_with('[') {
        match authority.find(']') {
            Some(end) => &authority[..=end],
            None => authority,
        }
    } else {
        authority.split(':').next().unwrap_or("")
    }
}
