//! The writer thread of the durable ledger.
//!
//! Owns the open segment: it serialises records and snapshots off the fold's thread,
//! hands written bytes to the kernel whenever its queue runs dry (so a killed agent loses
//! only what was still queued), fsyncs at most every `fsync_period_ms`, starts a new
//! segment at the first snapshot after the current one reached `segment_max_bytes`, and
//! deletes the oldest segments beyond `dir_max_bytes`. Must not stop the agent on a disk
//! error: it reports it, counts what it could not write, and starts a new segment at the
//! next snapshot.

use std::fs::{File, OpenOptions};
use std::io::{self, BufWriter, Write};
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::Arc;
use std::time::{Duration, Instant};

use serde::Serialize;

use super::{list_segments, segment_name, DurableConfig};
use crate::core::record::Record;
use crate::ledger::codec::{write_record, write_snapshot, Snapshot};

enum Msg<S> {
    Record(Arc<Record>),
    Snapshot(Arc<Snapshot<Arc<S>>>),
    Flush(mpsc::SyncSender<()>),
}

/// Counters of the writer (for metrics and tests).
#[derive(Debug, Default)]
pub struct DurableStats {
    /// Records written.
    pub records_written: AtomicU64,
    /// Records that could not be written (disk errors).
    pub records_lost: AtomicU64,
    /// Segments started.
    pub segments_started: AtomicU64,
    /// Segments deleted for the budget.
    pub segments_deleted: AtomicU64,
    /// fsyncs done.
    pub fsyncs: AtomicU64,
}

/// The handle the engine appends through. Dropping it flushes, fsyncs and joins the thread.
pub struct DurableWriter<S> {
    tx: Option<SyncSender<Msg<S>>>,
    rotate: Arc<AtomicBool>,
    stats: Arc<DurableStats>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl<S: Serialize + Send + Sync + 'static> DurableWriter<S> {
    /// Starts the writer. `current` is the segment to append to (from `load`), if any.
    pub fn start(config: DurableConfig, current: Option<(PathBuf, u64)>) -> io::Result<Self> {
        config.validate().map_err(io::Error::other)?;
        std::fs::create_dir_all(&config.dir)?;
        let segment = match current {
            Some((path, len)) => Some(Segment {
                file: BufWriter::with_capacity(
                    256 * 1024,
                    OpenOptions::new().append(true).open(&path)?,
                ),
                bytes: len,
            }),
            None => None,
        };
        let (tx, rx) = mpsc::sync_channel(config.queue_records);
        let rotate = Arc::new(AtomicBool::new(false));
        let stats = Arc::new(DurableStats::default());
        let mut w = Worker {
            config,
            segment,
            rotate: rotate.clone(),
            stats: stats.clone(),
            dirty: false,
            last_sync: Instant::now(),
            broken_logged: false,
        };
        let thread = std::thread::Builder::new()
            .name("ledger-writer".into())
            .spawn(move || w.run(rx))?;
        Ok(DurableWriter {
            tx: Some(tx),
            rotate,
            stats,
            thread: Some(thread),
        })
    }
}

impl<S> DurableWriter<S> {
    fn send(&self, m: Msg<S>) {
        let Some(tx) = &self.tx else { return };
        match tx.try_send(m) {
            Ok(()) => {}
            Err(TrySendError::Full(m)) => {
                // the disk is behind: the fold waits rather than leave a gap on disk
                metrics::counter!("ledgerlet_durable_queue_full_total").increment(1);
                let _ = tx.send(m);
            }
            Err(TrySendError::Disconnected(_)) => {}
        }
    }

    /// Queues a record.
    pub fn append(&self, r: Arc<Record>) {
        self.send(Msg::Record(r));
    }

    /// Queues a snapshot (it starts a new segment when one is due).
    pub fn snapshot(&self, s: Arc<Snapshot<Arc<S>>>) {
        self.send(Msg::Snapshot(s));
    }

    /// True when the current segment is full: the engine should take a snapshot now.
    pub fn wants_snapshot(&self) -> bool {
        self.rotate.load(Ordering::Relaxed)
    }

    /// Writes and fsyncs everything queued so far; waits at most `timeout`.
    pub fn flush(&self, timeout: Duration) -> bool {
        let (ack, done) = mpsc::sync_channel(1);
        self.send(Msg::Flush(ack));
        done.recv_timeout(timeout).is_ok()
    }

    /// The counters.
    pub fn stats(&self) -> &DurableStats {
        &self.stats
    }
}

impl<S> Drop for DurableWriter<S> {
    fn drop(&mut self) {
        drop(self.tx.take());
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

struct Segment {
    file: BufWriter<File>,
    /// Bytes of records in the segment (its leading snapshot does not count, so a segment
    /// smaller than a snapshot still holds records).
    bytes: u64,
}

struct Worker {
    config: DurableConfig,
    segment: Option<Segment>,
    rotate: Arc<AtomicBool>,
    stats: Arc<DurableStats>,
    dirty: bool,
    last_sync: Instant,
    broken_logged: bool,
}

/// Counts bytes written through it.
struct Counting<'a, W> {
    inner: &'a mut W,
    n: u64,
}

impl<W: Write> Write for Counting<'_, W> {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        let n = self.inner.write(buf)?;
        self.n += n as u64;
        Ok(n)
    }
    fn flush(&mut self) -> io::Result<()> {
        self.inner.flush()
    }
}

fn sync_dir(dir: &Path) {
    if let Ok(d) = File::open(dir) {
        let _ = d.sync_all();
    }
}

