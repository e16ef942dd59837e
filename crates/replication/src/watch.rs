//! Waiting for offsets to move: the async edge of delayed produce and fetch.

use std::time::Duration;

use tokio::sync::watch;

/// A monotonically increasing offset (a log end offset or a high watermark)
/// that tasks can wait on. Advancing it wakes every waiter at once; nothing
/// polls.
#[derive(Debug)]
pub struct OffsetWatch {
    sender: watch::Sender<i64>,
}

/// How a wait ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum WaitOutcome {
    /// The offset reached the target; the value seen.
    Reached(i64),
    /// The timeout passed first; the last value seen.
    TimedOut(i64),
}

impl OffsetWatch {
    /// A watch starting at `offset`.
    pub fn new(offset: i64) -> OffsetWatch {
        let (sender, _) = watch::channel(offset);
        OffsetWatch { sender }
    }

    /// The current value.
    pub fn current(&self) -> i64 {
        *self.sender.borrow()
    }

    /// Moves the offset forward (never back) and wakes waiters if it moved.
    pub fn advance(&self, offset: i64) {
        self.sender.send_if_modified(|current| {
            if offset > *current {
                *current = offset;
                true
            } else {
                false
            }
        });
    }

    /// Sets the offset even if it goes back (log truncation), waking waiters.
    pub fn reset(&self, offset: i64) {
        self.sender.send_replace(offset);
    }

    /// A receiver for waiting on several watches at once (`changed()`).
    pub fn subscribe(&self) -> watch::Receiver<i64> {
        self.sender.subscribe()
    }

    /// Waits until the offset is at least `target` or `timeout` passes.
    /// Dropping the future cancels the wait cleanly.
    pub async fn wait_until(&self, target: i64, timeout: Duration) -> WaitOutcome {
        let mut receiver = self.sender.subscribe();
        let wait = async {
            match receiver.wait_for(|value| *value >= target).await {
                Ok(value) => Some(*value),
                Err(_) => None,
            }
        };
        match tokio::time::timeout(timeout, wait).await {
            Ok(Some(value)) => WaitOutcome::Reached(value),
            // The sender lives in `self`, so the channel cannot close while
            // we borrow it; report the last value either way.
            Ok(None) | Err(_) => WaitOutcome::TimedOut(self.current()),
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    #[tokio::test(start_paused = true)]
    async fn an_advance_wakes_a_waiter_before_its_timeout() {
        let watch = Arc::new(OffsetWatch::new(0));
        let waiter = {
            let watch = Arc::clone(&watch);
            tokio::spawn(async move { watch.wait_until(5, Duration::from_secs(30)).await })
        };
        tokio::task::yield_now().await;
        watch.advance(3);
        tokio::task::yield_now().await;
        assert!(!waiter.is_finished(), "3 is below the target");
        watch.advance(7);
        assert_eq!(waiter.await.expect("joins"), WaitOutcome::Reached(7));
    }

    #[tokio::test(start_paused = true)]
    async fn a_wait_times_out_with_the_last_value() {
        let watch = OffsetWatch::new(2);
        let outcome = watch.wait_until(5, Duration::from_millis(500)).await;
        assert_eq!(outcome, WaitOutcome::TimedOut(2));
    }

    #[test]
    fn the_offset_never_moves_back_on_advance() {
        let watch = OffsetWatch::new(10);
        watch.advance(4);
        assert_eq!(watch.current(), 10);
        watch.reset(4);
        assert_eq!(watch.current(), 4);
    }

    #[tokio::test(start_paused = true)]
    async fn an_already_reached_target_returns_at_once() {
        let watch = OffsetWatch::new(9);
        assert_eq!(
            watch.wait_until(9, Duration::from_secs(1)).await,
            WaitOutcome::Reached(9)
        );
    }
}
