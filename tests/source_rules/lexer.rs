//! A small Rust lexer: enough to tell code from comments, strings and
//! character literals, so that the rules read only code.

/// One token of code: an identifier or keyword, `::`, or one punctuation
/// character. Comments, strings and character literals are dropped.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Token {
    /// An identifier or keyword (`fn`, `crate`, `metrics`, `r#type` as `type`).
    Word(String),
    /// `::`.
    PathSeparator,
    /// Any other punctuation character (`{`, `}`, `;`, `#`, ...).
    Punct(char),
    /// A string, byte string, raw string or character literal (its text is
    /// not kept).
    Literal,
}

/// A token and the 1-based line it starts on.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Located {
    /// The token.
    pub token: Token,
    /// Its line.
    pub line: usize,
}

struct Cursor {
    chars: Vec<char>,
    at: usize,
    line: usize,
    tokens: Vec<Located>,
}

impl Cursor {
    fn peek(&self, ahead: usize) -> Option<char> {
        self.chars.get(self.at + ahead).copied()
    }

    fn bump(&mut self) -> Option<char> {
        let c = self.chars.get(self.at).copied()?;
        self.at += 1;
        if c == '\n' {
            self.line += 1;
        }
        Some(c)
    }

    fn push(&mut self, token: Token, line: usize) {
        self.tokens.push(Located { token, line });
    }

    fn skip_line_comment(&mut self) {
        while let Some(c) = self.peek(0) {
            if c == '\n' {
                return;
            }
            self.bump();
        }
    }

    fn skip_block_comment(&mut self) {
        // At "/*"; block comments nest in Rust.
        self.bump();
        self.bump();
        let mut depth = 1;
        while depth > 0 {
            match (self.peek(0), self.peek(1)) {
                (Some('/'), Some('*')) => {
                    self.bump();
                    self.bump();
                    depth += 1;
                }
                (Some('*'), Some('/')) => {
                    self.bump();
                    self.bump();
                    depth -= 1;
                }
                (Some(_), _) => {
                    self.bump();
                }
                (None, _) => return,
            }
        }
    }

    fn skip_quoted(&mut self) {
        // At the opening '"'.
        self.bump();
        while let Some(c) = self.bump() {
            match c {
                '\\' => {
                    self.bump();
                }
                '"' => return,
                _ => {}
            }
        }
    }

    /// At `r`, `br` or `cr` followed by `#*"`: skips a raw string if there
    /// is one and says whether it did.
    fn skip_raw_string(&mut self, prefix: usize) -> bool {
        let mut hashes = 0;
        while self.peek(prefix + hashes) == Some('#') {
            hashes += 1;
        }
        if self.peek(prefix + hashes) != Some('"') {
            return false;
        }
        for _ in 0..prefix + hashes + 1 {
            self.bump();
        }
        loop {
            match self.bump() {
                None => return true,
                Some('"') => {
                    if (0..hashes).all(|i| self.peek(i) == Some('#')) {
                        for _ in 0..hashes {
                            self.bump();
                        }
                        return true;
                    }
                }
                Some(_) => {}
            }
        }
    }

    /// At `'`: a character literal (skipped, true) or a lifetime or label
    /// (false: the quote is dropped and the name lexes as a word).
    fn skip_char_literal(&mut self) -> bool {
        let is_char = matches!(
            (self.peek(1), self.peek(2)),
            (Some('\\'), _) | (Some(_), Some('\''))
        );
        if !is_char {
            self.bump();
            return false;
        }
        self.bump();
        while let Some(c) = self.bump() {
            match c {
                '\\' => {
                    self.bump();
                }
                '\'' => return true,
                _ => {}
            }
        }
        true
    }

    fn word(&mut self) -> String {
        let mut word = String::new();
        while let Some(c) = self.peek(0) {
            if c.is_alphanumeric() || c == '_' {
                word.push(c);
                self.bump();
            } else {
                break;
            }
        }
        word
    }

    fn string_prefix(&self) -> Option<usize> {
        let prefix = match (self.peek(0), self.peek(1)) {
            (Some('b' | 'c'), Some('r')) => 2,
            (Some('r'), _) => 1,
            _ => return None,
        };
        matches!(self.peek(prefix), Some('#' | '"')).then_some(prefix)
    }

    fn next_token(&mut self, c: char) {
        let line = self.line;
        match c {
            '/' if self.peek(1) == Some('/') => self.skip_line_comment(),
            '/' if self.peek(1) == Some('*') => self.skip_block_comment(),
            '"' => {
                self.skip_quoted();
                self.push(Token::Literal, line);
            }
            '\'' => {
                if self.skip_char_literal() {
                    self.push(Token::Literal, line);
                }
            }
            'b' if self.peek(1) == Some('"') => {
                self.bump();
                self.skip_quoted();
                self.push(Token::Literal, line);
            }
            'b' if self.peek(1) == Some('\'') => {
                self.bump();
                self.skip_char_literal();
                self.push(Token::Literal, line);
            }
            c if c.is_alphabetic() || c == '_' => {
                if let Some(prefix) = self.string_prefix() {
                    if self.skip_raw_string(prefix) {
                        self.push(Token::Literal, line);
                        return;
                    }
                }
                let mut word = self.word();
                if word == "r" && self.peek(0) == Some('#') {
                    self.bump();
                    word = self.word();
                }
                self.push(Token::Word(word), line);
            }
            c if c.is_numeric() => {
                self.word();
            }
            ':' if self.peek(1) == Some(':') => {
                self.bump();
                self.bump();
                self.push(Token::PathSeparator, line);
            }
            c if c.is_whitespace() => {
                self.bump();
            }
            c => {
                self.bump();
                self.push(Token::Punct(c), line);
            }
        }
    }
}

