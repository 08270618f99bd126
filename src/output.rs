//! The one way a user-named output is written (`fit --out`, `report --out`, `simulate --out`,
//! `--report`, `--request-log`). `fit ex2.csv --out ex2.csv` replaced the log with the
//! scenario, and `--out ../../etc/passwd` replaced that file too; every output now goes
//! through [`check`] before any work and through [`write`] / [`write_with`] at the end:
//!
//! - an output is never one of the run's inputs (the same file by device and inode, or the
//!   same path; a directory output never holds an input) — `--force` does not change that;
//! - an existing file or non-empty directory this tool did not write is refused unless
//!   `--force` is given. What marks a file or a directory as ours is the caller's [`Target`]
//!   (`ours`, and `mark` to say it in the error): fit's header comment, `summary.json`, the
//!   tables' CSV header, the page's generator tag. An empty file, or a directory holding only
//!   hidden files (`.gitkeep`), is written over: nothing is lost;
//! - a symbolic link at the target is refused, `--force` or not: a planted link would
//!   otherwise send the output to the file it points to;
//! - a file is written to a temporary file beside the target and renamed over it, so a failed
//!   run never leaves half a file, and the rename replaces a link itself, never what it names.
//!   The one exception is a file that must hold what the run did up to the moment it was killed
//!   (`simulate --carrier-ledger`): a killed run never reaches the rename, so that file is
//!   opened in place by [`create_in_place`], after the same [`check`].
//!
//! Errors name the flag and the path and say how to proceed; the command line maps them to
//! exit 2 (bad input).

use std::fs::{File, Metadata};
use std::io::{Read as _, Seek as _, Write as _};
use std::os::unix::fs::OpenOptionsExt as _;
use std::path::{Path, PathBuf};

/// An input of the run, which no output may replace.
#[derive(Debug, Clone, Copy)]
pub struct Input<'a> {
    /// How the user gave it: `--scenario`, `LOG`, `--baseline`.
    pub what: &'a str,
    pub path: &'a Path,
}

/// A file or a directory output.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    File,
    /// A directory the tool writes its own file names into (created if needed).
    Dir,
}

/// One user-named output.
pub struct Target<'a> {
    /// The flag that named it (`--out`), for the errors.
    pub flag: &'a str,
    pub path: &'a Path,
    pub kind: Kind,
    /// Whether an existing file (or non-empty directory) at `path` was written by this tool.
    pub ours: &'a dyn Fn(&Path) -> bool,
    /// What `ours` looks for, in words, for the error: "a scenario `idemcalc fit` wrote starts
    /// with its header comment".
    pub mark: &'a str,
}

/// Why an output is refused: the message names the flag and the path and says what to do.
#[derive(Debug, thiserror::Error)]
#[error("{flag} {}: {message}", path.display())]
pub struct OutputError {
    pub flag: String,
    pub path: PathBuf,
    pub message: String,
}

impl Target<'_> {
    fn error(&self, message: impl Into<String>) -> OutputError {
        OutputError {
            flag: self.flag.to_string(),
            path: self.path.to_path_buf(),
            message: message.into(),
        }
    }
}

/// Checks an output before any work: not a link, not an input, not something this tool did
/// not write (unless `force`), and its directory takes a file. A directory output is created
/// here, as the report's was, so an unwritable place fails at once.
pub fn check(target: &Target, force: bool, inputs: &[Input]) -> Result<(), OutputError> {
    let existing = match std::fs::symlink_metadata(target.path) {
        Ok(m) => Some(m),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => None,
        Err(e) => return Err(target.error(format!("cannot look at it: {e}"))),
    };
    if let Some(meta) = &existing {
        let t = meta.file_type();
        if t.is_symlink() {
            return Err(target.error(
                "is a symbolic link; idemcalc does not write through links (not even with \
                 --force): give the path it points to, or another path",
            ));
        }
        match target.kind {
            Kind::File if t.is_dir() => {
                return Err(target.error("is a directory; give a file name"));
            }
            Kind::File if !t.is_file() => {
                return Err(target.error(format!(
                    "is {}; give a regular file's path",
                    crate::input::file_kind(meta)
                )));
            }
            Kind::Dir if !t.is_dir() => {
                return Err(target.error(format!(
                    "is {}; give a directory (a new one is created)",
                    crate::input::file_kind(meta)
                )));
            }
            _ => {}
        }
    }
    for input in inputs {
        if let Some(why) = clash(target, existing.as_ref(), input) {
            return Err(target.error(why));
        }
    }
    if let Some(meta) = &existing
        && !force
        && !foreign_ok(target, meta)
    {
        return Err(target.error(match target.kind {
            Kind::File => format!(
                "exists and was not written by idemcalc ({}); give another path, or --force to \
                 replace it",
                target.mark
            ),
            Kind::Dir => format!(
                "is a directory idemcalc did not write (not empty, and {}); give a new or empty \
                 directory, or --force to write into it (files of the same names are replaced)",
                target.mark
            ),
        }));
    }
    let dir = match target.kind {
        Kind::Dir => {
            std::fs::create_dir_all(target.path)
                .map_err(|e| target.error(format!("cannot create the directory: {e}")))?;
            target.path
        }
        Kind::File => {
            let dir = parent(target.path);
            if !dir.is_dir() {
                return Err(target.error(format!("the directory {} does not exist", dir.display())));
            }
            dir
        }
    };
    // The same temporary file the write will make, made and removed now.
    tempfile::Builder::new()
        .prefix(".idemcalc-write-check-")
        .tempfile_in(dir)
        .map(drop)
        .map_err(|e| target.error(format!("cannot write there: {e}")))
}

