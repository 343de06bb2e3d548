//! Where checkpoints are kept: a [`CheckpointBackend`] holds a run's checkpoint objects
//! by key (`LATEST`, `chk-<epoch>/MANIFEST`, `chk-<epoch>/map-<stage>-<p>.bin`, ...),
//! and [`crate::checkpoint::Store`] does all its I/O through one.
//!
//! [`LocalDir`] keeps them in a directory (the default; one directory every process
//! of a cluster writes: one machine or a shared file system). Object storage (S3 and
//! compatible servers) is the `braid-objstore` crate, kept out of this one so that
//! the execution crate does not depend on an HTTP and async stack.
//!
//! What a commit needs of a backend: parts [`put`](CheckpointBackend::put) by the
//! workers, then [`sync`](CheckpointBackend::sync) of the checkpoint's prefix (every
//! part durable), then the manifest and `LATEST` each by
//! [`replace`](CheckpointBackend::replace) (atomic and durable). In a directory that
//! is a synced write and a rename; on object storage every PUT is atomic and durable
//! once it returns, so `sync` does nothing and `replace` is one PUT.

use crate::error::{Error, Result};
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// A store of checkpoint objects by key. Keys are relative, `/`-separated
/// (`chk-00000000000000000042/map-0-3.bin`). Every method is synchronous and may be
/// called from any thread; an error names the location and what failed.
pub trait CheckpointBackend: Send + Sync + std::fmt::Debug {
    /// Where it is, for messages: a directory, or a URL.
    fn location(&self) -> String;

    /// The backend of the keys under `name/` (a script's query: `query-N`).
    fn child(&self, name: &str) -> Arc<dyn CheckpointBackend>;

    /// Makes the store ready and fails early, naming it, when it cannot be used (a
    /// directory that cannot be created, a bucket that cannot be reached).
    fn prepare(&self) -> Result<()>;

    /// Writes object `key` (replacing one there). Readable once this returns, durable
    /// once it returns or after [`CheckpointBackend::sync`] of a prefix of `key`.
    fn put(&self, key: &str, bytes: &[u8]) -> Result<()>;

    /// Makes every object under `prefix` durable (a directory: syncs its files and
    /// itself; object storage: nothing, a PUT is durable once it returns).
    fn sync(&self, prefix: &str) -> Result<()>;

    /// Replaces object `key` by `bytes` atomically and durably: a reader sees the
    /// old object or the new one, never a part (a directory: a synced temporary file
    /// renamed over it; object storage: one PUT).
    fn replace(&self, key: &str, bytes: &[u8]) -> Result<()>;

    /// Object `key`, or None when there is none.
    fn get(&self, key: &str) -> Result<Option<Vec<u8>>>;

    /// The keys that start with `prefix` (as strings: `chk-` matches `chk-…/MANIFEST`),
    /// sorted. A directory also lists an empty subdirectory, as its key with a
    /// trailing `/`.
    fn list(&self, prefix: &str) -> Result<Vec<String>>;

    /// Deletes object `key`; none there is no error.
    fn delete(&self, key: &str) -> Result<()>;

    /// Deletes every object whose key starts with `prefix`.
    fn delete_prefix(&self, prefix: &str) -> Result<()>;
}

/// Checkpoints in a local directory (or one on a shared file system).
#[derive(Clone, Debug)]
pub struct LocalDir {
    dir: PathBuf,
}

impl LocalDir {
    /// The store in `dir` (created by [`CheckpointBackend::prepare`]).
    pub fn new(dir: impl Into<PathBuf>) -> LocalDir {
        LocalDir { dir: dir.into() }
    }

    /// Its directory.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn path(&self, key: &str) -> PathBuf {
        self.dir.join(key)
    }

    /// The directory a prefix's keys are in, and the start of their names there.
    fn split<'a>(&self, prefix: &'a str) -> (PathBuf, &'a str) {
        match prefix.rsplit_once('/') {
            Some((dir, name)) => (self.dir.join(dir), name),
            None => (self.dir.clone(), prefix),
        }
    }
}

impl CheckpointBackend for LocalDir {
    fn location(&self) -> String {
        self.dir.display().to_string()
    }

    fn child(&self, name: &str) -> Arc<dyn CheckpointBackend> {
        Arc::new(LocalDir::new(self.dir.join(name)))
    }

    fn prepare(&self) -> Result<()> {
        std::fs::create_dir_all(&self.dir).map_err(|e| {
            Error::io(
                format!("creating checkpoint directory {}", self.dir.display()),
                e,
            )
        })
    }

    fn put(&self, key: &str, bytes: &[u8]) -> Result<()> {
        let path = self.path(key);
        if let Some(dir) = path.parent() {
            std::fs::create_dir_all(dir)
                .map_err(|e| Error::io(format!("creating {}", dir.display()), e))?;
        }
        std::fs::write(&path, bytes)
            .map_err(|e| Error::io(format!("writing {}", path.display()), e))
    }

