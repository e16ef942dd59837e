//! The integration tests of this crate, linked as one test binary (each
//! file is a module): one executable instead of one per file keeps the
//! workspace's test build small on disk and quick to link.

mod wire_support;

mod records_bad_input;
mod records_codecs;
mod records_fixtures;
mod records_golden;
mod records_roundtrip;
mod records_seeds;
mod records_view;
mod wire_bad_input;
mod wire_docs;
mod wire_fixtures;
mod wire_frame;
mod wire_header;
mod wire_messages_arbitrary;
mod wire_messages_defaults;
mod wire_messages_proptest;
mod wire_regressions;
