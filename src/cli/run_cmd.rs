//! `ledgerlet run`: the node agent. Flags follow the kubelet's names where one exists; every
//! duration names its unit.

use std::net::IpAddr;
use std::path::PathBuf;
use std::process::ExitCode;

use clap::{Args, ValueEnum};

use crate::core::config::CoreConfig;
use crate::daemon::{default_root_dir, RunOptions};
use crate::ledger::LedgerConfig;
use crate::sources::pleg::PlegOptions;

#[derive(Clone, Copy, Debug, ValueEnum)]
pub enum LogFormat {
    /// Human-readable lines.
    Text,
    /// One JSON object per line.
    Json,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum StopPods {
    /// Stop pods on exit when the runtime is embedded: it keeps no state across restarts, so
    /// on SIGTERM or SIGINT the agent stops them. (After a SIGKILL their processes keep
    /// running untracked; stop them by hand.)
    Auto,
    /// Always stop every pod on SIGTERM (graceful node shutdown).
    Always,
    /// Never: pods keep running in an external runtime across agent restarts.
    Never,
}

#[derive(Args, Debug)]
pub struct RunArgs {
    /// This node's name (default: the host name, lowercased).
    #[arg(long)]
    node_name: Option<String>,
    /// The node's IP, used for host-network pods and `status.hostIP`.
    #[arg(long, default_value = "127.0.0.1")]
    node_ip: String,
    /// Join the cluster of this kubeconfig (its current context). Without it the node runs
    /// standalone: static pods only, as the kubelet does.
    #[arg(long)]
    kubeconfig: Option<PathBuf>,
    /// API requests per second (kubelet --kube-api-qps).
    #[arg(long, default_value_t = 50.0)]
    kube_api_qps: f64,
    /// API request burst (kubelet --kube-api-burst).
    #[arg(long, default_value_t = 100)]
    kube_api_burst: u32,
    /// Events per second (kubelet --event-qps).
    #[arg(long, default_value_t = 50.0)]
    event_qps: f64,
    /// Event burst (kubelet --event-burst).
    #[arg(long, default_value_t = 100)]
    event_burst: u32,
    /// Static pod manifests: a directory of YAML/JSON files or one file.
    #[arg(long)]
    pod_manifest_path: Option<PathBuf>,
    /// How often the manifest path is rescanned.
    #[arg(long, default_value_t = 1000)]
    manifest_check_period_ms: u64,
    /// How often `emptyDir` volumes with a `sizeLimit` are measured (a volume above its
    /// limit evicts its pod); the kubelet's evictionMonitoringPeriod.
    #[arg(long, default_value_t = crate::shell::empty_dir_usage::DEFAULT_PERIOD_MS, value_parser = clap::value_parser!(u64).range(1..))]
    eviction_monitoring_period_ms: u64,
    /// A running container's log file larger than this is rotated (kubelet
    /// --container-log-max-size; a quantity such as 10Mi).
    #[arg(long, default_value = "10Mi", value_parser = crate::shell::container_log_rotation::parse_max_size)]
    container_log_max_size: u64,
    /// At most this many log files (the live one included) are kept per container
    /// (kubelet --container-log-max-files; at least 2).
    #[arg(long, default_value_t = 5, value_parser = clap::value_parser!(u32).range(2..))]
    container_log_max_files: u32,
    /// How many containers' logs are rotated at once (kubelet --container-log-max-workers).
    #[arg(long, default_value_t = 1, value_parser = clap::value_parser!(u32).range(1..))]
    container_log_max_workers: u32,
    /// How often container log sizes are checked for rotation (the kubelet's
    /// --container-log-monitor-interval, 10 s).
    #[arg(long, default_value_t = 10_000, value_parser = clap::value_parser!(u64).range(1..))]
    container_log_monitor_period_ms: u64,
    /// CRI endpoint (e.g. unix:///run/containerd/containerd.sock). Without it, an embedded
    /// runtime that runs containers as host processes is started under --root-dir.
    #[arg(long)]
    container_runtime_endpoint: Option<String>,
    /// Timeout of each CRI call.
    #[arg(long, default_value_t = 120_000)]
    runtime_request_timeout_ms: u64,
    /// The runtime is down (the node NotReady, "container runtime is down") after this long
    /// without a successful CRI Status (the kubelet's maxWaitForContainerRuntime, 30 s).
    #[arg(long, default_value_t = 30_000)]
    max_wait_for_container_runtime_ms: u64,
    /// Agent state directory (default: /var/lib/ledgerlet as root, else ~/.local/state/ledgerlet).
    #[arg(long)]
    root_dir: Option<PathBuf>,
    /// Root of the pod log layout (default: /var/log/pods as root, else <root-dir>/pod-logs).
    #[arg(long)]
    pod_logs_dir: Option<PathBuf>,
    /// Address of the kubelet API (--port). The read-only port stays on loopback: with a
    /// non-loopback address it listens on 127.0.0.1 (::1 for IPv6).
    #[arg(long, default_value = "127.0.0.1")]
    address: IpAddr,
    /// Port of the unauthenticated HTTP server on loopback (/healthz, /metrics, /pods,
    /// /debug/*); 0 turns it off, as in the kubelet.
    #[arg(long, default_value_t = 10255)]
    read_only_port: u16,
    /// Port of the authenticated HTTPS kubelet API (kubelet --port); 0 picks a free one,
    /// which the node reports in status.daemonEndpoints.
    #[arg(long, default_value_t = 10250)]
    port: u16,
    /// The HTTPS serving certificate (PEM); absent: a self-signed one under <root-dir>/pki.
    #[arg(long)]
    tls_cert_file: Option<PathBuf>,
    /// The key of --tls-cert-file (PEM).
    #[arg(long)]
    tls_private_key_file: Option<PathBuf>,
    /// Client certificates signed by this CA authenticate as CN (user) and O (groups).
    #[arg(long)]
    client_ca_file: Option<PathBuf>,
    /// Check bearer tokens with a TokenReview (needs --kubeconfig).
    #[arg(long, default_value_t = false, num_args = 0..=1, default_missing_value = "true", action = clap::ArgAction::Set)]
    authentication_token_webhook: bool,
    /// Serve unauthenticated requests as system:anonymous (else they get 401).
    #[arg(long, default_value_t = false, num_args = 0..=1, default_missing_value = "true", action = clap::ArgAction::Set)]
    anonymous_auth: bool,
    /// Webhook (a SubjectAccessReview per request) or AlwaysAllow; default: Webhook with
    /// --kubeconfig, AlwaysAllow standalone.
    #[arg(long)]
    authorization_mode: Option<crate::kubelet_api::options::AuthorizationMode>,
    /// Pod resync after a successful sync (kubelet --sync-frequency).
    #[arg(long, default_value_t = 60_000)]
    sync_frequency_ms: u64,
    /// Pod worker retry after a failed sync.
    #[arg(long, default_value_t = 10_000)]
    sync_error_backoff_ms: u64,
    /// Housekeeping period.
    #[arg(long, default_value_t = 2_000)]
    housekeeping_period_ms: u64,
    /// Maximum number of pods.
    #[arg(long, default_value_t = 110)]
    max_pods: u32,
    /// Resources reserved for Kubernetes system daemons, subtracted from the node's
    /// allocatable (kubelet --kube-reserved): e.g. cpu=100m,memory=100Mi,ephemeral-storage=1Gi
    /// (cpu, memory, ephemeral-storage, pid).
    #[arg(long, value_parser = crate::shell::machine::allocatable::parse_reserved, default_value = "")]
    kube_reserved: crate::shell::machine::allocatable::Reserved,
    /// Resources reserved for the operating system's daemons, subtracted from the node's
    /// allocatable (kubelet --system-reserved), in the syntax of --kube-reserved.
    #[arg(long, value_parser = crate::shell::machine::allocatable::parse_reserved, default_value = "")]
    system_reserved: crate::shell::machine::allocatable::Reserved,
    /// Unsafe sysctls (or prefixes ending in `*`) pods may set beyond the safe set,
    /// comma-separated (kubelet --allowed-unsafe-sysctls), e.g. 'kernel.msg*,net.core.somaxconn'.
    /// Only namespaced sysctls: net.*, fs.mqueue.*, kernel.sem, kernel.shm*, kernel.msg*.
    #[arg(long, value_delimiter = ',', value_name = "SYSCTL,...", value_parser = parse_sysctl_pattern)]
    allowed_unsafe_sysctls: Vec<String>,
    /// Run containers without a seccomp profile with the runtime's default profile
    /// (RuntimeDefault) instead of Unconfined (kubelet --seccomp-default).
    #[arg(long, default_value_t = false, num_args = 0..=1, require_equals = true, default_missing_value = "true", action = clap::ArgAction::Set)]
    seccomp_default: bool,
    /// First CrashLoopBackOff delay.
    #[arg(long, default_value_t = 10_000)]
    crash_loop_backoff_initial_ms: u64,
    /// Maximum CrashLoopBackOff delay.
    #[arg(long, default_value_t = 300_000)]
    crash_loop_backoff_max_ms: u64,
    /// First ImagePullBackOff delay after a failed pull (per pod and image; doubling).
    #[arg(long, default_value_t = 10_000)]
    image_pull_backoff_initial_ms: u64,
    /// Maximum ImagePullBackOff delay.
    #[arg(long, default_value_t = 300_000)]
    image_pull_backoff_max_ms: u64,
    /// Period of the status manager's full pass (needsUpdate / needsReconcile; kubelet 10 s).
    #[arg(long, default_value_t = 10_000)]
    status_sync_period_ms: u64,
    /// Status syncs (GET + PATCH) in flight at once, across pods (one per pod at most).
    #[arg(long, default_value_t = 16)]
    status_sync_max_in_flight: u32,
    /// Generic PLEG relist period.
    #[arg(long, default_value_t = 1_000)]
    relist_period_ms: u64,
    /// PLEG unhealthy (/healthz fails, the node turns NotReady) after this long without a
    /// generic relist (the kubelet's genericPlegRelistThreshold, 3 min).
    #[arg(long, default_value_t = 180_000)]
    relist_threshold_ms: u64,
    /// Relist period while the runtime's container event stream is up (Evented PLEG's
    /// fallback relist; the kubelet's is 300 s).
    #[arg(long, default_value_t = 300_000)]
    evented_relist_period_ms: u64,
    /// PLEG unhealthy after this long without a relist or container event while the event
    /// stream is up (the kubelet's eventedPlegRelistThreshold, 10 min).
    #[arg(long, default_value_t = 600_000)]
    evented_relist_threshold_ms: u64,
    /// Use the runtime's container event stream (Evented PLEG) when available.
    #[arg(long, default_value_t = true, action = clap::ArgAction::Set)]
    evented_pleg: bool,
    /// Keep at most this many ledger records in memory.
    #[arg(long, default_value_t = 200_000)]
    ledger_max_records: usize,
    /// Keep at most this many bytes of ledger records in memory (the heap they hold).
    #[arg(long, default_value_t = 32 * 1024 * 1024)]
    ledger_max_bytes: u64,
    /// Also serve the ledger stream (gRPC `ledgerlet.v1.Ledger`) on this loopback address
    /// (it is always served on <root-dir>/ledger.sock).
    #[arg(long, value_name = "HOST:PORT")]
    ledger_grpc_address: Option<std::net::SocketAddr>,
    /// Keep the ledger on disk in this directory (segments, batched fsync): the agent
    /// continues its history and its seq after a restart.
    #[arg(long)]
    ledger_dir: Option<PathBuf>,
    /// fsync the durable ledger at least this often (a machine crash loses at most this).
    #[arg(long, default_value_t = crate::ledger::durable::DEFAULT_FSYNC_PERIOD_MS)]
    ledger_fsync_period_ms: u64,
    /// Start a new durable segment once the current one reaches this size.
    #[arg(long, default_value_t = crate::ledger::durable::DEFAULT_SEGMENT_MAX_BYTES)]
    ledger_segment_max_bytes: u64,
    /// Delete the oldest durable segments beyond this many bytes in --ledger-dir.
    #[arg(long, default_value_t = crate::ledger::durable::DEFAULT_DIR_MAX_BYTES)]
    ledger_dir_max_bytes: u64,
    /// Stop every pod when the agent exits (SIGTERM or SIGINT): the node shutdown.
    #[arg(long, value_enum, default_value = "auto")]
    stop_pods_on_exit: StopPods,
    /// How long the node shutdown may take in all (kubelet `shutdownGracePeriod`, e.g.
    /// 30s; 0 turns graceful node shutdown off: each pod gets its own grace period).
    #[arg(long, value_parser = super::duration::parse_duration_s, default_value = "0")]
    shutdown_grace_period: u64,
    /// The part of --shutdown-grace-period kept for critical pods, killed after the others
    /// (kubelet `shutdownGracePeriodCriticalPods`, e.g. 10s).
    #[arg(long, value_parser = super::duration::parse_duration_s, default_value = "0")]
    shutdown_grace_period_critical_pods: u64,
    /// Log level when RUST_LOG is not set.
    #[arg(long, default_value = "info")]
    log_level: String,
    /// Log format.
    #[arg(long, value_enum, default_value = "text")]
    log_format: LogFormat,
    /// Cluster DNS server IPs, comma-separated (kubelet --cluster-dns): the nameservers
    /// of `ClusterFirst` pods. Without one, those pods fall back to `Default` DNS with a
    /// `MissingClusterDNS` warning.
    #[arg(long, value_delimiter = ',', value_name = "IP,...")]
    cluster_dns: Vec<IpAddr>,
    /// The cluster's domain (kubelet --cluster-domain, e.g. cluster.local): pods search
    /// `<namespace>.svc.<domain>`, `svc.<domain>` and `<domain>`.
    #[arg(long, default_value = "")]
    cluster_domain: String,
    /// The resolver configuration pods' DNS is based on (kubelet --resolv-conf); "" for
    /// none.
    #[arg(long, default_value = crate::shell::dns::DEFAULT_RESOLV_CONF)]
    resolv_conf: String,
    #[command(flatten)]
    tracing: super::tracing_args::TracingArgs,
}

/// One entry of `--allowed-unsafe-sysctls`, refused as the kubelet refuses it at start-up
/// (empty entries are dropped later).
fn parse_sysctl_pattern(s: &str) -> Result<String, String> {
    if !s.is_empty() {
        let one = [s.to_string()];
        crate::core::admission::sysctls::validate_allowed_unsafe(&one)
            .map_err(|e| e.to_string())?;
    }
    Ok(s.to_string())
}

pub fn run(args: RunArgs) -> ExitCode {
    let host = crate::shell::machine::system_hostname();
    let node_name = match &args.node_name {
        Some(name) => name.to_lowercase(),
        None if host.is_empty() => "localhost".into(),
        None => host.clone(),
    };
    // the recorder first: the tracing pipeline registers its queue metrics when it starts
    crate::observe::metrics::install();
    if let Err(e) = args.tracing.init(
        "ledgerlet",
        &node_name,
        &host,
        &args.log_level,
        matches!(args.log_format, LogFormat::Json),
    ) {
        eprintln!("ledgerlet run: {e}");
        return ExitCode::from(2);
    }
    let pleg = PlegOptions {
        relist_period_ms: args.relist_period_ms,
        relist_threshold_ms: args.relist_threshold_ms,
        evented: args.evented_pleg,
        evented_relist_period_ms: args.evented_relist_period_ms,
        evented_relist_threshold_ms: args.evented_relist_threshold_ms,
        ..PlegOptions::default()
    };
    if let Err(e) = pleg.validate() {
        eprintln!("ledgerlet run: {e}");
        return ExitCode::from(2);
    }
    let probe_ms = crate::shell::runtime_health::DEFAULT_PERIOD_MS;
    if args.max_wait_for_container_runtime_ms <= probe_ms {
        eprintln!(
            "ledgerlet run: --max-wait-for-container-runtime-ms {} must be longer than the \
             runtime status check period ({probe_ms} ms), or one slow check makes the node \
             NotReady",
            args.max_wait_for_container_runtime_ms
        );
        return ExitCode::from(2);
    }
    if args.shutdown_grace_period_critical_pods > args.shutdown_grace_period {
        eprintln!(
            "ledgerlet run: --shutdown-grace-period-critical-pods ({} s) must not exceed \
             --shutdown-grace-period ({} s): the critical pods' time is part of the total",
            args.shutdown_grace_period_critical_pods, args.shutdown_grace_period
        );
        return ExitCode::from(2);
    }
    let root_dir = args.root_dir.unwrap_or_else(default_root_dir);
    let is_root = unsafe { libc::geteuid() } == 0;
    let pod_logs_dir = args.pod_logs_dir.unwrap_or_else(|| {
        if is_root {
            PathBuf::from("/var/log/pods")
        } else {
            root_dir.join("pod-logs")
        }
    });
    let stop_pods_on_exit = match args.stop_pods_on_exit {
        StopPods::Always => true,
        StopPods::Never => false,
        StopPods::Auto => args.container_runtime_endpoint.is_none(),
    };
    if args.shutdown_grace_period > 0 && !stop_pods_on_exit {
        eprintln!(
            "ledgerlet run: --shutdown-grace-period shapes the node shutdown on SIGTERM, but \
             with --stop-pods-on-exit never (the default with --container-runtime-endpoint) \
             SIGTERM leaves the pods running; pass --stop-pods-on-exit always"
        );
        return ExitCode::from(2);
    }
    let dns = crate::shell::dns::DnsSettings {
        cluster_dns: args.cluster_dns,
        cluster_domain: args.cluster_domain,
        resolv_conf: args.resolv_conf,
        node_ips: args.node_ip.parse().into_iter().collect(),
    };
    let opts = RunOptions {
        dns,
        node_name,
        node_ip: args.node_ip,
        root_dir,
        pod_logs_dir,
        pod_manifest_path: args.pod_manifest_path,
        kubeconfig: args.kubeconfig,
        api_limits: crate::shell::api::ApiLimits {
            qps: args.kube_api_qps,
            burst: args.kube_api_burst,
        },
        event_limits: crate::shell::api::ApiLimits {
            qps: args.event_qps,
            burst: args.event_burst,
        },
        manifest_check_period_ms: args.manifest_check_period_ms,
        eviction_monitoring_period_ms: args.eviction_monitoring_period_ms,
        container_runtime_endpoint: args.container_runtime_endpoint,
        runtime_request_timeout_ms: args.runtime_request_timeout_ms,
        max_wait_for_container_runtime_ms: args.max_wait_for_container_runtime_ms,
        address: args.address,
        read_only_port: args.read_only_port,
        api: crate::kubelet_api::options::ApiOptions {
            port: args.port,
            tls: crate::kubelet_api::tls::TlsFiles {
                cert: args.tls_cert_file,
                key: args.tls_private_key_file,
                client_ca: args.client_ca_file,
            },
            anonymous_auth: args.anonymous_auth,
            token_webhook: args.authentication_token_webhook,
            authorization_mode: args.authorization_mode,
        },
        seccomp_default: args.seccomp_default,
        log_rotation: crate::shell::container_log_rotation::RotationPolicy {
            max_size_bytes: args.container_log_max_size,
            max_files: args.container_log_max_files as usize,
            max_workers: args.container_log_max_workers as usize,
            monitor_period_ms: args.container_log_monitor_period_ms,
        },
        reserved: crate::shell::machine::allocatable::Reservations {
            kube: args.kube_reserved,
            system: args.system_reserved,
        },
        core: CoreConfig {
            resync_interval_ms: args.sync_frequency_ms,
            sync_error_backoff_ms: args.sync_error_backoff_ms,
            housekeeping_period_ms: args.housekeeping_period_ms,
            max_pods: args.max_pods,
            crash_loop_backoff_initial_ms: args.crash_loop_backoff_initial_ms,
            crash_loop_backoff_max_ms: args.crash_loop_backoff_max_ms,
            image_pull_backoff_initial_ms: args.image_pull_backoff_initial_ms,
            image_pull_backoff_max_ms: args.image_pull_backoff_max_ms,
            status_sync_period_ms: args.status_sync_period_ms,
            status_sync_max_in_flight: args.status_sync_max_in_flight,
            shutdown_grace_period_s: args.shutdown_grace_period,
            shutdown_grace_period_critical_pods_s: args.shutdown_grace_period_critical_pods,
            allowed_unsafe_sysctls: args
                .allowed_unsafe_sysctls
                .into_iter()
                .filter(|s| !s.is_empty())
                .collect(),
            ..CoreConfig::default()
        },
        ledger: LedgerConfig {
            max_records: args.ledger_max_records,
            max_bytes: args.ledger_max_bytes,
            snapshot_every_records: (args.ledger_max_records as u64 / 20).max(1),
            ..LedgerConfig::default()
        },
        pleg,
        inbox_capacity: 4096,
        stop_pods_on_exit,
        event_log_capacity: 1000,
        ledger_grpc_address: args.ledger_grpc_address,
        durable: args
            .ledger_dir
            .map(|dir| crate::ledger::durable::DurableConfig {
                fsync_period_ms: args.ledger_fsync_period_ms,
                segment_max_bytes: args.ledger_segment_max_bytes,
                dir_max_bytes: args.ledger_dir_max_bytes,
                ..crate::ledger::durable::DurableConfig::new(dir)
            }),
    };
    let rt = match super::async_runtime("run", true) {
        Ok(rt) => rt,
        Err(code) => return code,
    };
    use crate::postmortem::flight_recorder;
    let result = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
        rt.block_on(crate::daemon::run(opts))
    }));
    // spans buffered for the collector go out (bounded wait) whatever the outcome
    if let Some(t) = crate::observe::otel::global() {
        t.shutdown(std::time::Duration::from_secs(3));
    }
    match result {
        Ok(Ok(())) => ExitCode::SUCCESS,
        Ok(Err(e)) if e.is::<crate::daemon::Quit>() => {
            eprintln!("ledgerlet run: {e:#}");
            ExitCode::from(2)
        }
        Ok(Err(e)) => {
            eprintln!("ledgerlet run: {e:#}");
            flight_recorder::record(&format!("fatal error: {e:#}"));
            ExitCode::from(1)
        }
        Err(_) => {
            // the panic hook started a recording; let it finish before the process exits
            flight_recorder::wait_pending();
            ExitCode::from(101)
        }
    }
}