/// The code tokens of `text`.
pub fn tokens(text: &str) -> Vec<Located> {
    let mut cursor = Cursor {
        chars: text.chars().collect(),
        at: 0,
        line: 1,
        tokens: Vec::new(),
    };
    while let Some(c) = cursor.peek(0) {
        cursor.next_token(c);
    }
    cursor.tokens
}

/// The index of the `}` that closes the `{` at `open`, or the last token.
pub fn matching_brace(tokens: &[Located], open: usize) -> usize {
    let mut depth = 0usize;
    for (index, located) in tokens.iter().enumerate().skip(open) {
        match located.token {
            Token::Punct('{') => depth += 1,
            Token::Punct('}') => {
                depth = depth.saturating_sub(1);
                if depth == 0 {
                    return index;
                }
            }
            _ => {}
        }
    }
    tokens.len().saturating_sub(1)
}

/// The word at `index` and its line, if the token there is a word.
pub fn word_at(tokens: &[Located], index: usize) -> Option<(&str, usize)> {
    match tokens.get(index) {
        Some(Located {
            token: Token::Word(word),
            line,
        }) => Some((word.as_str(), *line)),
        _ => None,
    }
}

/// Whether the token at `index` is the word `word`.
pub fn is_word(tokens: &[Located], index: usize, word: &str) -> bool {
    matches!(tokens.get(index), Some(Located { token: Token::Word(w), .. }) if w == word)
}

/// The tokens of `text` without the items under `#[cfg(test)]` (test
/// modules and test-only functions).
pub fn code_tokens(text: &str) -> Vec<Located> {
    let all = tokens(text);
    let mut kept = Vec::with_capacity(all.len());
    let mut index = 0;
    while index < all.len() {
        if let Some(end) = cfg_test_item_end(&all, index) {
            index = end + 1;
            continue;
        }
        kept.push(all[index].clone());
        index += 1;
    }
    kept
}

/// At `#[cfg(test)]`: the index of the last token of the item it guards.
fn cfg_test_item_end(tokens: &[Located], index: usize) -> Option<usize> {
    let pattern = [
        Token::Punct('#'),
        Token::Punct('['),
        Token::Word("cfg".to_owned()),
        Token::Punct('('),
        Token::Word("test".to_owned()),
        Token::Punct(')'),
        Token::Punct(']'),
    ];
    let matches = pattern
        .iter()
        .enumerate()
        .all(|(offset, token)| tokens.get(index + offset).map(|l| &l.token) == Some(token));
    if !matches {
        return None;
    }
    // The item ends at the first `;` before any `{`, or at the brace that
    // closes its first `{`.
    for (at, located) in tokens.iter().enumerate().skip(index + pattern.len()) {
        match located.token {
            Token::Punct(';') => return Some(at),
            Token::Punct('{') => return Some(matching_brace(tokens, at)),
            _ => {}
        }
    }
    Some(tokens.len().saturating_sub(1))
}

#[test]
fn comments_strings_and_chars_are_not_code() {
    let text = "fn a() { let s = \"crate::x {\"; let c = '{'; /* crate::y } */ }\n\
                // crate::z {\n\
                fn b<'a>(x: &'a str) { let r = r#\"}\"#; }";
    let words: Vec<String> = tokens(text)
        .into_iter()
        .filter_map(|located| match located.token {
            Token::Word(word) => Some(word),
            _ => None,
        })
        .collect();
    assert!(!words.contains(&"crate".to_owned()), "{words:?}");
    let all = tokens(text);
    let braces = all
        .iter()
        .filter(|l| matches!(l.token, Token::Punct('{') | Token::Punct('}')))
        .count();
    assert_eq!(braces, 4, "two bodies, their braces only");
    assert_eq!(all.last().map(|l| l.line), Some(3));
}

#[test]
fn cfg_test_items_are_left_out() {
    let text = "use crate::a;\n#[cfg(test)]\nmod tests { use crate::b; }\n#[cfg(test)]\nuse crate::c;\nfn d() {}";
    let words: Vec<String> = code_tokens(text)
        .into_iter()
        .filter_map(|located| match located.token {
            Token::Word(word) => Some(word),
            _ => None,
        })
        .collect();
    assert_eq!(words, ["use", "crate", "a", "fn", "d"]);
}
