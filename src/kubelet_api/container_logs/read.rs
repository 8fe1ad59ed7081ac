//! Streams one container log file into a response body, as the kubelet's `ReadLogs`: from
//! the start or the last N lines, record by record through the [`Writer`], and with
//! `follow` on and on across rotations until the container exits or the client goes away.
//!
//! Owns: file positions, waiting for growth (polling), noticing that the file at the log
//! path was replaced (rotation) and reopening it, and back-pressure. Must not: decide which
//! file to read or hold any lock while it waits.
//!
//! Memory per stream is bounded: at most [`CHANNEL_CHUNKS`] chunks of about [`CHUNK_BYTES`]
//! (one record may overshoot a chunk) wait for a slow client, plus an 8 KiB read buffer and
//! one pending record of at most [`MAX_RECORD_BYTES`]. A client that stops reading stops
//! the reader (it waits on the full channel); nothing else is buffered for it.

use std::io::{Read, Seek, SeekFrom};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use bytes::Bytes;
use tokio::io::{AsyncBufReadExt, BufReader};
use tokio::sync::mpsc;

use super::cri_format::{self, Writer, Written};

/// Output is sent in chunks of about this many bytes.
pub const CHUNK_BYTES: usize = 32 * 1024;
/// Chunks that may wait for a slow client before the reader waits too.
pub const CHANNEL_CHUNKS: usize = 4;
/// A record longer than this (no newline in sight) is taken as it is.
pub const MAX_RECORD_BYTES: usize = 1024 * 1024;
/// How often a follower at the end of the file looks for growth or a rotation.
const POLL: Duration = Duration::from_millis(250);
/// How often a follower at the end of the file asks whether the container still runs (the kubelet's stateCheckPeriod).
const STATE_CHECK: Duration = Duration::from_secs(5);

/// The body's items.
pub type Chunk = Result<Bytes, std::io::Error>;

/// Where the last `n` lines of `f` start, as the kubelet's `FindTailLineStartIndex`: the
/// offset after which `n` newlines remain (an unterminated last line is not counted), or
/// 0 when the file has no more than `n` newlines.
pub fn tail_offset<R: Read + Seek>(f: &mut R, n: u64) -> std::io::Result<u64> {
    const BLOCK: u64 = 8 * 1024;
    let size = f.seek(SeekFrom::End(0))?;
    let mut right = size;
    let mut seen = 0u64;
    let mut buf = vec![0u8; BLOCK as usize];
    while right > 0 {
        let left = right.saturating_sub(BLOCK);
        let block = &mut buf[..(right - left) as usize];
        f.seek(SeekFrom::Start(left))?;
        f.read_exact(block)?;
        for (i, _) in block.iter().enumerate().rev().filter(|(_, &b)| b == b'\n') {
            if seen == n {
                return Ok(left + i as u64 + 1);
            }
            seen += 1;
        }
        right = left;
    }
    Ok(0)
}

/// What one stream reads and how.
pub struct Request {
    /// The container's log file.
    pub path: PathBuf,
    /// Only the last N lines (`tailLines`).
    pub tail_lines: Option<u64>,
    /// Keep following new lines.
    pub follow: bool,
    /// The output rules.
    pub writer: Writer,
}

/// Opens `path` positioned at the last `tail` lines (or the start).
pub async fn open(path: &Path, tail: Option<u64>) -> std::io::Result<tokio::fs::File> {
    let path = path.to_path_buf();
    let f = tokio::task::spawn_blocking(move || {
        let mut f = std::fs::File::open(&path)?;
        let start = match tail {
            Some(n) => tail_offset(&mut f, n)?,
            None => 0,
        };
        f.seek(SeekFrom::Start(start))?;
        Ok::<_, std::io::Error>(f)
    })
    .await
    .map_err(std::io::Error::other)??;
    Ok(tokio::fs::File::from_std(f))
}

fn inode(m: &std::fs::Metadata) -> (u64, u64) {
    (m.dev(), m.ino())
}

