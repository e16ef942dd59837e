//! Benchmarks of the sans-IO coordinator core (filled in below).
fn main() {}
