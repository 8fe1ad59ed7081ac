//! Container log rotation, as the kubelet's `ContainerLogManager`: every monitor period,
//! each running container whose log file is larger than the maximum size has it renamed to
//! `<file>.<YYYYmmdd-HHMMSS>` and the runtime reopens it (CRI `ReopenContainerLog`; on
//! failure the file is renamed back to try again next period). Before that, older rotated
//! files are gzipped and the oldest deleted, so at most `max_files` files (the live one
//! included) remain per container.
//!
//! Owns: the periodic pass, the file operations and the bounded worker pool. Must not: touch
//! a file that is not a container's log or a rotation of it, or read log contents except to
//! compress them.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{watch, Semaphore};

use crate::cri::{v1, CriClient};

/// The kubelet's defaults: 10Mi, 5 files, 1 worker, 10 s.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RotationPolicy {
    /// A live log larger than this is rotated.
    pub max_size_bytes: u64,
    /// Files kept per container, the live one included (at least 2).
    pub max_files: usize,
    /// Containers rotated at once.
    pub max_workers: usize,
    /// How often sizes are checked.
    pub monitor_period_ms: u64,
}

impl Default for RotationPolicy {
    fn default() -> Self {
        RotationPolicy {
            max_size_bytes: 10 * 1024 * 1024,
            max_files: 5,
            max_workers: 1,
            monitor_period_ms: 10_000,
        }
    }
}

/// Parses `--container-log-max-size` (a Kubernetes quantity of bytes, e.g. `10Mi`).
pub fn parse_max_size(text: &str) -> Result<u64, String> {
    let nanos = crate::core::pod_status::quantity::parse_nanos(text)
        .ok_or_else(|| format!("{text:?} is not a quantity (e.g. 10Mi)"))?;
    let bytes = nanos / 1_000_000_000;
    if bytes <= 0 {
        return Err(format!("{text:?} must be a positive size"));
    }
    u64::try_from(bytes).map_err(|_| format!("{text:?} is too large"))
}

const COMPRESS_SUFFIX: &str = ".gz";
const TMP_SUFFIX: &str = ".tmp";

/// Runs the periodic pass until shutdown.
pub async fn run(cri: CriClient, policy: RotationPolicy, mut shutdown: watch::Receiver<bool>) {
    let period = Duration::from_millis(policy.monitor_period_ms.max(1));
    let workers = Arc::new(Semaphore::new(policy.max_workers.max(1)));
    loop {
        tokio::select! {
            _ = shutdown.changed() => return,
            _ = tokio::time::sleep(period) => {}
        }
        if *shutdown.borrow() {
            return;
        }
        rotate_all(&cri, &policy, &workers).await;
    }
}

/// One pass over the running containers; returns when every rotation of the pass ended.
pub async fn rotate_all(cri: &CriClient, policy: &RotationPolicy, workers: &Arc<Semaphore>) {
    let running = v1::ContainerStateValue {
        state: v1::ContainerState::ContainerRunning as i32,
    };
    let filter = v1::ContainerFilter {
        state: Some(running),
        ..Default::default()
    };
    let containers = match cri.list_containers(Some(filter)).await {
        Ok(c) => c,
        Err(e) => {
            tracing::warn!(error = %e, "log rotation: listing running containers failed");
            return;
        }
    };
    let mut tasks = tokio::task::JoinSet::new();
    for c in containers {
        let Ok(permit) = workers.clone().acquire_owned().await else {
            return;
        };
        let cri = cri.clone();
        let policy = policy.clone();
        tasks.spawn(async move {
            if let Err(e) = rotate_container(&cri, &policy, &c.id).await {
                tracing::warn!(container_id = %c.id, error = %e, "container log rotation failed");
            }
            drop(permit);
        });
    }
    while tasks.join_next().await.is_some() {}
}

async fn rotate_container(
    cri: &CriClient,
    policy: &RotationPolicy,
    id: &str,
) -> Result<(), String> {
    let status = cri
        .container_status(id, false)
        .await
        .map_err(|e| e.to_string())?;
    let Some(log) = status.status.map(|s| s.log_path).filter(|p| !p.is_empty()) else {
        return Ok(());
    };
    let log = PathBuf::from(log);
    let size = match tokio::fs::metadata(&log).await {
        Ok(m) => m.len(),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            // renamed away but never reopened (e.g. the agent stopped mid-rotation)
            return cri
                .reopen_container_log(id)
                .await
                .map_err(|e| format!("reopening missing log {}: {e}", log.display()));
        }
        Err(e) => return Err(format!("stat {}: {e}", log.display())),
    };
    if size < policy.max_size_bytes {
        return Ok(());
    }
    // local time, as the kubelet's `time.Now().Format("20060102-150405")`
    let stamp = jiff::Zoned::now().strftime("%Y%m%d-%H%M%S").to_string();
    let (log2, max_files) = (log.clone(), policy.max_files);
    let rotated = tokio::task::spawn_blocking(move || prepare_and_rename(&log2, max_files, &stamp))
        .await
        .map_err(|e| e.to_string())?
        .map_err(|e| format!("rotating {}: {e}", log.display()))?;
    if let Err(e) = cri.reopen_container_log(id).await {
        // try again next period (as the kubelet, the rotated file goes back)
        if let Err(back) = std::fs::rename(&rotated, &log) {
            tracing::warn!(file = %rotated.display(), error = %back, "renaming a rotated log back failed");
        }
        return Err(format!("reopening {}: {e}", log.display()));
    }
    tracing::debug!(container_id = id, rotated = %rotated.display(), "rotated container log");
    Ok(())
}

