//! The kubelet's stats endpoints: `GET /stats/summary` (the Summary API, `?only_cpu_and_memory=true`
//! for the CPU-and-memory subset) and `GET /metrics/resource` (the resource metrics
//! metrics-server reads), from CRI stats and the host's own figures, as the kubelet's CRI
//! stats provider.
//!
//! Owns [`router`] (mountable on the read-only server and on an authenticated one, where the
//! kubelet authorizes these paths as `nodes/stats` and `nodes/metrics`) and the per-request
//! collection. Must not hold a lock across a runtime call, keep more than the bounded CPU
//! cache between requests, nor write anything: every request reads afresh.

pub mod cpu_rate;
pub mod host;
pub mod logs;
pub mod pods;
pub mod resource_metrics;
pub mod summary;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use axum::extract::{Query, State};
use axum::http::{header, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::get;
use axum::Router;

use crate::cri::{CriClient, CriError};

use cpu_rate::{CpuRates, CpuReading};
use pods::{CriLists, RateMode};
use summary::{api_time, CpuStats, FsStats, NodeStats, RuntimeStats, Summary};

/// The cache key of the node's own CPU.
pub const NODE_KEY: &str = "<node>";

/// At most this many containers, sandboxes and the node have a remembered CPU reading.
pub const RATE_CACHE_CAPACITY: usize = 4096;

/// What the stats endpoints read: the runtime, the node's name and root directory, and the
/// bounded CPU cache. Cheap to clone.
#[derive(Clone)]
pub struct StatsState {
    cri: CriClient,
    node_name: String,
    root_dir: PathBuf,
    pod_logs_dir: Option<PathBuf>,
    rates: Arc<Mutex<CpuRates>>,
}

impl StatsState {
    /// The stats of node `node_name` whose runtime is `cri` and root directory `root_dir`.
    pub fn new(cri: CriClient, node_name: String, root_dir: PathBuf) -> StatsState {
        StatsState {
            cri,
            node_name,
            root_dir,
            pod_logs_dir: None,
            rates: Arc::new(Mutex::new(CpuRates::new(RATE_CACHE_CAPACITY))),
        }
    }

    /// The same, with the containers' log figures read from `dir` (`--pod-logs-dir`).
    pub fn with_pod_logs_dir(mut self, dir: PathBuf) -> StatsState {
        self.pod_logs_dir = Some(dir);
        self
    }

    /// The summary: everything (`only_cpu_and_memory` false), or the node's and pods' CPU and
    /// memory only, which does not move the `usageNanoCores` windows.
    pub async fn summary(&self, only_cpu_and_memory: bool) -> Result<Summary, CriError> {
        let lists = self.cri_lists().await?;
        let image_fs = if only_cpu_and_memory {
            None
        } else {
            self.image_fs().await
        };
        let now_ns = now_ns();
        let time = api_time(now_ns);
        let mode = if only_cpu_and_memory {
            RateMode::ReadOnly
        } else {
            RateMode::Update
        };
        let node_cpu = host::cpu_usage_ns();
        let mut rates = self.rates.lock().expect("stats cpu cache");
        let node_rate = node_cpu.and_then(|used| match mode {
            RateMode::Update => rates.observe(
                NODE_KEY,
                CpuReading {
                    timestamp_ns: now_ns,
                    usage_core_nano_seconds: used,
                },
            ),
            RateMode::ReadOnly => rates.last_rate(NODE_KEY),
        });
        let mut pods = pods::build_pods(
            &lists,
            &mut rates,
            mode,
            image_fs.as_ref(),
            !only_cpu_and_memory,
        );
        drop(rates);
        let full = !only_cpu_and_memory;
        if let (true, Some(dir)) = (full, &self.pod_logs_dir) {
            logs::add_logs(&mut pods, dir, &time);
        }
        let node = NodeStats {
            node_name: self.node_name.clone(),
            start_time: api_time(host::boot_time_ns()),
            cpu: node_cpu.map(|used| CpuStats {
                time: time.clone(),
                usage_nano_cores: node_rate,
                usage_core_nano_seconds: Some(used),
            }),
            memory: host::memory(&time),
            swap: host::swap(&time),
            network: full.then(|| host::network(&time)).flatten(),
            fs: full.then(|| host::fs_of(&self.root_dir, &time)).flatten(),
            runtime: full.then_some(RuntimeStats { image_fs }),
            rlimit: full.then(|| host::rlimit(&time)),
        };
        Ok(Summary { node, pods })
    }

    /// The CRI lists. A runtime that does not implement `ListPodSandboxStats` leaves the
    /// pods' figures to be summed from their containers'.
    async fn cri_lists(&self) -> Result<CriLists, CriError> {
        let sandboxes = self.cri.list_pod_sandbox(None).await?;
        let containers = self.cri.list_containers(None).await?;
        let container_stats = self.cri.list_container_stats(None).await?;
        let sandbox_stats = match self.cri.list_pod_sandbox_stats(None).await {
            Ok(s) => s,
            Err(e) if e.code() == tonic::Code::Unimplemented => Vec::new(),
            Err(e) => return Err(e),
        };
        Ok(CriLists {
            sandboxes,
            containers,
            container_stats,
            sandbox_stats,
        })
    }

    /// The image filesystem: bytes and inodes the runtime says its images use, capacity and
    /// free space of the filesystem they are on.
    async fn image_fs(&self) -> Option<FsStats> {
        let info = self.cri.image_fs_info().await.ok()?;
        let fs = info.image_filesystems.first()?;
        let mountpoint = fs.fs_id.as_ref().map(|f| f.mountpoint.clone());
        let time = api_time(fs.timestamp);
        let mut out = mountpoint
            .and_then(|m| host::fs_of(std::path::Path::new(&m), &time))
            .unwrap_or_else(|| FsStats {
                time: time.clone(),
                ..Default::default()
            });
        out.used_bytes = fs.used_bytes.as_ref().map(|v| v.value);
        out.inodes_used = fs.inodes_used.as_ref().map(|v| v.value);
        Some(out)
    }
}

fn now_ns() -> i64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as i64)
}