    fn sync(&self, prefix: &str) -> Result<()> {
        let sync = |path: &Path| {
            std::fs::File::open(path)
                .and_then(|f| f.sync_all())
                .map_err(|e| Error::io(format!("syncing {}", path.display()), e))
        };
        // A prefix is a directory here (`chk-…/`): its files, then itself.
        let dir = self.path(prefix.trim_end_matches('/'));
        std::fs::create_dir_all(&dir)
            .map_err(|e| Error::io(format!("creating {}", dir.display()), e))?;
        let parts = std::fs::read_dir(&dir)
            .map_err(|e| Error::io(format!("listing {}", dir.display()), e))?;
        for part in parts.flatten() {
            sync(&part.path())?;
        }
        sync(&dir)
    }

    fn replace(&self, key: &str, bytes: &[u8]) -> Result<()> {
        replace(&self.path(key), bytes)
    }

    fn get(&self, key: &str) -> Result<Option<Vec<u8>>> {
        let path = self.path(key);
        match std::fs::read(&path) {
            Ok(b) => Ok(Some(b)),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(Error::io(format!("reading {}", path.display()), e)),
        }
    }

    fn list(&self, prefix: &str) -> Result<Vec<String>> {
        let (dir, start) = self.split(prefix);
        let at = prefix.len() - start.len();
        let mut out = Vec::new();
        let entries = match std::fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(out),
            Err(e) => return Err(Error::io(format!("listing {}", dir.display()), e)),
        };
        for entry in entries.flatten() {
            let Some(name) = entry.file_name().to_str().map(str::to_string) else {
                continue;
            };
            if name.starts_with(start) {
                walk(&entry.path(), format!("{}{name}", &prefix[..at]), &mut out)?;
            }
        }
        out.sort();
        Ok(out)
    }

    fn delete(&self, key: &str) -> Result<()> {
        let path = self.path(key);
        match std::fs::remove_file(&path) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                Err(Error::io(format!("removing {}", path.display()), e))
            }
            _ => Ok(()),
        }
    }

    fn delete_prefix(&self, prefix: &str) -> Result<()> {
        let (dir, start) = self.split(prefix);
        let entries = match std::fs::read_dir(&dir) {
            Ok(e) => e,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
            Err(e) => return Err(Error::io(format!("listing {}", dir.display()), e)),
        };
        for entry in entries.flatten() {
            let matches = entry
                .file_name()
                .to_str()
                .is_some_and(|n| n.starts_with(start));
            if !matches {
                continue;
            }
            let path = entry.path();
            let gone = match entry.file_type().is_ok_and(|t| t.is_dir()) {
                true => std::fs::remove_dir_all(&path),
                false => std::fs::remove_file(&path),
            };
            gone.map_err(|e| Error::io(format!("removing {}", path.display()), e))?;
        }
        // `chk-…/`: the directory itself goes too.
        if prefix.ends_with('/') {
            match std::fs::remove_dir(&dir) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    return Err(Error::io(format!("removing {}", dir.display()), e))
                }
                _ => {}
            }
        }
        Ok(())
    }
}

/// Adds the keys of `path` (named `key`) to `out`: a file's, or every file's under a
/// directory (an empty directory as `key/`).
fn walk(path: &Path, key: String, out: &mut Vec<String>) -> Result<()> {
    let meta = match std::fs::metadata(path) {
        Ok(m) => m,
        // Removed since its directory was read.
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(Error::io(format!("reading {}", path.display()), e)),
    };
    if !meta.is_dir() {
        out.push(key);
        return Ok(());
    }
    let entries = match std::fs::read_dir(path) {
        Ok(e) => e,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(Error::io(format!("listing {}", path.display()), e)),
    };
    let mut any = false;
    for entry in entries.flatten() {
        if let Some(name) = entry.file_name().to_str() {
            any = true;
            walk(&entry.path(), format!("{key}/{name}"), out)?;
        }
    }
    if !any {
        out.push(format!("{key}/"));
    }
    Ok(())
}

/// Writes what `write` writes to `path` (buffered) and syncs it to disk.
fn write_synced(
    path: &Path,
    write: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> Result<()> {
    let io = |e| Error::io(format!("writing {}", path.display()), e);
    let mut w = std::io::BufWriter::new(std::fs::File::create(path).map_err(io)?);
    write(&mut w).map_err(io)?;
    let f = w.into_inner().map_err(|e| io(e.into_error()))?;
    f.sync_all().map_err(io)
}

/// Replaces `path` by `bytes` atomically (a synced temporary file renamed over it).
fn replace(path: &Path, bytes: &[u8]) -> Result<()> {
    replace_with(path, |w| w.write_all(bytes))
}

/// Replaces `path` by what `write` writes, atomically and durably: a temporary file
/// beside it (`.tmp`), synced, renamed over it, and the directory synced.
pub(crate) fn replace_with(
    path: &Path,
    write: impl FnOnce(&mut dyn Write) -> std::io::Result<()>,
) -> Result<()> {
    let tmp = path.with_extension("tmp");
    write_synced(&tmp, write)?;
    std::fs::rename(&tmp, path).map_err(|e| {
        Error::io(
            format!("renaming {} to {}", tmp.display(), path.display()),
            e,
        )
    })?;
    if let Some(parent) = path.parent() {
        if let Ok(d) = std::fs::File::open(parent) {
            let _ = d.sync_all();
        }
    }
    Ok(())
}
