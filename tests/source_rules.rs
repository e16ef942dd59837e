//! Rules read from the workspace's source, as Kafka's import-control and
//! checkstyle rules read its modules:
//!
//! - no import cycle between the modules of any library crate (a module
//!   imports another when one of its paths, in a `use` or in code, names
//!   it: `crate::...`, `super::...` or `self::...`);
//! - no function over [`FUNCTION_LINES_MAX`] lines outside tests.
//!
//! Both read code only: comments, strings and `#[cfg(test)]` items are
//! left out by a small lexer (`source_rules/lexer.rs`).

mod source_rules {
    pub mod functions;
    pub mod lexer;
    pub mod modules;
}

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use source_rules::functions::{long_functions, source_files};
use source_rules::modules::{cycles, import_graph, module_files, ModulePath};

/// The longest a function outside tests may be, in lines.
const FUNCTION_LINES_MAX: usize = 70;

/// Module cycles that are allowed, by crate directory and the sorted
/// modules of the cycle. Each needs a reason; none has one today.
const ALLOWED_CYCLES: &[(&str, &[&str])] = &[];

fn workspace_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("tests/ is inside the workspace")
        .to_path_buf()
}

/// Every library crate of the workspace: its directory and `src/lib.rs`.
fn library_crates() -> Vec<(PathBuf, PathBuf)> {
    let root = workspace_root();
    let mut crates = Vec::new();
    for group in ["crates", "benches"] {
        let Ok(entries) = std::fs::read_dir(root.join(group)) else {
            continue;
        };
        for entry in entries.flatten() {
            let lib = entry.path().join("src").join("lib.rs");
            if lib.exists() {
                crates.push((entry.path(), lib));
            }
        }
    }
    crates.sort();
    crates
}

fn module_name(module: &ModulePath) -> String {
    if module.is_empty() {
        "lib".to_owned()
    } else {
        module.join("::")
    }
}

fn crate_cycles(lib: &Path) -> Vec<Vec<String>> {
    let files = module_files(lib).unwrap_or_else(|error| panic!("{error}"));
    let graph = import_graph(&files);
    cycles(&graph)
        .into_iter()
        .map(|cycle| cycle.iter().map(module_name).collect())
        .collect()
}

fn describe_cycle(lib: &Path, cycle: &[String]) -> String {
    let files = module_files(lib).unwrap_or_else(|error| panic!("{error}"));
    let graph = import_graph(&files);
    let members: BTreeSet<&String> = cycle.iter().collect();
    let mut lines = Vec::new();
    for (module, targets) in &graph {
        let name = module_name(module);
        if !members.contains(&name) {
            continue;
        }
        let inside: Vec<String> = targets
            .iter()
            .map(module_name)
            .filter(|target| members.contains(target))
            .collect();
        lines.push(format!("    {name} -> {}", inside.join(", ")));
    }
    lines.join("\n")
}

#[test]
fn no_library_crate_has_an_import_cycle_between_its_modules() {
    let allowed: BTreeMap<(&str, Vec<String>), ()> = ALLOWED_CYCLES
        .iter()
        .map(|(dir, modules)| {
            (
                (*dir, modules.iter().map(|m| (*m).to_owned()).collect()),
                (),
            )
        })
        .collect();
    let crates = library_crates();
    assert!(crates.len() >= 10, "found the library crates: {crates:?}");
    let mut failures = Vec::new();
    for (directory, lib) in &crates {
        let name = directory
            .strip_prefix(workspace_root())
            .unwrap_or(directory)
            .display()
            .to_string();
        for cycle in crate_cycles(lib) {
            if allowed.contains_key(&(name.as_str(), cycle.clone())) {
                continue;
            }
            failures.push(format!(
                "{name}: {}\n{}",
                cycle.join(", "),
                describe_cycle(lib, &cycle)
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "import cycles between modules:\n{}",
        failures.join("\n")
    );
}

#[test]
fn no_function_outside_tests_is_over_the_limit() {
    let root = workspace_root();
    let mut long = Vec::new();
    for group in ["crates", "benches", "examples"] {
        for file in source_files(&root.join(group)) {
            let text = std::fs::read_to_string(&file).expect("source file reads");
            long.extend(long_functions(&file, &text, FUNCTION_LINES_MAX));
        }
    }
    let report: Vec<String> = long
        .iter()
        .map(|f| {
            let file = f.file.strip_prefix(&root).unwrap_or(&f.file);
            format!(
                "{}:{} {} ({} lines)",
                file.display(),
                f.line,
                f.name,
                f.lines
            )
        })
        .collect();
    assert!(
        report.is_empty(),
        "functions over {FUNCTION_LINES_MAX} lines:\n{}",
        report.join("\n")
    );
}

/// A crate written to a temporary directory.
fn scratch_crate(files: &[(&str, &str)]) -> tempfile::TempDir {
    let directory = tempfile::tempdir().expect("temporary directory");
    for (path, text) in files {
        let path = directory.path().join(path);
        std::fs::create_dir_all(path.parent().expect("a parent")).expect("directories");
        std::fs::write(path, text).expect("file writes");
    }
    directory
}

#[test]
fn a_cycle_through_a_re_export_and_super_is_found() {
    let directory = scratch_crate(&[
        (
            "src/lib.rs",
            "pub mod config;\npub mod security;\npub use config::Config;\n",
        ),
        (
            "src/config.rs",
            "use crate::security::Settings;\npub struct Config;\n",
        ),
        (
            "src/security/mod.rs",
            "mod parse;\npub use parse::Settings;\n",
        ),
        (
            "src/security/parse.rs",
            "pub struct Settings(crate::Config);\nfn f() { super::super::config::Config; }\n",
        ),
    ]);
    let cycles = crate_cycles(&directory.path().join("src/lib.rs"));
    assert_eq!(
        cycles,
        vec![vec!["config".to_owned(), "security::parse".to_owned()]]
    );
}

#[test]
fn test_modules_comments_and_strings_make_no_cycle() {
    let directory = scratch_crate(&[
        ("src/lib.rs", "mod a;\nmod b;\n"),
        ("src/a.rs", "use crate::b::B;\npub struct A;\n"),
        (
            "src/b.rs",
            "pub struct B;\n// crate::a::A\nconst S: &str = \"crate::a::A\";\n#[cfg(test)]\nmod tests { use crate::a::A; }\n",
        ),
    ]);
    assert!(crate_cycles(&directory.path().join("src/lib.rs")).is_empty());
}

#[test]
fn a_long_function_is_found_and_a_test_function_is_not() {
    let body = "    let x = 1;\n".repeat(FUNCTION_LINES_MAX);
    let text = format!(
        "fn long() {{\n{body}}}\nfn short() -> Result<(), ()> {{ Ok(()) }}\n#[cfg(test)]\nmod tests {{\n    fn long_test() {{\n{body}    }}\n}}\n"
    );
    let long = long_functions(Path::new("x.rs"), &text, FUNCTION_LINES_MAX);
    let names: Vec<&str> = long.iter().map(|f| f.name.as_str()).collect();
    assert_eq!(names, ["long"]);
    assert_eq!(long[0].lines, FUNCTION_LINES_MAX + 2);
}