/// Feeds `file` (opened by [`open`]) to `tx` until done. `running` says whether the
/// container still runs (asked every few seconds while following at the end of the file).
pub async fn stream<F, Fut>(
    file: tokio::fs::File,
    mut req: Request,
    tx: mpsc::Sender<Chunk>,
    mut running: F,
) where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = bool>,
{
    let mut open_inode = match file.metadata().await {
        Ok(m) => inode(&m),
        Err(e) => {
            let _ = tx.send(Err(e)).await;
            return;
        }
    };
    let mut reader = BufReader::with_capacity(8 * 1024, file);
    // without follow, a tail is a number of records to show
    let mut lines_left = req.tail_lines.filter(|_| !req.follow);
    let mut record = Vec::new();
    let mut out = Vec::new();
    let mut alive = true;
    let mut last_check = Instant::now();
    let mut rotation_seen = false;
    loop {
        if lines_left == Some(0) {
            break;
        }
        let read = reader.read_until(b'\n', &mut record).await;
        if let Err(e) = read {
            let _ = tx.send(Err(e)).await;
            return;
        }
        let complete = record.last() == Some(&b'\n') || record.len() >= MAX_RECORD_BYTES;
        let at_end = !complete;
        if at_end && (!req.follow || !alive) {
            // the end: an unterminated last line is still shown when not following
            if !req.follow && !record.is_empty() {
                emit(&record, &mut req.writer, &mut out);
            }
            break;
        }
        if complete {
            match cri_format::parse(&record) {
                Ok(r) => {
                    if req.writer.write(&r, &mut out) == Written::LimitReached {
                        break;
                    }
                    if let Some(n) = &mut lines_left {
                        *n -= 1;
                    }
                }
                Err(e) => {
                    tracing::debug!(path = %req.path.display(), error = %e, "skipping a malformed log line")
                }
            }
            record.clear();
            if out.len() >= CHUNK_BYTES && !send(&tx, &mut out).await {
                return;
            }
            continue;
        }
        // following, at the end of the file: flush, then wait for growth or a rotation
        if !out.is_empty() && !send(&tx, &mut out).await {
            return;
        }
        let now_at_path = tokio::fs::metadata(&req.path).await.ok().map(|m| inode(&m));
        if now_at_path.is_some_and(|i| i != open_inode) {
            if rotation_seen {
                // the old file is drained (read to its end once more after the rename)
                match tokio::fs::File::open(&req.path).await {
                    Ok(f) => {
                        open_inode = now_at_path.expect("checked");
                        reader = BufReader::with_capacity(8 * 1024, f);
                        record.clear();
                        rotation_seen = false;
                        continue;
                    }
                    Err(e) => {
                        tracing::debug!(path = %req.path.display(), error = %e, "reopening a rotated log")
                    }
                }
            } else {
                rotation_seen = true;
                continue;
            }
        }
        tokio::select! {
            _ = tx.closed() => return,
            _ = tokio::time::sleep(POLL) => {}
        }
        if last_check.elapsed() >= STATE_CHECK {
            last_check = Instant::now();
            // once it has exited, what it wrote is read to the end and the stream ends
            alive = running().await;
        }
    }
    if !out.is_empty() {
        send(&tx, &mut out).await;
    }
}

fn emit(record: &[u8], writer: &mut Writer, out: &mut Vec<u8>) {
    if let Ok(r) = cri_format::parse(record) {
        writer.write(&r, out);
    }
}

