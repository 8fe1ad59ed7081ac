//! The flight recorder: when the agent panics, gets SIGQUIT or stops on a fatal error, the
//! snapshot and the retained records go to `<root-dir>/postmortem/ledger-<time>.ndjson.gz`.
//!
//! Owns the panic hook, the file names and the bound on kept recordings. Must never make a
//! failure worse: it never blocks the panicking thread on the engine lock (a panic inside a
//! fold holds it), writes from a helper thread, and gives up quietly after a deadline.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, OnceLock};
use std::time::{Duration, Instant};

use crate::core::record::Time;
use crate::engine::Engine;
use crate::ledger::export::{write_export, ExportWriter};

/// Recordings kept in the postmortem directory (the oldest are removed).
pub const MAX_RECORDINGS: usize = 10;
/// Recordings one process writes at most (a panic storm writes a few, not hundreds).
pub const MAX_RECORDINGS_PER_PROCESS: usize = 3;
/// How long a recording may wait for the engine lock.
pub const LOCK_WAIT_MS: u64 = 5_000;

struct Recorder {
    engine: Arc<Mutex<Engine>>,
    dir: PathBuf,
    written: Mutex<usize>,
    pending: Mutex<Vec<std::thread::JoinHandle<()>>>,
}

static RECORDER: OnceLock<Recorder> = OnceLock::new();

/// Arms the recorder for `engine`, writing under `<root_dir>/postmortem`, and chains a
/// panic hook in front of the existing one. Only the first call in a process takes effect.
pub fn install(engine: Arc<Mutex<Engine>>, root_dir: &Path) {
    let fresh = RECORDER
        .set(Recorder {
            engine,
            dir: root_dir.join("postmortem"),
            written: Mutex::new(0),
            pending: Mutex::new(Vec::new()),
        })
        .is_ok();
    if !fresh {
        return;
    }
    let previous = std::panic::take_hook();
    std::panic::set_hook(Box::new(move |info| {
        previous(info);
        let payload = info.payload();
        let what = (payload.downcast_ref::<&str>().copied())
            .or_else(|| payload.downcast_ref::<String>().map(String::as_str))
            .unwrap_or("panic");
        let at = info
            .location()
            .map(|l| format!(" at {}:{}", l.file(), l.line()))
            .unwrap_or_default();
        record_in_background(format!("panic{at}: {what}"));
    }));
}

/// Writes a recording now (blocking) and returns its path; `None` if the recorder is not
/// installed, the per-process bound is reached, or writing failed (which is logged).
pub fn record(reason: &str) -> Option<PathBuf> {
    let r = RECORDER.get()?;
    write_recording(r, reason)
}

/// Starts a recording on a helper thread (the caller may hold the engine lock).
fn record_in_background(reason: String) {
    let Some(r) = RECORDER.get() else { return };
    let spawned = std::thread::Builder::new()
        .name("flight-recorder".into())
        .spawn(move || {
            let _ = write_recording(r, &reason);
        });
    if let Ok(h) = spawned {
        r.pending.lock().unwrap_or_else(|e| e.into_inner()).push(h);
    }
}

/// Waits for recordings started by panics (call before the process exits).
pub fn wait_pending() {
    let Some(r) = RECORDER.get() else { return };
    let handles: Vec<_> = std::mem::take(&mut *r.pending.lock().unwrap_or_else(|e| e.into_inner()));
    for h in handles {
        let _ = h.join();
    }
}

