//! Progress on long operations: an indicatif bar on stderr when stderr is a
//! terminal, nothing otherwise (pipes and logs get plain output only).

use std::io::IsTerminal;
use std::time::Duration;

use indicatif::{ProgressBar, ProgressStyle};

/// A progress bar or spinner that draws only on a terminal.
#[derive(Debug, Clone)]
pub struct Progress {
    bar: ProgressBar,
}

impl Progress {
    /// A bar for `total` steps.
    pub fn bar(total: u64, message: &'static str) -> Progress {
        if !draws() {
            return Progress::hidden();
        }
        let bar = ProgressBar::new(total);
        if let Ok(style) =
            ProgressStyle::with_template("{msg} [{bar:40}] {pos}/{len} ({elapsed}, eta {eta})")
        {
            bar.set_style(style.progress_chars("=> "));
        }
        bar.set_message(message);
        Progress { bar }
    }

    /// A spinner with a message, for work of unknown length.
    pub fn spinner(message: &'static str) -> Progress {
        if !draws() {
            return Progress::hidden();
        }
        let bar = ProgressBar::new_spinner();
        bar.set_message(message);
        bar.enable_steady_tick(Duration::from_millis(120));
        Progress { bar }
    }

    /// A progress that never draws.
    pub fn hidden() -> Progress {
        Progress {
            bar: ProgressBar::hidden(),
        }
    }

    /// Whether anything is drawn.
    pub fn is_visible(&self) -> bool {
        !self.bar.is_hidden()
    }

    /// Advances by `steps`.
    pub fn advance(&self, steps: u64) {
        self.bar.inc(steps);
    }

    /// Sets the position.
    pub fn set_position(&self, position: u64) {
        self.bar.set_position(position);
    }

    /// Removes the bar from the terminal.
    pub fn finish(&self) {
        self.bar.finish_and_clear();
    }
}

/// Bars are drawn only when stderr is a terminal.
fn draws() -> bool {
    std::io::stderr().is_terminal()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hidden_progress_accepts_updates() {
        let progress = Progress::hidden();
        assert!(!progress.is_visible());
        progress.advance(3);
        progress.set_position(5);
        progress.finish();
    }
}
