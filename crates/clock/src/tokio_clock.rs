//! A clock on tokio's time, for paused-time tests (feature `tokio`).

use std::time::SystemTime;

use crate::clock::{duration_ms, epoch_ms, Clock};

/// A clock that reads `tokio::time::Instant`: under `tokio::time::pause()`
/// it moves only with `tokio::time::advance` (or tokio's auto-advance),
/// together with every tokio timer. The wall reading is the wall-clock time
/// at [`TokioClock::new`] plus the tokio time elapsed since, so it does not
/// follow steps of the host's clock; see the crate docs for why brokers use
/// [`crate::SystemClock`] instead.
#[derive(Debug, Clone, Copy)]
pub struct TokioClock {
    origin: tokio::time::Instant,
    origin_wall_ms: i64,
}

impl TokioClock {
    /// A clock starting at the current wall-clock time and tokio instant.
    pub fn new() -> Self {
        TokioClock {
            origin: tokio::time::Instant::now(),
            origin_wall_ms: epoch_ms(SystemTime::now()),
        }
    }

    /// A clock whose wall reading is `wall_ms` now.
    pub fn starting_at(wall_ms: i64) -> Self {
        TokioClock {
            origin: tokio::time::Instant::now(),
            origin_wall_ms: wall_ms,
        }
    }
}

impl Default for TokioClock {
    fn default() -> Self {
        Self::new()
    }
}

impl Clock for TokioClock {
    fn wall_ms(&self) -> i64 {
        let elapsed_ms = i64::try_from(self.monotonic_ms()).unwrap_or(i64::MAX);
        self.origin_wall_ms.saturating_add(elapsed_ms)
    }

    fn monotonic_ms(&self) -> u64 {
        duration_ms(self.origin.elapsed())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[tokio::test(start_paused = true)]
    async fn paused_time_drives_the_clock() {
        let clock = TokioClock::starting_at(1_000);
        assert_eq!((clock.wall_ms(), clock.monotonic_ms()), (1_000, 0));
        tokio::time::advance(Duration::from_millis(1_500)).await;
        assert_eq!((clock.wall_ms(), clock.monotonic_ms()), (2_500, 1_500));
        tokio::time::sleep(Duration::from_secs(60)).await;
        assert_eq!(clock.monotonic_ms(), 61_500);
    }

    #[tokio::test(start_paused = true)]
    async fn new_starts_at_the_wall_clock() {
        let clock = TokioClock::new();
        assert!(clock.wall_ms() > 1_577_836_800_000);
        assert_eq!(clock.monotonic_ms(), 0);
    }
}
