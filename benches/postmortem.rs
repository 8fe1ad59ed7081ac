//! `postmortem`: how fast a ledger replays from NDJSON and how fast 1,000,000 records are
//! exported (plain and gzip). Floors, which fail the bench (exit 1) when missed: replay of a
//! 1,000,000-record export ≥ 500,000 records/s; an export of 1,000,000 records ≤ 2 s.
//!
//! The workload is the simulated busy node of the `fold` bench (1,000 pods adding,
//! syncing, failing, resyncing and going away), run long enough to reach a million records;
//! replay is also measured on the `fold` bench's own ten-minute mix, next to folding alone,
//! because replay decodes on a second thread and so cannot be faster than the fold. Replay's
//! parts are measured apart too: decoding alone, decoding with the handoff to a receiving
//! thread that folds nothing (with the decoder thread's CPU time, which the load of a shared
//! machine does not inflate), and folding alone. Under
//! `cargo test` (no `--bench` argument) it is a smoke run over a short simulation that
//! checks the numbers are computed, not their size.

use std::io::Write;
use std::sync::Arc;
use std::time::Instant;

use ledgerlet::core::record::Record;
use ledgerlet::core::Node;
use ledgerlet::ledger::codec::write_record;
use ledgerlet::ledger::export::{write_export, ExportWriter};
use ledgerlet::ledger::{Ledger, LedgerConfig};
use ledgerlet::postmortem::replay::ahead::{DecodeAhead, Decoded};
use ledgerlet::postmortem::replay::replay;
use ledgerlet::sim::scenarios::busy_node;

/// CPU seconds of `clock` (the process, or the calling thread).
fn cpu_s(clock: libc::clockid_t) -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid timespec for the call to fill.
    unsafe { libc::clock_gettime(clock, &mut ts) };
    ts.tv_sec as f64 + ts.tv_nsec as f64 * 1e-9
}

fn workload(target_records: usize, start_minutes: u64) -> (Vec<Arc<Record>>, Vec<u8>) {
    let mut minutes = start_minutes;
    loop {
        let sim = busy_node(1_000, minutes * 60 * 1000);
        let records: Vec<Arc<Record>> = sim.engine().ledger().since(0).cloned().collect();
        if records.len() >= target_records || minutes >= 24 * 60 || target_records == usize::MAX / 2
        {
            let mut text = Vec::with_capacity(records.len() * 400);
            for r in records.iter().take(target_records) {
                write_record(&mut text, r).unwrap();
            }
            let records = records.into_iter().take(target_records).collect();
            return (records, text);
        }
        minutes =
            (minutes * target_records as u64 / records.len().max(1) as u64 + 1).max(minutes + 1);
    }
}

