//! Prometheus' text exposition: the encoding helpers the collector writes
//! its samples with, the OpenMetrics text of a registry, and its classic
//! (0.0.4) form.

use std::fmt;

use prometheus_client::encoding::{DescriptorEncoder, NoLabelSet};
use prometheus_client::metrics::MetricType;

use crate::histogram::HistogramSnapshot;

/// Labels of one sample.
pub(crate) type Labels = Vec<(&'static str, String)>;

/// Writes a counter family: one sample per row, unlabelled when its labels
/// are empty.
pub(crate) fn counter(
    encoder: &mut DescriptorEncoder<'_>,
    name: &str,
    help: &str,
    rows: Vec<(Labels, u64)>,
) -> fmt::Result {
    let mut metric = encoder.encode_descriptor(name, help, None, MetricType::Counter)?;
    for (labels, value) in rows {
        if labels.is_empty() {
            metric.encode_counter::<NoLabelSet, u64, u64>(&value, None)?;
        } else {
            metric
                .encode_family(&labels)?
                .encode_counter::<NoLabelSet, u64, u64>(&value, None)?;
        }
    }
    Ok(())
}

/// Writes a gauge family, as [`counter`] does.
pub(crate) fn gauge(
    encoder: &mut DescriptorEncoder<'_>,
    name: &str,
    help: &str,
    rows: Vec<(Labels, i64)>,
) -> fmt::Result {
    let mut metric = encoder.encode_descriptor(name, help, None, MetricType::Gauge)?;
    for (labels, value) in rows {
        if labels.is_empty() {
            metric.encode_gauge(&value)?;
        } else {
            metric.encode_family(&labels)?.encode_gauge(&value)?;
        }
    }
    Ok(())
}

/// Writes a histogram family, as [`counter`] does.
pub(crate) fn histogram(
    encoder: &mut DescriptorEncoder<'_>,
    name: &str,
    help: &str,
    rows: Vec<(Labels, HistogramSnapshot)>,
) -> fmt::Result {
    let mut metric = encoder.encode_descriptor(name, help, None, MetricType::Histogram)?;
    for (labels, snapshot) in rows {
        if labels.is_empty() {
            encode_snapshot(&mut metric, &snapshot)?;
        } else {
            encode_snapshot(&mut metric.encode_family(&labels)?, &snapshot)?;
        }
    }
    Ok(())
}

fn encode_snapshot(
    metric: &mut prometheus_client::encoding::MetricEncoder<'_>,
    snapshot: &HistogramSnapshot,
) -> fmt::Result {
    metric.encode_histogram::<NoLabelSet>(
        snapshot.sum_seconds,
        snapshot.count,
        &snapshot.buckets,
        None,
    )
}

/// The one unlabelled row of a single-valued counter.
pub(crate) fn one(value: u64) -> Vec<(Labels, u64)> {
    vec![(Vec::new(), value)]
}

/// Prometheus' classic text format (0.0.4) of an OpenMetrics exposition,
/// for consumers that do not negotiate OpenMetrics (`promtool check
/// metrics`, `curl`): the two formats differ, for what this exposition
/// holds, only in that a classic counter's `HELP` and `TYPE` lines name the
/// series with its `_total` suffix, and in OpenMetrics' closing `# EOF`.
pub fn classic_text(openmetrics: &str) -> String {
    let mut counters = std::collections::HashSet::new();
    for line in openmetrics.lines() {
        if let Some(name) = line
            .strip_prefix("# TYPE ")
            .and_then(|rest| rest.strip_suffix(" counter"))
        {
            counters.insert(name.to_owned());
        }
    }
    let mut classic = String::with_capacity(openmetrics.len() + 16 * counters.len());
    for line in openmetrics.lines() {
        if line == "# EOF" {
            continue;
        }
        let renamed = ["# HELP ", "# TYPE "].iter().find_map(|prefix| {
            let rest = line.strip_prefix(prefix)?;
            let (name, tail) = rest.split_once(' ')?;
            counters
                .contains(name)
                .then(|| format!("{prefix}{name}_total {tail}"))
        });
        classic.push_str(renamed.as_deref().unwrap_or(line));
        classic.push('\n');
    }
    classic
}

/// The text exposition of `registry` (OpenMetrics' text format, which
/// Prometheus negotiates; it ends with `# EOF`).
pub fn exposition(registry: &prometheus_client::registry::Registry) -> Result<String, fmt::Error> {
    let mut text = String::with_capacity(64 * 1024);
    prometheus_client::encoding::text::encode(&mut text, registry)?;
    Ok(text)
}

#[cfg(test)]
mod tests {
    use super::classic_text;

    #[test]
    fn classic_text_names_counters_with_their_total_suffix() {
        let openmetrics = "# HELP requests Requests.\n# TYPE requests counter\nrequests_total{api=\"Produce\"} 3\n# HELP open Open.\n# TYPE open gauge\nopen 1\n# EOF\n";
        assert_eq!(
            classic_text(openmetrics),
            "# HELP requests_total Requests.\n# TYPE requests_total counter\nrequests_total{api=\"Produce\"} 3\n# HELP open Open.\n# TYPE open gauge\nopen 1\n"
        );
    }
}