/// Whether an existing, non-link `path` may be replaced without `--force`: ours, or holding
/// nothing (an empty file; a directory with nothing but hidden files, such as the
/// repository's `reports/.gitkeep`).
fn foreign_ok(target: &Target, meta: &Metadata) -> bool {
    let empty = match target.kind {
        Kind::File => meta.len() == 0,
        Kind::Dir => std::fs::read_dir(target.path).is_ok_and(|d| {
            d.flatten()
                .all(|e| e.file_name().as_encoded_bytes().starts_with(b"."))
        }),
    };
    empty || (target.ours)(target.path)
}

/// Why `target` may not be written because of `input`, if it may not.
fn clash(target: &Target, existing: Option<&Metadata>, input: &Input) -> Option<String> {
    let same_path = match (
        std::path::absolute(target.path),
        std::path::absolute(input.path),
    ) {
        (Ok(a), Ok(b)) => a == b,
        _ => false,
    };
    let input_meta = std::fs::metadata(input.path).ok();
    let same_file =
        matches!((existing, &input_meta), (Some(a), Some(b)) if crate::input::same_file(a, b));
    if same_path || same_file {
        return Some(format!(
            "is also this run's {} {}; write the output to another path",
            input.what,
            input.path.display()
        ));
    }
    if target.kind == Kind::Dir && existing.is_some() && input_meta.is_some() {
        let (Ok(dir), Ok(inner)) = (target.path.canonicalize(), input.path.canonicalize()) else {
            return None;
        };
        if inner.starts_with(&dir) {
            return Some(format!(
                "holds this run's {} {}, and the run writes into it; write the output to \
                 another directory, or move the input out of it",
                input.what,
                input.path.display()
            ));
        }
    }
    None
}

/// The directory a file output is written in (`.` for a bare file name).
fn parent(path: &Path) -> &Path {
    match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p,
        _ => Path::new("."),
    }
}

/// Writes `bytes` to `path` through a temporary file beside it (see [`write_with`]).
pub fn write(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    write_with(path, |f| f.write_all(bytes))
}

/// Writes `path` by calling `fill` on a temporary file in the same directory, then renaming it
/// over `path`: a failed `fill` (or a killed run) leaves `path` as it was and no half file. A
/// symbolic link or anything but a regular file at `path` is refused here too, not only in
/// [`check`]: the rename would replace the link itself, never the file it names. The new file
/// has the usual permissions (0666 less the umask), not the temporary file's 0600; a replaced
/// file keeps its own.
pub fn write_with(
    path: &Path,
    fill: impl FnOnce(&mut File) -> std::io::Result<()>,
) -> std::io::Result<()> {
    if let Ok(meta) = std::fs::symlink_metadata(path) {
        let t = meta.file_type();
        if t.is_symlink() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                "is a symbolic link; idemcalc does not write through links",
            ));
        }
        if !t.is_file() {
            return Err(std::io::Error::new(
                std::io::ErrorKind::InvalidInput,
                format!("is {}; not replaced", crate::input::file_kind(&meta)),
            ));
        }
    }
    let name = path.file_name().map_or_else(
        || "output".to_string(),
        |n| n.to_string_lossy().into_owned(),
    );
    let mut tmp = tempfile::Builder::new()
        .prefix(&format!(".{name}."))
        .suffix(".tmp")
        .permissions(std::os::unix::fs::PermissionsExt::from_mode(0o666))
        .tempfile_in(parent(path))?;
    if let Ok(meta) = std::fs::metadata(path) {
        // A replaced file keeps its permissions (a private file stays private).
        tmp.as_file().set_permissions(meta.permissions())?;
    }
    fill(tmp.as_file_mut())?;
    tmp.as_file_mut().flush()?;
    tmp.as_file().sync_all()?;
    tmp.persist(path).map(drop).map_err(|e| e.error)
}

