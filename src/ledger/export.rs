//! Exports: a replayable NDJSON file (a snapshot line, then records), plain or gzip.
//!
//! Owns choosing where an export starts (the newest retained snapshot at or before the
//! requested seq, so the file always replays), writing it, and opening ledger files for
//! reading whatever their compression. Must not fold or redact: records are written as the
//! ledger holds them (secrets were redacted before they were appended).

use std::fs::File;
use std::io::{self, BufRead, BufReader, BufWriter, Read, Write};
use std::path::Path;
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::sync::Arc;

use serde::Serialize;

use super::codec::{write_record, write_snapshot, Snapshot};
use super::store::{Ledger, ReplayBase};
use crate::core::record::Record;

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
    // a line is encoded into `line`, then written at once: many small writes into the
    // export's buffer cost more than the copy
    let mut line = Vec::with_capacity(4096);
    for r in records {
        line.clear();
        write_record(&mut line, r)?;
        w.write_all(&line)?;
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

/// A writer for an export file: gzip (level [`GZIP_LEVEL`]) when the name ends in `.gz`.
/// The caller's thread only encodes: the bytes go in chunks to a second thread that
/// compresses (for `.gz`) and writes them, so encoding, compression and the kernel's copy
/// into the file run side by side. Call [`ExportWriter::finish`] to complete the file.
pub struct ExportWriter {
    buf: Vec<u8>,
    tx: Option<SyncSender<Vec<u8>>>,
    /// Chunks the writing thread is done with, to be filled again (a fresh 1 MiB buffer
    /// per chunk would cost its page faults every time).
    back: Receiver<Vec<u8>>,
    thread: Option<std::thread::JoinHandle<io::Result<File>>>,
}

/// Chunks of this size go to the writing thread.
const CHUNK_BYTES: usize = 1 << 20;
/// Chunks the encoder may be ahead of the writing thread.
const CHUNKS_AHEAD: usize = 4;

/// The writing thread: writes (or compresses, then writes) every chunk to `file`.
fn write_chunks(
    file: File,
    gzip: bool,
    chunks: Receiver<Vec<u8>>,
    back: SyncSender<Vec<u8>>,
) -> io::Result<File> {
    fn drain(
        w: &mut impl Write,
        chunks: Receiver<Vec<u8>>,
        back: SyncSender<Vec<u8>>,
    ) -> io::Result<()> {
        for chunk in chunks {
            w.write_all(&chunk)?;
            let _ = back.try_send(chunk);
        }
        Ok(())
    }
    if gzip {
        let file = BufWriter::with_capacity(CHUNK_BYTES, file);
        let mut gz = flate2::write::GzEncoder::new(file, flate2::Compression::new(GZIP_LEVEL));
        drain(&mut gz, chunks, back)?;
        gz.finish()?.into_inner().map_err(|e| e.into_error())
    } else {
        let mut file = file;
        drain(&mut file, chunks, back)?;
        Ok(file)
    }
}

impl ExportWriter {
    /// Creates (truncates) `path`.
    pub fn create(path: &Path) -> io::Result<ExportWriter> {
        let file = File::create(path)?;
        let gzip = is_gz_path(path);
        let (tx, chunks) = sync_channel::<Vec<u8>>(CHUNKS_AHEAD);
        let (back_tx, back) = sync_channel::<Vec<u8>>(CHUNKS_AHEAD + 2);
        let thread = std::thread::Builder::new()
            .name(if gzip { "export-gzip" } else { "export-write" }.into())
            .spawn(move || write_chunks(file, gzip, chunks, back_tx))?;
        Ok(ExportWriter {
            buf: Vec::with_capacity(CHUNK_BYTES),
            tx: Some(tx),
            back,
            thread: Some(thread),
        })
    }

    /// Hands the buffered bytes to the writing thread.
    fn send(&mut self) -> io::Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let next = match self.back.try_recv() {
            Ok(mut b) => {
                b.clear();
                b
            }
            Err(_) => Vec::with_capacity(CHUNK_BYTES),
        };
        let chunk = std::mem::replace(&mut self.buf, next);
        let sent = self.tx.as_ref().is_some_and(|tx| tx.send(chunk).is_ok());
        if sent {
            Ok(())
        } else {
            // the writer stopped: its error says why
            Err(self
                .join()
                .err()
                .unwrap_or_else(|| io::Error::other("the export writing thread stopped")))
        }
    }

    fn join(&mut self) -> io::Result<File> {
        drop(self.tx.take());
        match self.thread.take() {
            Some(t) => t
                .join()
                .map_err(|_| io::Error::other("the export writing thread panicked"))?,
            None => Err(io::Error::other("the export is already finished")),
        }
    }

    /// Writes everything, completes the gzip stream and syncs the file to disk.
    pub fn finish(mut self) -> io::Result<()> {
        self.send()?;
        self.join()?.sync_all()
    }
}

impl Write for ExportWriter {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        self.write_all(data)?;
        Ok(data.len())
    }
    fn write_all(&mut self, data: &[u8]) -> io::Result<()> {
        if self.buf.len() + data.len() > CHUNK_BYTES {
            self.send()?;
        }
        if data.len() > CHUNK_BYTES {
            self.buf.extend_from_slice(data);
            return self.send();
        }
        self.buf.extend_from_slice(data);
        Ok(())
    }
    /// Hands what is buffered to the writing thread ([`ExportWriter::finish`] waits for it
    /// to reach the file).
    fn flush(&mut self) -> io::Result<()> {
        self.send()
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

#[cfg(test)]
mod tests {
    use super::*;

    /// Lines of every size around the chunk size, so chunks split lines and some writes
    /// are larger than a chunk.
    fn text() -> Vec<u8> {
        let mut text = Vec::new();
        for (i, len) in [10, CHUNK_BYTES - 3, 1, CHUNK_BYTES + 5, 2 * CHUNK_BYTES, 7]
            .into_iter()
            .enumerate()
        {
            text.extend(std::iter::repeat_n(b'a' + i as u8, len));
            text.push(b'\n');
        }
        text
    }

    #[test]
    fn plain_and_gzip_files_hold_exactly_what_was_written() {
        let dir = tempfile::tempdir().unwrap();
        let text = text();
        for name in ["x.ndjson", "x.ndjson.gz"] {
            let path = dir.path().join(name);
            let mut w = ExportWriter::create(&path).unwrap();
            for line in text.split_inclusive(|b| *b == b'\n') {
                // in pieces, as an encoder writes
                for piece in line.chunks(1 << 19) {
                    w.write_all(piece).unwrap();
                }
            }
            w.flush().unwrap();
            w.finish().unwrap();
            let mut back = Vec::new();
            open_file(&path).unwrap().read_to_end(&mut back).unwrap();
            assert!(
                back == text,
                "{name}: {} bytes back of {}",
                back.len(),
                text.len()
            );
            let raw = std::fs::read(&path).unwrap();
            assert_eq!(raw.starts_with(&[0x1f, 0x8b]), name.ends_with(".gz"));
        }
    }

    #[test]
    fn a_file_that_cannot_be_written_is_an_error() {
        // /dev/full accepts the open and fails every write
        let mut w = ExportWriter::create(Path::new("/dev/full")).unwrap();
        let mut failed = false;
        for _ in 0..16 {
            if w.write_all(&vec![b'x'; CHUNK_BYTES]).is_err() {
                failed = true;
                break;
            }
        }
        assert!(failed || w.finish().is_err());
    }
}