/// `GET /stats/summary` and `GET /metrics/resource` over `state`.
pub fn router(state: StatsState) -> Router {
    Router::new()
        .route("/stats/summary", get(summary_handler))
        .route("/metrics/resource", get(resource_handler))
        .with_state(state)
}

async fn summary_handler(
    State(s): State<StatsState>,
    Query(q): Query<HashMap<String, String>>,
) -> Response {
    let only = match q.get("only_cpu_and_memory").map(String::as_str) {
        None | Some("false") | Some("0") | Some("") => false,
        Some("true") | Some("1") => true,
        Some(other) => {
            return (
                StatusCode::BAD_REQUEST,
                format!("only_cpu_and_memory must be true or false, not {other:?}\n"),
            )
                .into_response()
        }
    };
    match s.summary(only).await {
        Ok(summary) => (
            [(header::CONTENT_TYPE, "application/json")],
            serde_json::to_vec(&summary).expect("serialisable"),
        )
            .into_response(),
        Err(e) => {
            tracing::warn!(error = %e, "/stats/summary: cannot get the pods' stats from the runtime");
            (
                StatusCode::INTERNAL_SERVER_ERROR,
                format!("Internal Error: failed to get the pods' stats from the runtime: {e}\n"),
            )
                .into_response()
        }
    }
}

async fn resource_handler(State(s): State<StatsState>) -> Response {
    let summary = match s.summary(true).await {
        Ok(summary) => Some(summary),
        Err(e) => {
            tracing::warn!(error = %e, "/metrics/resource: cannot get the pods' stats from the runtime");
            None
        }
    };
    let text = "text/plain; version=0.0.4; charset=utf-8";
    (
        [(header::CONTENT_TYPE, text)],
        resource_metrics::render(summary.as_ref()),
    )
        .into_response()
}
