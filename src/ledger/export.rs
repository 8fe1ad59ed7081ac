//! Exports: a replayable NDJSON file (a snapshot line, then records), plain or gzip.
//!
//! Owns choosing where an export starts (the newest retained snapshot at or before the
//! requested seq, so the file always replays), writing it, and opening ledger files for
//! reading whatever their compression. Must not fold or redact: records are written as the
//! ledger holds them (secrets were redacted before they were appended).

use std::fs::File;
use std::io::{self, BufRead, BufReader, BufWriter, Read, Write};
use std::path::Path;
use std::sync::Arc;

use serde::Serialize;

use super::codec::{write_record, write_snapshot, Snapshot};
use super::record::Record;
use super::store::{Ledger, ReplayBase};

/// The gzip level of `.gz` exports: fast, since ledgers compress well at any level and
/// the flight recorder writes while an agent is failing.
pub const GZIP_LEVEL: u32 = 1;

/// What an export wrote.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ExportStats {
    /// The snapshot's seq, if the export starts with one.
    pub snapshot_seq: Option<u64>,
    /// Records written.
    pub records: u64,
    /// Seq of the first record written.
    pub first_seq: Option<u64>,
    /// Seq of the last record written.
    pub last_seq: Option<u64>,
}

impl<S> Ledger<S> {
    /// Where an export of the records from `since` starts: the newest retained snapshot
    /// whose successor is at or before `since` (or none when the ledger still holds seq 1
    /// and `since` precedes every snapshot), and every retained record after it. The export
    /// may therefore begin a little before `since`; it always replays.
    pub fn export_base(&self, since: u64) -> ReplayBase<S> {
        let (base, records) = self.replay_base();
        let start_seq = |b: &Option<Arc<Snapshot<Arc<S>>>>| b.as_ref().map_or(1, |s| s.seq + 1);
        if since <= start_seq(&base) {
            return (base, records);
        }
        let first = self.first_seq().unwrap_or(self.last_seq() + 1);
        let better = self
            .snapshots()
            .filter(|s| s.seq + 1 >= first && s.seq < since)
            .last()
            .cloned();
        match better {
            Some(s) if s.seq + 1 > start_seq(&base) => {
                let from = s.seq + 1;
                (Some(s), self.since(from).cloned().collect())
            }
            _ => (base, records),
        }
    }
}

/// Writes `snapshot` (if any) then `records` as NDJSON to `w`.
pub fn write_export<'a, S: Serialize>(
    w: &mut impl Write,
    snapshot: Option<&Snapshot<S>>,
    records: impl IntoIterator<Item = &'a Arc<Record>>,
) -> io::Result<ExportStats> {
    // each shared pod is encoded once per export, not once per record carrying it
    let _cache = super::shared::EncodeCache::start();
    let mut stats = ExportStats {
        snapshot_seq: snapshot.map(|s| s.seq),
        ..ExportStats::default()
    };
    if let Some(s) = snapshot {
        write_snapshot(w, s)?;
    }
    for r in records {
        write_record(w, r)?;
        stats.records += 1;
        stats.first_seq.get_or_insert(r.seq);
        stats.last_seq = Some(r.seq);
    }
    Ok(stats)
}

/// True when `path` names a gzip file by its extension.
pub fn is_gz_path(path: &Path) -> bool {
    path.extension().is_some_and(|e| e == "gz")
}

/// A writer for an export file: gzip (level [`GZIP_LEVEL`]) when the name ends in `.gz`,
/// compressed on a second thread so encoding and compression run side by side. Call
/// [`ExportWriter::finish`] to complete the file.
pub struct ExportWriter {
    inner: Inner,
}

enum Inner {
    Plain(BufWriter<File>),
    Gz(GzPipe),
}

/// Chunks of this size go to the compressing thread.
const GZ_CHUNK_BYTES: usize = 1 << 20;

struct GzPipe {
    buf: Vec<u8>,
    tx: Option<std::sync::mpsc::SyncSender<Vec<u8>>>,
    thread: Option<std::thread::JoinHandle<io::Result<File>>>,
}

