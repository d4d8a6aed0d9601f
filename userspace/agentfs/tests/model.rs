//! Random operation sequences against a plain in-memory model: the workspace
//! must return what the model predicts, and the checker must stay clean
//! after every step.

mod common;

use std::collections::BTreeMap;

use common::{assert_consistent, Workspace};
use proptest::prelude::*;

/// Small name space so that operations collide often.
const NAMES: &[&str] = &["/a", "/b", "/d/a", "/d/b", "/d"];

#[derive(Debug, Clone)]
enum Op {
    WriteFile(usize, Vec<u8>),
    Write(usize, u16, Vec<u8>),
    Truncate(usize, u16),
    Mkdir(usize),
    Unlink(usize),
    Rmdir(usize),
    Rename(usize, usize),
    Link(usize, usize),
}

#[derive(Debug, Clone, PartialEq)]
enum Entry {
    File(usize),
    Dir,
}

#[derive(Default)]
struct Model {
    entries: BTreeMap<String, Entry>,
    contents: Vec<Vec<u8>>,
}

impl Model {
    fn parent_ok(&self, path: &str) -> bool {
        let parent = &path[..path.rfind('/').unwrap()];
        parent.is_empty() || self.entries.get(parent) == Some(&Entry::Dir)
    }

    fn has_children(&self, path: &str) -> bool {
        let prefix = format!("{path}/");
        self.entries.keys().any(|k| k.starts_with(&prefix))
    }

    /// Applies `op`; returns whether it should succeed.
    fn apply(&mut self, op: &Op) -> bool {
        match op {
            Op::WriteFile(p, data) => {
                let path = NAMES[*p];
                match self.entries.get(path) {
                    Some(Entry::File(id)) => self.contents[*id] = data.clone(),
                    Some(Entry::Dir) => return false,
                    None if self.parent_ok(path) || !self.entries.contains_key("/d") => {
                        if !self.parent_ok(path) {
                            self.entries.insert("/d".into(), Entry::Dir);
                        }
                        self.contents.push(data.clone());
                        self.entries.insert(path.into(), Entry::File(self.contents.len() - 1));
                    }
                    None => return false,
                }
                true
            }
            Op::Write(p, offset, data) => match self.entries.get(NAMES[*p]) {
                Some(Entry::File(id)) => {
                    let content = &mut self.contents[*id];
                    if !data.is_empty() {
                        let end = *offset as usize + data.len();
                        if content.len() < end {
                            content.resize(end, 0);
                        }
                        content[*offset as usize..end].copy_from_slice(data);
                    }
                    true
                }
                _ => false,
            },
            Op::Truncate(p, size) => match self.entries.get(NAMES[*p]) {
                Some(Entry::File(id)) => {
                    self.contents[*id].resize(*size as usize, 0);
                    true
                }
                _ => false,
            },
            Op::Mkdir(p) => {
                let path = NAMES[*p];
                if self.entries.contains_key(path) || !self.parent_ok(path) {
                    return false;
                }
                self.entries.insert(path.into(), Entry::Dir);
                true
            }
            Op::Unlink(p) => match self.entries.get(NAMES[*p]) {
                Some(Entry::File(_)) => {
                    self.entries.remove(NAMES[*p]);
                    true
                }
                _ => false,
            },
            Op::Rmdir(p) => {
                let path = NAMES[*p];
                if self.entries.get(path) != Some(&Entry::Dir) || self.has_children(path) {
                    return false;
                }
                self.entries.remove(path);
                true
            }
            Op::Rename(from, to) => {
                let (from, to) = (NAMES[*from], NAMES[*to]);
                let Some(source) = self.entries.get(from).cloned() else { return false };
                if !self.parent_ok(to) {
                    return false;
                }
                if from == to {
                    return true;
                }
                if source == Entry::Dir && to.starts_with(&format!("{from}/")) {
                    return false;
                }
                match (&source, self.entries.get(to)) {
                    (Entry::Dir, Some(Entry::File(_))) | (Entry::File(_), Some(Entry::Dir)) => return false,
                    (Entry::Dir, Some(Entry::Dir)) if self.has_children(to) => return false,
                    (Entry::File(a), Some(Entry::File(b))) if a == b => return true,
                    _ => {}
                }
                let moved: Vec<(String, Entry)> = self
                    .entries
                    .iter()
                    .filter(|(k, _)| *k == from || k.starts_with(&format!("{from}/")))
                    .map(|(k, v)| (format!("{to}{}", &k[from.len()..]), v.clone()))
                    .collect();
                self.entries.retain(|k, _| k != from && !k.starts_with(&format!("{from}/")));
                self.entries.extend(moved);
                true
            }
            Op::Link(from, to) => {
                let (from, to) = (NAMES[*from], NAMES[*to]);
                match self.entries.get(from).cloned() {
                    Some(Entry::File(id)) if !self.entries.contains_key(to) && self.parent_ok(to) => {
                        self.entries.insert(to.into(), Entry::File(id));
                        true
                    }
                    _ => false,
                }
            }
        }
    }
}

