//! Function lengths: from the line of `fn` to the line of the brace that
//! closes its body.

use std::path::{Path, PathBuf};

use super::lexer::{code_tokens, is_word, matching_brace, word_at, Located, Token};

/// A function longer than the limit.
#[derive(Debug)]
pub struct LongFunction {
    /// The file.
    pub file: PathBuf,
    /// The line of its `fn`.
    pub line: usize,
    /// Its name.
    pub name: String,
    /// Its length in lines, signature and closing brace included.
    pub lines: usize,
}

/// The functions of `text` (outside `#[cfg(test)]` items) longer than
/// `limit` lines.
pub fn long_functions(file: &Path, text: &str, limit: usize) -> Vec<LongFunction> {
    let tokens = code_tokens(text);
    let mut long = Vec::new();
    for index in 0..tokens.len() {
        if !is_word(&tokens, index, "fn") {
            continue;
        }
        let Some((name, line)) = word_at(&tokens, index + 1) else {
            continue;
        };
        let Some(open) = body_start(&tokens, index + 2) else {
            continue;
        };
        let close = matching_brace(&tokens, open);
        let lines = tokens[close].line - line + 1;
        if lines > limit {
            long.push(LongFunction {
                file: file.to_path_buf(),
                line,
                name: name.to_owned(),
                lines,
            });
        }
    }
    long
}

/// The `{` that opens the body of the function whose signature starts at
/// `from`, or `None` for a declaration without a body.
fn body_start(tokens: &[Located], from: usize) -> Option<usize> {
    let mut parentheses = 0usize;
    let mut angles = 0usize;
    for (index, located) in tokens.iter().enumerate().skip(from) {
        match located.token {
            Token::Punct('(') => parentheses += 1,
            Token::Punct(')') => parentheses = parentheses.saturating_sub(1),
            Token::Punct('<') => angles += 1,
            Token::Punct('>') => {
                // `->` is not a closing angle bracket.
                let arrow = index > 0 && tokens[index - 1].token == Token::Punct('-');
                if !arrow {
                    angles = angles.saturating_sub(1);
                }
            }
            Token::Punct(';') if parentheses == 0 => return None,
            Token::Punct('{') if parentheses == 0 && angles == 0 => return Some(index),
            _ => {}
        }
    }
    None
}

/// The Rust files of a source tree that are not tests: everything under
/// `root` except `tests/` directories, fuzz targets, build output and
/// files of test modules (`*_tests.rs`).
pub fn source_files(root: &Path) -> Vec<PathBuf> {
    let mut files = Vec::new();
    let mut pending = vec![root.to_path_buf()];
    while let Some(directory) = pending.pop() {
        let Ok(entries) = std::fs::read_dir(&directory) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let name = entry.file_name().to_string_lossy().into_owned();
            if path.is_dir() {
                if !matches!(name.as_str(), "tests" | "target" | "fuzz" | "vendor") {
                    pending.push(path);
                }
            } else if name.ends_with(".rs") && !name.ends_with("_tests.rs") {
                files.push(path);
            }
        }
    }
    files.sort();
    files
}
