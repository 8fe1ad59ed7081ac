//! The core is pure (ARCHITECTURE.md): nothing under `src/core/` names the ledger, does
//! I/O, reads a clock, uses randomness, spawns, keeps process-wide mutable state, or uses a
//! hash map (whose iteration order could reach commands, events or exported state). This test reads
//! every source file under `src/core/` and fails on any use of the APIs that would do so,
//! except the few named in [`ALLOWED`], each with its reason.

use std::path::{Path, PathBuf};

/// What may not appear in core code, and why.
const FORBIDDEN: &[(&str, &str)] = &[
    ("std::fs", "file I/O"),
    ("File::", "file I/O"),
    ("std::net", "network I/O"),
    ("std::io", "I/O"),
    ("std::process", "processes"),
    ("std::env", "the environment"),
    ("std::thread", "threads"),
    ("spawn(", "spawning"),
    ("tokio", "the async runtime"),
    ("Instant", "a monotonic clock"),
    ("SystemTime", "the wall clock"),
    ("::now(", "a clock read"),
    ("from_system", "a clock read"),
    ("rand::", "randomness"),
    ("getrandom", "randomness"),
    ("RandomState", "randomness"),
    ("HashMap", "hash map iteration order"),
    ("HashSet", "hash set iteration order"),
    ("println!", "writing to stdout"),
    ("eprintln!", "writing to stderr"),
    ("dbg!", "writing to stderr"),
    ("static mut", "process-wide mutable state"),
    ("thread_local!", "per-thread state"),
    ("Atomic", "process-wide mutable state"),
    ("Mutex", "shared mutable state"),
    ("OnceLock", "process-wide state"),
    ("crate::ledger", "the ledger, which depends on the core"),
];

/// (file under `src/core/`, forbidden pattern): uses that are pure, and why.
const ALLOWED: &[(&str, &str, &str)] = &[(
    "plan/hash.rs",
    "std::io",
    "an in-memory FNV-1a hasher implements io::Write so serde_json can write into it",
)];

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).expect("read src/core") {
        let path = entry.expect("dir entry").path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// The forbidden uses in `text` (the source of `file`, relative to `src/core/`), as
/// `file:line: pattern (why)`. Comment lines are skipped.
fn violations(file: &str, text: &str) -> Vec<String> {
    let mut found = Vec::new();
    for (n, line) in text.lines().enumerate() {
        let code = line.trim_start();
        if code.starts_with("//") {
            continue;
        }
        let code = code.split(" // ").next().unwrap_or(code);
        for (pattern, why) in FORBIDDEN {
            if code.contains(pattern) && !ALLOWED.iter().any(|(f, p, _)| *f == file && p == pattern)
            {
                found.push(format!("src/core/{file}:{}: {pattern} ({why})", n + 1));
            }
        }
    }
    found
}

#[test]
fn the_core_does_no_io_reads_no_clock_uses_no_randomness_spawns_nothing_and_has_no_hash_maps() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR")).join("src/core");
    let mut files = Vec::new();
    rust_files(&root, &mut files);
    assert!(
        files.len() > 50,
        "only {} files under src/core",
        files.len()
    );
    let mut found = Vec::new();
    for path in &files {
        let rel = path
            .strip_prefix(&root)
            .expect("under src/core")
            .to_string_lossy()
            .replace('\\', "/");
        let text = std::fs::read_to_string(path).expect("read source");
        found.extend(violations(&rel, &text));
    }
    assert!(
        found.is_empty(),
        "the core must stay pure:\n{}",
        found.join("\n")
    );
}

#[test]
fn the_purity_check_finds_a_clock_read_a_hash_map_and_a_spawn() {
    let text = "fn f() {\n    let t = std::time::Instant::now();\n    // HashMap in a comment is fine\n    let m: HashMap<u8, u8> = HashMap::new();\n    std::thread::spawn(|| ());\n}\n";
    let found = violations("node.rs", text);
    assert!(found.iter().any(|v| v.contains(":2: Instant")), "{found:?}");
    assert!(found.iter().any(|v| v.contains(":4: HashMap")), "{found:?}");
    assert!(
        found.iter().any(|v| v.contains(":5: std::thread")),
        "{found:?}"
    );
    assert!(!found.iter().any(|v| v.contains(":3:")), "{found:?}");
    // an allowance is for its file only
    assert!(violations("plan/hash.rs", "impl std::io::Write for Fnv {}").is_empty());
    assert!(!violations("node.rs", "impl std::io::Write for Fnv {}").is_empty());
    // so is the shell's clock, and any name of the ledger's
    assert!(!violations("node.rs", "let t = Time::from_system();").is_empty());
    assert!(!violations("node.rs", "use crate::ledger::Time;").is_empty());
    // process-wide mutable state is found wherever it is
    assert!(!violations("uid_map.rs", "static N: AtomicU64 = AtomicU64::new(1);").is_empty());
}