impl Worker {
    fn run<S: Serialize>(&mut self, rx: mpsc::Receiver<Msg<S>>) {
        let period = Duration::from_millis(self.config.fsync_period_ms);
        loop {
            let wait = if self.dirty {
                period.saturating_sub(self.last_sync.elapsed())
            } else {
                Duration::from_secs(3600)
            };
            match rx.recv_timeout(wait) {
                Ok(m) => {
                    self.handle(m);
                    // drain what is queued, then hand the bytes to the kernel
                    let mut n = 0;
                    while n < 4096 {
                        match rx.try_recv() {
                            Ok(m) => self.handle(m),
                            Err(_) => break,
                        }
                        n += 1;
                    }
                    self.flush_to_kernel();
                }
                Err(RecvTimeoutError::Timeout) => {}
                Err(RecvTimeoutError::Disconnected) => {
                    self.sync();
                    return;
                }
            }
            if self.dirty && self.last_sync.elapsed() >= period {
                self.sync();
            }
        }
    }

    fn handle<S: Serialize>(&mut self, m: Msg<S>) {
        match m {
            Msg::Record(r) => self.write_record(&r),
            Msg::Snapshot(s) => {
                if self.segment.is_none() || self.rotate.load(Ordering::Relaxed) {
                    self.start_segment(&s);
                }
            }
            Msg::Flush(ack) => {
                self.sync();
                let _ = ack.send(());
            }
        }
    }

    fn fail(&mut self, what: &str, e: &io::Error) {
        if !self.broken_logged {
            tracing::error!(dir = %self.config.dir.display(), error = %e, "durable ledger: {what} failed; records are not persisted until the next snapshot starts a new segment");
            self.broken_logged = true;
        }
        metrics::counter!("ledgerlet_durable_errors_total").increment(1);
        self.segment = None;
        self.rotate.store(true, Ordering::Relaxed);
    }

    fn write_record(&mut self, r: &Record) {
        if self.segment.is_none() && r.seq == 1 {
            // a brand-new ledger: its first segment starts at seq 1 without a snapshot
            if let Err(e) = self.open_segment(1) {
                self.fail("creating the first segment", &e);
            }
        }
        let Some(seg) = self.segment.as_mut() else {
            self.stats.records_lost.fetch_add(1, Ordering::Relaxed);
            return;
        };
        let mut c = Counting {
            inner: &mut seg.file,
            n: 0,
        };
        let res = write_record(&mut c, r);
        seg.bytes += c.n;
        match res {
            Ok(()) => {
                self.dirty = true;
                self.stats.records_written.fetch_add(1, Ordering::Relaxed);
                if seg.bytes >= self.config.segment_max_bytes {
                    self.rotate.store(true, Ordering::Relaxed);
                }
            }
            Err(e) => {
                self.stats.records_lost.fetch_add(1, Ordering::Relaxed);
                self.fail("writing a record", &e);
            }
        }
    }

    fn open_segment(&mut self, first_seq: u64) -> io::Result<()> {
        let path = self.config.dir.join(segment_name(first_seq));
        let file = OpenOptions::new()
            .create(true)
            .write(true)
            .truncate(true)
            .open(&path)?;
        sync_dir(&self.config.dir);
        self.segment = Some(Segment {
            file: BufWriter::with_capacity(256 * 1024, file),
            bytes: 0,
        });
        self.stats.segments_started.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }

    fn start_segment<S: Serialize>(&mut self, s: &Snapshot<Arc<S>>) {
        self.sync();
        self.segment = None;
        let res = self.open_segment(s.seq + 1).and_then(|()| {
            let seg = self.segment.as_mut().expect("just opened");
            write_snapshot(&mut seg.file, s)
        });
        match res {
            Ok(()) => {
                self.dirty = true;
                self.broken_logged = false;
                self.rotate.store(false, Ordering::Relaxed);
                // the new segment must be on disk before older ones go
                self.sync();
                self.enforce_budget();
            }
            Err(e) => self.fail("starting a segment", &e),
        }
    }

    fn flush_to_kernel(&mut self) {
        if let Some(seg) = self.segment.as_mut() {
            if let Err(e) = seg.file.flush() {
                self.fail("writing", &e);
            }
        }
    }

    fn sync(&mut self) {
        self.flush_to_kernel();
        if let Some(seg) = self.segment.as_mut() {
            if let Err(e) = seg.file.get_ref().sync_data() {
                self.fail("fsync", &e);
            } else {
                self.stats.fsyncs.fetch_add(1, Ordering::Relaxed);
            }
        }
        self.dirty = false;
        self.last_sync = Instant::now();
    }

    fn enforce_budget(&mut self) {
        let Ok(mut segs) = list_segments(&self.config.dir) else {
            return;
        };
        let mut total: u64 = segs.iter().map(|(_, _, len)| len).sum();
        // room for the new segment to fill up; never delete the newest (being written)
        let keep = self
            .config
            .dir_max_bytes
            .saturating_sub(self.config.segment_max_bytes);
        while total > keep && segs.len() > 1 {
            let (_, path, len) = segs.remove(0);
            match std::fs::remove_file(&path) {
                Ok(()) => {
                    total -= len;
                    self.stats.segments_deleted.fetch_add(1, Ordering::Relaxed);
                }
                Err(e) => {
                    tracing::warn!(path = %path.display(), error = %e, "durable ledger: cannot delete an old segment");
                    break;
                }
            }
        }
        sync_dir(&self.config.dir);
    }
}