fn op() -> impl Strategy<Value = Op> {
    let name = 0..NAMES.len();
    let data = proptest::collection::vec(any::<u8>(), 0..40);
    prop_oneof![
        (name.clone(), data.clone()).prop_map(|(p, d)| Op::WriteFile(p, d)),
        (name.clone(), 0u16..50, data).prop_map(|(p, o, d)| Op::Write(p, o, d)),
        (name.clone(), 0u16..50).prop_map(|(p, s)| Op::Truncate(p, s)),
        name.clone().prop_map(Op::Mkdir),
        name.clone().prop_map(Op::Unlink),
        name.clone().prop_map(Op::Rmdir),
        (name.clone(), name.clone()).prop_map(|(a, b)| Op::Rename(a, b)),
        (name.clone(), name).prop_map(|(a, b)| Op::Link(a, b)),
    ]
}

fn run(ws: &mut Workspace, op: &Op) -> agentfs::Result<()> {
    match op {
        Op::WriteFile(p, data) => ws.write_file(NAMES[*p], data),
        Op::Write(p, offset, data) => ws.write(NAMES[*p], u64::from(*offset), data).map(drop),
        Op::Truncate(p, size) => ws.truncate(NAMES[*p], u64::from(*size)),
        Op::Mkdir(p) => ws.mkdir(NAMES[*p], 0o755).map(drop),
        Op::Unlink(p) => ws.unlink(NAMES[*p]),
        Op::Rmdir(p) => ws.rmdir(NAMES[*p]),
        Op::Rename(a, b) => ws.rename(NAMES[*a], NAMES[*b]),
        Op::Link(a, b) => ws.link(NAMES[*a], NAMES[*b]).map(drop),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 64, ..ProptestConfig::default() })]

    #[test]
    fn workspace_matches_the_model(ops in proptest::collection::vec(op(), 1..30)) {
        // A 16-byte chunk size makes multi-chunk writes and truncates common.
        let mut ws = Workspace::with_options(&agentfs::OpenOptions { chunk_size: 16, ..agentfs::OpenOptions::default() });
        let mut model = Model::default();
        for op in &ops {
            let expected = model.apply(op);
            let actual = run(&mut ws, op);
            prop_assert_eq!(actual.is_ok(), expected, "{:?} -> {:?}", op, actual);
            assert_consistent(&ws);
        }
        for (path, entry) in &model.entries {
            match entry {
                Entry::File(id) => prop_assert_eq!(&ws.read_file(path).unwrap(), &model.contents[*id]),
                Entry::Dir => prop_assert!(ws.stat(path).unwrap().is_dir()),
            }
        }
        let listed: Vec<_> = ws.readdir("/").unwrap().into_iter().map(|e| format!("/{}", e.name)).collect();
        let expected: Vec<_> = model.entries.keys().filter(|k| k.matches('/').count() == 1).cloned().collect();
        prop_assert_eq!(listed, expected);
    }
}
