//! The crate's errors. Kafka error codes are chosen by the broker from these;
//! each variant's doc names the code Kafka answers with.

pub use crate::state::IllegalTransition;
