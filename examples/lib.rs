//! Runnable examples of Strom; this library is empty. Run one with
//! `cargo run -p strom-examples --example embedded_broker`.
