//! Real peers for the observability tests: the `rotel` OTLP receiver (PyPI), `promtool` and
//! `prometheus` (Debian's `prometheus` package), and Jaeger (built from the Go module proxy
//! by `scripts/build-jaeger.sh`). `scripts/test.sh` installs or builds them when missing;
//! under `CI=true` a missing peer fails the test, otherwise the test says loudly that it was
//! skipped.
//!
//! Owns finding the peers, running rotel and Jaeger, and reading the spans they received.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::io::Read;
use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

// the agent's support module loads the same client: one source, compiled in both places
#[allow(clippy::duplicate_mod)]
#[path = "http.rs"]
mod http;
use http::http_get;

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

/// The `jaeger` binary (v2, all-in-one) built from the version pinned in
/// `testbed/jaeger/go.mod` by `scripts/build-jaeger.sh`, which prints the cached binary's path
/// at once when it was built before (`scripts/test.sh` builds it; a cold build needs Go).
pub fn jaeger() -> Option<PathBuf> {
    let script = Path::new(env!("CARGO_MANIFEST_DIR")).join("scripts/build-jaeger.sh");
    let out = Command::new(&script)
        .stdin(Stdio::null())
        .output()
        .expect("run scripts/build-jaeger.sh");
    let found = out
        .status
        .success()
        .then(|| {
            let text = String::from_utf8_lossy(&out.stdout);
            PathBuf::from(text.lines().last().unwrap_or_default().trim())
        })
        .filter(|p| p.is_file());
    if found.is_none() {
        eprintln!(
            "scripts/build-jaeger.sh failed ({}):\n{}",
            out.status,
            String::from_utf8_lossy(&out.stderr)
        );
    }
    require(
        "jaeger (testbed/jaeger/go.mod)",
        found,
        "scripts/build-jaeger.sh builds it from the Go module proxy",
    )
}

/// A running Jaeger (v2, all-in-one, in-memory storage) receiving OTLP/gRPC and serving its
/// query API, on free ports (the defaults are fixed ports, and tests run in parallel).
pub struct Jaeger {
    child: Child,
    /// Its OTLP/gRPC receiver's port.
    pub otlp_port: u16,
    /// Its query service's HTTP port (the UI's JSON API, `/api/traces`).
    pub query_port: u16,
    pub log: PathBuf,
}

impl Jaeger {
    /// Starts `jaeger --config FILE` with a configuration of its own in `dir`: the OTLP/gRPC
    /// receiver, the memory store and the query extension, each on a free loopback port; no
    /// other receiver, extension or telemetry endpoint, and no traces of its own (the query
    /// extension would otherwise export them to the default OTLP port).
    pub fn start(bin: &Path, dir: &Path) -> Jaeger {
        let otlp_port = free_port();
        let query_port = free_port();
        let query_grpc_port = free_port();
        let config = dir.join("jaeger.yaml");
        std::fs::write(
            &config,
            format!(
                "service:
  extensions: [jaeger_storage, jaeger_query]
  pipelines:
    traces:
      receivers: [otlp]
      exporters: [jaeger_storage_exporter]
  telemetry:
    metrics:
      level: none
    logs:
      level: info
extensions:
  jaeger_storage:
    backends:
      memstore:
        memory:
          max_traces: 10000
  jaeger_query:
    enable_tracing: false
    storage:
      traces: memstore
    http:
      endpoint: 127.0.0.1:{query_port}
    grpc:
      endpoint: 127.0.0.1:{query_grpc_port}
receivers:
  otlp:
    protocols:
      grpc:
        endpoint: 127.0.0.1:{otlp_port}
exporters:
  jaeger_storage_exporter:
    trace_storage: memstore
"
            ),
        )
        .unwrap();
        let log = dir.join("jaeger.log");
        let out = std::fs::File::create(&log).unwrap();
        let child = Command::new(bin)
            .arg("--config")
            .arg(&config)
            .current_dir(dir)
            .stdin(Stdio::null())
            .stdout(out.try_clone().unwrap())
            .stderr(out)
            .spawn()
            .expect("start jaeger");
        let mut jaeger = Jaeger {
            child,
            otlp_port,
            query_port,
            log,
        };
        jaeger.wait_ready();
        jaeger
    }

