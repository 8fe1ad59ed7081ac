//! What is in the manifest path: the manifest files to read, and bounded reads of them.
//!
//! Owns the naming rules (`*.yaml`, `*.yml`, `*.json`; names starting with `.` and
//! everything else ignored, logged at debug once) and the per-file byte limit. Must not
//! parse: it hands bytes to `manifest`.

use std::collections::BTreeSet;
use std::fs;
use std::io::{self, Read};
use std::path::{Path, PathBuf};

use super::decode::Format;
use super::error::Problem;

/// The manifest path's content.
#[derive(Debug, PartialEq, Eq)]
pub enum Listing {
    /// The path does not exist.
    Missing,
    /// The manifest files, sorted by path (the path itself when it names a file).
    Files(Vec<PathBuf>),
}

/// Lists `path`. Entries that are not manifests are logged at debug the first time they
/// are seen; `ignored` carries what was logged from one listing to the next.
pub fn list(path: &Path, ignored: &mut BTreeSet<PathBuf>) -> Result<Listing, Problem> {
    let meta = match fs::metadata(path) {
        Ok(m) => m,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(Listing::Missing),
        Err(e) => return Err(Problem::Io(format!("cannot read the manifest path: {e}"))),
    };
    if meta.is_file() {
        return Ok(Listing::Files(vec![path.to_owned()]));
    }
    if !meta.is_dir() {
        return Err(Problem::Io(
            "the manifest path is neither a regular file nor a directory".into(),
        ));
    }
    let io_err = |e: io::Error| Problem::Io(format!("cannot list the manifest directory: {e}"));
    let mut files = Vec::new();
    let mut now_ignored = BTreeSet::new();
    for entry in fs::read_dir(path).map_err(io_err)? {
        let entry = entry.map_err(io_err)?;
        let file = entry.path();
        let why = if entry.file_name().as_encoded_bytes().starts_with(b".") {
            Some("hidden")
        } else if Format::of(&file).is_none() {
            Some("not *.yaml, *.yml or *.json")
        } else {
            // Follows symlinks; a dangling one, or a file removed since the listing, is
            // simply not there.
            match fs::metadata(&file) {
                Ok(m) if m.is_file() => None,
                Ok(m) if m.is_dir() => Some("a directory (not recursing)"),
                Ok(_) => Some("not a regular file"),
                Err(e) if e.kind() == io::ErrorKind::NotFound => continue,
                // Let the read report it.
                Err(_) => None,
            }
        };
        match why {
            None => files.push(file),
            Some(why) => {
                if !ignored.contains(&file) {
                    tracing::debug!(path = %file.display(), why, "ignoring entry of the manifest directory");
                }
                now_ignored.insert(file);
            }
        }
    }
    *ignored = now_ignored;
    files.sort();
    Ok(Listing::Files(files))
}

/// Why a manifest could not be read.
#[derive(Debug)]
pub enum ReadError {
    /// It is gone (removed since the listing).
    Gone,
    /// It could not be read, or is too large.
    Problem(Problem),
}

/// Reads `path`, refusing more than `limit` bytes.
pub fn read_bounded(path: &Path, limit: u64) -> Result<Vec<u8>, ReadError> {
    let io_err = |e: io::Error| {
        if e.kind() == io::ErrorKind::NotFound {
            ReadError::Gone
        } else {
            ReadError::Problem(Problem::Io(format!("cannot read the manifest: {e}")))
        }
    };
    let file = fs::File::open(path).map_err(io_err)?;
    let size = file.metadata().map_err(io_err)?.len();
    let too_large = |size| ReadError::Problem(Problem::TooLarge { size, limit });
    if size > limit {
        return Err(too_large(size));
    }
    let mut bytes = Vec::with_capacity(size as usize);
    file.take(limit.saturating_add(1))
        .read_to_end(&mut bytes)
        .map_err(io_err)?;
    if bytes.len() as u64 > limit {
        // It grew while being read.
        return Err(too_large(bytes.len() as u64));
    }
    Ok(bytes)
}
