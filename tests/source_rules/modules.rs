//! The module tree of a library crate and the imports between its modules.
//!
//! The tree is followed from `lib.rs` through its `mod NAME;` declarations,
//! leaving out what `#[cfg(test)]` guards, so only modules of the library
//! itself count. An import is any path that starts with `crate::`,
//! `super::` or `self::`, in a `use` or in code (a parent's `use` of a
//! child's path, `pub use config::Listener;`, is how a facade re-exports
//! and is not counted, as a parent declares its children anyway). Each resolves to
//! the deepest module file it names; a name re-exported with `pub use`
//! resolves to the module that defines it, so `crate::BrokerConfig`
//! counts as an import of `config`.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use super::lexer::{code_tokens, is_word, matching_brace, word_at, Located, Token};

/// A module's path inside its crate (`[]` for the crate root).
pub type ModulePath = Vec<String>;

/// One module file of a crate.
#[derive(Debug)]
pub struct ModuleFile {
    /// Its path in the module tree.
    pub module: ModulePath,
    tokens: Vec<Located>,
}

/// The module files of the library rooted at `lib_rs`.
pub fn module_files(lib_rs: &Path) -> Result<Vec<ModuleFile>, String> {
    let mut files = Vec::new();
    let mut pending = vec![(Vec::new(), lib_rs.to_path_buf())];
    while let Some((module, file)) = pending.pop() {
        let text = std::fs::read_to_string(&file)
            .map_err(|error| format!("{}: {error}", file.display()))?;
        let tokens = code_tokens(&text);
        for child in declared_modules(&tokens, &file)? {
            let path = child_file(&file, &module, &child)?;
            let mut child_module = module.clone();
            child_module.push(child);
            pending.push((child_module, path));
        }
        files.push(ModuleFile { module, tokens });
    }
    files.sort_by(|a, b| a.module.cmp(&b.module));
    Ok(files)
}

/// The names of `mod NAME;` declarations at any depth of inline modules
/// (a declaration inside an inline module is refused: none exists).
fn declared_modules(tokens: &[Located], file: &Path) -> Result<Vec<String>, String> {
    let mut names = Vec::new();
    for index in 0..tokens.len() {
        if !is_word(tokens, index, "mod") {
            continue;
        }
        let Some((name, line)) = word_at(tokens, index + 1) else {
            continue;
        };
        if tokens.get(index + 2).map(|l| &l.token) != Some(&Token::Punct(';')) {
            continue;
        }
        let attributes_before = tokens[..index]
            .iter()
            .rev()
            .take(8)
            .any(|l| l.token == Token::Word("path".to_owned()));
        if attributes_before {
            return Err(format!(
                "{}:{line}: `#[path]` on a library module is not followed by this check",
                file.display()
            ));
        }
        names.push(name.to_owned());
    }
    Ok(names)
}

fn child_file(parent: &Path, parent_module: &[String], child: &str) -> Result<PathBuf, String> {
    let directory = parent.parent().unwrap_or(Path::new("."));
    let owns_directory = parent_module.is_empty()
        || parent.file_name().is_some_and(|name| name == "mod.rs")
        || parent.file_name().is_some_and(|name| name == "lib.rs");
    let base = if owns_directory {
        directory.to_path_buf()
    } else {
        let stem = parent.file_stem().unwrap_or_default();
        directory.join(stem)
    };
    [
        base.join(format!("{child}.rs")),
        base.join(child).join("mod.rs"),
    ]
    .into_iter()
    .find(|candidate| candidate.exists())
    .ok_or_else(|| format!("{}: no file for `mod {child};`", parent.display()))
}

/// One path found in a module: where it starts and its segments from the
/// crate root (or, for a relative `use`, from the module itself).
#[derive(Debug, Clone)]
struct FoundPath {
    segments: Vec<String>,
    /// The name it is re-exported under, for `pub use`.
    exported_as: Option<String>,
    /// Whether it counts as an import (a relative `use` of a child's path
    /// only resolves re-exports).
    import: bool,
}

/// Scans a module file for paths, tracking inline modules (for `super`).
struct Scanner<'a> {
    tokens: &'a [Located],
    /// Whether the paths being read count as imports.
    importing: bool,
    module: &'a [String],
    children: &'a BTreeSet<String>,
    inline: Vec<(String, usize)>,
    depth: usize,
    found: Vec<FoundPath>,
}

