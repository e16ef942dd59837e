//! Layering rules of the workspace, read from `cargo metadata`.
//!
//! Dependencies point down only (see `docs/architecture.md`): every Strom crate may
//! depend on the Strom crates listed for it below and on no other. A new crate
//! must be added to the table, which is how a reviewer gets to see its place.

use std::collections::{BTreeMap, BTreeSet};
use std::process::Command;

/// For each Strom package, the Strom packages it may depend on (any kind of
/// dependency: normal, build or dev). `None` means "anything": the top-level
/// test and benchmark packages that exercise the whole system.
fn allowed() -> BTreeMap<&'static str, Option<Vec<&'static str>>> {
    let mut rules = BTreeMap::new();
    rules.insert("strom-clock", Some(vec![]));
    rules.insert("strom-protocol", Some(vec![]));
    rules.insert("strom-config", Some(vec!["strom-protocol"]));
    // Client quotas' sans-IO core: entities, precedence, rates, throttles.
    rules.insert("strom-quotas", Some(vec![]));
    rules.insert("strom-storage", Some(vec!["strom-clock", "strom-protocol"]));
    rules.insert(
        "strom-replication",
        Some(vec!["strom-clock", "strom-protocol", "strom-storage"]),
    );
    rules.insert(
        "strom-controller",
        Some(vec![
            "strom-clock",
            "strom-protocol",
            "strom-config",
            "strom-storage",
            "strom-quotas",
        ]),
    );
    rules.insert(
        "strom-coordinator",
        Some(vec!["strom-clock", "strom-protocol", "strom-storage"]),
    );
    // The transaction coordinator's sans-IO core; the broker wires it.
    rules.insert(
        "strom-transactions",
        Some(vec!["strom-clock", "strom-protocol"]),
    );
    rules.insert(
        "strom-security",
        Some(vec!["strom-protocol", "strom-config"]),
    );
    rules.insert(
        "strom-network",
        Some(vec![
            "strom-protocol",
            "strom-config",
            "strom-security",
            "strom-observability",
        ]),
    );
    rules.insert(
        "strom-client",
        Some(vec!["strom-protocol", "strom-config", "strom-security"]),
    );
    rules.insert(
        "strom-producer",
        Some(vec!["strom-protocol", "strom-config", "strom-client"]),
    );
    rules.insert(
        "strom-consumer",
        Some(vec![
            "strom-protocol",
            "strom-config",
            "strom-client",
            "strom-producer",
        ]),
    );
    // Metrics, health probes and the console; it reads the broker through
    // a trait the broker implements, never the broker itself.
    rules.insert(
        "strom-observability",
        Some(vec!["strom-protocol", "strom-config"]),
    );
    // The broker's typed configuration; the settings of the components the
    // broker starts are derived in the broker.
    rules.insert(
        "strom-broker-config",
        Some(vec![
            "strom-protocol",
            "strom-config",
            "strom-security",
            "strom-storage",
        ]),
    );
    rules.insert(
        "strom-broker",
        Some(vec![
            "strom-clock",
            "strom-protocol",
            "strom-config",
            "strom-security",
            "strom-network",
            "strom-storage",
            "strom-replication",
            "strom-controller",
            "strom-coordinator",
            "strom-transactions",
            "strom-observability",
            "strom-broker-config",
            "strom-quotas",
        ]),
    );
    rules.insert(
        "strom-tools",
        Some(vec![
            "strom-protocol",
            "strom-config",
            "strom-security",
            "strom-network",
            "strom-storage",
            "strom-client",
            "strom-producer",
            "strom-consumer",
            "strom-broker-config",
            "strom-broker",
        ]),
    );
    rules.insert("strom-integration", None);
    rules.insert("strom-bench", None);
    rules.insert("strom-examples", None);
    rules
}

struct Package {
    name: String,
    manifest_path: String,
    dependencies: BTreeSet<String>,
    /// Normal dependencies that no feature has to switch on.
    required_dependencies: BTreeSet<String>,
}

