//! The ledger's byte bound (`--ledger-max-bytes`, `LedgerConfig::max_bytes`) is the heap its
//! retained records really hold, so the bound an operator sets is the memory the history
//! costs. The records are those of a node under load, taken from a real run: a pod of the
//! API server (with its status, as the node keeps it) in an `UpdatePod`, and the runtime's view
//! of it. A counting allocator measures what the retained ledger holds, each allocation
//! counted as the chunk glibc's malloc gives it.
//!
//! One test in this binary: the allocator's count is process-wide.

use std::alloc::{GlobalAlloc, Layout, System};
use std::sync::atomic::{AtomicIsize, Ordering};
use std::sync::Arc;

use ledgerlet::ledger::codec::decode_line;
use ledgerlet::ledger::shared::clear_interned;
use ledgerlet::ledger::{Ledger, LedgerConfig, Line};

struct Counting;

static LIVE_BYTES: AtomicIsize = AtomicIsize::new(0);

/// The chunk glibc's malloc takes for a request: an 8-byte header, 16-byte aligned, at
/// least 32 bytes.
fn chunk(size: usize) -> isize {
    ((size + 8 + 15) & !15).max(32) as isize
}

unsafe impl GlobalAlloc for Counting {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        if !p.is_null() {
            LIVE_BYTES.fetch_add(chunk(layout.size()), Ordering::Relaxed);
        }
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc_zeroed(layout) };
        if !p.is_null() {
            LIVE_BYTES.fetch_add(chunk(layout.size()), Ordering::Relaxed);
        }
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) };
        LIVE_BYTES.fetch_sub(chunk(layout.size()), Ordering::Relaxed);
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        if !p.is_null() {
            LIVE_BYTES.fetch_add(chunk(new_size) - chunk(layout.size()), Ordering::Relaxed);
        }
        p
    }
}

#[global_allocator]
static ALLOCATOR: Counting = Counting;

/// `n` pairs of records like the fixture's: each pod a version of its own (as every status
/// update makes one), each runtime view of its own.
fn busy_node_lines(n: usize) -> Vec<String> {
    let fixture = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("tests/fixtures/ledger_memory.ndjson"),
    )
    .expect("the fixture");
    let templates: Vec<serde_json::Value> = fixture
        .lines()
        .map(|l| serde_json::from_str(l).expect("a fixture line"))
        .collect();
    assert_eq!(
        templates.len(),
        2,
        "an UpdatePod and a RuntimeStatusObserved"
    );
    let mut lines = Vec::with_capacity(2 * n);
    for i in 0..n {
        for (j, template) in templates.iter().enumerate() {
            let mut v = template.clone();
            let seq = (2 * i + j + 1) as u64;
            v["seq"] = seq.into();
            v["cause"] = serde_json::Value::Null;
            let event = &mut v["event"];
            if let Some(pod) = event.get_mut("pod") {
                pod["metadata"]["resourceVersion"] = format!("{}", 1000 + i).into();
            }
            if let Some(status) = event.get_mut("status") {
                status["name"] = format!("steady-ledgerlet-{i}").into();
            }
            lines.push(v.to_string());
        }
    }
    lines
}

#[test]
fn the_ledgers_byte_bound_is_the_heap_its_retained_records_hold() {
    let lines = busy_node_lines(400);
    let before = LIVE_BYTES.load(Ordering::Relaxed);
    let records: Vec<Arc<_>> = lines
        .iter()
        .enumerate()
        .map(
            |(i, l)| match decode_line::<()>(l, i as u64 + 1).expect("decode") {
                Line::Record(r) => Arc::new(r),
                Line::Snapshot(_) => unreachable!("records only"),
            },
        )
        .collect();
    clear_interned();
    let ledger: Ledger<()> = Ledger::resume(LedgerConfig::default(), None, records);
    let held = (LIVE_BYTES.load(Ordering::Relaxed) - before) as f64;
    let stats = ledger.stats();
    assert_eq!(stats.retained_records, lines.len(), "nothing evicted");
    let counted = stats.retained_bytes as f64;
    let ratio = counted / held;
    eprintln!(
        "{} records: counted {counted} bytes, held {held} bytes (counted / held {ratio:.2})",
        stats.retained_records
    );
    assert!(
        (0.8..=1.25).contains(&ratio),
        "the ledger counts {counted} bytes for records that hold {held} bytes of heap \
         (counted / held {ratio:.2})"
    );
    drop(ledger);
}
