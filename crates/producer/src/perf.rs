//! perf placeholder
