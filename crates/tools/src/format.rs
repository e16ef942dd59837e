//! How `strom consume` prints a record: a kcat-style `--format` template
//! or one JSON object per record.

use strom_consumer::record::ConsumerRecord;
use strom_protocol::records::TimestampType;

use crate::error::ToolError;

/// One piece of a format template.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Literal(Vec<u8>),
    Topic,
    Partition,
    Offset,
    Timestamp,
    Key,
    Value,
    Headers,
    KeyLength,
    ValueLength,
}

/// A parsed `--format` template.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RecordFormat {
    tokens: Vec<Token>,
}

impl RecordFormat {
    /// Parses a template: `%t %p %o %T %k %v %h %K %S %%`, `\n`, `\t`,
    /// `\\`. A newline is added after each record unless the template ends
    /// with one.
    pub fn parse(template: &str) -> Result<RecordFormat, ToolError> {
        let mut tokens = Vec::new();
        let mut literal = Vec::new();
        let mut characters = template.chars();
        while let Some(character) = characters.next() {
            match character {
                '%' => {
                    let token = match characters.next() {
                        Some('%') => {
                            literal.push(b'%');
                            continue;
                        }
                        Some(code) => directive(code).ok_or_else(|| bad_format(template))?,
                        None => return Err(bad_format(template)),
                    };
                    flush_literal(&mut literal, &mut tokens);
                    tokens.push(token);
                }
                '\\' => match characters.next() {
                    Some('n') => literal.push(b'\n'),
                    Some('t') => literal.push(b'\t'),
                    Some('\\') => literal.push(b'\\'),
                    _ => return Err(bad_format(template)),
                },
                other => {
                    let mut buffer = [0u8; 4];
                    literal.extend_from_slice(other.encode_utf8(&mut buffer).as_bytes());
                }
            }
        }
        if !literal.ends_with(b"\n") {
            literal.push(b'\n');
        }
        flush_literal(&mut literal, &mut tokens);
        Ok(RecordFormat { tokens })
    }

    /// Appends the record as the template says to `out`.
    pub fn render(&self, record: &ConsumerRecord, out: &mut Vec<u8>) {
        for token in &self.tokens {
            match token {
                Token::Literal(bytes) => out.extend_from_slice(bytes),
                Token::Topic => out.extend_from_slice(record.topic.as_bytes()),
                Token::Partition => out.extend_from_slice(record.partition.to_string().as_bytes()),
                Token::Offset => out.extend_from_slice(record.offset.to_string().as_bytes()),
                Token::Timestamp => {
                    out.extend_from_slice(record.timestamp_ms.to_string().as_bytes())
                }
                Token::Key => out.extend_from_slice(record.key.as_deref().unwrap_or_default()),
                Token::Value => out.extend_from_slice(record.value.as_deref().unwrap_or_default()),
                Token::Headers => render_headers(record, out),
                Token::KeyLength => out.extend_from_slice(length(record.key.as_deref()).as_bytes()),
                Token::ValueLength => {
                    out.extend_from_slice(length(record.value.as_deref()).as_bytes())
                }
            }
        }
    }
}

fn directive(code: char) -> Option<Token> {
    Some(match code {
        't' => Token::Topic,
        'p' => Token::Partition,
        'o' => Token::Offset,
        'T' => Token::Timestamp,
        'k' => Token::Key,
        'v' => Token::Value,
        'h' => Token::Headers,
        'K' => Token::KeyLength,
        'S' => Token::ValueLength,
        _ => return None,
    })
}

fn flush_literal(literal: &mut Vec<u8>, tokens: &mut Vec<Token>) {
    if !literal.is_empty() {
        tokens.push(Token::Literal(std::mem::take(literal)));
    }
}

fn bad_format(template: &str) -> ToolError {
    ToolError::InvalidArgument {
        what: "--format",
        text: template.to_owned(),
        expected: "text with %t %p %o %T %k %v %h %K %S %% \\n \\t",
    }
}

fn length(field: Option<&[u8]>) -> String {
    field.map_or_else(|| "-1".to_owned(), |bytes| bytes.len().to_string())
}

fn render_headers(record: &ConsumerRecord, out: &mut Vec<u8>) {
    for (index, header) in record.headers.iter().enumerate() {
        if index > 0 {
            out.push(b',');
        }
        out.extend_from_slice(&header.key);
        if let Some(value) = &header.value {
            out.push(b'=');
            out.extend_from_slice(value);
        }
    }
}

/// The record as one JSON object (keys, values and headers as UTF-8 text,
/// invalid bytes replaced).
pub fn record_json(record: &ConsumerRecord) -> serde_json::Value {
    let text =
        |bytes: Option<&[u8]>| bytes.map(|bytes| String::from_utf8_lossy(bytes).into_owned());
    let headers: Vec<serde_json::Value> = record
        .headers
        .iter()
        .map(|header| {
            serde_json::json!({
                "key": String::from_utf8_lossy(&header.key),
                "value": text(header.value.as_deref()),
            })
        })
        .collect();
    serde_json::json!({
        "topic": &*record.topic,
        "partition": record.partition,
        "offset": record.offset,
        "timestamp_ms": record.timestamp_ms,
        "timestamp_type": match record.timestamp_type {
            TimestampType::CreateTime => "CreateTime",
            TimestampType::LogAppendTime => "LogAppendTime",
        },
        "key": text(record.key.as_deref()),
        "value": text(record.value.as_deref()),
        "headers": headers,
    })
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use bytes::Bytes;
    use strom_consumer::record::RecordHeader;

    use super::*;

    fn record() -> ConsumerRecord {
        ConsumerRecord {
            topic: Arc::from("events"),
            partition: 2,
            offset: 41,
            timestamp_ms: 1_700_000_000_000,
            timestamp_type: TimestampType::CreateTime,
            leader_epoch: None,
            key: Some(Bytes::from_static(b"user")),
            value: Some(Bytes::from_static(b"clicked")),
            headers: vec![
                RecordHeader {
                    key: Bytes::from_static(b"source"),
                    value: Some(Bytes::from_static(b"web")),
                },
                RecordHeader {
                    key: Bytes::from_static(b"flag"),
                    value: None,
                },
            ],
        }
    }

    fn rendered(template: &str) -> String {
        let mut out = Vec::new();
        RecordFormat::parse(template)
            .expect("valid")
            .render(&record(), &mut out);
        String::from_utf8(out).expect("utf-8")
    }

    #[test]
    fn every_token_renders() {
        assert_eq!(rendered("%v"), "clicked\n");
        assert_eq!(
            rendered("%t/%p@%o %T %k=%v [%h] %K %S 100%%\\n"),
            "events/2@41 1700000000000 user=clicked [source=web,flag] 4 7 100%\n"
        );
        assert_eq!(rendered("%k\\t%v"), "user\tclicked\n");
    }

    #[test]
    fn unknown_tokens_are_rejected() {
        assert!(RecordFormat::parse("%x").is_err());
        assert!(RecordFormat::parse("trailing %").is_err());
        assert!(RecordFormat::parse("\\q").is_err());
    }

    #[test]
    fn json_has_every_field() {
        let json = record_json(&record());
        assert_eq!(json["offset"], 41);
        assert_eq!(json["key"], "user");
        assert_eq!(json["headers"][0]["value"], "web");
        assert!(json["headers"][1]["value"].is_null());
    }
}