fn main() {
    let full = std::env::args().any(|a| a == "--bench");
    let n = if full { 1_000_000 } else { 20_000 };
    // replay of the fold bench's workload (the realistic mix the fold bench measures),
    // first, while the process's heap is as fresh as the fold bench's: after the
    // million-record workload below is built, even the plain fold of this mix runs markedly
    // slower in the same process (a fragmented heap)
    if full {
        let (mix, mix_text) = workload(usize::MAX / 2, 10);
        // a pass takes tens of milliseconds: the best of five of each, as for the full replay
        // below (the first pass of a process pays its page faults)
        let (mut s, mut fold_s, mut records_folded) = (f64::MAX, f64::MAX, 0);
        for _ in 0..5 {
            let t = Instant::now();
            let r = replay(&mix_text[..], None).expect("the workload replays");
            s = s.min(t.elapsed().as_secs_f64());
            records_folded = r.records_folded;
            drop(r);
            let t = Instant::now();
            let mut node = Node::default();
            for rec in &mix {
                std::hint::black_box(ledgerlet::core::fold(&mut node, rec));
            }
            fold_s = fold_s.min(t.elapsed().as_secs_f64());
        }
        let per_s = records_folded as f64 / s;
        println!(
            "replay (fold bench mix, {} records): {:.3} s: {:.0} records/s, {:.0} % of folding alone ({:.0} records/s): replay is bound by the fold (the replay floor is on the million-record ledger below)",
            records_folded,
            s,
            per_s,
            fold_s / s * 100.0,
            records_folded as f64 / fold_s
        );
    }

    let started = Instant::now();
    let (records, text) = workload(n, 10);
    eprintln!(
        "postmortem: workload of {} records ({:.0} MiB of NDJSON, {:.0} bytes/record) built in {:.1} s",
        records.len(),
        text.len() as f64 / (1024.0 * 1024.0),
        text.len() as f64 / records.len() as f64,
        started.elapsed().as_secs_f64()
    );

    // replay: decode + dense-seq checks + fold, from the NDJSON bytes
    let rounds = if full { 3 } else { 1 };
    let mut best = f64::MAX;
    for _ in 0..rounds {
        let t = Instant::now();
        let r = replay(&text[..], None).expect("the workload replays");
        let s = t.elapsed().as_secs_f64();
        assert_eq!(r.records_folded as usize, records.len());
        best = best.min(s);
    }
    let per_s = records.len() as f64 / best;
    let mut missed = Vec::new();
    if full && per_s < 500_000.0 {
        missed.push(format!("replay {per_s:.0} records/s is under 500000"));
    }
    println!(
        "replay: {} records in {:.3} s: {:.0} records/s (floor >= 500000: {})",
        records.len(),
        best,
        per_s,
        if !full {
            "smoke run"
        } else if per_s >= 500_000.0 {
            "met"
        } else {
            "MISSED"
        }
    );

    // where the time goes: decoding alone, decoding and handing over to a fold thread that
    // does nothing (replay's pipeline without the fold), folding alone
    {
        let t = Instant::now();
        let cpu0 = cpu_s(libc::CLOCK_PROCESS_CPUTIME_ID);
        let n = ledgerlet::ledger::Reader::<_, Node>::new(&text[..]).count();
        let decode_s = t.elapsed().as_secs_f64();
        let decode_cpu_s = cpu_s(libc::CLOCK_PROCESS_CPUTIME_ID) - cpu0;
        assert_eq!(n, records.len());
        let t = Instant::now();
        let cpu0 = cpu_s(libc::CLOCK_PROCESS_CPUTIME_ID);
        let this0 = cpu_s(libc::CLOCK_THREAD_CPUTIME_ID);
        let mut handed = 0;
        std::thread::scope(|scope| {
            let decoder = DecodeAhead::spawn(scope, &text[..], None);
            while let Some(d) = decoder.recv() {
                if let Decoded::Records(batch) = d {
                    handed += batch.len();
                    decoder.give_back(batch);
                }
            }
            decoder.finish();
        });
        let pipe_s = t.elapsed().as_secs_f64();
        let this_cpu_s = cpu_s(libc::CLOCK_THREAD_CPUTIME_ID) - this0;
        let decoder_cpu_s = cpu_s(libc::CLOCK_PROCESS_CPUTIME_ID) - cpu0 - this_cpu_s;
        assert_eq!(handed, records.len());
        let t = Instant::now();
        let mut node = Node::default();
        for r in &records {
            std::hint::black_box(ledgerlet::core::fold(&mut node, r));
        }
        let fold_s = t.elapsed().as_secs_f64();
        let per_s = |s: f64| n as f64 / s;
        println!(
            "replay parts: decode alone {n} lines {decode_s:.3} s ({:.0} lines/s; {:.0} lines per CPU-second); \
             decode + handoff, no fold {pipe_s:.3} s ({:.0} records/s; decoder thread {:.0} records per CPU-second, \
             receiving thread {this_cpu_s:.3} CPU-s); fold alone {fold_s:.3} s ({:.0} records/s)",
            per_s(decode_s),
            per_s(decode_cpu_s),
            per_s(pipe_s),
            per_s(decoder_cpu_s),
            per_s(fold_s),
        );
    }

    // export: the records retained by a ledger, with its snapshot, to a file
    let mut ledger: Ledger<Node> = Ledger::new(
        LedgerConfig {
            max_records: usize::MAX / 2,
            max_bytes: u64::MAX,
            snapshot_every_records: u64::MAX,
            ..LedgerConfig::default()
        },
        0,
    );
    for r in &records {
        ledger.append(r.at, r.cause, r.trace, r.event.clone());
    }
    let dir = tempfile::tempdir().unwrap();
    for name in ["export.ndjson", "export.ndjson.gz"] {
        let path = dir.path().join(name);
        let t = Instant::now();
        let (snap, recs) = ledger.export_base(0);
        let mut w = ExportWriter::create(&path).unwrap();
        let stats = write_export(&mut w, snap.as_deref(), recs.iter()).unwrap();
        w.flush().unwrap();
        w.finish().unwrap();
        let s = t.elapsed().as_secs_f64();
        let size = std::fs::metadata(&path).unwrap().len();
        assert_eq!(stats.records as usize, records.len());
        println!(
            "export {name}: {} records in {:.3} s ({:.0} MiB; floor <= 2 s for 1000000: {})",
            stats.records,
            s,
            size as f64 / (1024.0 * 1024.0),
            if !full {
                "smoke run"
            } else if s <= 2.0 {
                "met"
            } else {
                "MISSED"
            }
        );
        if full && s > 2.0 {
            missed.push(format!("export {name} took {s:.3} s, over 2 s"));
        }
    }
    if !missed.is_empty() {
        eprintln!("postmortem: floor missed: {}", missed.join("; "));
        std::process::exit(1);
    }
}
