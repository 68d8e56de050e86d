//! Secrets out of text that is shown: credentials in a URL's userinfo, and credentials an upstream
//! answer echoes (an `Authorization` header, a password or token field). Applied to every URL and
//! upstream message before it reaches an error, a log line, a result or an HTTP answer.

/// `url` without its `user:password@` part.
pub fn redact_url(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return strip_userinfo(url).to_string();
    };
    format!("{scheme}://{}", strip_userinfo(rest))
}

/// `host…` without a leading `userinfo@` (an `@` after the first `/` is a path, not userinfo).
fn strip_userinfo(rest: &str) -> &str {
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    match rest[..authority_end].rfind('@') {
        Some(at) => &rest[at + 1..],
        None => rest,
    }
}

/// The user and password of a URL's userinfo, if it has one (percent-decoding not attempted).
pub fn userinfo(url: &str) -> Option<(String, String)> {
    let rest = url.split_once("://").map_or(url, |(_, r)| r);
    let authority_end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
    let at = rest[..authority_end].rfind('@')?;
    let info = &rest[..at];
    let (user, password) = info.split_once(':').unwrap_or((info, ""));
    Some((user.to_string(), password.to_string()))
}

/// `text` with every URL's userinfo removed and the value after a credential-looking key masked:
/// `Authorization: Basic …`, `password=…`, `"password": "…"`, `token`, `secret`.
pub fn redact_text(text: &str) -> String {
    const KEYS: [&str; 5] = ["authorization", "password", "passwd", "token", "secret"];
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    // URLs first: any `scheme://user:pass@` loses its userinfo.
    while let Some(i) = rest.find("://") {
        let (head, tail) = rest.split_at(i + 3);
        out.push_str(head);
        rest = strip_userinfo(tail);
    }
    out.push_str(rest);
    let lower = out.to_ascii_lowercase();
    let mut masked = String::with_capacity(out.len());
    let mut pos = 0;
    while pos < out.len() {
        let next = KEYS
            .iter()
            .filter_map(|k| lower[pos..].find(k).map(|i| (pos + i, k.len())))
            .min();
        let Some((at, len)) = next else {
            masked.push_str(&out[pos..]);
            break;
        };
        let key_end = at + len;
        masked.push_str(&out[pos..key_end]);
        // Skip the separator (quotes, colon, equals, spaces), then mask the value up to a delimiter.
        let bytes = out.as_bytes();
        let mut v = key_end;
        while v < out.len() && matches!(bytes[v], b'"' | b'\'' | b':' | b'=' | b' ' | b'\t') {
            v += 1;
        }
        if v == key_end {
            pos = key_end;
            continue;
        }
        masked.push_str(&out[key_end..v]);
        let mut end = v;
        while end < out.len()
            && !matches!(
                bytes[end],
                b'"' | b'\'' | b',' | b'}' | b'&' | b'\n' | b'\r' | b';'
            )
        {
            end += 1;
        }
        if end > v {
            masked.push_str("***");
        }
        pos = end;
    }
    masked
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn userinfo_is_removed_from_urls() {
        assert_eq!(
            redact_url("http://u:secret@proxy:8082/x"),
            "http://proxy:8082/x"
        );
        assert_eq!(redact_url("https://proxy/a@b"), "https://proxy/a@b");
        assert_eq!(redact_url("user:pw@host:9092"), "host:9092");
        assert_eq!(
            userinfo("http://me:pw@proxy:1"),
            Some(("me".into(), "pw".into()))
        );
        assert_eq!(userinfo("http://proxy:1/x@y"), None);
    }

    #[test]
    fn echoed_credentials_are_masked() {
        for (given, secret) in [
            (
                "bad header Authorization: Basic dXNlcjpodW50ZXIy",
                "dXNlcjpodW50ZXIy",
            ),
            ("{\"password\": \"hunter2\", \"x\": 1}", "hunter2"),
            ("login failed for password=hunter2&user=a", "hunter2"),
            ("upstream http://a:hunter2@host:1/ refused", "hunter2"),
            ("token: abc.def.ghi", "abc.def.ghi"),
        ] {
            let shown = redact_text(given);
            assert!(!shown.contains(secret), "{given} → {shown}");
        }
        assert_eq!(redact_text("nothing to hide"), "nothing to hide");
    }
}
