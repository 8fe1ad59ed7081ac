//! The CRI log file format and what a client is shown of it: records
//! `<RFC3339Nano> <stdout|stderr> <P|F>[:more tags] <content>`, one per line, a `P` (partial)
//! record continued by the next one, as the kubelet's `kuberuntime/logs` parses and writes
//! them.
//!
//! Owns: parsing one record, the output rules (`sinceTime`/`sinceSeconds` filtering,
//! `timestamps` prefixes at the start of a logical line only, `limitBytes` cutting mid-line)
//! Must not: open files or wait; callers feed it
//! bytes.

/// One parsed record.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Record<'a> {
    /// When the runtime wrote it.
    pub timestamp: jiff::Timestamp,
    /// `stdout` or `stderr`.
    pub stream: &'a str,
    /// The content: a full (`F`) record keeps its line's newline, a partial (`P`) one has
    /// none, so partial records join into one line.
    pub content: &'a [u8],
}

/// Parses one line of a CRI log file (`line` with or without its trailing newline).
pub fn parse(line: &[u8]) -> Result<Record<'_>, String> {
    let next = |rest: &[u8], what: &str| -> Result<usize, String> {
        rest.iter()
            .position(|&b| b == b' ')
            .ok_or_else(|| format!("{what} is not found"))
    };
    let i = next(line, "timestamp")?;
    let ts = std::str::from_utf8(&line[..i]).map_err(|_| "timestamp is not UTF-8".to_string())?;
    let timestamp = ts
        .parse::<jiff::Timestamp>()
        .map_err(|e| format!("unexpected timestamp format {ts:?}: {e}"))?;
    let rest = &line[i + 1..];
    let i = next(rest, "stream type")?;
    let stream = match &rest[..i] {
        b"stdout" => "stdout",
        b"stderr" => "stderr",
        other => {
            return Err(format!(
                "unexpected stream type {:?}",
                String::from_utf8_lossy(other)
            ))
        }
    };
    let mut rest = &rest[i + 1..];
    let i = next(rest, "log tag")?;
    // forward compatible: only the first `:`-separated tag matters
    let partial = rest[..i].split(|&b| b == b':').next() == Some(b"P");
    if partial && rest.last() == Some(&b'\n') {
        rest = &rest[..rest.len() - 1];
    }
    Ok(Record {
        timestamp,
        stream,
        content: &rest[i + 1..],
    })
}

/// What the writer says after a record.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Written {
    /// Keep going.
    More,
    /// `limitBytes` is used up: the response ends.
    LimitReached,
}

/// Turns records into the response body under the request's options (the kubelet's
/// `logWriter`).
#[derive(Debug)]
pub struct Writer {
    since: Option<jiff::Timestamp>,
    timestamps: bool,
    /// Bytes still allowed (`limitBytes`), unlimited when `None`.
    remain: Option<u64>,
    /// The next record starts a logical line (the previous one was not partial).
    at_line_start: bool,
}

impl Writer {
    /// A writer for a request with these options.
    pub fn new(since: Option<jiff::Timestamp>, timestamps: bool, limit_bytes: Option<u64>) -> Self {
        Writer {
            since,
            timestamps,
            remain: limit_bytes,
            at_line_start: true,
        }
    }

