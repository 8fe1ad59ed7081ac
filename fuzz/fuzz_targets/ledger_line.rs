//! The ledger's NDJSON decoders on arbitrary bytes, with the snapshot state the agent uses
//! (`ledgerlet::core::Node`):
//! - `ledger::codec::decode_line` on the whole input and on each of its lines (the
//!   durable ledger's start-up load decodes lines this way; it tries the hand-written fast
//!   path, then the one-pass and two-pass serde decoders);
//! - `ledger::Reader` (the replay/export stream) over the bytes, through a `BufReader`
//!   whose capacity (picked from the input's length) splits lines across buffer fills.
//!
//! Must not panic or stall. One invariant besides: a decoded record re-encoded with
//! `encode_record` decodes to the same record (replay and export re-encode what they read).
//!
//! Seeds: `LEDGERLET_FUZZ_WRITE_SEEDS=DIR <this binary> -runs=0` writes into DIR one line
//! of each kind the simulator's busy node records (`sim::scenarios::busy_node`), and a
//! snapshot of its state: regenerate fuzz/seeds/ledger_line/sim-* when the schema changes.
#![no_main]

use std::io::BufReader;

use ledgerlet::core::Node;
use ledgerlet::ledger::codec::{decode_line, encode_record};
use ledgerlet::ledger::{Line, Reader};
use libfuzzer_sys::fuzz_target;

fn check(text: &str, line_no: u64) {
    let Ok(line) = decode_line::<Node>(text, line_no) else {
        return;
    };
    if let Line::Record(r) = &line {
        let again = encode_record(r);
        match decode_line::<Node>(&again, line_no) {
            Ok(back) => assert_eq!(back, line, "re-encoded as {again}"),
            Err(e) => panic!("a decoded record re-encoded does not decode: {e}\n{again}"),
        }
    }
}

/// One line per kind (and a snapshot line) from a simulated busy node, into `dir`.
fn write_seeds(dir: &std::path::Path) {
    use ledgerlet::ledger::codec::write_snapshot;
    use ledgerlet::ledger::Snapshot;
    let sim = ledgerlet::sim::scenarios::busy_node(14, 400_000);
    let ledger = sim.engine().ledger();
    std::fs::create_dir_all(dir).expect("seed dir");
    let mut seen = std::collections::BTreeSet::new();
    let mut last = None;
    for r in ledger.since(0) {
        if seen.insert(r.event.kind()) {
            let path = dir.join(format!("sim-{}.ndjson", r.event.kind()));
            std::fs::write(path, encode_record(r) + "\n").expect("seed");
        }
        last = Some(r.clone());
    }
    // a snapshot of the folded state as an export's first line, then the next record
    if let Some(last) = last {
        let mut out = Vec::new();
        let snap = Snapshot { seq: last.seq, at: last.at, state: sim.engine().node().clone() };
        write_snapshot(&mut out, &snap).expect("to a Vec");
        let mut next = (*last).clone();
        next.seq = last.seq + 1;
        out.extend_from_slice(encode_record(&next).as_bytes());
        out.push(b'\n');
        std::fs::write(dir.join("sim-snapshot-then-record.ndjson"), out).expect("seed");
    }
    eprintln!("wrote {} kinds to {}: {:?}", seen.len(), dir.display(), seen);
}

fuzz_target!(init: {
    if let Some(dir) = std::env::var_os("LEDGERLET_FUZZ_WRITE_SEEDS") {
        write_seeds(std::path::Path::new(&dir));
    }
}, |data: &[u8]| {
    if let Ok(text) = std::str::from_utf8(data) {
        check(text, 1);
        if text.contains('\n') {
            for (i, l) in text.split('\n').enumerate() {
                check(l.trim_end_matches('\r'), i as u64 + 1);
            }
        }
    }
    let capacity = [1, 7, 64, 333, 1 << 16][data.len() % 5];
    let reader = Reader::<_, Node>::new(BufReader::with_capacity(capacity, data));
    for (n, line) in reader.enumerate() {
        if let Err(e) = line {
            drop(e.to_string());
        }
        assert!(n <= data.len(), "more lines than bytes");
    }
});