fn write_recording(r: &Recorder, reason: &str) -> Option<PathBuf> {
    {
        let mut n = r.written.lock().unwrap_or_else(|e| e.into_inner());
        if *n >= MAX_RECORDINGS_PER_PROCESS {
            eprintln!("flight recorder: not recording {reason:?}: {MAX_RECORDINGS_PER_PROCESS} recordings already written by this process");
            return None;
        }
        *n += 1;
    }
    // A panic inside a fold holds the lock until it unwinds (and poisons it): wait for it.
    let deadline = Instant::now() + Duration::from_millis(LOCK_WAIT_MS);
    let (snapshot, records) = loop {
        match r.engine.try_lock() {
            Ok(e) => break e.ledger().replay_base(),
            Err(std::sync::TryLockError::Poisoned(p)) => {
                break p.into_inner().ledger().replay_base()
            }
            Err(std::sync::TryLockError::WouldBlock) => {
                if Instant::now() > deadline {
                    eprintln!("flight recorder: the engine stayed locked for {LOCK_WAIT_MS} ms; no recording for {reason:?}");
                    return None;
                }
                std::thread::sleep(Duration::from_millis(5));
            }
        }
    };
    if let Err(e) = std::fs::create_dir_all(&r.dir) {
        eprintln!("flight recorder: cannot create {}: {e}", r.dir.display());
        return None;
    }
    let path = unique_path(&r.dir, Time::from_system());
    let result = (|| {
        let mut w = ExportWriter::create(&path)?;
        let stats = write_export(&mut w, snapshot.as_deref(), records.iter())?;
        w.finish()?;
        Ok::<_, std::io::Error>(stats)
    })();
    match result {
        Ok(stats) => {
            eprintln!(
                "flight recorder: {reason}: wrote {} records (seq {}..={}) to {}",
                stats.records,
                stats.first_seq.unwrap_or(0),
                stats.last_seq.unwrap_or(0),
                path.display()
            );
            tracing::error!(path = %path.display(), records = stats.records, reason, "flight recorder wrote the ledger");
            prune(&r.dir);
            Some(path)
        }
        Err(e) => {
            eprintln!("flight recorder: writing {}: {e}", path.display());
            let _ = std::fs::remove_file(&path);
            None
        }
    }
}

/// `ledger-<YYYYMMDDTHHMMSS.nnnnnnnnnZ>.ndjson.gz`, made unique with a counter.
fn unique_path(dir: &Path, now: Time) -> PathBuf {
    let stamp: String = now
        .to_rfc3339_nanos()
        .chars()
        .filter(|c| *c != '-' && *c != ':')
        .collect();
    let mut path = dir.join(format!("ledger-{stamp}.ndjson.gz"));
    let mut n = 1;
    while path.exists() {
        path = dir.join(format!("ledger-{stamp}-{n}.ndjson.gz"));
        n += 1;
    }
    path
}

/// Keeps the newest [`MAX_RECORDINGS`] recordings.
fn prune(dir: &Path) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    let mut names: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with("ledger-") && n.ends_with(".ndjson.gz"))
        })
        .collect();
    names.sort();
    while names.len() > MAX_RECORDINGS {
        let _ = std::fs::remove_file(names.remove(0));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn recording_names_sort_by_time_and_never_collide() {
        let dir = tempfile::tempdir().unwrap();
        let t = Time::from_unix_nanos(1_767_225_600_000_000_001);
        let a = unique_path(dir.path(), t);
        assert_eq!(
            a.file_name().unwrap().to_str().unwrap(),
            "ledger-20260101T000000.000000001Z.ndjson.gz"
        );
        std::fs::write(&a, b"").unwrap();
        let b = unique_path(dir.path(), t);
        assert_ne!(a, b);
    }

    #[test]
    fn pruning_keeps_the_newest_recordings_only() {
        let dir = tempfile::tempdir().unwrap();
        for i in 0..(MAX_RECORDINGS + 3) {
            std::fs::write(dir.path().join(format!("ledger-2026{i:04}.ndjson.gz")), b"").unwrap();
        }
        std::fs::write(dir.path().join("other.txt"), b"").unwrap();
        prune(dir.path());
        let mut left: Vec<String> = std::fs::read_dir(dir.path())
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .collect();
        left.sort();
        assert_eq!(left.len(), MAX_RECORDINGS + 1);
        assert_eq!(left[0], "ledger-20260003.ndjson.gz");
        assert!(left.contains(&"other.txt".to_string()));
    }
}
