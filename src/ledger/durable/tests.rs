use std::io::Write;
use std::sync::Arc;
use std::time::Duration;

use super::*;
use crate::core::record::event::{PlegEvent, PlegEventKind};
use crate::core::record::{Event, Time};
use crate::core::Uid;
use crate::ledger::codec::{Line, Reader};
use crate::ledger::{Ledger, LedgerConfig};

fn event(i: u64) -> Event {
    Event::PlegEvent(PlegEvent {
        uid: Uid::new("pod-a"),
        kind: PlegEventKind::ContainerStarted,
        container_id: Some(format!("{i:064x}")),
    })
}

fn config(dir: &Path, segment: u64, budget: u64) -> DurableConfig {
    DurableConfig {
        fsync_period_ms: 10,
        segment_max_bytes: segment,
        dir_max_bytes: budget,
        ..DurableConfig::new(dir)
    }
}

/// Appends `n` records through a ledger whose state is the number of records folded,
/// taking snapshots whenever the ledger or the writer asks, as the engine does. The writer
/// is flushed every 50 records: a live agent appends far slower than the disk writes, and a
/// segment only closes at the first snapshot after the writer saw it full.
fn append(ledger: &mut Ledger<u64>, w: &DurableWriter<u64>, n: u64) {
    for i in 0..n {
        if i % 50 == 0 {
            assert!(w.flush(Duration::from_secs(10)));
        }
        let seq = ledger.last_seq() + 1;
        let r = ledger.append(Time::from_unix_secs(seq as i64), None, None, event(seq));
        w.append(r);
        if ledger.wants_snapshot() || w.wants_snapshot() {
            ledger.store_snapshot(Arc::new(ledger.last_seq()));
            w.snapshot(ledger.snapshots().last().unwrap().clone());
        }
    }
}

fn big_ledger() -> LedgerConfig {
    LedgerConfig {
        max_records: 1_000_000,
        max_bytes: 1 << 30,
        snapshot_every_records: 100_000,
        follower_buffer_records: 16,
    }
}

fn replay_seqs(dir: &Path) -> (Option<u64>, Vec<u64>) {
    let mut snap = None;
    let mut seqs = Vec::new();
    for l in Reader::<_, u64>::new(open_dir(dir).unwrap()) {
        match l.unwrap() {
            Line::Snapshot(s) => snap = Some(s.seq),
            Line::Record(r) => seqs.push(r.seq),
        }
    }
    (snap, seqs)
}

/// Writes `n` records into a fresh directory with `segment`-byte segments.
fn written(segment: u64, n: u64) -> (tempfile::TempDir, DurableConfig) {
    let dir = tempfile::tempdir().unwrap();
    let cfg = config(dir.path(), segment, 1 << 30);
    let mut ledger: Ledger<u64> = Ledger::new(big_ledger(), 0);
    let w = DurableWriter::<u64>::start(cfg.clone(), None).unwrap();
    append(&mut ledger, &w, n);
    assert!(w.flush(Duration::from_secs(10)));
    (dir, cfg)
}

fn dir_bytes(dir: &Path) -> u64 {
    list_segments(dir).unwrap().iter().map(|s| s.2).sum()
}

#[test]
fn segments_rotate_at_a_snapshot_and_the_directory_replays_densely() {
    let (dir, _) = written(8 * 1024, 2_000);
    let segs = list_segments(dir.path()).unwrap();
    assert!(segs.len() > 5, "{segs:?}");
    assert_eq!(segs[0].0, 1, "the first segment starts at seq 1");
    let (snap, seqs) = replay_seqs(dir.path());
    assert_eq!(snap, None, "the whole history is there: no snapshot needed");
    assert_eq!(seqs, (1..=2_000).collect::<Vec<_>>());
    // every later segment starts with the snapshot of the state before it
    for (first, path, _) in &segs[1..] {
        let text = std::fs::read_to_string(path).unwrap();
        let first_line = text.lines().next().unwrap();
        let Ok(Line::Snapshot(s)) = crate::ledger::codec::decode_line::<u64>(first_line, 1) else {
            panic!("{} does not start with a snapshot", path.display())
        };
        assert_eq!(s.seq + 1, *first);
        assert_eq!(s.state, s.seq, "the state folded up to the snapshot");
    }
    // start-up loads the newest snapshot and the tail after it
    let loaded = load::<u64>(dir.path()).unwrap();
    let snap = loaded.snapshot.as_ref().expect("a snapshot");
    assert_eq!(snap.seq + 1, segs.last().unwrap().0);
    assert_eq!(loaded.records.first().unwrap().seq, snap.seq + 1);
    assert_eq!(loaded.last_seq(), 2_000);
    assert!(loaded.torn.is_empty());
}