impl Scanner<'_> {
    fn base(&self, head: &str) -> Vec<String> {
        let mut here: Vec<String> = self.module.to_vec();
        here.extend(self.inline.iter().map(|(name, _)| name.clone()));
        match head {
            "crate" => Vec::new(),
            "super" => {
                here.pop();
                here
            }
            _ => here,
        }
    }

    /// Reads a use tree at `index` below `prefix`; returns the index after it.
    fn use_tree(&mut self, mut index: usize, prefix: Vec<String>, export: bool) -> usize {
        let mut path = prefix;
        loop {
            match self.tokens.get(index).map(|l| &l.token) {
                Some(Token::Word(word)) if word == "super" && !path.is_empty() => {
                    path.pop();
                }
                Some(Token::Word(word)) if word == "self" => {}
                Some(Token::Word(word)) if word == "as" => {
                    let alias = match self.tokens.get(index + 1).map(|l| &l.token) {
                        Some(Token::Word(alias)) => Some(alias.clone()),
                        _ => None,
                    };
                    self.record(path, alias, export);
                    return index + 2;
                }
                Some(Token::Word(word)) => path.push(word.clone()),
                Some(Token::Punct('*')) => {
                    self.record(path, None, false);
                    return index + 1;
                }
                Some(Token::Punct('{')) => {
                    return self.use_group(index, &path, export);
                }
                _ => {
                    let name = path.last().cloned();
                    self.record(path, name, export);
                    return index;
                }
            }
            index += 1;
            if self.tokens.get(index).map(|l| &l.token) == Some(&Token::PathSeparator) {
                index += 1;
            }
        }
    }

    fn use_group(&mut self, open: usize, path: &[String], export: bool) -> usize {
        let close = matching_brace(self.tokens, open);
        let mut index = open + 1;
        while index < close {
            if self.tokens.get(index).map(|l| &l.token) == Some(&Token::Punct(',')) {
                index += 1;
                continue;
            }
            let next = self.use_tree(index, path.to_vec(), export);
            index = next.max(index + 1);
        }
        close + 1
    }

    fn record(&mut self, segments: Vec<String>, exported_as: Option<String>, export: bool) {
        self.found.push(FoundPath {
            segments,
            exported_as: if export { exported_as } else { None },
            import: self.importing,
        });
    }

    /// At `use` (after any `pub(...)`): reads the statement.
    fn use_statement(&mut self, index: usize, export: bool) -> usize {
        let first = match self.tokens.get(index + 1).map(|l| &l.token) {
            Some(Token::Word(word)) => word.clone(),
            _ => return index + 1,
        };
        let anchored = matches!(first.as_str(), "crate" | "super" | "self");
        if anchored {
            let base = self.base(&first);
            let after = index + 2;
            let start = if self.tokens.get(after).map(|l| &l.token) == Some(&Token::PathSeparator) {
                after + 1
            } else {
                after
            };
            let mut prefix = base;
            let mut at = start;
            while is_word(self.tokens, at, "super") {
                prefix.pop();
                at += 2;
            }
            return self.use_tree(at, prefix, export);
        }
        if self.children.contains(&first) {
            let mut prefix = self.module.to_vec();
            prefix.extend(self.inline.iter().map(|(name, _)| name.clone()));
            self.importing = false;
            let next = self.use_tree(index + 1, prefix, export);
            self.importing = true;
            return next;
        }
        index + 1
    }

    /// At `crate`/`super`/`self` followed by `::` outside a `use`.
    fn code_path(&mut self, index: usize, head: &str) -> usize {
        let mut segments = self.base(head);
        let mut at = index + 1;
        while self.tokens.get(at).map(|l| &l.token) == Some(&Token::PathSeparator) {
            match self.tokens.get(at + 1).map(|l| &l.token) {
                Some(Token::Word(word)) if word == "super" => {
                    segments.pop();
                }
                Some(Token::Word(word)) => segments.push(word.clone()),
                _ => break,
            }
            at += 2;
        }
        self.record(segments, None, false);
        at
    }

    fn scan(&mut self) {
        let mut index = 0;
        while index < self.tokens.len() {
            index = self.step(index);
        }
    }

    fn step(&mut self, index: usize) -> usize {
        let tokens = self.tokens;
        match &tokens[index].token {
            Token::Punct('{') => self.depth += 1,
            Token::Punct('}') => {
                self.depth = self.depth.saturating_sub(1);
                if self
                    .inline
                    .last()
                    .is_some_and(|(_, depth)| *depth == self.depth)
                {
                    self.inline.pop();
                }
            }
            Token::Word(word) if word == "mod" => {
                if let (Some(Token::Word(name)), Some(Token::Punct('{'))) = (
                    tokens.get(index + 1).map(|l| &l.token),
                    tokens.get(index + 2).map(|l| &l.token),
                ) {
                    self.inline.push((name.clone(), self.depth));
                }
            }
            Token::Word(word) if word == "use" => {
                let export = self.is_exported(index);
                return self.use_statement(index, export);
            }
            Token::Word(word) if matches!(word.as_str(), "crate" | "super" | "self") => {
                let after_separator = index > 0 && tokens[index - 1].token == Token::PathSeparator;
                let before_separator =
                    tokens.get(index + 1).map(|l| &l.token) == Some(&Token::PathSeparator);
                if before_separator && !after_separator {
                    let head = word.clone();
                    return self.code_path(index, &head);
                }
            }
            _ => {}
        }
        index + 1
    }

    /// Whether the `use` at `index` is `pub use` or `pub(...) use`.
    fn is_exported(&self, index: usize) -> bool {
        let before = &self.tokens[..index];
        match before.last().map(|l| &l.token) {
            Some(Token::Word(word)) if word == "pub" => true,
            Some(Token::Punct(')')) => before
                .iter()
                .rev()
                .take(6)
                .any(|l| l.token == Token::Word("pub".to_owned())),
            _ => false,
        }
    }
}

