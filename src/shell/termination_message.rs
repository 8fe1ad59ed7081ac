//! Termination messages (kubelet `kuberuntime_container.go`: the termination-log mount of
//! `makeMounts`, `getTerminationMessage`, `readLastStringFromContainerLogs`).
//!
//! Owns the file a container writes its termination message to: created empty (mode 0666)
//! under `<pods_dir>/<uid>/containers/<name>/` and mounted at its `terminationMessagePath`
//! before the container is created; and, once the container has exited, the message read
//! back from it (at most [`MAX_MESSAGE_BYTES`], the file's end) or, with
//! `terminationMessagePolicy: FallbackToLogsOnError` and a failed container whose file is
//! empty, from the end of its log (at most [`MAX_LOG_LINES`] lines and
//! [`MAX_LOG_MESSAGE_BYTES`]). Every read is bounded before it reaches memory. Must not
//! change a running container's status, nor read any file but the container's own.

use std::io::{Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use k8s_openapi::api::core::v1::{Container, Pod};

use super::cri_config::{
    TERMINATION_MESSAGE_PATH_ANNOTATION, TERMINATION_MESSAGE_POLICY_ANNOTATION,
};
use crate::core::pod;
use crate::cri::v1;

/// The API's default `terminationMessagePath`.
pub const DEFAULT_PATH: &str = "/dev/termination-log";
/// The policy that falls back to the log (`TerminationMessageFallbackToLogsOnError`).
pub const FALLBACK_TO_LOGS_ON_ERROR: &str = "FallbackToLogsOnError";
/// At most this much of the file is read (`MaxContainerTerminationMessageLength`, 4 KiB).
pub const MAX_MESSAGE_BYTES: u64 = 4096;
/// At most this many log lines (`MaxContainerTerminationMessageLogLines`).
pub const MAX_LOG_LINES: usize = 80;
/// At most this much of the log's content (`MaxContainerTerminationMessageLogLength`).
pub const MAX_LOG_MESSAGE_BYTES: usize = 2048;
/// How much of the end of a log file is read to find the message: enough for
/// [`MAX_LOG_MESSAGE_BYTES`] of content behind the CRI log prefix of every line.
pub const MAX_LOG_READ_BYTES: u64 = 8192;
/// The runtime's reason for a container that never ran: it has no log to fall back to.
const CONTAINER_CANNOT_RUN: &str = "ContainerCannotRun";

/// The container's `terminationMessagePath` (the API's default when unset).
pub fn container_path(c: &Container) -> &str {
    c.termination_message_path
        .as_deref()
        .unwrap_or(DEFAULT_PATH)
}

/// Creates the container's empty termination-message file (mode 0666, so any user in the
/// container can write it) and returns its mount; nothing when the path is empty. `id`
/// makes the file this container instance's own.
pub fn mount(
    pods_dir: &Path,
    p: &Pod,
    c: &Container,
    id: &str,
) -> Result<Option<v1::Mount>, String> {
    let target = container_path(c);
    if target.is_empty() {
        return Ok(None);
    }
    let file = host_file(pods_dir, p, &c.name, id);
    create(&file).map_err(|e| {
        format!(
            "container {}: terminationMessagePath: cannot create {}: {e}",
            c.name,
            file.display()
        )
    })?;
    Ok(Some(v1::Mount {
        container_path: target.to_string(),
        host_path: file.to_string_lossy().into_owned(),
        readonly: false,
        ..Default::default()
    }))
}

/// `<pods_dir>/<uid>/containers/<name>/<id>`.
pub fn host_file(pods_dir: &Path, p: &Pod, name: &str, id: &str) -> PathBuf {
    pods_dir
        .join(pod::uid_str(p))
        .join("containers")
        .join(name)
        .join(id)
}

fn create(file: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::PermissionsExt;
    if let Some(dir) = file.parent() {
        std::fs::create_dir_all(dir)?;
    }
    std::fs::File::create(file)?;
    std::fs::set_permissions(file, std::fs::Permissions::from_mode(0o666))
}

/// The kubelet's enrichment of an exited container's message: the termination message (or
/// the log's end, per policy) after the runtime's own message and ": ".
pub fn enrich(status: &v1::ContainerStatus, message: &mut String) {
    if status.state != v1::ContainerState::ContainerExited as i32 {
        return;
    }
    let annotation = |k: &str| status.annotations.get(k).map(String::as_str);
    let policy = annotation(TERMINATION_MESSAGE_POLICY_ANNOTATION).unwrap_or_default();
    let fallback = policy == FALLBACK_TO_LOGS_ON_ERROR
        && status.exit_code != 0
        && status.reason != CONTAINER_CANNOT_RUN;
    let path = annotation(TERMINATION_MESSAGE_PATH_ANNOTATION).unwrap_or_default();
    let (mut text, check_logs) = from_file(status, path, fallback);
    if check_logs {
        text = from_log(Path::new(&status.log_path));
    }
    if !text.is_empty() {
        if !message.is_empty() {
            message.push_str(": ");
        }
        message.push_str(&text);
    }
}

/// `getTerminationMessage`: the end of the file mounted at `path`, and whether to read the
/// log instead.
fn from_file(status: &v1::ContainerStatus, path: &str, fallback: bool) -> (String, bool) {
    if path.is_empty() {
        return (String::new(), fallback);
    }
    let Some(m) = status.mounts.iter().find(|m| m.container_path == path) else {
        return (String::new(), fallback);
    };
    match read_tail(Path::new(&m.host_path), MAX_MESSAGE_BYTES) {
        Ok((bytes, _)) => {
            let empty = bytes.is_empty();
            (
                String::from_utf8_lossy(&bytes).into_owned(),
                fallback && empty,
            )
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => (String::new(), fallback),
        Err(e) => (
            format!("Error on reading termination log {}: {e}", m.host_path),
            false,
        ),
    }
}

/// The last `max` bytes of `file`, and whether the file started before them.
fn read_tail(file: &Path, max: u64) -> std::io::Result<(Vec<u8>, bool)> {
    let mut f = std::fs::File::open(file)?;
    let len = f.metadata()?.len();
    let start = len.saturating_sub(max);
    f.seek(SeekFrom::Start(start))?;
    let mut bytes = Vec::new();
    f.take(max).read_to_end(&mut bytes)?;
    Ok((bytes, start > 0))
}

/// `readLastStringFromContainerLogs`: the content of the last [`MAX_LOG_LINES`] lines of a
/// CRI-format log (`<time> <stream> <F|P> <content>`), both streams, at most its last
/// [`MAX_LOG_MESSAGE_BYTES`].
pub fn from_log(log: &Path) -> String {
    match read_tail(log, MAX_LOG_READ_BYTES) {
        Ok((bytes, cut)) => log_message(&bytes, cut),
        Err(e) => format!("Error on reading termination message from logs: {e}"),
    }
}

/// The message in the end of a CRI log; `cut`: the bytes start inside a line, which is
/// dropped.
pub fn log_message(bytes: &[u8], cut: bool) -> String {
    let mut lines: Vec<&[u8]> = bytes.split(|b| *b == b'\n').collect();
    if lines.last().is_some_and(|l| l.is_empty()) {
        lines.pop();
    }
    if cut && !lines.is_empty() {
        lines.remove(0);
    }
    let from = lines.len().saturating_sub(MAX_LOG_LINES);
    let mut content: Vec<u8> = Vec::new();
    for line in &lines[from..] {
        let mut fields = line.splitn(4, |b| *b == b' ');
        let (Some(_time), Some(stream), Some(tag)) = (fields.next(), fields.next(), fields.next())
        else {
            continue;
        };
        if stream != b"stdout" && stream != b"stderr" {
            continue;
        }
        content.extend_from_slice(fields.next().unwrap_or_default());
        // a full line ends with a newline; a partial one continues on the next
        if !tag.split(|b| *b == b':').any(|t| t == b"P") {
            content.push(b'\n');
        }
    }
    let start = content.len().saturating_sub(MAX_LOG_MESSAGE_BYTES);
    String::from_utf8_lossy(&content[start..]).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::HashMap;

    fn exited(
        exit_code: i32,
        policy: &str,
        mounts: Vec<v1::Mount>,
        log: &Path,
    ) -> v1::ContainerStatus {
        v1::ContainerStatus {
            state: v1::ContainerState::ContainerExited as i32,
            exit_code,
            reason: if exit_code == 0 { "Completed" } else { "Error" }.into(),
            annotations: HashMap::from([
                (
                    TERMINATION_MESSAGE_PATH_ANNOTATION.to_string(),
                    DEFAULT_PATH.to_string(),
                ),
                (
                    TERMINATION_MESSAGE_POLICY_ANNOTATION.to_string(),
                    policy.to_string(),
                ),
            ]),
            mounts,
            log_path: log.to_string_lossy().into_owned(),
            ..Default::default()
        }
    }

    fn termination_mount(file: &Path) -> v1::Mount {
        v1::Mount {
            container_path: DEFAULT_PATH.into(),
            host_path: file.to_string_lossy().into_owned(),
            ..Default::default()
        }
    }

    #[test]
    fn an_exited_container_reports_the_end_of_its_termination_message_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("msg");
        std::fs::write(&file, format!("{}the end", "x".repeat(5000))).unwrap();
        let s = exited(
            0,
            "File",
            vec![termination_mount(&file)],
            &dir.path().join("log"),
        );
        let mut message = String::new();
        enrich(&s, &mut message);
        assert_eq!(message.len(), MAX_MESSAGE_BYTES as usize);
        assert!(message.ends_with("the end"));
        // after the runtime's own message
        let mut message = "OOMKilled".to_string();
        std::fs::write(&file, "bye").unwrap();
        enrich(&s, &mut message);
        assert_eq!(message, "OOMKilled: bye");
    }

    #[test]
    fn fallback_to_logs_reads_the_log_end_only_for_a_failed_container_with_an_empty_file() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("msg");
        std::fs::write(&file, "").unwrap();
        let log = dir.path().join("0.log");
        let mut text = String::new();
        for i in 0..100 {
            text.push_str(&format!(
                "2026-01-01T00:00:00.000000000Z stderr F line {i}\n"
            ));
        }
        text.push_str("2026-01-01T00:00:00.000000000Z stdout P part-");
        text.push_str("\n2026-01-01T00:00:00.000000000Z stdout F done\n");
        std::fs::write(&log, text).unwrap();
        let mounts = vec![termination_mount(&file)];
        let mut message = String::new();
        enrich(
            &exited(1, FALLBACK_TO_LOGS_ON_ERROR, mounts.clone(), &log),
            &mut message,
        );
        assert!(message.ends_with("line 99\npart-done\n"), "{message}");
        // the last 80 lines: lines 22..=99, the partial line and its end
        assert!(message.starts_with("line 22\n"), "{message}");
        let mut message = String::new();
        enrich(
            &exited(0, FALLBACK_TO_LOGS_ON_ERROR, mounts.clone(), &log),
            &mut message,
        );
        assert_eq!(message, "");
        let mut message = String::new();
        enrich(&exited(1, "File", mounts.clone(), &log), &mut message);
        assert_eq!(message, "");
        std::fs::write(&file, "from the file").unwrap();
        let mut message = String::new();
        enrich(
            &exited(1, FALLBACK_TO_LOGS_ON_ERROR, mounts, &log),
            &mut message,
        );
        assert_eq!(message, "from the file");
    }

    #[test]
    fn a_log_message_keeps_the_last_2048_bytes_and_drops_a_cut_first_line() {
        let long = "y".repeat(3000);
        let log = format!("ial line\n2026-01-01T00:00:00Z stdout F {long}\n");
        let got = log_message(log.as_bytes(), true);
        assert_eq!(got.len(), MAX_LOG_MESSAGE_BYTES);
        assert!(!got.contains("ial"));
    }

    #[test]
    fn the_mounted_file_is_created_empty_and_writable_by_anyone() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let p: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p", "namespace": "ns", "uid": "u9"},
            "spec": {"containers": [{"name": "main", "terminationMessagePath": "/tmp/out"}]}
        }))
        .unwrap();
        let c = &p.spec.as_ref().unwrap().containers[0];
        let m = mount(dir.path(), &p, c, "3-abc").unwrap().unwrap();
        assert_eq!(m.container_path, "/tmp/out");
        let file = dir.path().join("u9/containers/main/3-abc");
        assert_eq!(m.host_path, file.to_string_lossy());
        let meta = std::fs::metadata(&file).unwrap();
        assert_eq!(meta.len(), 0);
        assert_eq!(meta.permissions().mode() & 0o777, 0o666);
    }
}