impl GzPipe {
    fn new(file: BufWriter<File>) -> io::Result<GzPipe> {
        let (tx, rx) = std::sync::mpsc::sync_channel::<Vec<u8>>(4);
        let thread = std::thread::Builder::new()
            .name("export-gzip".into())
            .spawn(move || {
                let mut gz =
                    flate2::write::GzEncoder::new(file, flate2::Compression::new(GZIP_LEVEL));
                for chunk in rx {
                    gz.write_all(&chunk)?;
                }
                gz.finish()?.into_inner().map_err(|e| e.into_error())
            })?;
        Ok(GzPipe {
            buf: Vec::with_capacity(GZ_CHUNK_BYTES),
            tx: Some(tx),
            thread: Some(thread),
        })
    }

    fn send(&mut self) -> io::Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let chunk = std::mem::replace(&mut self.buf, Vec::with_capacity(GZ_CHUNK_BYTES));
        let sent = self.tx.as_ref().is_some_and(|tx| tx.send(chunk).is_ok());
        if sent {
            Ok(())
        } else {
            // the compressor stopped: its error says why
            Err(self
                .join()
                .err()
                .unwrap_or_else(|| io::Error::other("the gzip thread stopped")))
        }
    }

    fn join(&mut self) -> io::Result<File> {
        drop(self.tx.take());
        match self.thread.take() {
            Some(t) => t
                .join()
                .map_err(|_| io::Error::other("the gzip thread panicked"))?,
            None => Err(io::Error::other("the gzip stream is already finished")),
        }
    }
}

impl Write for GzPipe {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        self.buf.extend_from_slice(data);
        if self.buf.len() >= GZ_CHUNK_BYTES {
            self.send()?;
        }
        Ok(data.len())
    }
    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl ExportWriter {
    /// Creates (truncates) `path`.
    pub fn create(path: &Path) -> io::Result<ExportWriter> {
        let file = BufWriter::with_capacity(1 << 20, File::create(path)?);
        let inner = if is_gz_path(path) {
            Inner::Gz(GzPipe::new(file)?)
        } else {
            Inner::Plain(file)
        };
        Ok(ExportWriter { inner })
    }

    /// Flushes everything, writes the gzip trailer and syncs the file to disk.
    pub fn finish(self) -> io::Result<()> {
        let file = match self.inner {
            Inner::Plain(w) => w.into_inner().map_err(|e| e.into_error())?,
            Inner::Gz(mut g) => {
                g.send()?;
                g.join()?
            }
        };
        file.sync_all()
    }
}

impl Write for ExportWriter {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        match &mut self.inner {
            Inner::Plain(w) => w.write(buf),
            Inner::Gz(w) => w.write(buf),
        }
    }
    fn write_all(&mut self, buf: &[u8]) -> io::Result<()> {
        match &mut self.inner {
            Inner::Plain(w) => w.write_all(buf),
            Inner::Gz(w) => w.write_all(buf),
        }
    }
    fn flush(&mut self) -> io::Result<()> {
        match &mut self.inner {
            Inner::Plain(w) => w.flush(),
            Inner::Gz(w) => w.flush(),
        }
    }
}

/// Opens a ledger for reading: a durable ledger directory (its segments as one ledger), or
/// a file (plain or gzip).
pub fn open_input(path: &Path) -> io::Result<Box<dyn BufRead + Send>> {
    if path.is_dir() {
        super::durable::open_dir(path)
    } else {
        open_file(path)
    }
}

/// Opens a ledger file for reading: gzip is recognised by its magic bytes, so a renamed
/// file still reads. (A durable ledger directory is read with `durable::open_dir`.)
pub fn open_file(path: &Path) -> io::Result<Box<dyn BufRead + Send>> {
    let mut file = File::open(path)?;
    let mut magic = [0u8; 2];
    let n = read_up_to(&mut file, &mut magic)?;
    use std::io::Seek;
    file.seek(io::SeekFrom::Start(0))?;
    if n == 2 && magic == [0x1f, 0x8b] {
        let gz = flate2::read::MultiGzDecoder::new(BufReader::with_capacity(1 << 16, file));
        Ok(Box::new(BufReader::with_capacity(1 << 20, gz)))
    } else {
        Ok(Box::new(BufReader::with_capacity(1 << 20, file)))
    }
}

fn read_up_to(r: &mut impl Read, buf: &mut [u8]) -> io::Result<usize> {
    let mut n = 0;
    while n < buf.len() {
        match r.read(&mut buf[n..])? {
            0 => break,
            k => n += k,
        }
    }
    Ok(n)
}
