//! Parsing of Java `.properties` text, the format of Kafka's `server.properties`.
//!
//! Supported: `#` and `!` comments, `key=value`, `key:value` and `key value`
//! separators, whitespace around keys and values, backslash line continuation,
//! and the escapes `\t`, `\n`, `\r`, `\f`, `\\`, `\uXXXX` and `\<char>`.
//! Later definitions of a key replace earlier ones, as in Java.

use std::collections::BTreeMap;

use crate::error::ConfigError;

/// Parses properties text into an ordered map of keys to values.
///
/// `source` names the text in errors (usually a file path).
pub fn parse_properties(text: &str, source: &str) -> Result<BTreeMap<String, String>, ConfigError> {
    let mut entries = BTreeMap::new();
    let mut logical = String::new();
    let mut first_line = 0;
    for (index, raw_line) in text.lines().enumerate() {
        let line = if logical.is_empty() {
            first_line = index + 1;
            raw_line.trim_start()
        } else {
            raw_line.trim_start()
        };
        if logical.is_empty() && (line.is_empty() || line.starts_with('#') || line.starts_with('!'))
        {
            continue;
        }
        if ends_with_continuation(line) {
            logical.push_str(&line[..line.len() - 1]);
            continue;
        }
        logical.push_str(line);
        let (key, value) = split_entry(&logical, source, first_line)?;
        entries.insert(key, value);
        logical.clear();
    }
    if !logical.is_empty() {
        let (key, value) = split_entry(&logical, source, first_line)?;
        entries.insert(key, value);
    }
    Ok(entries)
}

/// A line continues when it ends with an odd number of backslashes.
fn ends_with_continuation(line: &str) -> bool {
    line.bytes().rev().take_while(|&b| b == b'\\').count() % 2 == 1
}

fn split_entry(logical: &str, source: &str, line: usize) -> Result<(String, String), ConfigError> {
    let chars: Vec<char> = logical.chars().collect();
    let mut position = 0;
    let mut escaped = false;
    while position < chars.len() {
        let c = chars[position];
        if escaped {
            escaped = false;
        } else if c == '\\' {
            escaped = true;
        } else if c == '=' || c == ':' || c.is_whitespace() {
            break;
        }
        position += 1;
    }
    let key_raw: String = chars[..position].iter().collect();
    let mut rest = position;
    while rest < chars.len() && chars[rest].is_whitespace() {
        rest += 1;
    }
    if rest < chars.len() && (chars[rest] == '=' || chars[rest] == ':') {
        rest += 1;
        while rest < chars.len() && chars[rest].is_whitespace() {
            rest += 1;
        }
    }
    let value_raw: String = chars[rest..].iter().collect();
    let key = unescape(&key_raw, source, line)?;
    let value = unescape(&value_raw, source, line)?;
    Ok((key, value))
}

fn unescape(text: &str, source: &str, line: usize) -> Result<String, ConfigError> {
    let mut out = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        if c != '\\' {
            out.push(c);
            continue;
        }
        match chars.next() {
            Some('t') => out.push('\t'),
            Some('n') => out.push('\n'),
            Some('r') => out.push('\r'),
            Some('f') => out.push('\u{c}'),
            Some('u') => {
                let hex: String = chars.by_ref().take(4).collect();
                let code = u32::from_str_radix(&hex, 16)
                    .ok()
                    .filter(|_| hex.len() == 4)
                    .and_then(char::from_u32)
                    .ok_or_else(|| ConfigError::UnicodeEscape {
                        source_name: source.to_owned(),
                        line,
                        escape: hex.clone(),
                    })?;
                out.push(code);
            }
            Some(other) => out.push(other),
            None => {}
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> BTreeMap<String, String> {
        parse_properties(text, "test").expect("parses")
    }

    #[test]
    fn separators_comments_and_whitespace() {
        let map = parse("# comment\n! also\n  a=1\nb : 2\nc 3\nd=\n e = spaced value \n");
        assert_eq!(map["a"], "1");
        assert_eq!(map["b"], "2");
        assert_eq!(map["c"], "3");
        assert_eq!(map["d"], "");
        assert_eq!(map["e"], "spaced value ");
        assert_eq!(map.len(), 5);
    }

    #[test]
    fn continuation_and_escapes() {
        let map =
            parse("listeners=PLAINTEXT://a:1,\\\n    PLAINTEXT://b:2\nk\\=x=v\\tw\nu=\\u0041\n");
        assert_eq!(map["listeners"], "PLAINTEXT://a:1,PLAINTEXT://b:2");
        assert_eq!(map["k=x"], "v\tw");
        assert_eq!(map["u"], "A");
    }

    #[test]
    fn later_definitions_win() {
        let map = parse("a=1\na=2\n");
        assert_eq!(map["a"], "2");
    }

    #[test]
    fn a_bad_unicode_escape_names_the_line() {
        let error = parse_properties("a=1\nb=\\uZZ\n", "server.properties").unwrap_err();
        let text = error.to_string();
        assert!(
            text.contains("server.properties") && text.contains('2'),
            "{text}"
        );
    }

    #[test]
    fn even_backslashes_do_not_continue() {
        let map = parse("a=x\\\\\nb=y\n");
        assert_eq!(map["a"], "x\\");
        assert_eq!(map["b"], "y");
    }
}