    /// Appends what the client is shown of `r` to `out`.
    pub fn write(&mut self, r: &Record<'_>, out: &mut Vec<u8>) -> Written {
        let start_of_line = self.at_line_start;
        self.at_line_start = r.content.last().is_none_or(|&b| b == b'\n');
        if self.since.is_some_and(|since| r.timestamp < since) {
            return Written::More;
        }
        let mut line = Vec::new();
        if self.timestamps && start_of_line {
            // RFC 3339 with as many fraction digits as needed, as Go's RFC3339Nano prints
            line.extend_from_slice(format!("{} ", r.timestamp).as_bytes());
        }
        line.extend_from_slice(r.content);
        match &mut self.remain {
            None => {
                out.extend_from_slice(&line);
                Written::More
            }
            Some(remain) => {
                let n = line.len().min(*remain as usize);
                out.extend_from_slice(&line[..n]);
                *remain -= n as u64;
                if *remain == 0 {
                    Written::LimitReached
                } else {
                    Written::More
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ts(s: &str) -> jiff::Timestamp {
        s.parse().unwrap()
    }

    /// Runs `lines` through a writer, skipping malformed ones as the reader does.
    fn show(lines: &str, mut w: Writer) -> String {
        let mut out = Vec::new();
        for l in lines.split_inclusive('\n') {
            let Ok(r) = parse(l.as_bytes()) else { continue };
            if w.write(&r, &mut out) == Written::LimitReached {
                break;
            }
        }
        String::from_utf8(out).unwrap()
    }

    const FILE: &str = "2024-01-02T03:04:05.100000000Z stdout F one\n\
                        2024-01-02T03:04:06.000000000Z stderr P tw\n\
                        2024-01-02T03:04:06.500000000Z stderr F o\n\
                        2024-01-02T03:04:07.000000000Z stdout F three\n";

    #[test]
    fn a_full_record_keeps_its_newline_and_a_partial_one_loses_it() {
        let r = parse(b"2024-01-02T03:04:05.123456789Z stdout F hello world\n").unwrap();
        assert_eq!(r.timestamp, ts("2024-01-02T03:04:05.123456789Z"));
        assert_eq!((r.stream, r.content), ("stdout", &b"hello world\n"[..]));
        let r = parse(b"2024-01-02T03:04:05Z stderr P part\n").unwrap();
        assert_eq!((r.stream, r.content), ("stderr", &b"part"[..]));
    }

    #[test]
    fn extra_tags_after_a_colon_are_ignored() {
        let r = parse(b"2024-01-02T03:04:05Z stdout P:x:y part\n").unwrap();
        assert_eq!(r.content, b"part");
    }

    #[test]
    fn an_empty_full_record_is_an_empty_line() {
        let r = parse(b"2024-01-02T03:04:05Z stdout F \n").unwrap();
        assert_eq!(r.content, b"\n");
    }

    #[test]
    fn malformed_records_are_errors_naming_what_is_missing() {
        let e = |l: &[u8]| parse(l).unwrap_err();
        assert!(e(b"garbage\n").contains("timestamp is not found"));
        assert!(e(b"yesterday stdout F x\n").contains("unexpected timestamp format"));
        assert!(e(b"2024-01-02T03:04:05Z stdin F x\n").contains("unexpected stream type"));
        assert!(e(b"2024-01-02T03:04:05Z stdout\n").contains("stream type is not found"));
        assert!(e(b"2024-01-02T03:04:05Z stdout F\n").contains("log tag is not found"));
    }

    #[test]
    fn partial_records_are_joined_into_one_line() {
        assert_eq!(
            show(FILE, Writer::new(None, false, None)),
            "one\ntwo\nthree\n"
        );
    }

    #[test]
    fn malformed_lines_are_skipped_and_the_rest_is_shown() {
        let file = format!("not a record\n{FILE}2024 nonsense\n");
        assert_eq!(
            show(&file, Writer::new(None, false, None)),
            "one\ntwo\nthree\n"
        );
    }

    #[test]
    fn timestamps_prefix_each_logical_line_once_with_trimmed_fraction() {
        let want = "2024-01-02T03:04:05.1Z one\n\
                    2024-01-02T03:04:06Z two\n\
                    2024-01-02T03:04:07Z three\n";
        assert_eq!(show(FILE, Writer::new(None, true, None)), want);
    }

    #[test]
    fn since_drops_records_older_than_the_given_time() {
        let w = Writer::new(Some(ts("2024-01-02T03:04:06.2Z")), false, None);
        // the partial start of "two" is older, its end is not
        assert_eq!(show(FILE, w), "o\nthree\n");
    }

    #[test]
    fn limit_bytes_cuts_the_output_mid_line() {
        assert_eq!(show(FILE, Writer::new(None, false, Some(6))), "one\ntw");
        assert_eq!(show(FILE, Writer::new(None, false, Some(4))), "one\n");
    }
}