/// Opens `path` for writing in place, emptied, for an output written while the run goes (a
/// killed run must leave what it wrote, which a temporary file renamed at the end cannot): not
/// through a symbolic link (`O_NOFOLLOW`), never blocking on a FIFO (`O_NONBLOCK`), and
/// emptied only once it is known to be a regular file, so a device or FIFO put there after
/// [`check`] is refused, not truncated. Writes go straight to the file (no buffer).
pub fn create_in_place(path: &Path) -> std::io::Result<File> {
    let file = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        // Emptied below, once it is known to be a regular file.
        .truncate(false)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK | libc::O_CLOEXEC)
        .open(path)?;
    let meta = file.metadata()?;
    if !meta.is_file() {
        return Err(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            format!("is {}; not written", crate::input::file_kind(&meta)),
        ));
    }
    file.set_len(0)?;
    Ok(file)
}

/// Opens an existing regular file for reading without following a link or blocking on a FIFO.
fn open_plain(path: &Path) -> Option<File> {
    let file = std::fs::OpenOptions::new()
        .read(true)
        .custom_flags(libc::O_NOFOLLOW | libc::O_NONBLOCK)
        .open(path)
        .ok()?;
    file.metadata().ok()?.is_file().then_some(file)
}

/// The first `n` bytes of a regular file (fewer if it is shorter; empty if it cannot be read):
/// what the `ours` tests look at.
pub fn head(path: &Path, n: u64) -> Vec<u8> {
    let mut bytes = Vec::new();
    if let Some(file) = open_plain(path) {
        let _ = file.take(n).read_to_end(&mut bytes);
    }
    bytes
}

/// The last `n` bytes of a regular file (a Parquet file's footer holds its column names).
pub fn tail(path: &Path, n: u64) -> Vec<u8> {
    let mut bytes = Vec::new();
    if let Some(mut file) = open_plain(path) {
        let len = file.metadata().map_or(0, |m| m.len());
        if file
            .seek(std::io::SeekFrom::Start(len.saturating_sub(n)))
            .is_ok()
        {
            let _ = file.take(n).read_to_end(&mut bytes);
        }
    }
    bytes
}

/// Whether `haystack` holds `needle`.
pub fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    memchr::memmem::find(haystack, needle).is_some()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn never(_: &Path) -> bool {
        false
    }

    fn file<'a>(path: &'a Path) -> Target<'a> {
        Target {
            flag: "--out",
            path,
            kind: Kind::File,
            ours: &never,
            mark: "test",
        }
    }

    #[test]
    fn a_link_is_refused_and_its_target_kept() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, b"keep").unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&victim, &link).unwrap();
        let e = check(&file(&link), true, &[]).unwrap_err().to_string();
        assert!(e.contains("symbolic link"), "{e}");
        assert!(write(&link, b"new").is_err());
        assert_eq!(std::fs::read(&victim).unwrap(), b"keep");
    }

    #[test]
    fn foreign_files_need_force_and_inputs_are_never_outputs() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("notes.txt");
        std::fs::write(&path, b"mine").unwrap();
        let e = check(&file(&path), false, &[]).unwrap_err().to_string();
        assert!(e.contains("--force"), "{e}");
        check(&file(&path), true, &[]).unwrap();
        let input = Input {
            what: "LOG",
            path: &path,
        };
        let e = check(&file(&path), true, &[input]).unwrap_err().to_string();
        assert!(e.contains("LOG"), "{e}");
        write(&path, b"new").unwrap();
        assert_eq!(std::fs::read(&path).unwrap(), b"new");
        let leftovers = std::fs::read_dir(dir.path()).unwrap().count();
        assert_eq!(leftovers, 1, "no temporary file left behind");
    }

    #[test]
    fn a_directory_of_hidden_files_is_empty_and_others_need_force() {
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join(".gitkeep"), b"").unwrap();
        let target = Target {
            flag: "--out",
            path: dir.path(),
            kind: Kind::Dir,
            ours: &never,
            mark: "test",
        };
        check(&target, false, &[]).unwrap();
        std::fs::write(dir.path().join("notes.md"), b"mine").unwrap();
        let e = check(&target, false, &[]).unwrap_err().to_string();
        assert!(e.contains("--force"), "{e}");
        check(&target, true, &[]).unwrap();
    }

    #[test]
    fn in_place_refuses_a_link_and_empties_a_file() {
        let dir = tempfile::tempdir().unwrap();
        let victim = dir.path().join("victim");
        std::fs::write(&victim, b"keep").unwrap();
        let link = dir.path().join("link");
        std::os::unix::fs::symlink(&victim, &link).unwrap();
        assert!(create_in_place(&link).is_err());
        assert_eq!(std::fs::read(&victim).unwrap(), b"keep");
        let mut f = create_in_place(&victim).unwrap();
        f.write_all(b"new").unwrap();
        assert_eq!(std::fs::read(&victim).unwrap(), b"new");
        assert!(create_in_place(dir.path()).is_err());
    }

    #[test]
    fn a_failed_write_leaves_the_old_file() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("out.toml");
        std::fs::write(&path, b"old").unwrap();
        let r = write_with(&path, |f| {
            f.write_all(b"half")?;
            Err(std::io::Error::other("failed"))
        });
        assert!(r.is_err());
        assert_eq!(std::fs::read(&path).unwrap(), b"old");
        assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 1);
    }
}
