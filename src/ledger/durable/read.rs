//! Reading a whole durable ledger directory as one NDJSON ledger, for replay and export.
//!
//! Owns stitching segments together: the first segment is read whole (its snapshot, if
//! any, starts the ledger); later segments lose their leading snapshot line (the records
//! before them already lead to that state); an incomplete last line of the newest segment
//! (an agent killed mid-write) is left out. Must not modify the directory.

use std::collections::VecDeque;
use std::fs::File;
use std::io::{self, BufRead, BufReader, Read, Seek, SeekFrom};
use std::path::{Path, PathBuf};

use super::list_segments;
use crate::ledger::codec::SNAPSHOT_KIND;

/// Reads every segment of `dir` in order as one ledger.
pub fn open_dir(dir: &Path) -> io::Result<Box<dyn BufRead + Send>> {
    let segments: VecDeque<PathBuf> = list_segments(dir)?.into_iter().map(|(_, p, _)| p).collect();
    if segments.is_empty() {
        return Err(io::Error::new(
            io::ErrorKind::NotFound,
            format!(
                "{} holds no ledger segments (segment-*.ndjson)",
                dir.display()
            ),
        ));
    }
    Ok(Box::new(BufReader::with_capacity(
        1 << 20,
        Segments {
            left: segments,
            current: None,
            first: true,
        },
    )))
}

struct Segments {
    left: VecDeque<PathBuf>,
    current: Option<Box<dyn BufRead + Send>>,
    first: bool,
}

/// Length of `file` up to and including its last newline.
fn complete_len(file: &mut File) -> io::Result<u64> {
    let len = file.seek(SeekFrom::End(0))?;
    let mut end = len;
    let mut buf = vec![0u8; 64 * 1024];
    while end > 0 {
        let start = end.saturating_sub(buf.len() as u64);
        let n = (end - start) as usize;
        file.seek(SeekFrom::Start(start))?;
        file.read_exact(&mut buf[..n])?;
        if let Some(i) = buf[..n].iter().rposition(|b| *b == b'\n') {
            file.seek(SeekFrom::Start(0))?;
            return Ok(start + i as u64 + 1);
        }
        end = start;
    }
    file.seek(SeekFrom::Start(0))?;
    Ok(0)
}

fn starts_with_snapshot(head: &[u8]) -> bool {
    let probe = &head[..head.len().min(256)];
    let needle = format!("\"kind\":\"{SNAPSHOT_KIND}\"");
    probe.starts_with(b"{\"seq\":") && probe.windows(needle.len()).any(|w| w == needle.as_bytes())
}

impl Segments {
    fn open_next(&mut self) -> io::Result<bool> {
        let Some(path) = self.left.pop_front() else {
            return Ok(false);
        };
        let mut file = File::open(&path)?;
        let limit = if self.left.is_empty() {
            complete_len(&mut file)?
        } else {
            u64::MAX
        };
        let mut r = BufReader::with_capacity(1 << 16, file.take(limit));
        if !self.first && starts_with_snapshot(r.fill_buf()?) {
            r.skip_until(b'\n')?;
        }
        self.first = false;
        self.current = Some(Box::new(r));
        Ok(true)
    }
}

impl Read for Segments {
    fn read(&mut self, out: &mut [u8]) -> io::Result<usize> {
        loop {
            if self.current.is_none() && !self.open_next()? {
                return Ok(0);
            }
            let n = self.current.as_mut().expect("open").read(out)?;
            if n > 0 {
                return Ok(n);
            }
            self.current = None;
        }
    }
}
