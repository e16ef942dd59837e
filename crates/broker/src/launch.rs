//! From command-line arguments to a typed configuration: what the
//! `strom-broker` binary and `strom broker` share.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use crate::config::{BrokerConfig, ConfigWarning};
use crate::error::ConfigError;
use crate::properties::parse_properties;

/// Where the configuration comes from: an optional `server.properties` file
/// and `key=value` overrides applied on top of it, in order.
#[derive(Debug, Clone, Default)]
pub struct LaunchOptions {
    /// `--config FILE`.
    pub config_file: Option<PathBuf>,
    /// `--set key=value`, repeatable.
    pub overrides: Vec<String>,
}

impl LaunchOptions {
    /// Reads the file (if any), applies the overrides and parses the result.
    pub fn load(&self) -> Result<(BrokerConfig, Vec<ConfigWarning>), ConfigError> {
        let mut map = match &self.config_file {
            Some(path) => read_properties_file(path)?,
            None => BTreeMap::new(),
        };
        for text in &self.overrides {
            let (key, value) = text
                .split_once('=')
                .ok_or_else(|| ConfigError::Override { text: text.clone() })?;
            map.insert(key.trim().to_owned(), value.trim().to_owned());
        }
        BrokerConfig::from_map(&map)
    }
}

/// Reads and parses a properties file.
pub fn read_properties_file(path: &Path) -> Result<BTreeMap<String, String>, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
        path: path.to_owned(),
        source,
    })?;
    parse_properties(&text, &path.display().to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn overrides_apply_on_top_of_the_file() {
        let directory = std::env::temp_dir().join(format!("strom-launch-{}", std::process::id()));
        std::fs::create_dir_all(&directory).expect("temp dir");
        let path = directory.join("server.properties");
        std::fs::write(&path, "num.partitions=3\nnode.id=4\n").expect("write");
        let options = LaunchOptions {
            config_file: Some(path),
            overrides: vec!["num.partitions=5".to_owned()],
        };
        let (config, warnings) = options.load().expect("valid");
        assert_eq!(config.num_partitions, 5);
        assert_eq!(config.node_id, 4);
        assert!(warnings.is_empty());
        std::fs::remove_dir_all(&directory).expect("cleanup");
    }

    #[test]
    fn a_missing_file_and_a_bad_override_are_errors() {
        let options = LaunchOptions {
            config_file: Some(PathBuf::from("/nonexistent/server.properties")),
            overrides: vec![],
        };
        assert!(matches!(options.load(), Err(ConfigError::Read { .. })));
        let options = LaunchOptions {
            config_file: None,
            overrides: vec!["no-equals".to_owned()],
        };
        assert!(matches!(options.load(), Err(ConfigError::Override { .. })));
    }
}
