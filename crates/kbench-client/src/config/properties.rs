//! Java properties text (`--producer.config`, `--command-config`, OMB's property blocks), read as
//! `java.util.Properties.load` reads it. Text only: what a key means is the settings' business.

use super::is_secret;

/// A line of a properties text that is not `key=value`: the 1-based line and what is wrong. It
/// never holds a value (a secret's included).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct PropertiesSyntax {
    pub line: usize,
    pub what: String,
}

/// A Java properties text, read as `java.util.Properties.load` reads it (what the Kafka tools use
/// for `--producer.config` and OMB for its property blocks): `key=value`, `key: value` or
/// `key value` (the key ends at the first unescaped `=`, `:` or white space), `#` and `!` comment
/// lines, a line ending in an odd number of `\` continued on the next (its leading white space
/// skipped), the escapes `\t \n \r \f \uXXXX` and `\` before any other character, `\n`, `\r\n`
/// or `\r` line ends, and a leading byte-order mark skipped. Values are trimmed as Kafka's
/// ConfigDef trims them, except a secret's (Kafka's PASSWORD type keeps its spaces). Stricter than
/// Java in one place: a line with a key and neither a separator nor a value is an error, not an
/// empty value — it is a mistake far more often than meant.
pub fn parse_properties(text: &str) -> Result<Vec<(String, String)>, PropertiesSyntax> {
    const WS: [char; 3] = [' ', '\t', '\x0c'];
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let text = text.replace("\r\n", "\n").replace('\r', "\n");
    let natural: Vec<&str> = text.split('\n').collect();
    let mut out = Vec::new();
    let mut i = 0;
    while i < natural.len() {
        let line = i + 1;
        let mut cur = natural[i].trim_start_matches(WS);
        i += 1;
        if cur.is_empty() || cur.starts_with('#') || cur.starts_with('!') {
            continue;
        }
        let mut logical = String::new();
        loop {
            let slashes = cur.len() - cur.trim_end_matches('\\').len();
            if slashes.is_multiple_of(2) {
                logical.push_str(cur);
                break;
            }
            logical.push_str(&cur[..cur.len() - 1]);
            if i == natural.len() {
                break;
            }
            cur = natural[i].trim_start_matches(WS);
            i += 1;
        }
        let err = |what: &str| PropertiesSyntax {
            line,
            what: what.to_string(),
        };
        let chars: Vec<char> = logical.chars().collect();
        let mut k = 0;
        while k < chars.len() {
            match chars[k] {
                '\\' => k += 2,
                '=' | ':' => break,
                c if WS.contains(&c) => break,
                _ => k += 1,
            }
        }
        let k = k.min(chars.len());
        let mut j = k;
        while j < chars.len() && WS.contains(&chars[j]) {
            j += 1;
        }
        let separated = j < chars.len() && matches!(chars[j], '=' | ':');
        if separated {
            j += 1;
            while j < chars.len() && WS.contains(&chars[j]) {
                j += 1;
            }
        }
        let key = unescape(&chars[..k]).map_err(|e| err(&e))?;
        if key.is_empty() {
            return Err(err("a value with no key"));
        }
        let value = unescape(&chars[j..]).map_err(|e| err(&format!("{key}: {e}")))?;
        if !separated && value.is_empty() {
            return Err(err(&format!(
                "{key}: no value (expected key=value, key: value or key value)"
            )));
        }
        let value = if is_secret(&key) {
            value
        } else {
            value.trim().to_string()
        };
        out.push((key, value));
    }
    Ok(out)
}

/// A key's or value's escapes, as java.util.Properties resolves them.
fn unescape(chars: &[char]) -> Result<String, String> {
    let mut out = String::with_capacity(chars.len());
    let mut i = 0;
    let mut pending_high: Option<u32> = None;
    while i < chars.len() {
        let c = chars[i];
        i += 1;
        if c != '\\' || i == chars.len() {
            if pending_high.take().is_some() {
                return Err("a \\u escape of half a surrogate pair".into());
            }
            if c != '\\' {
                out.push(c);
            }
            continue;
        }
        let e = chars[i];
        i += 1;
        if e != 'u' {
            if pending_high.take().is_some() {
                return Err("a \\u escape of half a surrogate pair".into());
            }
            out.push(match e {
                't' => '\t',
                'n' => '\n',
                'r' => '\r',
                'f' => '\x0c',
                other => other,
            });
            continue;
        }
        let hex: String = chars.get(i..i + 4).unwrap_or_default().iter().collect();
        let code = (hex.len() == 4)
            .then(|| u32::from_str_radix(&hex, 16).ok())
            .flatten()
            .ok_or("a malformed \\uXXXX escape (four hex digits expected)")?;
        i += 4;
        match (pending_high.take(), code) {
            (None, 0xD800..=0xDBFF) => pending_high = Some(code),
            (Some(high), 0xDC00..=0xDFFF) => {
                let joined = 0x10000 + ((high - 0xD800) << 10) + (code - 0xDC00);
                out.push(char::from_u32(joined).ok_or("a malformed \\u surrogate pair")?);
            }
            (Some(_), _) | (None, 0xDC00..=0xDFFF) => {
                return Err("a \\u escape of half a surrogate pair".into());
            }
            (None, code) => out.push(char::from_u32(code).ok_or("a malformed \\uXXXX escape")?),
        }
    }
    if pending_high.is_some() {
        return Err("a \\u escape of half a surrogate pair".into());
    }
    Ok(out)
}
#[cfg(test)]
mod tests {
    use super::*;

    fn props(text: &str) -> Vec<(String, String)> {
        parse_properties(text).unwrap()
    }

    #[test]
    fn properties_read_as_java_reads_them() {
        let text = "\u{feff}# comment\r\n! also\n\nacks=all\nlinger.ms : 5\nbatch.size 16384\n  \
            \tclient.id\t=\tkb\\u00e9nch\nkey\\ with\\=odd = a\\\n    b\\nc\nsasl.password=  p w  \nempty=\n";
        assert_eq!(
            props(text),
            vec![
                ("acks".into(), "all".into()),
                ("linger.ms".into(), "5".into()),
                ("batch.size".into(), "16384".into()),
                ("client.id".into(), "kb\u{e9}nch".into()),
                ("key with=odd".into(), "ab\nc".into()),
                ("sasl.password".into(), "p w  ".into()),
                ("empty".into(), "".into()),
            ]
        );
        assert_eq!(
            props("a=\\uD83D\\uDE00"),
            vec![("a".into(), "\u{1F600}".into())]
        );
        assert_eq!(props("a=b\\"), vec![("a".into(), "b".into())]);
    }

    #[test]
    fn bad_properties_name_their_line_and_no_value() {
        let e = parse_properties("acks=all\n\nnovalue\n").unwrap_err();
        assert_eq!(e.line, 3);
        assert!(e.what.starts_with("novalue: no value"), "{e:?}");
        let e = parse_properties("=x").unwrap_err();
        assert_eq!((e.line, e.what.as_str()), (1, "a value with no key"));
        let e = parse_properties("sasl.password=secret\\u12").unwrap_err();
        assert!(!e.what.contains("secret\\"), "{e:?}");
        assert!(e.what.contains("\\uXXXX"), "{e:?}");
        assert!(parse_properties("a=\\uD83D").is_err());
    }
}
