//! The file side of [`ReviewCommand`]s, for the driver: the only code of the
//! review module that touches the filesystem. Writes are atomic; an archive
//! never overwrites an earlier one.

use std::fs;
use std::io;
use std::path::{Path, PathBuf};

use troupe_core::layout::Layout;
use troupe_project::write_atomic;

use crate::review::ReviewCommand;
use crate::review::record;

/// `reviews/active/` of `feature`.
pub fn active_dir(layout: &Layout, feature: &str) -> PathBuf {
    layout.reviews_dir(feature).join("active")
}

/// `verdicts.md` of `feature`.
pub fn verdicts_file(layout: &Layout, feature: &str) -> PathBuf {
    layout.spec_dir(feature).join("verdicts.md")
}

/// The `B{seq}` the next review round of `feature` gets.
pub fn next_seq(layout: &Layout, feature: &str) -> io::Result<u32> {
    let mut names = Vec::new();
    match fs::read_dir(layout.reviews_dir(feature)) {
        Ok(entries) => {
            for e in entries {
                names.push(e?.file_name().to_string_lossy().into_owned());
            }
        }
        Err(e) if e.kind() == io::ErrorKind::NotFound => {}
        Err(e) => return Err(e),
    }
    let md = match fs::read_to_string(verdicts_file(layout, feature)) {
        Ok(t) => t,
        Err(e) if e.kind() == io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(e),
    };
    Ok(record::next_seq(names.iter().map(String::as_str), &md))
}

fn with_path(path: &Path, e: io::Error) -> io::Error {
    io::Error::new(e.kind(), format!("{}: {e}", path.display()))
}

/// Carry out one review command under the project of `layout`.
pub fn apply(layout: &Layout, command: &ReviewCommand) -> io::Result<()> {
    match command {
        ReviewCommand::BeginRound { feature, seq } => {
            let active = active_dir(layout, feature);
            let leftovers = fs::read_dir(&active).map(|d| d.count() > 0).unwrap_or(false);
            if leftovers {
                // An interrupted round: keep its files, out of the new round's way.
                let aside = layout.reviews_dir(feature).join(format!("interrupted-before-B{seq}"));
                if aside.exists() {
                    fs::remove_dir_all(&aside).map_err(|e| with_path(&aside, e))?;
                }
                fs::rename(&active, &aside).map_err(|e| with_path(&active, e))?;
            }
            fs::create_dir_all(&active).map_err(|e| with_path(&active, e))
        }
        ReviewCommand::WriteActive { feature, file, contents, overwrite } => {
            if file.contains('/') || file.contains('\\') || file.starts_with('.') {
                return Err(io::Error::new(io::ErrorKind::InvalidInput, format!("not a plain file name: {file}")));
            }
            let path = active_dir(layout, feature).join(file);
            if !overwrite && path.exists() {
                return Ok(());
            }
            write_atomic(&path, contents.as_bytes()).map_err(|e| with_path(&path, e))
        }
        ReviewCommand::Archive { feature, seq } => {
            let active = active_dir(layout, feature);
            let target = layout.reviews_dir(feature).join(format!("B{seq}"));
            if target.exists() {
                return Err(io::Error::new(
                    io::ErrorKind::AlreadyExists,
                    format!("{} already exists; an archive is never overwritten", target.display()),
                ));
            }
            fs::create_dir_all(&active).map_err(|e| with_path(&active, e))?;
            fs::rename(&active, &target).map_err(|e| with_path(&active, e))
        }
        ReviewCommand::AppendVerdicts { feature, entry } => {
            let path = verdicts_file(layout, feature);
            let mut text = match fs::read_to_string(&path) {
                Ok(t) => t,
                Err(e) if e.kind() == io::ErrorKind::NotFound => format!("# Verdicts: {feature}\n\n"),
                Err(e) => return Err(with_path(&path, e)),
            };
            if !text.is_empty() && !text.ends_with('\n') {
                text.push('\n');
            }
            text.push_str(entry);
            write_atomic(&path, text.as_bytes()).map_err(|e| with_path(&path, e))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_round_is_begun_written_archived_and_recorded() {
        let dir = tempfile::tempdir().unwrap();
        let l = Layout::new(dir.path());
        let f = "login".to_string();
        assert_eq!(next_seq(&l, &f).unwrap(), 1);
        apply(&l, &ReviewCommand::BeginRound { feature: f.clone(), seq: 1 }).unwrap();
        fs::write(active_dir(&l, &f).join("verdict.cpf"), "VERDICT:GO\n").unwrap();
        let keep = ReviewCommand::WriteActive {
            feature: f.clone(),
            file: "verdict.cpf".into(),
            contents: "VERDICT:NO-GO\n".into(),
            overwrite: false,
        };
        apply(&l, &keep).unwrap();
        assert_eq!(fs::read_to_string(active_dir(&l, &f).join("verdict.cpf")).unwrap(), "VERDICT:GO\n");
        apply(&l, &ReviewCommand::Archive { feature: f.clone(), seq: 1 }).unwrap();
        assert!(l.reviews_dir(&f).join("B1/verdict.cpf").exists());
        assert!(!active_dir(&l, &f).exists());
        apply(
            &l,
            &ReviewCommand::AppendVerdicts {
                feature: f.clone(),
                entry: "## [B1] impl | t | v1.0 | runs:1 | threshold:1/1\n\n".into(),
            },
        )
        .unwrap();
        assert_eq!(next_seq(&l, &f).unwrap(), 2);
        let md = fs::read_to_string(verdicts_file(&l, &f)).unwrap();
        assert!(md.starts_with("# Verdicts: login\n\n## [B1] impl"), "{md}");
        let again = apply(&l, &ReviewCommand::Archive { feature: f.clone(), seq: 1 }).unwrap_err();
        assert_eq!(again.kind(), io::ErrorKind::AlreadyExists);
    }

    #[test]
    fn leftovers_of_an_interrupted_round_are_set_aside() {
        let dir = tempfile::tempdir().unwrap();
        let l = Layout::new(dir.path());
        fs::create_dir_all(active_dir(&l, "f")).unwrap();
        fs::write(active_dir(&l, "f").join("old.cpf"), "x").unwrap();
        apply(&l, &ReviewCommand::BeginRound { feature: "f".into(), seq: 2 }).unwrap();
        assert!(l.reviews_dir("f").join("interrupted-before-B2/old.cpf").exists());
        assert_eq!(fs::read_dir(active_dir(&l, "f")).unwrap().count(), 0);
    }

    #[test]
    fn file_names_cannot_escape_the_active_folder() {
        let dir = tempfile::tempdir().unwrap();
        let l = Layout::new(dir.path());
        for bad in ["../spec.yaml", "a/b.cpf", ".hidden"] {
            let c = ReviewCommand::WriteActive {
                feature: "f".into(),
                file: bad.into(),
                contents: String::new(),
                overwrite: true,
            };
            assert_eq!(apply(&l, &c).unwrap_err().kind(), io::ErrorKind::InvalidInput, "{bad}");
        }
    }
}