    /// Waits until both ports listen (or panics with Jaeger's log if it exited first).
    fn wait_ready(&mut self) {
        let deadline = Instant::now() + Duration::from_secs(60);
        for port in [self.otlp_port, self.query_port] {
            while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
                let exited = self.child.try_wait().unwrap();
                assert!(
                    exited.is_none() && Instant::now() < deadline,
                    "jaeger did not listen on {port} ({exited:?}):\n{}",
                    std::fs::read_to_string(&self.log).unwrap_or_default()
                );
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }

    /// The endpoint for `--tracing-endpoint`.
    pub fn endpoint(&self) -> String {
        format!("127.0.0.1:{}", self.otlp_port)
    }

    /// `GET path` on the query service: the status and the body.
    pub fn get(&self, path: &str) -> (u16, String) {
        http_get(self.query_port, path)
    }

    /// Every span of every trace the query API finds for `service` (`GET
    /// /api/traces?service=…`), and the response's body.
    pub fn spans(&self, service: &str) -> (Vec<Span>, String) {
        let (status, body) = self.get(&format!("/api/traces?service={service}&limit=1000"));
        assert_eq!(
            status, 200,
            "jaeger's /api/traces answered {status}: {body}"
        );
        let v: serde_json::Value = serde_json::from_str(&body)
            .unwrap_or_else(|e| panic!("jaeger's /api/traces is not JSON ({e}): {body}"));
        (jaeger_spans(&v), body)
    }

    /// Waits up to `secs` for `check` over the spans the query API returns for `service`;
    /// on timeout panics with what Jaeger returned last and its log's tail.
    pub fn wait_for<T>(
        &self,
        service: &str,
        what: &str,
        secs: u64,
        mut check: impl FnMut(&[Span]) -> Option<T>,
    ) -> T {
        let deadline = Instant::now() + Duration::from_secs(secs);
        loop {
            let (spans, body) = self.spans(service);
            if let Some(v) = check(&spans) {
                return v;
            }
            if Instant::now() > deadline {
                let log = std::fs::read_to_string(&self.log).unwrap_or_default();
                let tail: Vec<&str> = log.lines().rev().take(40).collect();
                let tail: Vec<&str> = tail.into_iter().rev().collect();
                panic!(
                    "timed out after {secs}s waiting for {what}; {}\njaeger's log (last lines):\n{}",
                    returned(&spans, &body),
                    tail.join("\n")
                );
            }
            std::thread::sleep(Duration::from_millis(250));
        }
    }
}

impl Drop for Jaeger {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// What Jaeger returned, for a failure message: one line per span (trace, span, parent,
/// kind, name, pod UID), then the start of the raw answer.
pub fn returned(spans: &[Span], body: &str) -> String {
    let mut out = format!("jaeger returned {} spans:\n", spans.len());
    for s in spans {
        out.push_str(&format!(
            "  {} {} <- {:16} {:16} {} {}\n",
            s.trace_id,
            s.id,
            s.parent_id,
            s.kind,
            s.name,
            s.attributes.get("k8s.pod.uid").map_or("", String::as_str)
        ));
    }
    let cut = body.char_indices().nth(4000).map_or(body.len(), |(i, _)| i);
    out.push_str(&format!(
        "raw answer ({} bytes): {}",
        body.len(),
        &body[..cut]
    ));
    out
}

/// The spans of Jaeger's `/api/traces` answer (`{"data": [{"spans": [...]}]}`), in the shape
/// rotel's are parsed into: the `span.kind` tag becomes the kind (`client` ->
/// `SPAN_KIND_CLIENT`), the other tags the attributes (values as text), the `CHILD_OF`
/// reference the parent, each log an event (`name | key: value | ...`).
pub fn jaeger_spans(v: &serde_json::Value) -> Vec<Span> {
    let text = |v: &serde_json::Value| match v {
        serde_json::Value::String(s) => s.clone(),
        other => other.to_string(),
    };
    let mut spans = Vec::new();
    for trace in v["data"].as_array().into_iter().flatten() {
        for s in trace["spans"].as_array().into_iter().flatten() {
            let mut span = Span {
                trace_id: text(&s["traceID"]),
                id: text(&s["spanID"]),
                name: text(&s["operationName"]),
                ..Span::default()
            };
            for r in s["references"].as_array().into_iter().flatten() {
                if r["refType"] == "CHILD_OF" && r["traceID"] == s["traceID"] {
                    span.parent_id = text(&r["spanID"]);
                }
            }
            for t in s["tags"].as_array().into_iter().flatten() {
                let (key, value) = (text(&t["key"]), text(&t["value"]));
                if key == "span.kind" {
                    span.kind = format!("SPAN_KIND_{}", value.to_ascii_uppercase());
                } else {
                    span.attributes.insert(key, value);
                }
            }
            for l in s["logs"].as_array().into_iter().flatten() {
                let fields = l["fields"].as_array().cloned().unwrap_or_default();
                let name = fields
                    .iter()
                    .find(|f| f["key"] == "event")
                    .map(|f| text(&f["value"]))
                    .unwrap_or_default();
                let mut event = name;
                for f in fields.iter().filter(|f| f["key"] != "event") {
                    event.push_str(&format!(" | {}: {}", text(&f["key"]), text(&f["value"])));
                }
                span.events.push(event);
            }
            spans.push(span);
        }
    }
    spans
}