/// The rotations of `log` (`<log>.*`), sorted oldest first (their names sort by time).
fn rotations(log: &Path) -> std::io::Result<Vec<PathBuf>> {
    let dir = log.parent().unwrap_or(Path::new("."));
    let prefix = format!("{}.", log.file_name().unwrap_or_default().to_string_lossy());
    let mut out: Vec<PathBuf> = std::fs::read_dir(dir)?
        .filter_map(Result::ok)
        .filter(|e| e.file_name().to_string_lossy().starts_with(&prefix))
        .map(|e| e.path())
        .collect();
    out.sort();
    Ok(out)
}

/// Cleans up, trims and compresses the existing rotations of `log`, then renames `log` to
/// `<log>.<stamp>` and returns that name. Afterwards at most `max_files` files remain:
/// the live one (once reopened), the newest rotation uncompressed, the rest gzipped.
pub fn prepare_and_rename(log: &Path, max_files: usize, stamp: &str) -> std::io::Result<PathBuf> {
    let mut logs = Vec::new();
    let all = rotations(log)?;
    for l in &all {
        let name = l.to_string_lossy();
        let compressed_twin = all
            .iter()
            .any(|o| o.to_string_lossy() == format!("{name}{COMPRESS_SUFFIX}"));
        // temporaries and files already compressed are leftovers of an interrupted pass
        if name.ends_with(TMP_SUFFIX) || (!name.ends_with(COMPRESS_SUFFIX) && compressed_twin) {
            remove(l);
        } else {
            logs.push(l.clone());
        }
    }
    // the live file and the one about to be rotated, plus max_files - 2 older ones
    let keep = max_files.saturating_sub(2);
    let excess = logs.len().saturating_sub(keep);
    for l in logs.drain(..excess) {
        remove(&l);
    }
    for l in logs
        .iter()
        .filter(|l| !l.to_string_lossy().ends_with(COMPRESS_SUFFIX))
    {
        compress(l)?;
    }
    let rotated = PathBuf::from(format!("{}.{stamp}", log.display()));
    std::fs::rename(log, &rotated)?;
    Ok(rotated)
}

fn remove(p: &Path) {
    if let Err(e) = std::fs::remove_file(p) {
        tracing::warn!(file = %p.display(), error = %e, "removing an old container log failed");
    }
}

/// Gzips `l` into `<l>.gz` (through `<l>.gz.tmp`) and removes `l`.
fn compress(l: &Path) -> std::io::Result<()> {
    let gz = PathBuf::from(format!("{}{COMPRESS_SUFFIX}", l.display()));
    let tmp = PathBuf::from(format!("{}{TMP_SUFFIX}", gz.display()));
    let mut input = std::fs::File::open(l)?;
    let out = std::fs::File::create(&tmp)?;
    let mut enc = flate2::write::GzEncoder::new(out, flate2::Compression::default());
    std::io::copy(&mut input, &mut enc)?;
    enc.finish()?.sync_all()?;
    std::fs::rename(&tmp, &gz)?;
    std::fs::remove_file(l)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        v.sort();
        v
    }

    #[test]
    fn max_size_is_a_quantity_of_bytes() {
        assert_eq!(parse_max_size("10Mi"), Ok(10 * 1024 * 1024));
        assert_eq!(parse_max_size("1Ki"), Ok(1024));
        assert_eq!(parse_max_size("2000"), Ok(2000));
        assert!(parse_max_size("ten")
            .unwrap_err()
            .contains("not a quantity"));
        assert!(parse_max_size("0").unwrap_err().contains("positive"));
    }

    #[test]
    fn rotating_keeps_at_most_max_files_with_all_but_the_newest_rotation_gzipped() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("0.log");
        for i in 0..6 {
            std::fs::write(&log, format!("generation {i}\n")).unwrap();
            prepare_and_rename(&log, 3, &format!("20240101-00000{i}")).unwrap();
        }
        std::fs::write(&log, "live\n").unwrap();
        // live + newest rotation uncompressed + one gzipped = 3
        assert_eq!(
            names(dir.path()),
            ["0.log", "0.log.20240101-000004.gz", "0.log.20240101-000005"]
        );
        let gz = std::fs::File::open(dir.path().join("0.log.20240101-000004.gz")).unwrap();
        let mut text = String::new();
        std::io::Read::read_to_string(&mut flate2::read::GzDecoder::new(gz), &mut text).unwrap();
        assert_eq!(text, "generation 4\n");
    }

    #[test]
    fn leftovers_of_an_interrupted_compression_are_cleaned_up() {
        let dir = tempfile::tempdir().unwrap();
        let log = dir.path().join("0.log");
        for f in ["0.log.1.gz.tmp", "0.log.2", "0.log.2.gz", "other.log"] {
            std::fs::write(dir.path().join(f), "x").unwrap();
        }
        std::fs::write(&log, "live\n").unwrap();
        prepare_and_rename(&log, 5, "3").unwrap();
        assert_eq!(names(dir.path()), ["0.log.2.gz", "0.log.3", "other.log"]);
    }
}
