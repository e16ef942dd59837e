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

    /// Writes a table as Kafka's command-line tools print one: every
    /// column padded to its widest cell, columns separated by a tab.
    pub fn table(&mut self, headers: &[&str], rows: &[Vec<String>]) -> Result<(), ToolError> {
        let mut widths: Vec<usize> = headers.iter().map(|header| header.len()).collect();
        for row in rows {
            for (width, cell) in widths.iter_mut().zip(row) {
                *width = (*width).max(cell.len());
            }
        }
        let header: Vec<String> = headers.iter().map(|header| (*header).to_owned()).collect();
        for row in std::iter::once(&header).chain(rows) {
            let cells: Vec<String> = row
                .iter()
                .zip(&widths)
                .map(|(cell, width)| format!("{cell:<width$}"))
                .collect();
            self.line(cells.join("\t").trim_end())?;
        }
        Ok(())
    }

    /// Flushes buffered output (call when a consumer waits for records, so
    /// what arrived so far is visible).
    pub fn flush(&mut self) -> Result<(), ToolError> {
        self.writer
            .flush()
            .map_err(|source| ToolError::Output { source })
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};

    use super::*;

    #[derive(Clone, Default)]
    struct Shared(Arc<Mutex<Vec<u8>>>);

    impl Write for Shared {
        fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
            self.0.lock().expect("lock").extend_from_slice(bytes);
            Ok(bytes.len())
        }

        fn flush(&mut self) -> std::io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn tables_pad_every_column_to_its_widest_cell() {
        let shared = Shared::default();
        let mut out = Output::to(Box::new(shared.clone()));
        out.table(
            &["Id", "State"],
            &[
                vec!["orders-writer".to_owned(), "Ongoing".to_owned()],
                vec!["x".to_owned(), "Empty".to_owned()],
            ],
        )
        .expect("written");
        let text = String::from_utf8(shared.0.lock().expect("lock").clone()).expect("utf-8");
        assert_eq!(
            text,
            "Id           \tState\norders-writer\tOngoing\nx            \tEmpty\n"
        );
    }
}
