//! A progress bar on stderr for the offline tools reading large ledgers.
//!
//! Owns drawing one line (`\r[=====>    ]  45%  120.0/266.4 MiB`) while a reader is
//! consumed, at most ten times a second, and clearing it at the end. Shown only when stderr
//! is a terminal and the input is large, so pipes, logs and tests see nothing. Must not
//! pull in a terminal library: it writes plain bytes.

use std::io::{self, BufRead, BufReader, IsTerminal, Read, Write};
use std::path::Path;
use std::time::{Duration, Instant};

/// Inputs smaller than this get no bar.
pub const MIN_BYTES_FOR_BAR: u64 = 16 * 1024 * 1024;
const WIDTH: usize = 30;

/// The bar's text for `done` of `total` bytes (`total` 0: unknown, bytes only).
pub fn render(done: u64, total: u64) -> String {
    let mib = |b: u64| b as f64 / (1024.0 * 1024.0);
    if total == 0 {
        return format!("\rreading {:.1} MiB", mib(done));
    }
    let frac = (done as f64 / total as f64).clamp(0.0, 1.0);
    let filled = (frac * WIDTH as f64) as usize;
    let mut bar = "=".repeat(filled);
    if filled < WIDTH {
        bar.push('>');
        bar.push_str(&" ".repeat(WIDTH - filled - 1));
    }
    format!(
        "\r[{bar}] {:3.0}%  {:.1}/{:.1} MiB",
        frac * 100.0,
        mib(done),
        mib(total)
    )
}

struct Progress<R> {
    inner: R,
    done: u64,
    total: u64,
    last_draw: Instant,
    drawn: bool,
}

impl<R: Read> Read for Progress<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.done += n as u64;
        if self.last_draw.elapsed() >= Duration::from_millis(100) {
            self.last_draw = Instant::now();
            self.drawn = true;
            let _ = io::stderr().write_all(render(self.done, self.total).as_bytes());
        }
        Ok(n)
    }
}

impl<R> Drop for Progress<R> {
    fn drop(&mut self) {
        if self.drawn {
            let _ = write!(io::stderr(), "\r{}\r", " ".repeat(WIDTH + 30));
        }
    }
}

/// The size of a ledger input (a file, or the segments of a directory); 0 if unknown
/// (gzip: the compressed size says little about the records).
pub fn input_size(path: &Path) -> u64 {
    if path.is_dir() {
        return crate::ledger::durable::list_segments(path)
            .map(|s| s.iter().map(|x| x.2).sum())
            .unwrap_or(0);
    }
    let mut magic = [0u8; 2];
    let gz = std::fs::File::open(path)
        .and_then(|mut f| f.read_exact(&mut magic))
        .is_ok()
        && magic == [0x1f, 0x8b];
    if gz {
        0
    } else {
        std::fs::metadata(path).map(|m| m.len()).unwrap_or(0)
    }
}

/// Opens a ledger input (file, `.gz` or `--ledger-dir`), with a progress bar on a terminal
/// for large inputs.
pub fn open_with_progress(path: &Path) -> io::Result<Box<dyn BufRead + Send>> {
    let input = crate::ledger::export::open_input(path)?;
    let total = input_size(path);
    let on_disk = if path.is_dir() {
        total
    } else {
        std::fs::metadata(path).map(|m| m.len()).unwrap_or(0)
    };
    if !io::stderr().is_terminal() || on_disk < MIN_BYTES_FOR_BAR {
        return Ok(input);
    }
    Ok(Box::new(BufReader::with_capacity(
        1 << 20,
        Progress {
            inner: input,
            done: 0,
            total,
            last_draw: Instant::now(),
            drawn: false,
        },
    )))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_bar_fills_with_the_bytes_read() {
        assert_eq!(
            render(0, 100 << 20),
            "\r[>                             ]   0%  0.0/100.0 MiB"
        );
        assert_eq!(
            render(50 << 20, 100 << 20),
            "\r[===============>              ]  50%  50.0/100.0 MiB"
        );
        assert_eq!(
            render(100 << 20, 100 << 20),
            "\r[==============================] 100%  100.0/100.0 MiB"
        );
        assert_eq!(render(3 << 20, 0), "\rreading 3.0 MiB");
    }

    #[test]
    fn small_inputs_and_non_terminals_get_no_bar() {
        let dir = tempfile::tempdir().unwrap();
        let p = dir.path().join("l.ndjson");
        std::fs::write(&p, b"").unwrap();
        // under the test harness stderr is not a terminal, and the file is small: the
        // input is returned as it is (no wrapper that could write to stderr)
        let mut r = open_with_progress(&p).unwrap();
        let mut s = String::new();
        r.read_to_string(&mut s).unwrap();
        assert!(s.is_empty());
        assert_eq!(input_size(&p), 0);
    }
}