fn workspace_packages() -> Vec<Package> {
    let cargo = std::env::var("CARGO").unwrap_or_else(|_| "cargo".to_owned());
    let output = Command::new(cargo)
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .output()
        .expect("cargo metadata runs");
    assert!(
        output.status.success(),
        "cargo metadata failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    let metadata: serde_json::Value =
        serde_json::from_slice(&output.stdout).expect("cargo metadata prints JSON");
    let packages = metadata["packages"].as_array().expect("packages array");
    packages
        .iter()
        .map(|package| Package {
            name: package["name"].as_str().expect("name").to_owned(),
            manifest_path: package["manifest_path"]
                .as_str()
                .expect("manifest_path")
                .to_owned(),
            dependencies: package["dependencies"]
                .as_array()
                .expect("dependencies array")
                .iter()
                .map(|dependency| dependency["name"].as_str().expect("name").to_owned())
                .collect(),
            required_dependencies: package["dependencies"]
                .as_array()
                .expect("dependencies array")
                .iter()
                .filter(|dependency| dependency["kind"].is_null() && dependency["optional"] != true)
                .map(|dependency| dependency["name"].as_str().expect("name").to_owned())
                .collect(),
        })
        .collect()
}

#[test]
fn dependencies_point_down_only() {
    let rules = allowed();
    let packages = workspace_packages();
    assert!(
        packages.iter().any(|p| p.name == "strom-protocol"),
        "the workspace has the protocol crate"
    );
    let mut violations = Vec::new();
    for package in &packages {
        let Some(rule) = rules.get(package.name.as_str()) else {
            violations.push(format!(
                "{} is not in the layering table of tests/layering.rs",
                package.name
            ));
            continue;
        };
        let Some(allowed) = rule else { continue };
        for dependency in &package.dependencies {
            if dependency.starts_with("strom-") && !allowed.contains(&dependency.as_str()) {
                violations.push(format!(
                    "{} depends on {}, which is not below it",
                    package.name, dependency
                ));
            }
        }
    }
    assert!(
        violations.is_empty(),
        "layering violations:\n{}",
        violations.join("\n")
    );
}

#[test]
fn the_clock_crate_needs_no_dependency() {
    let clock = workspace_packages()
        .into_iter()
        .find(|package| package.name == "strom-clock")
        .expect("the workspace has the clock crate");
    assert!(
        clock.required_dependencies.is_empty(),
        "strom-clock must build with no dependency unless a feature asks: {:?}",
        clock.required_dependencies
    );
    assert!(
        clock.dependencies.contains("tokio"),
        "the check sees the optional tokio dependency"
    );
}

#[test]
fn only_the_protocol_crate_imports_kafka_protocol() {
    for package in workspace_packages() {
        if package.name != "strom-protocol" {
            assert!(
                !package.dependencies.contains("kafka-protocol"),
                "{} depends on kafka-protocol directly; use strom_protocol::kafka",
                package.name
            );
        }
    }
}

/// Crates that exist for command-line programs: argument parsing, shell
/// completions, progress bars.
const COMMAND_LINE_CRATES: &[&str] = &["clap", "clap_complete", "indicatif"];

/// The packages that are programs (or their tests and benchmarks) rather
/// than libraries other services embed.
const PROGRAM_PACKAGES: &[&str] = &[
    "strom-tools",
    "strom-bench",
    "strom-integration",
    "strom-examples",
];

/// Whether `package` may depend on `dependency`, as far as command-line
/// crates go.
fn command_line_dependency_allowed(package: &str, dependency: &str) -> bool {
    PROGRAM_PACKAGES.contains(&package) || !COMMAND_LINE_CRATES.contains(&dependency)
}

#[test]
fn no_library_crate_depends_on_a_command_line_crate() {
    let mut violations = Vec::new();
    for package in workspace_packages() {
        for dependency in &package.dependencies {
            if !command_line_dependency_allowed(&package.name, dependency) {
                violations.push(format!(
                    "{} depends on {}: command-line code belongs in strom-tools or strom-bench",
                    package.name, dependency
                ));
            }
        }
    }
    assert!(
        violations.is_empty(),
        "library crates with command-line dependencies:\n{}",
        violations.join("\n")
    );
}

#[test]
fn the_command_line_rule_rejects_clap_in_a_library() {
    for library in [
        "strom-protocol",
        "strom-producer",
        "strom-consumer",
        "strom-broker",
    ] {
        assert!(!command_line_dependency_allowed(library, "clap"));
    }
    assert!(command_line_dependency_allowed("strom-tools", "clap"));
    assert!(command_line_dependency_allowed("strom-producer", "tokio"));
}

#[test]
fn every_crate_inherits_the_workspace_lints() {
    for package in workspace_packages() {
        let manifest = std::fs::read_to_string(&package.manifest_path).expect("manifest");
        let lints = manifest
            .split("[lints]")
            .nth(1)
            .map(|rest| rest.trim_start().starts_with("workspace = true"))
            .unwrap_or(false);
        assert!(lints, "{} lacks `[lints] workspace = true`", package.name);
        assert!(
            !manifest.contains("[lints.") && !manifest.contains("[package.lints"),
            "{} overrides lints locally",
            package.name
        );
    }
}

#[test]
fn the_rules_reject_an_upward_dependency() {
    // The table itself must forbid the obvious inversions, or the test above
    // proves nothing.
    let rules = allowed();
    let storage = rules["strom-storage"].as_ref().expect("storage has rules");
    assert!(!storage.contains(&"strom-broker"));
    let protocol = rules["strom-protocol"]
        .as_ref()
        .expect("protocol has rules");
    assert!(protocol.is_empty());
    for (name, rule) in &rules {
        if let Some(allowed) = rule {
            assert!(!allowed.contains(&"strom-broker") || *name == "strom-tools");
            assert!(
                !allowed.contains(&"strom-tools"),
                "{name} may not use tools"
            );
        }
    }
}
