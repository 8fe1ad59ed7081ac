//! Real peers for the observability tests: the `rotel` OTLP receiver (PyPI), `promtool` and
//! `prometheus` (Debian's `prometheus` package). `scripts/test.sh` installs them when
//! missing; under `CI=true` a missing peer fails the test, otherwise the test says loudly
//! that it was skipped.
//!
//! Owns finding the peers, running rotel and reading the spans it logs.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::io::Read;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// `Some(path)` if found; `None` (after a loud message) if missing outside CI; panics in CI.
pub fn require(name: &str, found: Option<PathBuf>, how: &str) -> Option<PathBuf> {
    if let Some(p) = found {
        return Some(p);
    }
    if std::env::var("CI").as_deref() == Ok("true") {
        panic!("{name} is required under CI=true but was not found ({how}); scripts/test.sh installs it as root");
    }
    eprintln!("SKIPPED: {name} not found ({how}); run scripts/test.sh as root to install it");
    None
}

fn which(bin: &str) -> Option<PathBuf> {
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join(bin))
            .find(|p| p.is_file())
    })
}

/// The `rotel-agent` binary the PyPI package ships (`$ROTEL_AGENT`, or next to the
/// installed `rotel` Python module).
pub fn rotel() -> Option<PathBuf> {
    let found = std::env::var_os("ROTEL_AGENT")
        .map(PathBuf::from)
        .filter(|p| p.is_file())
        .or_else(|| {
            let out = Command::new("python3")
                .args([
                    "-c",
                    "import os, rotel; print(os.path.join(os.path.dirname(rotel.__file__), 'rotel-agent'))",
                ])
                .stderr(Stdio::null())
                .output()
                .ok()?;
            let p = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
            p.is_file().then_some(p)
        });
    require("rotel (PyPI)", found, "pip install rotel")
}

/// `promtool` from Debian's `prometheus` package.
pub fn promtool() -> Option<PathBuf> {
    require("promtool", which("promtool"), "apt-get install prometheus")
}

/// `prometheus` from Debian's `prometheus` package.
pub fn prometheus() -> Option<PathBuf> {
    require(
        "prometheus",
        which("prometheus"),
        "apt-get install prometheus",
    )
}

/// A free TCP port on 127.0.0.1 (bound and released).
pub fn free_port() -> u16 {
    TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}