#[test]
fn the_directory_stays_within_its_byte_budget_and_still_replays() {
    let dir = tempfile::tempdir().unwrap();
    let (segment, budget) = (16 * 1024, 64 * 1024);
    let cfg = config(dir.path(), segment, budget);
    let mut ledger: Ledger<u64> = Ledger::new(big_ledger(), 0);
    let w = DurableWriter::<u64>::start(cfg, None).unwrap();
    let mut peak = 0;
    for _ in 0..50 {
        append(&mut ledger, &w, 1_000);
        assert!(w.flush(Duration::from_secs(10)));
        peak = peak.max(dir_bytes(dir.path()));
    }
    drop(w);
    // rotation happens at the first snapshot after the writer saw a segment full, so the
    // newest segment may exceed its size by what was queued meanwhile (here < 50 records)
    assert!(peak <= budget + 50 * 256, "peak {peak}");
    let oldest = list_segments(dir.path()).unwrap()[0].0;
    assert!(oldest > 1, "old segments were deleted");
    let (snap, seqs) = replay_seqs(dir.path());
    let snap = snap.expect("the oldest kept segment starts with a snapshot");
    assert_eq!(seqs.first(), Some(&(snap + 1)));
    assert_eq!(seqs.last(), Some(&50_000));
    assert!(seqs.windows(2).all(|w| w[1] == w[0] + 1), "dense");
}

#[test]
fn a_torn_last_record_is_reported_cut_off_and_appending_continues_after_it() {
    let (dir, cfg) = written(1 << 20, 10);
    let (_, path, len) = list_segments(dir.path()).unwrap().pop().unwrap();
    let mut segment = std::fs::OpenOptions::new()
        .append(true)
        .open(&path)
        .unwrap();
    segment.write_all(b"{\"seq\":11,\"at\":\"2026-").unwrap();
    let loaded = load::<u64>(dir.path()).unwrap();
    assert_eq!(loaded.last_seq(), 10);
    assert_eq!(loaded.torn.len(), 1);
    let t = &loaded.torn[0];
    assert_eq!((t.line, t.bytes_dropped), (11, 21));
    assert!(t.what.contains("torn"), "{t}");
    assert_eq!(std::fs::metadata(&path).unwrap().len(), len, "truncated");
    // the writer continues the same segment after the last good record
    let w = DurableWriter::<u64>::start(cfg, loaded.current.clone()).unwrap();
    let records = loaded.records.into_iter().map(Arc::new).collect();
    let mut ledger: Ledger<u64> = Ledger::resume(big_ledger(), None, records);
    append(&mut ledger, &w, 5);
    drop(w);
    assert_eq!(replay_seqs(dir.path()).1, (1..=15).collect::<Vec<_>>());
}

#[test]
fn a_garbled_record_in_the_middle_cuts_the_tail_there() {
    let (dir, _) = written(1 << 20, 10);
    let (_, path, _) = list_segments(dir.path()).unwrap().pop().unwrap();
    let text = std::fs::read_to_string(&path).unwrap();
    let mut lines: Vec<&str> = text.lines().collect();
    lines[6] = "{\"seq\":7,\"garbage";
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    let loaded = load::<u64>(dir.path()).unwrap();
    assert_eq!(loaded.last_seq(), 6);
    assert_eq!(loaded.torn[0].line, 7);
}

#[test]
fn a_newest_segment_without_a_readable_start_is_set_aside_and_the_previous_one_resumes() {
    let (dir, _) = written(4 * 1024, 200);
    let segs = list_segments(dir.path()).unwrap();
    let next = segment_name(201);
    // a crash right after a rotation created the file: half a snapshot line
    std::fs::write(dir.path().join(&next), b"{\"seq\":200,\"at\":\"20").unwrap();
    let loaded = load::<u64>(dir.path()).unwrap();
    assert_eq!(loaded.last_seq(), 200);
    assert_eq!(loaded.current.as_ref().unwrap().0, segs.last().unwrap().1);
    let set_aside = loaded.torn[0].segment.to_string_lossy();
    assert!(set_aside.ends_with(".unusable"), "{set_aside}");
    assert!(!dir.path().join(&next).exists());
}

#[test]
fn an_empty_or_missing_directory_loads_as_a_fresh_ledger() {
    let dir = tempfile::tempdir().unwrap();
    let loaded = load::<u64>(&dir.path().join("new")).unwrap();
    assert_eq!(loaded.last_seq(), 0);
    assert!(loaded.current.is_none() && loaded.torn.is_empty());
    assert!(dir.path().join("new").is_dir());
}

#[test]
fn settings_that_cannot_work_are_rejected_by_flag_name() {
    let dir = tempfile::tempdir().unwrap();
    let mut c = DurableConfig::new(dir.path());
    assert!(c.validate().is_ok());
    c.dir_max_bytes = c.segment_max_bytes;
    let e = c.validate().unwrap_err();
    assert!(e.contains("--ledger-dir-max-bytes"), "{e}");
    c = DurableConfig::new(dir.path());
    c.fsync_period_ms = 0;
    let e = c.validate().unwrap_err();
    assert!(e.contains("--ledger-fsync-period-ms"), "{e}");
}

#[test]
fn defaults_are_pinned() {
    let c = DurableConfig::new("/x");
    assert_eq!((c.fsync_period_ms, c.queue_records), (100, 65_536));
    assert_eq!((c.segment_max_bytes, c.dir_max_bytes), (64 << 20, 1 << 30));
}
