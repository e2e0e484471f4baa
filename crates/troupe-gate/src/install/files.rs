//! A plan of file changes: read through it (pending changes win over disk),
//! change it, then apply it. Nothing touches the disk before [`Plan::apply`], so
//! an error anywhere in an install leaves every file as it was.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde_json::Value;

use super::InstallError;
use super::manifest::{Created, MANIFEST, Manifest, hash};

enum Pending {
    Write(String),
    Remove,
}

/// Pending changes under a project root.
pub struct Plan {
    root: PathBuf,
    pending: BTreeMap<String, Pending>,
}

impl Plan {
    pub fn new(root: &Path) -> Plan {
        Plan { root: root.to_path_buf(), pending: BTreeMap::new() }
    }

    fn path(&self, rel: &str) -> PathBuf {
        self.root.join(rel)
    }

    /// The file's text as it will be after the plan (`None`: absent).
    pub fn read(&self, rel: &str) -> Result<Option<String>, InstallError> {
        match self.pending.get(rel) {
            Some(Pending::Write(t)) => return Ok(Some(t.clone())),
            Some(Pending::Remove) => return Ok(None),
            None => {}
        }
        let path = self.path(rel);
        match std::fs::read_to_string(&path) {
            Ok(t) => Ok(Some(t)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(source) => Err(InstallError::Io { action: "read", path, source }),
        }
    }

    /// The file as a JSON object (`None`: absent; an empty file counts as `{}`).
    pub fn read_json(&self, rel: &str) -> Result<Option<Value>, InstallError> {
        let Some(text) = self.read(rel)? else { return Ok(None) };
        if text.trim().is_empty() {
            return Ok(Some(Value::Object(Default::default())));
        }
        let value: Value = serde_json::from_str(&text)
            .map_err(|e| InstallError::BadJson { path: self.path(rel), detail: e.to_string() })?;
        if !value.is_object() {
            return Err(InstallError::BadShape { path: self.path(rel), detail: "expected a JSON object".into() });
        }
        Ok(Some(value))
    }

    pub fn write(&mut self, rel: &str, text: String) {
        self.pending.insert(rel.to_string(), Pending::Write(text));
    }

    pub fn write_json(&mut self, rel: &str, value: &Value) {
        let mut text = serde_json::to_string_pretty(value).expect("JSON values serialize");
        text.push('\n');
        self.write(rel, text);
    }

    pub fn remove(&mut self, rel: &str) {
        self.pending.insert(rel.to_string(), Pending::Remove);
    }

    /// Create `rel` with `text` unless a file is there (a user's file is never
    /// overwritten); a file troupe created before is refreshed if unchanged since.
    pub fn create(&mut self, manifest: &mut Manifest, rel: &str, text: String) -> Result<(), InstallError> {
        let ours = manifest.created.iter().position(|c| c.path == rel);
        match (self.read(rel)?, ours) {
            (None, _) => {}
            (Some(existing), Some(i)) if hash(&existing) == manifest.created[i].hash => {}
            (Some(_), _) => return Ok(()),
        }
        manifest.created.retain(|c| c.path != rel);
        manifest.created.push(Created { path: rel.to_string(), hash: hash(&text) });
        self.write(rel, text);
        Ok(())
    }

    /// Remove `rel` if its content still hashes to `expected` (the user did not edit it).
    pub fn remove_if_unchanged(&mut self, rel: &str, expected: &str) -> Result<(), InstallError> {
        if let Some(text) = self.read(rel)?
            && hash(&text) == expected
        {
            self.remove(rel);
        }
        Ok(())
    }

    pub fn set_manifest(&mut self, manifest: &Manifest) -> Result<(), InstallError> {
        let value = serde_json::to_value(manifest).expect("the manifest serializes");
        self.write_json(MANIFEST, &value);
        Ok(())
    }

    pub fn remove_manifest(&mut self) {
        self.remove(MANIFEST);
    }

    /// Write everything; returns the files that changed, relative to the root.
    pub fn apply(self) -> Result<Vec<String>, InstallError> {
        let mut changed = Vec::new();
        for (rel, pending) in self.pending {
            let path = self.root.join(&rel);
            match pending {
                Pending::Write(text) => {
                    if std::fs::read_to_string(&path).is_ok_and(|old| old == text) {
                        continue;
                    }
                    troupe_project::write_atomic(&path, text.as_bytes()).map_err(|source| InstallError::Io {
                        action: "write",
                        path: path.clone(),
                        source,
                    })?;
                }
                Pending::Remove => {
                    match std::fs::remove_file(&path) {
                        Ok(()) => {}
                        Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
                        Err(source) => return Err(InstallError::Io { action: "remove", path, source }),
                    }
                    remove_empty_parents(&self.root, &path);
                }
            }
            changed.push(rel);
        }
        Ok(changed)
    }
}

/// Remove folders left empty by a removal, up to (not including) the root.
fn remove_empty_parents(root: &Path, file: &Path) {
    let mut dir = file.parent();
    while let Some(d) = dir {
        if d == root || !d.starts_with(root) || std::fs::remove_dir(d).is_err() {
            break;
        }
        dir = d.parent();
    }
}