fn wait_port(port: u16, what: &str, log: &Path) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
        assert!(
            Instant::now() < deadline,
            "{what} did not listen on {port}:\n{}",
            std::fs::read_to_string(log).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// A running rotel agent receiving OTLP/gRPC and logging every span it receives.
pub struct Rotel {
    child: Child,
    pub port: u16,
    /// Its OTLP/HTTP receiver's port.
    pub http_port: u16,
    pub log: PathBuf,
}

impl Rotel {
    /// Starts `rotel-agent start` on a free port with the detailed trace debug log on stdout.
    pub fn start(bin: &Path, dir: &Path) -> Rotel {
        let port = free_port();
        let http_port = free_port();
        let log = dir.join("rotel.log");
        let out = std::fs::File::create(&log).unwrap();
        let child = Command::new(bin)
            .arg("start")
            .args(["--otlp-grpc-endpoint", &format!("127.0.0.1:{port}")])
            .args(["--otlp-http-endpoint", &format!("127.0.0.1:{http_port}")])
            .args(["--exporter", "blackhole"])
            .args(["--debug-log", "traces", "--debug-log-verbosity", "detailed"])
            .args(["--pid-file", dir.join("rotel.pid").to_str().unwrap()])
            .args(["--log-file", dir.join("rotel-daemon.log").to_str().unwrap()])
            .env("NO_COLOR", "1")
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn()
            .expect("start rotel-agent");
        wait_port(port, "rotel", &log);
        wait_port(http_port, "rotel's OTLP/HTTP receiver", &log);
        Rotel {
            child,
            port,
            http_port,
            log,
        }
    }

    /// The endpoint for `--tracing-endpoint`.
    pub fn endpoint(&self) -> String {
        format!("127.0.0.1:{}", self.port)
    }

    /// The base URI of its OTLP/HTTP receiver (for `OTEL_EXPORTER_OTLP_ENDPOINT`).
    pub fn http_base(&self) -> String {
        format!("http://127.0.0.1:{}", self.http_port)
    }

    /// Every span logged so far.
    pub fn spans(&self) -> Vec<Span> {
        let mut text = String::new();
        std::fs::File::open(&self.log)
            .unwrap()
            .read_to_string(&mut text)
            .unwrap();
        parse_spans(&text)
    }

    /// Waits up to `secs` for `check` over the spans logged so far.
    pub fn wait_for<T>(
        &self,
        what: &str,
        secs: u64,
        mut check: impl FnMut(&[Span]) -> Option<T>,
    ) -> T {
        let deadline = Instant::now() + Duration::from_secs(secs);
        loop {
            let spans = self.spans();
            if let Some(v) = check(&spans) {
                return v;
            }
            if Instant::now() > deadline {
                let names: BTreeMap<&str, usize> =
                    spans.iter().fold(BTreeMap::new(), |mut m, s| {
                        *m.entry(s.name.as_str()).or_default() += 1;
                        m
                    });
                panic!("timed out after {secs}s waiting for {what}; rotel received {} spans: {names:?}", spans.len());
            }
            std::thread::sleep(Duration::from_millis(200));
        }
    }
}

impl Drop for Rotel {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One span as rotel logs it.
#[derive(Clone, Debug, Default)]
pub struct Span {
    pub trace_id: String,
    pub parent_id: String,
    pub id: String,
    pub name: String,
    pub kind: String,
    pub attributes: BTreeMap<String, String>,
    pub events: Vec<String>,
}

fn strip_value(v: &str) -> String {
    // Str(x) / Int(1) / Bool(true) / Double(1.5)
    match v.split_once('(') {
        Some((_, rest)) if rest.ends_with(')') => rest[..rest.len() - 1].to_string(),
        _ => v.to_string(),
    }
}

/// Parses rotel's detailed trace debug log.
pub fn parse_spans(text: &str) -> Vec<Span> {
    let mut spans = Vec::new();
    let mut cur: Option<Span> = None;
    let mut section = "";
    for line in text.lines() {
        if line.starts_with("Span #") {
            if let Some(s) = cur.take() {
                spans.push(s);
            }
            cur = Some(Span::default());
            section = "";
            continue;
        }
        if line.starts_with("ResourceSpans #") || line.starts_with("ScopeSpans #") {
            if let Some(s) = cur.take() {
                spans.push(s);
            }
            continue;
        }
        let Some(s) = cur.as_mut() else { continue };
        let field = |prefix: &str| {
            line.trim_start()
                .strip_prefix(prefix)
                .map(|v| v.trim().to_string())
        };
        if let Some(v) = field("Trace ID       :") {
            s.trace_id = v;
        } else if let Some(v) = field("Parent ID      :") {
            s.parent_id = v;
        } else if let Some(v) = field("ID             :") {
            s.id = v;
        } else if let Some(v) = field("Name           :") {
            s.name = v;
        } else if let Some(v) = field("Kind           :") {
            s.kind = v;
        } else if line.starts_with("Attributes:") {
            section = "attributes";
        } else if line.starts_with("Events:") {
            section = "events";
        } else if line.starts_with("Links:") {
            section = "links";
        } else if section == "attributes" && line.starts_with("     -> ") {
            if let Some((k, v)) = line["     -> ".len()..].split_once(": ") {
                s.attributes.insert(k.to_string(), strip_value(v));
            }
        } else if section == "events" && line.trim_start().starts_with("-> Name: ") {
            s.events
                .push(line.trim_start()["-> Name: ".len()..].to_string());
        } else if section == "events" && line.starts_with("          -> ") {
            if let Some(e) = s.events.last_mut() {
                e.push_str(" | ");
                e.push_str(line.trim());
            }
        }
    }
    if let Some(s) = cur.take() {
        spans.push(s);
    }
    spans
}

/// `ancestor` is `span` or one of its ancestors (by parent ids within `spans`).
pub fn descends_from(spans: &[Span], span: &Span, ancestor: &Span) -> bool {
    let by_id: BTreeMap<&str, &Span> = spans.iter().map(|s| (s.id.as_str(), s)).collect();
    let mut cur = span;
    for _ in 0..10_000 {
        if cur.id == ancestor.id && cur.trace_id == ancestor.trace_id {
            return true;
        }
        match by_id.get(cur.parent_id.as_str()) {
            Some(p) if !cur.parent_id.is_empty() => cur = p,
            _ => return false,
        }
    }
    false
}
