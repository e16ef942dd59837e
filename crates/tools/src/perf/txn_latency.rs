//! `strom perf e2e-latency --transactional-id`: how long a committed
//! transaction takes to become readable. Each sample is one transaction of
//! a few records: begin, send, `commit_transaction`; the clock starts when
//! the commit returns and stops when a read_committed consumer of every
//! partition has read all the transaction's records. The commit itself
//! (flush plus EndTxn) is timed apart.

use std::time::{Duration, Instant};

use bytes::Bytes;
use strom_consumer::Consumer;
use strom_producer::{Producer, ProducerRecord, TransactionError};

use crate::error::ToolError;
use crate::progress::Progress;

/// What to measure.
#[derive(Debug, Clone)]
pub struct TransactionLatencyRun {
    /// The topic (the consumer reads every partition of it).
    pub topic: String,
    /// The producer's `transactional.id`.
    pub transactional_id: String,
    /// Transactions to commit, one at a time.
    pub transactions: u64,
    /// Records in each transaction.
    pub records_per_transaction: u64,
    /// Value bytes per record.
    pub record_size: usize,
    /// Give up when a transaction's records are not read within this long.
    pub timeout: Duration,
    /// Bound on `init_transactions` and each commit.
    pub transaction_timeout: Duration,
}

/// Per-transaction samples in microseconds.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TransactionLatencies {
    /// From `commit_transaction` returning to the transaction's records read.
    pub visible_us: Vec<u64>,
    /// The `commit_transaction` call (the flush of the records and EndTxn).
    pub commit_us: Vec<u64>,
}

impl TransactionLatencyRun {
    /// Runs the loop with `producer` (created with `transactional_id`,
    /// transactions not yet initialised) and `consumer` (read_committed,
    /// assigned every partition at its end).
    pub async fn measure(
        &self,
        producer: &Producer,
        consumer: &mut Consumer,
    ) -> Result<TransactionLatencies, ToolError> {
        producer
            .init_transactions(self.transaction_timeout)
            .await
            .map_err(self.failed("init_transactions"))?;
        let progress = Progress::bar(self.transactions, "measuring transaction latency");
        let capacity = usize::try_from(self.transactions).unwrap_or(0).min(1 << 20);
        let mut latencies = TransactionLatencies {
            visible_us: Vec::with_capacity(capacity),
            commit_us: Vec::with_capacity(capacity),
        };
        for transaction in 0..self.transactions {
            producer
                .begin_transaction()
                .map_err(self.failed("begin_transaction"))?;
            for record in 0..self.records_per_transaction {
                let value = self.value(transaction, record);
                // The commit waits for every record: a failed one fails it.
                drop(
                    producer
                        .send(ProducerRecord::new(self.topic.as_str(), value))
                        .await,
                );
            }
            let commit_started = Instant::now();
            producer
                .commit_transaction(self.transaction_timeout)
                .await
                .map_err(self.failed("commit_transaction"))?;
            let committed_at = Instant::now();
            self.receive(consumer, transaction).await?;
            latencies.visible_us.push(micros(committed_at.elapsed()));
            latencies
                .commit_us
                .push(micros(committed_at.duration_since(commit_started)));
            progress.advance(1);
        }
        progress.finish();
        Ok(latencies)
    }

    /// A value of `record_size` bytes that starts with the transaction's
    /// and the record's index.
    fn value(&self, transaction: u64, record: u64) -> Bytes {
        let mut value = format!("{transaction}.{record}:").into_bytes();
        value.resize(self.record_size.max(value.len()), b'x');
        Bytes::from(value)
    }

    /// Polls until the `records_per_transaction` records of `transaction`
    /// are read (they may be spread over partitions).
    async fn receive(&self, consumer: &mut Consumer, transaction: u64) -> Result<(), ToolError> {
        let prefix = format!("{transaction}.");
        let deadline = Instant::now() + self.timeout;
        let mut missing = self.records_per_transaction;
        while Instant::now() < deadline {
            let records = consumer
                .poll(Duration::from_millis(50))
                .await
                .map_err(|source| ToolError::Consume {
                    topic: self.topic.clone(),
                    source,
                })?;
            let read = records
                .iter()
                .filter_map(|record| record.value.as_ref())
                .filter(|value| value.starts_with(prefix.as_bytes()))
                .count() as u64;
            missing = missing.saturating_sub(read);
            if missing == 0 {
                return Ok(());
            }
        }
        Err(ToolError::PerfFailed {
            what: "records of a committed transaction were not read before --timeout-ms",
            count: missing,
        })
    }

    fn failed(&self, operation: &'static str) -> impl Fn(TransactionError) -> ToolError + '_ {
        move |source| ToolError::ProducerTransaction {
            transactional_id: self.transactional_id.clone(),
            operation,
            source,
        }
    }
}

fn micros(duration: Duration) -> u64 {
    u64::try_from(duration.as_micros()).unwrap_or(u64::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_name_their_transaction_and_record() {
        let run = TransactionLatencyRun {
            topic: "t".to_owned(),
            transactional_id: "id".to_owned(),
            transactions: 1,
            records_per_transaction: 2,
            record_size: 12,
            timeout: Duration::from_secs(1),
            transaction_timeout: Duration::from_secs(1),
        };
        assert_eq!(run.value(3, 1).as_ref(), b"3.1:xxxxxxxx");
        assert_eq!(run.value(12345, 67).as_ref(), b"12345.67:xxx");
        assert_ne!(run.value(1, 11), run.value(11, 1));
    }
}
