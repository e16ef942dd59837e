//! `meta.properties`: the cluster id and node id stamped on each log
//! directory, in Kafka's format, so a directory is never mounted into the
//! wrong cluster or node by mistake.

use std::path::{Path, PathBuf};

pub use crate::error::MetaPropertiesError;
use crate::properties::parse_properties;

/// The file name Kafka uses.
pub const META_PROPERTIES: &str = "meta.properties";

/// Reads or creates `meta.properties` in every directory and returns the
/// cluster id. A new cluster id is a random UUID in Kafka's URL-safe
/// base64 form (22 characters).
pub fn ensure(log_dirs: &[PathBuf], node_id: i32) -> Result<String, MetaPropertiesError> {
    ensure_cluster(log_dirs, node_id, None)
}

/// As [`ensure`], for a node of a cluster whose id is `given` (the
/// `strom.cluster.id` every node shares): a directory written for another
/// cluster is refused, so a node never joins a cluster with another's data.
pub fn ensure_cluster(
    log_dirs: &[PathBuf],
    node_id: i32,
    given: Option<&str>,
) -> Result<String, MetaPropertiesError> {
    let mut cluster_id: Option<String> = given.map(str::to_owned);
    for dir in log_dirs {
        let path = dir.join(META_PROPERTIES);
        if let Some((found_cluster, found_node)) = read(&path)? {
            if found_node != node_id {
                return Err(MetaPropertiesError::Mismatch {
                    path,
                    what: "node.id",
                    found: found_node.to_string(),
                    expected: node_id.to_string(),
                });
            }
            match &cluster_id {
                Some(expected) if *expected != found_cluster => {
                    return Err(MetaPropertiesError::Mismatch {
                        path,
                        what: "cluster.id",
                        found: found_cluster,
                        expected: expected.clone(),
                    })
                }
                _ => cluster_id = Some(found_cluster),
            }
        }
    }
    let cluster_id = cluster_id.unwrap_or_else(new_cluster_id);
    for dir in log_dirs {
        let path = dir.join(META_PROPERTIES);
        if !path.exists() {
            write(&path, &cluster_id, node_id)?;
        }
    }
    Ok(cluster_id)
}

fn read(path: &Path) -> Result<Option<(String, i32)>, MetaPropertiesError> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(error) if error.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(source) => {
            return Err(MetaPropertiesError::Io {
                path: path.to_owned(),
                source,
            })
        }
    };
    let missing = |key| MetaPropertiesError::MissingKey {
        path: path.to_owned(),
        key,
    };
    let map = parse_properties(&text, &path.display().to_string()).map_err(|source| {
        MetaPropertiesError::Unparsable {
            path: path.to_owned(),
            source,
        }
    })?;
    let cluster_id = map
        .get("cluster.id")
        .ok_or_else(|| missing("cluster.id"))?
        .clone();
    let node_id = map
        .get("node.id")
        .or_else(|| map.get("broker.id"))
        .ok_or_else(|| missing("node.id"))?;
    let node_id = node_id
        .parse::<i32>()
        .map_err(|_| MetaPropertiesError::InvalidNodeId {
            path: path.to_owned(),
            value: node_id.clone(),
        })?;
    Ok(Some((cluster_id, node_id)))
}

fn write(path: &Path, cluster_id: &str, node_id: i32) -> Result<(), MetaPropertiesError> {
    let text =
        format!("#\n#Written by Strom\nnode.id={node_id}\nversion=1\ncluster.id={cluster_id}\n");
    let temporary = path.with_extension("properties.tmp");
    let io = |source| MetaPropertiesError::Io {
        path: path.to_owned(),
        source,
    };
    std::fs::write(&temporary, text).map_err(io)?;
    std::fs::File::open(&temporary)
        .and_then(|file| file.sync_all())
        .map_err(io)?;
    std::fs::rename(&temporary, path).map_err(io)?;
    Ok(())
}

/// A random cluster id: 16 random bytes, URL-safe base64 without padding.
/// Drawn from the operating system, not the broker's seeded source: it is
/// an identity written once when a directory is formatted, and two test
/// clusters seeded alike must still not share it.
fn new_cluster_id() -> String {
    const ALPHABET: &[u8; 64] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";
    let bytes = uuid::Uuid::new_v4().into_bytes();
    let mut bits: u32 = 0;
    let mut bit_count = 0;
    let mut out = String::with_capacity(22);
    for byte in bytes {
        bits = (bits << 8) | u32::from(byte);
        bit_count += 8;
        while bit_count >= 6 {
            bit_count -= 6;
            out.push(ALPHABET[((bits >> bit_count) & 0x3f) as usize] as char);
        }
    }
    if bit_count > 0 {
        out.push(ALPHABET[((bits << (6 - bit_count)) & 0x3f) as usize] as char);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn temp_dir(name: &str) -> PathBuf {
        let dir = std::env::temp_dir().join(format!("strom-meta-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(&dir).expect("temp dir");
        dir
    }

    #[test]
    fn a_new_directory_gets_a_cluster_id_that_sticks() {
        let dir = temp_dir("new");
        let first = ensure(std::slice::from_ref(&dir), 1).expect("created");
        assert_eq!(first.len(), 22);
        assert_eq!(ensure(std::slice::from_ref(&dir), 1).expect("read"), first);
        let text = std::fs::read_to_string(dir.join(META_PROPERTIES)).expect("file");
        assert!(text.contains("version=1") && text.contains(&format!("cluster.id={first}")));
        std::fs::remove_dir_all(&dir).expect("cleanup");
    }

    #[test]
    fn a_directory_of_another_node_is_refused() {
        let dir = temp_dir("node");
        ensure(std::slice::from_ref(&dir), 1).expect("created");
        let error = ensure(std::slice::from_ref(&dir), 2).unwrap_err();
        assert!(matches!(
            error,
            MetaPropertiesError::Mismatch {
                what: "node.id",
                ..
            }
        ));
        std::fs::remove_dir_all(&dir).expect("cleanup");
    }

    #[test]
    fn a_damaged_file_says_what_is_wrong() {
        let dir = temp_dir("damaged");
        let path = dir.join(META_PROPERTIES);
        let ensure_here = || ensure(std::slice::from_ref(&dir), 1).unwrap_err();
        std::fs::write(&path, "cluster.id=abc\nnode.id=one\n").expect("write");
        assert!(matches!(
            ensure_here(),
            MetaPropertiesError::InvalidNodeId { value, .. } if value == "one"
        ));
        std::fs::write(&path, "node.id=1\n").expect("write");
        assert!(matches!(
            ensure_here(),
            MetaPropertiesError::MissingKey {
                key: "cluster.id",
                ..
            }
        ));
        std::fs::write(&path, "cluster.id=\\u12\n").expect("write");
        let error = ensure_here();
        assert!(matches!(
            &error,
            MetaPropertiesError::Unparsable {
                source: crate::ConfigError::UnicodeEscape { .. },
                ..
            }
        ));
        std::fs::remove_dir_all(&dir).expect("cleanup");
    }

    #[test]
    fn cluster_ids_are_url_safe_and_distinct() {
        let a = new_cluster_id();
        let b = new_cluster_id();
        assert_ne!(a, b);
        assert!(a
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_'));
    }
}
