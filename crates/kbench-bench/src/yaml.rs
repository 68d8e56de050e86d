//! The one way kbench parses YAML (OMB workload and driver files, load-shape scenarios): nesting is
//! checked before the parser sees the text, because the parser spends microseconds per level and
//! a file of nothing but `[` (junk, or a hostile upload to `kbench serve`) would hold a core for
//! seconds before being refused. No real workload nests past a handful of levels.

use serde::de::DeserializeOwned;

/// The deepest flow nesting (`[` and `{`, outside quotes and comments) a file may have.
pub const MAX_DEPTH: usize = 64;

/// Parse `text` into `T`; errors are serde_yaml's (the field and the line), or the nesting's.
pub fn parse<T: DeserializeOwned>(text: &str) -> Result<T, String> {
    check_depth(text)?;
    serde_yaml_ng::from_str(text).map_err(|e| e.to_string())
}

/// Refuse flow collections nested deeper than [`MAX_DEPTH`], counted in one pass that skips quoted
/// scalars and comments (an approximation of YAML's grammar that can only over-count inside a
/// block scalar holding brackets, which no workload file has).
fn check_depth(text: &str) -> Result<(), String> {
    let mut depth = 0usize;
    let mut quote: Option<char> = None;
    let mut comment = false;
    let mut prev = '\n';
    let mut line = 1;
    let mut escaped = false;
    for c in text.chars() {
        if c == '\n' {
            line += 1;
            comment = false;
        }
        match (quote, comment) {
            (_, true) => {}
            (Some(q), _) => {
                if escaped {
                    escaped = false;
                } else if q == '"' && c == '\\' {
                    escaped = true;
                } else if c == q {
                    quote = None;
                }
            }
            (None, false) => match c {
                '"' | '\'' if prev.is_whitespace() || "[{,:-".contains(prev) => quote = Some(c),
                '#' if prev.is_whitespace() => comment = true,
                '[' | '{' => {
                    depth += 1;
                    if depth > MAX_DEPTH {
                        return Err(format!(
                            "line {line}: nested more than {MAX_DEPTH} levels deep"
                        ));
                    }
                }
                ']' | '}' => depth = depth.saturating_sub(1),
                _ => {}
            },
        }
        prev = c;
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn deep_nesting_is_refused_before_parsing() {
        let e = parse::<serde_json::Value>(&"[".repeat(200_000)).unwrap_err();
        assert_eq!(e, "line 1: nested more than 64 levels deep");
        let ok: serde_json::Value =
            parse("a: [1, {b: \"[[\\\"[[\"}]  # [[[[\nc: '{{{{'\nd: it's [x]\n").unwrap();
        assert_eq!(ok["a"][1]["b"], "[[\"[[");
        assert_eq!(ok["d"], "it's [x]");
        let nested = format!("{}{}", "[".repeat(64), "]".repeat(64));
        assert!(parse::<serde_json::Value>(&nested).is_ok());
    }
}
