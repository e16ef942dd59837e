//! The controller validates topic configs against its table; the storage
//! crate parses the same keys into its typed `LogConfig`. Every value the
//! controller accepts (and stores) must parse in storage, or a topic could
//! be created that its partitions cannot open.

use std::collections::BTreeMap;

use strom_controller::config::{validate_topic_config, TOPIC_CONFIGS};
use strom_storage::LogConfig;

const SAMPLES: &[&str] = &[
    "",
    " ",
    "-2",
    "-1",
    "0",
    "1",
    "3",
    "4",
    "13",
    "14",
    "100",
    " 5 ",
    "0.5",
    "1.5",
    "NaN",
    "2147483647",
    "2147483648",
    "9223372036854775807",
    "-9223372036854775808",
    "true",
    "FALSE",
    "yes",
    "delete",
    "compact",
    "compact,delete",
    " compact , delete ",
    "compact,",
    "shred",
    "gzip",
    "GZIP",
    "zstd",
    "producer",
    "uncompressed",
    "CreateTime",
    "LogAppendTime",
    "0:1,1:2",
    "*",
    "3.0-IV1",
];

fn storage_accepts(key: &str, value: &str) -> Result<(), String> {
    let properties = BTreeMap::from([(key.to_owned(), value.to_owned())]);
    LogConfig::from_properties(&properties)
        .map(|_| ())
        .map_err(|error| error.to_string())
}

#[test]
fn defaults_parse_in_storage() {
    for definition in TOPIC_CONFIGS {
        assert_eq!(
            storage_accepts(definition.name, definition.default),
            Ok(()),
            "{} = {}",
            definition.name,
            definition.default
        );
    }
}

#[test]
fn every_value_the_controller_stores_parses_in_storage() {
    let mut disagreements = Vec::new();
    for definition in TOPIC_CONFIGS {
        for sample in SAMPLES {
            if let Ok(stored) = validate_topic_config(definition.name, sample) {
                if let Err(error) = storage_accepts(definition.name, &stored) {
                    disagreements.push(format!("{} = {stored:?}: {error}", definition.name));
                }
            }
        }
    }
    assert!(disagreements.is_empty(), "{disagreements:#?}");
}
