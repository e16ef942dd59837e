//! The [`Clock`] trait, the operating system's clock and a manual clock.

use std::fmt;
use std::sync::atomic::{AtomicI64, AtomicU64, Ordering};
use std::sync::OnceLock;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// What time it is, as a broker's components see it.
pub trait Clock: fmt::Debug + Send + Sync {
    /// Milliseconds since the Unix epoch: record timestamps, `segment.ms`,
    /// `retention.ms`, commit timestamps. May jump when the clock is set.
    fn wall_ms(&self) -> i64;

    /// Milliseconds since an arbitrary origin fixed for this clock; never
    /// decreases. For durations: sessions, leases, timeouts.
    fn monotonic_ms(&self) -> u64;
}

/// Milliseconds in `duration`, saturating at `u64::MAX`.
pub(crate) fn duration_ms(duration: Duration) -> u64 {
    u64::try_from(duration.as_millis()).unwrap_or(u64::MAX)
}

/// Milliseconds since the Unix epoch of `time` (negative before it),
/// saturating at the ends of `i64`.
pub(crate) fn epoch_ms(time: SystemTime) -> i64 {
    match time.duration_since(UNIX_EPOCH) {
        Ok(after) => i64::try_from(after.as_millis()).unwrap_or(i64::MAX),
        Err(before) => i64::try_from(before.duration().as_millis()).map_or(i64::MIN, |ms| -ms),
    }
}

/// The operating system's clocks: [`SystemTime`] for the wall reading and
/// [`Instant`] (from the first monotonic reading in the process) for the
/// monotonic one.
#[derive(Debug, Default, Clone, Copy)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn wall_ms(&self) -> i64 {
        epoch_ms(SystemTime::now())
    }

    fn monotonic_ms(&self) -> u64 {
        static ORIGIN: OnceLock<Instant> = OnceLock::new();
        duration_ms(ORIGIN.get_or_init(Instant::now).elapsed())
    }
}

/// A clock that moves only when a test moves it.
///
/// The wall and monotonic readings start at the given values and move
/// together with [`ManualClock::advance`]; [`ManualClock::set_wall_ms`] and
/// [`ManualClock::jump_wall_ms`] move the wall reading alone, as when an
/// operator or NTP steps the host's clock.
#[derive(Debug, Default)]
pub struct ManualClock {
    wall_ms: AtomicI64,
    monotonic_ms: AtomicU64,
}

impl ManualClock {
    /// A clock whose wall reading is `wall_ms` and monotonic reading is 0.
    pub fn new(wall_ms: i64) -> Self {
        ManualClock {
            wall_ms: AtomicI64::new(wall_ms),
            monotonic_ms: AtomicU64::new(0),
        }
    }

    /// Moves both readings forward by `elapsed_ms`.
    pub fn advance(&self, elapsed_ms: u64) {
        let wall_step = i64::try_from(elapsed_ms).unwrap_or(i64::MAX);
        let _ = self
            .wall_ms
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |wall| {
                Some(wall.saturating_add(wall_step))
            });
        let _ = self
            .monotonic_ms
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |monotonic| {
                Some(monotonic.saturating_add(elapsed_ms))
            });
    }

    /// Sets the wall reading to `wall_ms` (earlier or later than now); the
    /// monotonic reading does not move.
    pub fn set_wall_ms(&self, wall_ms: i64) {
        self.wall_ms.store(wall_ms, Ordering::SeqCst);
    }

    /// Moves the wall reading by `delta_ms` (negative: backwards); the
    /// monotonic reading does not move.
    pub fn jump_wall_ms(&self, delta_ms: i64) {
        let _ = self
            .wall_ms
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |wall| {
                Some(wall.saturating_add(delta_ms))
            });
    }
}

impl Clock for ManualClock {
    fn wall_ms(&self) -> i64 {
        self.wall_ms.load(Ordering::SeqCst)
    }

    fn monotonic_ms(&self) -> u64 {
        self.monotonic_ms.load(Ordering::SeqCst)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn manual_clock_moves_only_when_told() {
        let clock = ManualClock::new(5_000);
        assert_eq!((clock.wall_ms(), clock.monotonic_ms()), (5_000, 0));
        clock.advance(250);
        assert_eq!((clock.wall_ms(), clock.monotonic_ms()), (5_250, 250));
        clock.advance(0);
        assert_eq!((clock.wall_ms(), clock.monotonic_ms()), (5_250, 250));
    }

    #[test]
    fn a_wall_jump_leaves_the_monotonic_reading_alone() {
        let clock = ManualClock::new(10_000);
        clock.advance(100);
        clock.jump_wall_ms(-7_000);
        assert_eq!((clock.wall_ms(), clock.monotonic_ms()), (3_100, 100));
        clock.set_wall_ms(1_000_000);
        assert_eq!((clock.wall_ms(), clock.monotonic_ms()), (1_000_000, 100));
        clock.advance(1);
        assert_eq!((clock.wall_ms(), clock.monotonic_ms()), (1_000_001, 101));
    }

    #[test]
    fn manual_clock_saturates_instead_of_wrapping() {
        let clock = ManualClock::new(i64::MAX - 1);
        clock.advance(u64::MAX);
        assert_eq!(
            (clock.wall_ms(), clock.monotonic_ms()),
            (i64::MAX, u64::MAX)
        );
        clock.jump_wall_ms(i64::MIN);
        assert_eq!(clock.wall_ms(), -1);
    }

    #[test]
    fn system_clock_reads_the_epoch_and_a_monotonic_origin() {
        let wall = SystemClock.wall_ms();
        assert!(wall > 1_577_836_800_000, "after 2020: {wall}");
        let first = SystemClock.monotonic_ms();
        std::thread::sleep(Duration::from_millis(5));
        let second = SystemClock.monotonic_ms();
        assert!(second >= first + 5, "{first} then {second}");
    }

    #[test]
    fn epoch_ms_is_negative_before_the_epoch() {
        let before = UNIX_EPOCH - Duration::from_millis(1_500);
        assert_eq!(epoch_ms(before), -1_500);
        assert_eq!(epoch_ms(UNIX_EPOCH + Duration::from_millis(42)), 42);
    }

    #[test]
    fn a_shared_clock_is_a_trait_object() {
        let clock: std::sync::Arc<dyn Clock> = std::sync::Arc::new(ManualClock::new(1));
        assert_eq!(clock.wall_ms(), 1);
    }
}
