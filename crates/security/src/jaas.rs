//! Kafka's `sasl.jaas.config` values, as far as a broker's own SASL login
//! needs them: one login module entry,
//! `<class> <flag> name="value" ... ;` (for instance
//! `org.apache.kafka.common.security.scram.ScramLoginModule required
//! username="broker" password="secret";`), with its `username` and
//! `password` options.
//!
//! Values are quoted (with `\` escaping the next character) or bare words;
//! the flag is `required`, `requisite`, `sufficient` or `optional`, as in
//! JAAS. Other options (PLAIN's `user_<name>` entries) are read and left
//! unused.

use std::collections::BTreeMap;

use crate::error::JaasError;

/// One parsed login module entry.
#[derive(Clone, PartialEq, Eq)]
pub struct JaasEntry {
    /// The login module class.
    pub login_module: String,
    /// The control flag.
    pub flag: String,
    options: BTreeMap<String, String>,
}

impl std::fmt::Debug for JaasEntry {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter
            .debug_struct("JaasEntry")
            .field("login_module", &self.login_module)
            .field("flag", &self.flag)
            .field("options", &self.options.keys().collect::<Vec<_>>())
            .finish()
    }
}

impl JaasEntry {
    /// An option's value.
    pub fn option(&self, name: &str) -> Option<&str> {
        self.options.get(name).map(String::as_str)
    }

    /// The options named `<prefix><name>`, as `(name, value)` (PLAIN's
    /// `user_<name>="<password>"` entries).
    pub fn options_with_prefix<'a>(
        &'a self,
        prefix: &'a str,
    ) -> impl Iterator<Item = (&'a str, &'a str)> + 'a {
        self.options.iter().filter_map(move |(name, value)| {
            let rest = name.strip_prefix(prefix)?;
            (!rest.is_empty()).then_some((rest, value.as_str()))
        })
    }

    /// The `username` and `password` options, both required and not empty.
    pub fn credentials(&self) -> Result<(String, String), JaasError> {
        let get = |option: &'static str| {
            self.option(option)
                .filter(|value| !value.is_empty())
                .map(str::to_owned)
                .ok_or(JaasError::MissingOption { option })
        };
        Ok((get("username")?, get("password")?))
    }
}

/// A token of the entry: a word, a quoted string, `=` or `;`.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Token {
    Word(String),
    Quoted(String),
    Equals,
    Semicolon,
}

fn tokens(text: &str) -> Result<Vec<Token>, JaasError> {
    let mut tokens = Vec::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            c if c.is_whitespace() => {}
            '=' => tokens.push(Token::Equals),
            ';' => tokens.push(Token::Semicolon),
            '"' => {
                let mut value = String::new();
                loop {
                    match chars.next() {
                        None => return Err(JaasError::UnterminatedQuote),
                        Some('"') => break,
                        Some('\\') => value.push(chars.next().ok_or(JaasError::UnterminatedQuote)?),
                        Some(c) => value.push(c),
                    }
                }
                tokens.push(Token::Quoted(value));
            }
            c => {
                let mut word = c.to_string();
                while let Some(next) =
                    chars.next_if(|n| !matches!(n, '=' | ';' | '"') && !n.is_whitespace())
                {
                    word.push(next);
                }
                tokens.push(Token::Word(word));
            }
        }
    }
    Ok(tokens)
}

/// Parses one `sasl.jaas.config` value.
pub fn parse(text: &str) -> Result<JaasEntry, JaasError> {
    let tokens = tokens(text)?;
    let mut rest = tokens.as_slice();
    let Some((Token::Word(login_module), after)) = rest.split_first() else {
        return Err(JaasError::Empty);
    };
    rest = after;
    let flag = match rest.split_first() {
        Some((Token::Word(flag), after))
            if ["required", "requisite", "sufficient", "optional"]
                .contains(&flag.to_ascii_lowercase().as_str()) =>
        {
            rest = after;
            flag.to_ascii_lowercase()
        }
        _ => return Err(JaasError::ControlFlag),
    };
    let mut options = BTreeMap::new();
    let mut position = 0;
    loop {
        match rest {
            [Token::Semicolon] => break,
            [Token::Semicolon, ..] => return Err(JaasError::SeveralModules),
            [] => return Err(JaasError::MissingSemicolon),
            [Token::Word(name), Token::Equals, Token::Word(value) | Token::Quoted(value), after @ ..] =>
            {
                options.insert(name.clone(), value.clone());
                rest = after;
                position += 1;
            }
            _ => {
                return Err(JaasError::Option {
                    position: position + 1,
                })
            }
        }
    }
    Ok(JaasEntry {
        login_module: login_module.clone(),
        flag,
        options,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const SCRAM: &str = "org.apache.kafka.common.security.scram.ScramLoginModule required \
                         username=\"broker\" password=\"s3cret\";";

    #[test]
    fn a_scram_entry_gives_its_username_and_password() {
        let entry = parse(SCRAM).expect("valid");
        assert_eq!(
            entry.login_module,
            "org.apache.kafka.common.security.scram.ScramLoginModule"
        );
        assert_eq!(entry.flag, "required");
        assert_eq!(
            entry.credentials(),
            Ok(("broker".to_owned(), "s3cret".to_owned()))
        );
    }

    #[test]
    fn plain_entries_with_user_options_bare_words_and_escapes_parse() {
        let text = "org.apache.kafka.common.security.plain.PlainLoginModule Required\n \
                    username=admin password=\"a \\\"quoted\\\" ;=pass\" user_admin=\"x\";  ";
        let entry = parse(text).expect("valid");
        assert_eq!(entry.flag, "required");
        assert_eq!(entry.option("user_admin"), Some("x"));
        let users: Vec<_> = entry.options_with_prefix("user_").collect();
        assert_eq!(users, vec![("admin", "x")]);
        assert_eq!(
            entry.credentials(),
            Ok(("admin".to_owned(), "a \"quoted\" ;=pass".to_owned()))
        );
    }

    #[test]
    fn bad_entries_are_refused_with_the_reason() {
        let cases: [(&str, JaasError); 8] = [
            ("", JaasError::Empty),
            ("  ;", JaasError::Empty),
            ("Module username=\"a\";", JaasError::ControlFlag),
            ("Module always username=\"a\";", JaasError::ControlFlag),
            (
                "Module required username=\"a\"",
                JaasError::MissingSemicolon,
            ),
            (
                "Module required username=\"a;",
                JaasError::UnterminatedQuote,
            ),
            (
                "Module required username \"a\";",
                JaasError::Option { position: 1 },
            ),
            ("A required; B required;", JaasError::SeveralModules),
        ];
        for (text, expected) in cases {
            assert_eq!(parse(text), Err(expected), "{text}");
        }
    }

    #[test]
    fn a_missing_or_empty_credential_is_named() {
        let entry = parse("Module required username=\"broker\";").expect("valid");
        assert_eq!(
            entry.credentials(),
            Err(JaasError::MissingOption { option: "password" })
        );
        let entry = parse("Module required username=\"\" password=x;").expect("valid");
        assert_eq!(
            entry.credentials(),
            Err(JaasError::MissingOption { option: "username" })
        );
    }

    #[test]
    fn the_debug_form_hides_the_values() {
        let shown = format!("{:?}", parse(SCRAM).expect("valid"));
        assert!(!shown.contains("s3cret"), "{shown}");
        assert!(shown.contains("password"), "{shown}");
    }
}