/// The import graph of one crate: for each module, the modules it imports.
pub fn import_graph(files: &[ModuleFile]) -> BTreeMap<ModulePath, BTreeSet<ModulePath>> {
    let modules: BTreeSet<ModulePath> = files.iter().map(|f| f.module.clone()).collect();
    let mut found = BTreeMap::new();
    for file in files {
        let children: BTreeSet<String> = modules
            .iter()
            .filter(|m| m.len() == file.module.len() + 1 && m.starts_with(&file.module))
            .filter_map(|m| m.last().cloned())
            .collect();
        let mut scanner = Scanner {
            tokens: &file.tokens,
            module: &file.module,
            children: &children,
            importing: true,
            inline: Vec::new(),
            depth: 0,
            found: Vec::new(),
        };
        scanner.scan();
        found.insert(file.module.clone(), scanner.found);
    }
    let exports = re_exports(&modules, &found);
    found
        .iter()
        .map(|(module, paths)| {
            let targets = paths
                .iter()
                .filter(|path| path.import)
                .map(|path| resolve(&modules, &exports, &path.segments))
                .filter(|target| target != module)
                .collect();
            (module.clone(), targets)
        })
        .collect()
}

type Exports = BTreeMap<(ModulePath, String), Vec<String>>;

/// For each module and name it re-exports, the full path re-exported.
fn re_exports(
    modules: &BTreeSet<ModulePath>,
    found: &BTreeMap<ModulePath, Vec<FoundPath>>,
) -> Exports {
    let mut exports = Exports::new();
    for (module, paths) in found {
        for path in paths {
            if let Some(name) = &path.exported_as {
                if modules.contains(&path.segments) {
                    continue;
                }
                exports.insert((module.clone(), name.clone()), path.segments.clone());
            }
        }
    }
    exports
}

/// The module a path names: its deepest module prefix, or the module that
/// defines a name re-exported there.
fn resolve(modules: &BTreeSet<ModulePath>, exports: &Exports, segments: &[String]) -> ModulePath {
    let mut current = segments.to_vec();
    for _ in 0..8 {
        let depth = (0..=current.len())
            .rev()
            .find(|&depth| modules.contains(&current[..depth]))
            .unwrap_or(0);
        let module = current[..depth].to_vec();
        let Some(name) = current.get(depth) else {
            return module;
        };
        match exports.get(&(module.clone(), name.clone())) {
            Some(target) if target.as_slice() != current.as_slice() => {
                let mut next = target.clone();
                next.extend_from_slice(&current[depth + 1..]);
                current = next;
            }
            _ => return module,
        }
    }
    current
}

/// The cycles of `graph`: its strongly connected components of more than
/// one module, each sorted.
pub fn cycles(graph: &BTreeMap<ModulePath, BTreeSet<ModulePath>>) -> Vec<Vec<ModulePath>> {
    let nodes: Vec<&ModulePath> = graph.keys().collect();
    let index_of: BTreeMap<&ModulePath, usize> =
        nodes.iter().enumerate().map(|(i, m)| (*m, i)).collect();
    let edges: Vec<Vec<usize>> = nodes
        .iter()
        .map(|m| {
            graph[*m]
                .iter()
                .filter_map(|target| index_of.get(target).copied())
                .collect()
        })
        .collect();
    strongly_connected(&edges)
        .into_iter()
        .filter(|component| component.len() > 1)
        .map(|component| {
            let mut modules: Vec<ModulePath> =
                component.into_iter().map(|i| nodes[i].clone()).collect();
            modules.sort();
            modules
        })
        .collect()
}

/// Tarjan's algorithm, iterative.
fn strongly_connected(edges: &[Vec<usize>]) -> Vec<Vec<usize>> {
    let count = edges.len();
    let mut index = vec![usize::MAX; count];
    let mut low = vec![0; count];
    let mut on_stack = vec![false; count];
    let mut stack = Vec::new();
    let mut components = Vec::new();
    let mut next = 0;
    for root in 0..count {
        if index[root] != usize::MAX {
            continue;
        }
        let mut work = vec![(root, 0usize)];
        while let Some((node, edge)) = work.pop() {
            if edge == 0 {
                index[node] = next;
                low[node] = next;
                next += 1;
                stack.push(node);
                on_stack[node] = true;
            }
            if let Some(&target) = edges[node].get(edge) {
                work.push((node, edge + 1));
                if index[target] == usize::MAX {
                    work.push((target, 0));
                } else if on_stack[target] {
                    low[node] = low[node].min(index[target]);
                }
                continue;
            }
            if let Some(&(parent, _)) = work.last() {
                low[parent] = low[parent].min(low[node]);
            }
            if low[node] == index[node] {
                let mut component = Vec::new();
                while let Some(member) = stack.pop() {
                    on_stack[member] = false;
                    component.push(member);
                    if member == node {
                        break;
                    }
                }
                components.push(component);
            }
        }
    }
    components
}
