//! Runnable examples of embedding and using Strom; this library is empty.
//! Each example's file says what it shows; run one with
//! `cargo run -p strom-examples --example NAME`:
//!
//! * `embedded_broker`: a broker started from Rust, configured with Kafka's
//!   property strings;
//! * `produce`: keyed records with `strom-producer`, and each record's
//!   delivery result;
//! * `consume`: a consumer group with `strom-consumer`: subscribe with a
//!   rebalance listener, poll, commit;
//! * `admin`: the admin client of `strom-client`: create, describe,
//!   reconfigure and delete a topic, list groups;
//! * `in_process`: a broker configured with the typed builder
//!   (`BrokerConfig::builder()`) and all three clients against it in one
//!   process.
//!
//! `cargo test -p strom-examples` runs every one of them against a broker on
//! 127.0.0.1 (`tests/examples.rs`).