/// Sends `out` (emptying it); `false` when the client is gone.
async fn send(tx: &mpsc::Sender<Chunk>, out: &mut Vec<u8>) -> bool {
    let chunk = Bytes::from(std::mem::take(out));
    tx.send(Ok(chunk)).await.is_ok()
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Cursor;

    fn offset(data: &str, n: u64) -> &str {
        let i = tail_offset(&mut Cursor::new(data.as_bytes()), n).unwrap();
        &data[i as usize..]
    }

    #[test]
    fn tail_offset_leaves_the_last_n_lines() {
        let data = "a\nb\nc\n";
        assert_eq!(offset(data, 0), "");
        assert_eq!(offset(data, 1), "c\n");
        assert_eq!(offset(data, 2), "b\nc\n");
        assert_eq!(offset(data, 3), data);
        assert_eq!(offset(data, 10), data);
    }

    #[test]
    fn tail_offset_does_not_count_an_unterminated_last_line() {
        assert_eq!(offset("a\nb\nunfini", 1), "b\nunfini");
        assert_eq!(offset("a\nb\nunfini", 0), "unfini");
    }

    #[test]
    fn tail_offset_works_across_read_blocks() {
        let line = format!("{}\n", "x".repeat(1000));
        let data = line.repeat(200); // about 200 KB, several blocks
        assert_eq!(offset(&data, 150).len(), 150 * line.len());
    }

    async fn collect(file: &Path, tail: Option<u64>, writer: Writer) -> String {
        let f = open(file, tail).await.unwrap();
        let (tx, mut rx) = mpsc::channel(CHANNEL_CHUNKS);
        let req = Request {
            path: file.to_path_buf(),
            tail_lines: tail,
            follow: false,
            writer,
        };
        tokio::spawn(stream(f, req, tx, || async { false }));
        let mut got = Vec::new();
        while let Some(c) = rx.recv().await {
            got.extend_from_slice(&c.unwrap());
        }
        String::from_utf8(got).unwrap()
    }

    #[tokio::test]
    async fn tail_lines_counts_records_and_a_partial_record_joins_the_next() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("0.log");
        std::fs::write(
            &file,
            "2024-01-02T03:04:05Z stdout F one\n\
             2024-01-02T03:04:06Z stdout P tw\n\
             2024-01-02T03:04:06Z stdout F o\n\
             2024-01-02T03:04:07Z stderr F three\n",
        )
        .unwrap();
        let all = || Writer::new(None, false, None);
        assert_eq!(collect(&file, None, all()).await, "one\ntwo\nthree\n");
        assert_eq!(collect(&file, Some(1), all()).await, "three\n");
        assert_eq!(collect(&file, Some(2), all()).await, "o\nthree\n");
        assert_eq!(collect(&file, Some(3), all()).await, "two\nthree\n");
        assert_eq!(collect(&file, Some(0), all()).await, "");
    }

    #[tokio::test]
    async fn an_unterminated_last_record_is_shown_when_not_following() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("0.log");
        std::fs::write(
            &file,
            "2024-01-02T03:04:05Z stdout F one\n2024-01-02T03:04:06Z stdout F tw",
        )
        .unwrap();
        let got = collect(&file, None, Writer::new(None, false, None)).await;
        assert_eq!(got, "one\ntw");
    }

    fn append(path: &Path, text: &str) {
        use std::io::Write;
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .unwrap();
        f.write_all(text.as_bytes()).unwrap();
    }

    /// Receives until `want` has arrived (or the stream ends); panics after a generous wait.
    async fn until(rx: &mut mpsc::Receiver<Chunk>, got: &mut String, want: &str) {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        while !got.contains(want) {
            match tokio::time::timeout_at(deadline, rx.recv()).await {
                Ok(Some(c)) => got.push_str(std::str::from_utf8(&c.unwrap()).unwrap()),
                Ok(None) => panic!("stream ended before {want:?}; got {got:?}"),
                Err(_) => panic!("no {want:?} within 30 s; got {got:?}"),
            }
        }
    }

    #[tokio::test]
    async fn follow_sees_new_lines_across_a_rotation_and_ends_when_the_container_exits() {
        use std::sync::atomic::{AtomicBool, Ordering};
        use std::sync::Arc;
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("0.log");
        append(&file, "2024-01-02T03:04:05Z stdout F before\n");
        let alive = Arc::new(AtomicBool::new(true));
        let (tx, mut rx) = mpsc::channel(CHANNEL_CHUNKS);
        let req = Request {
            path: file.clone(),
            tail_lines: None,
            follow: true,
            writer: Writer::new(None, false, None),
        };
        let a = alive.clone();
        let task = tokio::spawn(stream(
            open(&file, None).await.unwrap(),
            req,
            tx,
            move || {
                let a = a.clone();
                async move { a.load(Ordering::SeqCst) }
            },
        ));
        let mut got = String::new();
        until(&mut rx, &mut got, "before\n").await;
        append(
            &file,
            "2024-01-02T03:04:06Z stdout P grow\n2024-01-02T03:04:06Z stdout F ing\n",
        );
        until(&mut rx, &mut got, "growing\n").await;
        // rotation: the old file gets a last line, is renamed, and a new file starts
        append(&file, "2024-01-02T03:04:07Z stdout F last of old\n");
        std::fs::rename(&file, dir.path().join("0.log.20240102-030407")).unwrap();
        append(&file, "2024-01-02T03:04:08Z stdout F first of new\n");
        until(&mut rx, &mut got, "first of new\n").await;
        assert_eq!(got, "before\ngrowing\nlast of old\nfirst of new\n");
        // the container exits: what it wrote is read and the stream ends
        append(&file, "2024-01-02T03:04:09Z stderr F bye\n");
        alive.store(false, Ordering::SeqCst);
        until(&mut rx, &mut got, "bye\n").await;
        let end = tokio::time::timeout(Duration::from_secs(30), rx.recv()).await;
        assert!(
            matches!(end, Ok(None)),
            "the stream ends after the container exits"
        );
        task.await.unwrap();
    }

    #[tokio::test]
    async fn a_client_that_stops_reading_holds_the_reader_at_a_bounded_backlog() {
        let dir = tempfile::tempdir().unwrap();
        let file = dir.path().join("0.log");
        let line = format!("2024-01-02T03:04:05Z stdout F {}\n", "x".repeat(1000));
        append(&file, &line.repeat(2000)); // about 2 MB of output
        let (tx, rx) = mpsc::channel(CHANNEL_CHUNKS);
        let req = Request {
            path: file.clone(),
            tail_lines: None,
            follow: true,
            writer: Writer::new(None, false, None),
        };
        let task = tokio::spawn(stream(
            open(&file, None).await.unwrap(),
            req,
            tx.clone(),
            || async { true },
        ));
        // the reader fills the channel and then waits on it
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        while tx.capacity() > 0 {
            assert!(
                tokio::time::Instant::now() < deadline,
                "the channel never filled"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        tokio::time::sleep(Duration::from_millis(300)).await;
        assert_eq!(tx.capacity(), 0);
        assert!(
            !task.is_finished(),
            "the reader waits for the client, it does not read ahead"
        );
        drop(rx);
        drop(tx);
        tokio::time::timeout(Duration::from_secs(30), task)
            .await
            .expect("the reader stops once the client is gone")
            .unwrap();
    }
}
