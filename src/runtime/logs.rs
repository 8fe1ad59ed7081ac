//! CRI container log files: copies a container's stdout/stderr pipes into the
//! log file the kubelet reads, one line per record:
//!
//! ```text
//! 2024-01-02T03:04:05.123456789Z stdout F hello
//! ```
//!
//! Owns: line splitting, the `P`/`F` tags and timestamps. Must not: rotate or
//! truncate files (the agent rotates logs) or ever stop draining a pipe (a
//! full pipe would block the container).

use std::path::Path;
use std::sync::Arc;
use std::time::{SystemTime, UNIX_EPOCH};

use tokio::io::{AsyncRead, AsyncReadExt, AsyncWriteExt};
use tokio::sync::Mutex;

/// Longest content of one log record; longer lines are split into `P`
/// (partial) records followed by a final `F` record, like containerd's
/// default `max_container_log_line_size` (16 KiB).
pub(crate) const MAX_LOG_LINE: usize = 16 * 1024;

const READ_CHUNK: usize = 8 * 1024;

/// A log file shared by a container's stdout and stderr pumps.
pub(crate) type SharedLog = Arc<Mutex<tokio::fs::File>>;

/// Opens (creating parent directories) the container log file in append mode.
pub(crate) async fn open_log(path: &Path) -> std::io::Result<SharedLog> {
    if let Some(parent) = path.parent() {
        tokio::fs::create_dir_all(parent).await?;
    }
    let file = tokio::fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(path)
        .await?;
    Ok(Arc::new(Mutex::new(file)))
}

/// Formats `t` as RFC 3339 in UTC with nanoseconds, e.g.
/// `2024-01-02T03:04:05.000000001Z` (a time before 1970 as the epoch).
pub(crate) fn rfc3339_nano(t: SystemTime) -> String {
    let t = jiff::Timestamp::try_from(t.max(UNIX_EPOCH)).unwrap_or(jiff::Timestamp::UNIX_EPOCH);
    format!("{t:.9}")
}

fn push_record(out: &mut Vec<u8>, ts: &str, stream: &str, full: bool, content: &[u8]) {
    out.extend_from_slice(ts.as_bytes());
    out.push(b' ');
    out.extend_from_slice(stream.as_bytes());
    out.extend_from_slice(if full { b" F " } else { b" P " });
    out.extend_from_slice(content);
    out.push(b'\n');
}

/// Splits `buf` into CRI records appended to `out`; returns how many bytes of
/// `buf` were consumed. What remains is an unterminated line shorter than
/// [`MAX_LOG_LINE`].
fn split_records(buf: &[u8], ts: &str, stream: &str, out: &mut Vec<u8>) -> usize {
    let mut start = 0;
    loop {
        let rest = &buf[start..];
        let nl = rest.iter().take(MAX_LOG_LINE + 1).position(|&b| b == b'\n');
        match nl {
            Some(pos) if pos <= MAX_LOG_LINE => {
                push_record(out, ts, stream, true, &rest[..pos]);
                start += pos + 1;
            }
            _ if rest.len() >= MAX_LOG_LINE => {
                push_record(out, ts, stream, false, &rest[..MAX_LOG_LINE]);
                start += MAX_LOG_LINE;
            }
            _ => return start,
        }
    }
}

/// Copies `reader` (a container's stdout or stderr) into `log` as CRI records
/// until EOF. Without a log file the output is drained and discarded. Write
/// errors are logged once and the pipe keeps being drained.
pub(crate) async fn pump<R: AsyncRead + Unpin>(
    mut reader: R,
    stream: &'static str,
    log: Option<SharedLog>,
    container_id: String,
) {
    let mut buf: Vec<u8> = Vec::with_capacity(READ_CHUNK);
    let mut chunk = vec![0u8; READ_CHUNK];
    let mut out: Vec<u8> = Vec::new();
    let mut write_failed = false;
    loop {
        let n = match reader.read(&mut chunk).await {
            Ok(0) => break,
            Ok(n) => n,
            Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
            Err(e) => {
                tracing::warn!(container_id, stream, error = %e, "reading container output failed");
                break;
            }
        };
        let Some(log) = &log else { continue };
        buf.extend_from_slice(&chunk[..n]);
        let ts = rfc3339_nano(SystemTime::now());
        out.clear();
        let used = split_records(&buf, &ts, stream, &mut out);
        buf.drain(..used);
        if !out.is_empty() {
            write(log, &out, &mut write_failed, &container_id).await;
        }
    }
    if let Some(log) = &log {
        out.clear();
        if !buf.is_empty() {
            // An unterminated last line is complete once the stream ends.
            push_record(
                &mut out,
                &rfc3339_nano(SystemTime::now()),
                stream,
                true,
                &buf,
            );
        }
        if !out.is_empty() {
            write(log, &out, &mut write_failed, &container_id).await;
        }
        let mut f = log.lock().await;
        if let Err(e) = f.flush().await {
            tracing::warn!(container_id, error = %e, "flushing container log failed");
        }
    }
}

async fn write(log: &SharedLog, data: &[u8], failed: &mut bool, container_id: &str) {
    let mut f = log.lock().await;
    if let Err(e) = f.write_all(data).await {
        if !*failed {
            tracing::warn!(container_id, error = %e, "writing container log failed");
            *failed = true;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::Duration;

    #[test]
    fn timestamps_are_rfc3339_utc_with_nanoseconds() {
        assert_eq!(rfc3339_nano(UNIX_EPOCH), "1970-01-01T00:00:00.000000000Z");
        let t = UNIX_EPOCH + Duration::new(951_782_400 + 3661, 5); // 2000-02-29 01:01:01
        assert_eq!(rfc3339_nano(t), "2000-02-29T01:01:01.000000005Z");
        let t = UNIX_EPOCH + Duration::new(1_735_689_599, 999_999_999);
        assert_eq!(rfc3339_nano(t), "2024-12-31T23:59:59.999999999Z");
    }

    /// `split_records` of `input` at time `T`: the bytes used and the records as text.
    fn split(input: &[u8], stream: &str) -> (usize, String) {
        let mut out = Vec::new();
        let used = split_records(input, "T", stream, &mut out);
        (used, String::from_utf8(out).unwrap())
    }

    #[test]
    fn complete_lines_become_full_records_and_the_rest_is_kept() {
        let want = "T stdout F a\nT stdout F bc\n";
        assert_eq!(split(b"a\nbc\npartial", "stdout"), (5, want.into()));
    }

    #[test]
    fn overlong_lines_are_split_into_partial_records() {
        let line = [vec![b'x'; MAX_LOG_LINE * 2 + 3], vec![b'\n']].concat();
        let (used, text) = split(&line, "stderr");
        assert_eq!(used, line.len());
        let tags: Vec<&str> = text.lines().map(|l| l.split(' ').nth(2).unwrap()).collect();
        assert_eq!(tags, ["P", "P", "F"]);
        assert!(text.lines().last().unwrap().ends_with(" F xxx"));
    }

    #[test]
    fn a_line_of_exactly_the_limit_is_one_full_record() {
        let line = [vec![b'y'; MAX_LOG_LINE], vec![b'\n']].concat();
        let (used, text) = split(&line, "stdout");
        assert_eq!((used, text.lines().count()), (line.len(), 1));
    }
}
