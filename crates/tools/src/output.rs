//! Standard output for command results, buffered, with write errors typed.
//!
//! Results go to stdout; progress bars, warnings and errors go to stderr,
//! so `strom ... | jq` and friends see only results.

use std::io::{BufWriter, Write};

use crate::error::ToolError;

/// Where a command writes its results.
pub struct Output {
    writer: Box<dyn Write + Send>,
}

impl std::fmt::Debug for Output {
    fn fmt(&self, formatter: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        formatter.debug_struct("Output").finish_non_exhaustive()
    }
}

impl Output {
    /// Buffered standard output.
    pub fn stdout() -> Output {
        Output::to(Box::new(BufWriter::new(std::io::stdout())))
    }

    /// Output to any writer (tests).
    pub fn to(writer: Box<dyn Write + Send>) -> Output {
        Output { writer }
    }

    /// Writes `text` and a newline.
    pub fn line(&mut self, text: &str) -> Result<(), ToolError> {
        self.bytes(text.as_bytes())?;
        self.bytes(b"\n")
    }

    /// Writes raw bytes.
    pub fn bytes(&mut self, bytes: &[u8]) -> Result<(), ToolError> {
        self.writer
            .write_all(bytes)
            .map_err(|source| ToolError::Output { source })
    }

    /// Flushes buffered output (call when a consumer waits for records, so
    /// what arrived so far is visible).
    pub fn flush(&mut self) -> Result<(), ToolError> {
        self.writer
            .flush()
            .map_err(|source| ToolError::Output { source })
    }
}
