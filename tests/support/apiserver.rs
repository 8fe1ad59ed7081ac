//! An in-process fake Kubernetes API server for ledgerlet's tests.
//!
//! **Owns:** an HTTP/1.1 listener on `127.0.0.1:<ephemeral>` (plain HTTP, no TLS) that speaks
//! the slice of the Kubernetes REST API a node agent uses — `pods` (+`/status`), `nodes`
//! (+`/status`), `leases` (coordination.k8s.io/v1), `events` (core/v1 and events.k8s.io/v1),
//! `secrets` —
//! with list/watch (bounded history, `410 Expired` for compacted resource versions, bookmarks,
//! `sendInitialEvents` streaming lists), get/create/replace/delete, JSON merge patch and the
//! subset of strategic merge patch that pod and node status need; a log of every request; and
//! deterministic fault injection. Every request body is decoded into the k8s-openapi type of
//! its resource; a body that does not decode is answered `400` with a `Status`, as the real
//! server does.
//!
//! **Must not:** be used outside tests; reach any address other than loopback; depend on
//! anything but tokio, hyper, hyper-util, http-body-util, bytes, serde, serde_json and
//! k8s-openapi; use randomness (fault injection is counter-based so tests are reproducible);
//! or grow without bound (watch history, request log, per-watch buffers and request bodies are
//! all capped). It implements no authentication, admission, validation of spec updates,
//! finalizers, `dryRun`, pagination, JSON Patch (RFC 6902) or server-side apply; where a
//! client asks for one of those it gets an error status rather than a silent success.
//!
//! Semantics that follow the real kube-apiserver (so agent code tested here behaves the same
//! against a real cluster):
//! - a write that changes nothing is a no-op: no resourceVersion bump, no watch event;
//! - a `PUT`/`PATCH` of the main resource never changes `.status`; one of `/status` changes
//!   only `.status`;
//! - `metadata.uid` in a `PUT` body or patch that differs from the stored object is a
//!   precondition failure (`409 Conflict`); so is a non-empty, different
//!   `metadata.resourceVersion`;
//! - strategic merge patch merges only lists that the Kubernetes types mark
//!   `patchStrategy:"merge"` (see [`SMP_MERGE_KEYS`]); every other list — notably
//!   `containerStatuses`, which upstream is `+listType=atomic` — is replaced whole;
//! - pod deletion is graceful when the pod is bound to a node and not terminal.

// Included as `mod support;` by several test binaries, each using only part of the API.
#![allow(dead_code)]

use std::collections::{BTreeMap, VecDeque};
use std::convert::Infallible;
use std::future::Future;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::task::{Context, Poll};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::combinators::UnsyncBoxBody;
use http_body_util::{BodyExt, Full, LengthLimitError, Limited};
use hyper::body::{Body, Frame, Incoming};
use hyper::server::conn::http1;
use hyper::service::service_fn;
use hyper::{header, Method, Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use k8s_openapi::api::coordination::v1::Lease;
use k8s_openapi::api::core::v1::{Event, Node, Pod, Secret};
use k8s_openapi::api::events::v1::Event as EventV1;
use k8s_openapi::apimachinery::pkg::apis::meta::v1::{DeleteOptions, Time};
use k8s_openapi::jiff::{SignedDuration, Timestamp};
use serde::de::DeserializeOwned;
use serde::Serialize;
use serde_json::{json, Map, Value};
use tokio::net::TcpListener;
use tokio::sync::mpsc;
use tokio::task::{JoinHandle, JoinSet};

// ---------------------------------------------------------------------------------------------
// Public test-facing API
// ---------------------------------------------------------------------------------------------

/// Limits and timings of a [`TestApiServer`]. `Default` is what [`TestApiServer::start`] uses.
#[derive(Clone, Debug)]
pub struct ServerConfig {
    /// Watch events retained for resuming watches; older resource versions get `410`.
    pub history_capacity: usize,
    /// Requests kept by [`TestApiServer::requests`]; older ones are counted in
    /// [`TestApiServer::requests_dropped`].
    pub request_log_capacity: usize,
    /// Largest accepted request body; bigger ones get `413`.
    pub max_body_bytes: usize,
    /// How often watches that asked for `allowWatchBookmarks` get a `BOOKMARK`.
    pub bookmark_interval: Duration,
    /// Events buffered per watch; a watch whose client falls this far behind is closed
    /// (the client resumes from its last resource version, as with a real server).
    pub watch_buffer: usize,
    /// Watch duration when the client sends no (or a zero) `timeoutSeconds`.
    pub default_watch_timeout: Duration,
}

impl Default for ServerConfig {
    fn default() -> Self {
        ServerConfig {
            history_capacity: 1000,
            request_log_capacity: 10_000,
            max_body_bytes: 3 * 1024 * 1024,
            bookmark_interval: Duration::from_secs(1),
            watch_buffer: 1024,
            default_watch_timeout: Duration::from_secs(1800),
        }
    }
}

/// Deterministic fault injection for requests that match the filters.
///
/// Of the matching requests, the n-th (counting from 1 after [`TestApiServer::set_fault`]) fails
/// when `floor(n * rate / 1e6) > floor((n - 1) * rate / 1e6)`: a rate of 250 000 fails every
/// 4th matching request, 1 000 000 fails all of them. Failed requests are answered with
/// `error_status` and a `Status` body before touching any state.
#[derive(Clone, Debug)]
pub struct FaultConfig {
    /// Failures per million matching requests (capped at 1 000 000).
    pub error_rate_per_million: u32,
    /// HTTP status of an injected failure (e.g. 500, 503, 429, 504).
    pub error_status: u16,
    /// Delay added before answering every matching request.
    pub latency_ms: u64,
    /// Only requests with one of these methods (e.g. `"PATCH"`) match; empty = all methods.
    pub only_methods: Vec<String>,
    /// Only requests whose path starts with one of these prefixes match; empty = all paths.
    pub only_paths: Vec<String>,
}

impl Default for FaultConfig {
    fn default() -> Self {
        FaultConfig {
            error_rate_per_million: 0,
            error_status: 500,
            latency_ms: 0,
            only_methods: Vec::new(),
            only_paths: Vec::new(),
        }
    }
}

impl FaultConfig {
    fn applies(&self, method: &str, path: &str) -> bool {
        (self.only_methods.is_empty()
            || self
                .only_methods
                .iter()
                .any(|m| m.eq_ignore_ascii_case(method)))
            && (self.only_paths.is_empty() || self.only_paths.iter().any(|p| path.starts_with(p)))
    }
}

/// One HTTP request as the server received it.
#[derive(Clone, Debug)]
pub struct RecordedRequest {
    /// Arrival order, starting at 0 for the server's first request.
    pub seq: u64,
    pub method: String,
    pub path: String,
    /// The raw (still percent-encoded) query string, `""` when there is none.
    pub query: String,
    pub content_type: Option<String>,
    /// The body parsed as JSON, `None` when empty or not JSON.
    pub body: Option<Value>,
    /// The body as received.
    pub raw_body: Bytes,
    /// Status the server answered with; `None` while the request is still being handled.
    /// A watch is recorded as `200` as soon as its stream starts.
    pub status: Option<u16>,
    /// Whether the answer was an injected fault.
    pub injected_fault: bool,
}

impl RecordedRequest {
    /// The decoded value of query parameter `key` (the last one if repeated).
    pub fn query_param(&self, key: &str) -> Option<String> {
        Query::parse(&self.query).get(key).map(str::to_owned)
    }
}

/// An API error, as the server puts it in a `Status` object.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApiError {
    pub code: u16,
    pub reason: String,
    pub message: String,
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}: {}", self.code, self.reason, self.message)
    }
}

impl std::error::Error for ApiError {}

/// A running fake API server. Dropping it stops the listener and every connection.
pub struct TestApiServer {
    shared: Arc<Shared>,
    addr: SocketAddr,
    tasks: Vec<JoinHandle<()>>,
}

impl Drop for TestApiServer {
    fn drop(&mut self) {
        for task in &self.tasks {
            task.abort();
        }
    }
}

impl TestApiServer {
    /// Starts a server with [`ServerConfig::default`] on `127.0.0.1` and an ephemeral port.
    pub async fn start() -> TestApiServer {
        Self::start_with(ServerConfig::default()).await
    }

    /// Starts a server with the given limits.
    pub async fn start_with(config: ServerConfig) -> TestApiServer {
        let listener = TcpListener::bind(("127.0.0.1", 0))
            .await
            .expect("bind 127.0.0.1:0 for the test API server");
        let addr = listener
            .local_addr()
            .expect("local address of the test API server");
        let shared = Arc::new(Shared::new(config, addr));
        let accept = tokio::spawn(accept_loop(listener, Arc::clone(&shared)));
        let bookmarks = tokio::spawn(bookmark_loop(Arc::clone(&shared)));
        TestApiServer {
            shared,
            addr,
            tasks: vec![accept, bookmarks],
        }
    }

    /// `http://127.0.0.1:<port>`, for `kube::Config::new`.
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    pub fn addr(&self) -> SocketAddr {
        self.addr
    }

    /// The retained request log, oldest first.
    pub fn requests(&self) -> Vec<RecordedRequest> {
        self.shared.control().log.iter().cloned().collect()
    }

    pub fn clear_requests(&self) {
        self.shared.control().log.clear();
    }

    /// Requests that fell out of the log because it was full.
    pub fn requests_dropped(&self) -> u64 {
        self.shared.control().dropped
    }

    /// The current global resource version (the one a list would report).
    pub fn resource_version(&self) -> u64 {
        self.shared.store().rv
    }

    pub fn pod(&self, namespace: &str, name: &str) -> Option<Pod> {
        self.shared.store().typed(Kind::Pod, namespace, name)
    }

    /// All pods, ordered by namespace then name.
    pub fn pods(&self) -> Vec<Pod> {
        self.shared.store().all_typed(Kind::Pod)
    }

    /// Stores a pod as if a user had created it (uid, resourceVersion, creationTimestamp,
    /// generation and the usual API defaults are set; a watch sees `ADDED`). Unlike an HTTP
    /// create, the given `.status` is kept, so a fixture can start in any phase. The namespace
    /// defaults to `default`.
    pub fn create_pod(&self, pod: Pod) -> Result<Pod, ApiError> {
        let namespace = pod
            .metadata
            .namespace
            .clone()
            .filter(|ns| !ns.is_empty())
            .unwrap_or_else(|| "default".to_owned());
        let value = to_json(&pod)?;
        let created =
            self.shared
                .store()
                .create(Kind::Pod, &namespace, value, CreateMode::Fixture)?;
        from_json(created)
    }

    /// Changes a stored pod — spec, status, labels, anything but the server-owned metadata —
    /// as one atomic write (a watch sees `MODIFIED`; nothing happens if `change` changes
    /// nothing). `change` runs under the server's lock: it must not call back into the server.
    pub fn update_pod(
        &self,
        namespace: &str,
        name: &str,
        change: impl FnOnce(&mut Pod),
    ) -> Result<Pod, ApiError> {
        let mut store = self.shared.store();
        let mut pod: Pod = store
            .typed(Kind::Pod, namespace, name)
            .ok_or_else(|| ApiError::not_found(Kind::Pod, name))?;
        change(&mut pod);
        let candidate = to_json(&pod)?;
        let updated = store.update(Kind::Pod, namespace, name, candidate, Scope::Everything)?;
        from_json(updated)
    }

    /// Deletes a pod the way `kubectl delete [--grace-period=N]` does. Returns the pod while it
    /// is still terminating (graceful deletion), `None` once it is gone.
    pub fn delete_pod_as_user(
        &self,
        namespace: &str,
        name: &str,
        grace_period_seconds: Option<i64>,
    ) -> Result<Option<Pod>, ApiError> {
        let options = DeleteOptions {
            grace_period_seconds,
            ..DeleteOptions::default()
        };
        match self
            .shared
            .store()
            .delete(Kind::Pod, namespace, name, &options)?
        {
            Deleted::Pending(pod) => Ok(Some(from_json(pod)?)),
            Deleted::Gone(_) => Ok(None),
        }
    }

    pub fn node(&self, name: &str) -> Option<Node> {
        self.shared.store().typed(Kind::Node, "", name)
    }

    pub fn nodes(&self) -> Vec<Node> {
        self.shared.store().all_typed(Kind::Node)
    }

    /// Stores a node as if created through the API (status is kept, as the real server does
    /// for nodes).
    pub fn create_node(&self, node: Node) -> Result<Node, ApiError> {
        let value = to_json(&node)?;
        let created = self
            .shared
            .store()
            .create(Kind::Node, "", value, CreateMode::Fixture)?;
        from_json(created)
    }

    /// Stores a Secret as if created through the API (namespace defaults to `default`).
    pub fn create_secret(&self, secret: Secret) -> Result<Secret, ApiError> {
        let namespace = secret
            .metadata
            .namespace
            .clone()
            .filter(|ns| !ns.is_empty())
            .unwrap_or_else(|| "default".to_owned());
        let value = to_json(&secret)?;
        let created =
            self.shared
                .store()
                .create(Kind::Secret, &namespace, value, CreateMode::Fixture)?;
        from_json(created)
    }

    pub fn lease(&self, namespace: &str, name: &str) -> Option<Lease> {
        self.shared.store().typed(Kind::Lease, namespace, name)
    }

    /// core/v1 events, ordered by namespace then name.
    pub fn events(&self) -> Vec<Event> {
        self.shared.store().all_typed(Kind::Event)
    }

    /// events.k8s.io/v1 events (what `kube::runtime::events::Recorder` writes).
    pub fn events_v1(&self) -> Vec<EventV1> {
        self.shared.store().all_typed(Kind::EventV1)
    }

    /// Replaces the fault configuration and restarts its failure pattern.
    pub fn set_fault(&self, fault: FaultConfig) {
        let mut control = self.shared.control();
        control.fault = Some(fault);
        control.fault_counter = 0;
    }

    pub fn clear_fault(&self) {
        self.shared.control().fault = None;
    }

    /// The next `n` requests — any method, any path, regardless of [`FaultConfig`] filters —
    /// are answered with `status` (and a `Status` body) without touching state. Calls queue:
    /// `fail_next(1, 500); fail_next(1, 503)` fails the next request with 500, the one after
    /// with 503.
    pub fn fail_next(&self, n: u32, status: u16) {
        if n > 0 {
            self.shared.control().fail_next.push_back((n, status));
        }
    }

    /// Ends every open watch stream now (cleanly, like an apiserver restart or a watch
    /// timeout); events not yet delivered are discarded, so clients resume from the last
    /// resource version they saw.
    pub fn drop_watches(&self) {
        self.shared.store().drop_watches();
    }

    /// Watches currently open.
    pub fn open_watches(&self) -> usize {
        self.shared
            .store()
            .watchers
            .iter()
            .filter(|w| !w.tx.is_closed())
            .count()
    }

    /// Forgets the watch history: every resource version issued so far becomes too old to
    /// watch from, so a client resuming a watch gets `410` and must relist. (Open watches
    /// are not affected; combine with [`TestApiServer::drop_watches`].)
    pub fn compact(&self) {
        self.shared.store().compact();
    }
}

// ---------------------------------------------------------------------------------------------
// Resource kinds
// ---------------------------------------------------------------------------------------------

#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
enum Kind {
    Pod,
    Node,
    Lease,
    Event,
    EventV1,
    Secret,
}

struct KindInfo {
    kind: &'static str,
    api_version: &'static str,
    /// URL prefix of the group version: `/api/v1` or `/apis/<group>/<version>`.
    prefix: &'static str,
    plural: &'static str,
    singular: &'static str,
    namespaced: bool,
    status_subresource: bool,
    /// Field selector labels besides `metadata.name` and `metadata.namespace`; each is a
    /// dotted JSON path whose absence means `""`.
    fields: &'static [&'static str],
}

const ALL_KINDS: [Kind; 6] = [
    Kind::Pod,
    Kind::Node,
    Kind::Lease,
    Kind::Event,
    Kind::EventV1,
    Kind::Secret,
];

impl Kind {
    fn info(self) -> &'static KindInfo {
        match self {
            Kind::Pod => &KindInfo {
                kind: "Pod",
                api_version: "v1",
                prefix: "/api/v1",
                plural: "pods",
                singular: "pod",
                namespaced: true,
                status_subresource: true,
                fields: &[
                    "spec.nodeName",
                    "spec.restartPolicy",
                    "spec.schedulerName",
                    "spec.serviceAccountName",
                    "status.phase",
                    "status.podIP",
                    "status.nominatedNodeName",
                ],
            },
            Kind::Node => &KindInfo {
                kind: "Node",
                api_version: "v1",
                prefix: "/api/v1",
                plural: "nodes",
                singular: "node",
                namespaced: false,
                status_subresource: true,
                fields: &[],
            },
            Kind::Lease => &KindInfo {
                kind: "Lease",
                api_version: "coordination.k8s.io/v1",
                prefix: "/apis/coordination.k8s.io/v1",
                plural: "leases",
                singular: "lease",
                namespaced: true,
                status_subresource: false,
                fields: &[],
            },
            Kind::Event => &KindInfo {
                kind: "Event",
                api_version: "v1",
                prefix: "/api/v1",
                plural: "events",
                singular: "event",
                namespaced: true,
                status_subresource: false,
                fields: &[
                    "involvedObject.kind",
                    "involvedObject.namespace",
                    "involvedObject.name",
                    "involvedObject.uid",
                    "involvedObject.apiVersion",
                    "involvedObject.fieldPath",
                    "reason",
                    "reportingComponent",
                    "type",
                ],
            },
            Kind::Secret => &KindInfo {
                kind: "Secret",
                api_version: "v1",
                prefix: "/api/v1",
                plural: "secrets",
                singular: "secret",
                namespaced: true,
                status_subresource: false,
                fields: &["type"],
            },
            Kind::EventV1 => &KindInfo {
                kind: "Event",
                api_version: "events.k8s.io/v1",
                prefix: "/apis/events.k8s.io/v1",
                plural: "events",
                singular: "event",
                namespaced: true,
                status_subresource: false,
                fields: &[
                    "regarding.kind",
                    "regarding.namespace",
                    "regarding.name",
                    "regarding.uid",
                    "reason",
                    "reportingController",
                    "type",
                ],
            },
        }
    }

    fn lookup(prefix: &str, plural: &str) -> Option<Kind> {
        ALL_KINDS
            .into_iter()
            .find(|k| k.info().prefix == prefix && k.info().plural == plural)
    }

    /// Decodes `value` into this kind's k8s-openapi type and back: rejects what the type
    /// rejects (wrong `apiVersion`/`kind`, wrong field types), drops unknown fields, and fills
    /// `apiVersion`/`kind`.
    fn normalize(self, value: Value) -> Result<Value, String> {
        let out = match self {
            Kind::Pod => roundtrip::<Pod>(value),
            Kind::Node => roundtrip::<Node>(value),
            Kind::Lease => roundtrip::<Lease>(value),
            Kind::Event => roundtrip::<Event>(value),
            Kind::EventV1 => roundtrip::<EventV1>(value),
            Kind::Secret => roundtrip::<Secret>(value),
        }?;
        if out.is_object() {
            Ok(out)
        } else {
            Err(format!("a {} must be a JSON object", self.info().kind))
        }
    }
}

fn roundtrip<T: DeserializeOwned + Serialize>(value: Value) -> Result<Value, String> {
    let typed: T = serde_json::from_value(value).map_err(|e| e.to_string())?;
    serde_json::to_value(typed).map_err(|e| e.to_string())
}

fn to_json<T: Serialize>(object: &T) -> Result<Value, ApiError> {
    serde_json::to_value(object).map_err(|e| ApiError::internal(e.to_string()))
}

fn from_json<T: DeserializeOwned>(value: Value) -> Result<T, ApiError> {
    serde_json::from_value(value).map_err(|e| ApiError::internal(e.to_string()))
}

// ---------------------------------------------------------------------------------------------
// Errors as Status objects
// ---------------------------------------------------------------------------------------------

impl ApiError {
    fn new(code: u16, reason: &str, message: impl Into<String>) -> ApiError {
        ApiError {
            code,
            reason: reason.to_owned(),
            message: message.into(),
        }
    }

    fn bad_request(message: impl Into<String>) -> ApiError {
        ApiError::new(400, "BadRequest", message)
    }

    fn not_found(kind: Kind, name: &str) -> ApiError {
        ApiError::new(
            404,
            "NotFound",
            format!("{} \"{name}\" not found", kind.info().plural),
        )
    }

    fn no_route() -> ApiError {
        ApiError::new(
            404,
            "NotFound",
            "the server could not find the requested resource",
        )
    }

    fn already_exists(kind: Kind, name: &str) -> ApiError {
        ApiError::new(
            409,
            "AlreadyExists",
            format!("{} \"{name}\" already exists", kind.info().plural),
        )
    }

    fn conflict(kind: Kind, name: &str, why: &str) -> ApiError {
        ApiError::new(
            409,
            "Conflict",
            format!(
                "Operation cannot be fulfilled on {} \"{name}\": {why}",
                kind.info().plural
            ),
        )
    }

    fn modified(kind: Kind, name: &str) -> ApiError {
        ApiError::conflict(
            kind,
            name,
            "the object has been modified; please apply your changes to the latest version and try again",
        )
    }

    fn invalid(message: impl Into<String>) -> ApiError {
        ApiError::new(422, "Invalid", message)
    }

    fn method_not_allowed() -> ApiError {
        ApiError::new(
            405,
            "MethodNotAllowed",
            "the server does not allow this method on the requested resource",
        )
    }

    fn unsupported_media(content_type: Option<&str>) -> ApiError {
        ApiError::new(
            415,
            "UnsupportedMediaType",
            format!(
                "the body of the request was in an unknown format ({}) - accepted media types \
                 include: application/json, application/merge-patch+json, \
                 application/strategic-merge-patch+json",
                content_type.unwrap_or("none")
            ),
        )
    }

    fn too_large(limit: usize) -> ApiError {
        ApiError::new(
            413,
            "RequestEntityTooLarge",
            format!("Request entity too large: limit is {limit}"),
        )
    }

    fn internal(message: impl Into<String>) -> ApiError {
        ApiError::new(500, "InternalError", message)
    }

    fn injected(code: u16) -> ApiError {
        let reason = match code {
            400 => "BadRequest",
            401 => "Unauthorized",
            403 => "Forbidden",
            404 => "NotFound",
            405 => "MethodNotAllowed",
            409 => "Conflict",
            410 => "Expired",
            413 => "RequestEntityTooLarge",
            415 => "UnsupportedMediaType",
            422 => "Invalid",
            429 => "TooManyRequests",
            503 => "ServiceUnavailable",
            504 => "Timeout",
            _ => "InternalError",
        };
        ApiError::new(code, reason, format!("injected fault: HTTP {code}"))
    }

    fn status_json(&self) -> Value {
        json!({
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        })
    }
}

// ---------------------------------------------------------------------------------------------
// Object store, watch history and watchers
// ---------------------------------------------------------------------------------------------

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct ObjKey {
    kind: Kind,
    /// `""` for cluster-scoped kinds.
    namespace: String,
    name: String,
}

impl ObjKey {
    fn new(kind: Kind, namespace: &str, name: &str) -> ObjKey {
        let namespace = if kind.info().namespaced {
            namespace
        } else {
            ""
        };
        ObjKey {
            kind,
            namespace: namespace.to_owned(),
            name: name.to_owned(),
        }
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ChangeType {
    Added,
    Modified,
    Deleted,
}

/// One write, as kept in the watch history.
struct Change {
    rv: u64,
    kind: Kind,
    change: ChangeType,
    object: Value,
    /// The object before a `Modified` change, to tell which watchers' selectors it entered
    /// or left.
    previous: Option<Value>,
}

struct WatchSink {
    filter: Filter,
    bookmarks: bool,
    tx: mpsc::Sender<Bytes>,
    closed: Arc<AtomicBool>,
}

/// Which part of an object a write may change.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Scope {
    /// The main resource: everything but `.status` (for kinds with a status subresource).
    Main,
    /// The `/status` subresource: only `.status`.
    Status,
    /// Test-harness writes: spec and status alike.
    Everything,
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum CreateMode {
    /// An HTTP create: a set `resourceVersion` is an error and, for pods, status is reset to
    /// `Pending`, like the real server does.
    Api,
    /// A test fixture: status is kept and a stale `resourceVersion` is ignored.
    Fixture,
}

enum Deleted {
    /// Graceful deletion in progress; the object is still stored.
    Pending(Value),
    /// Removed; the object as of its deletion.
    Gone(Value),
}

/// Metadata the server owns: kept from the stored object on every update.
const SERVER_OWNED_METADATA: [&str; 8] = [
    "name",
    "namespace",
    "uid",
    "resourceVersion",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "generation",
];

static UID_COUNTER: AtomicU64 = AtomicU64::new(1);

struct Store {
    objects: BTreeMap<ObjKey, Value>,
    /// The global resource version: the RV of the latest write.
    rv: u64,
    name_counter: u64,
    history: VecDeque<Change>,
    history_capacity: usize,
    /// Watches from a resource version below this get `410`: the history holds every change
    /// with `rv > min_watch_rv`.
    min_watch_rv: u64,
    watchers: Vec<WatchSink>,
    watch_buffer: usize,
}

impl Store {
    fn new(config: &ServerConfig) -> Store {
        Store {
            objects: BTreeMap::new(),
            rv: 1,
            name_counter: 0,
            history: VecDeque::new(),
            history_capacity: config.history_capacity,
            min_watch_rv: 0,
            watchers: Vec::new(),
            watch_buffer: config.watch_buffer.max(1),
        }
    }

    fn next_rv(&mut self) -> u64 {
        self.rv += 1;
        self.rv
    }

    fn typed<T: DeserializeOwned>(&self, kind: Kind, namespace: &str, name: &str) -> Option<T> {
        let value = self.objects.get(&ObjKey::new(kind, namespace, name))?;
        serde_json::from_value(value.clone()).ok()
    }

    fn all_typed<T: DeserializeOwned>(&self, kind: Kind) -> Vec<T> {
        self.objects
            .iter()
            .filter(|(key, _)| key.kind == kind)
            .filter_map(|(_, value)| serde_json::from_value(value.clone()).ok())
            .collect()
    }

    /// Records a change at the current RV and sends it to every watcher it concerns.
    fn publish(&mut self, kind: Kind, change: ChangeType, object: Value, previous: Option<Value>) {
        let change = Change {
            rv: self.rv,
            kind,
            change,
            object,
            previous,
        };
        // A watcher whose buffer is full or whose client is gone is dropped: its stream ends
        // and the client resumes from the last RV it saw.
        self.watchers.retain(|w| match w.filter.render(&change) {
            None => !w.tx.is_closed(),
            Some(line) => w.tx.try_send(line).is_ok(),
        });
        self.history.push_back(change);
        while self.history.len() > self.history_capacity {
            if let Some(evicted) = self.history.pop_front() {
                self.min_watch_rv = evicted.rv;
            }
        }
    }

    fn create(
        &mut self,
        kind: Kind,
        namespace: &str,
        body: Value,
        mode: CreateMode,
    ) -> Result<Value, ApiError> {
        let info = kind.info();
        let mut object = kind.normalize(body).map_err(ApiError::bad_request)?;
        if mode == CreateMode::Api && !meta_str(&object, "resourceVersion").is_empty() {
            // What the real server's storage layer answers.
            return Err(ApiError::internal(
                "resourceVersion should not be set on objects to be created",
            ));
        }
        if info.namespaced {
            let given = meta_str(&object, "namespace");
            if !given.is_empty() && given != namespace {
                return Err(ApiError::bad_request(
                    "the namespace of the provided object does not match the namespace sent on the request",
                ));
            }
        }
        let mut name = meta_str(&object, "name").to_owned();
        if name.is_empty() {
            let prefix = meta_str(&object, "generateName").to_owned();
            if prefix.is_empty() {
                return Err(ApiError::invalid(format!(
                    "{} \"\" is invalid: metadata.name: Required value: name or generateName is required",
                    info.kind
                )));
            }
            name = loop {
                self.name_counter += 1;
                let candidate = format!("{prefix}{}", name_suffix(self.name_counter));
                if !self
                    .objects
                    .contains_key(&ObjKey::new(kind, namespace, &candidate))
                {
                    break candidate;
                }
            };
        }
        let key = ObjKey::new(kind, namespace, &name);
        if self.objects.contains_key(&key) {
            return Err(ApiError::already_exists(kind, &name));
        }
        let rv = self.next_rv();
        let meta = meta_mut(&mut object);
        meta.insert("name".into(), json!(name));
        if info.namespaced {
            meta.insert("namespace".into(), json!(namespace));
        } else {
            meta.remove("namespace");
        }
        meta.insert("uid".into(), json!(new_uid()));
        meta.insert("resourceVersion".into(), json!(rv.to_string()));
        meta.insert("creationTimestamp".into(), time_json(now()));
        meta.insert("generation".into(), json!(1));
        meta.remove("deletionTimestamp");
        meta.remove("deletionGracePeriodSeconds");
        if kind == Kind::Pod {
            default_pod(&mut object);
            if mode == CreateMode::Api {
                set_field(&mut object, "status", Some(json!({"phase": "Pending"})));
            }
        }
        self.objects.insert(key, object.clone());
        self.publish(kind, ChangeType::Added, object.clone(), None);
        Ok(object)
    }

    /// Replaces the stored object with `candidate` (already normalized), limited to `scope`.
    fn update(
        &mut self,
        kind: Kind,
        namespace: &str,
        name: &str,
        candidate: Value,
        scope: Scope,
    ) -> Result<Value, ApiError> {
        let info = kind.info();
        let key = ObjKey::new(kind, namespace, name);
        let old = self
            .objects
            .get(&key)
            .cloned()
            .ok_or_else(|| ApiError::not_found(kind, name))?;

        let given_name = meta_str(&candidate, "name");
        if !given_name.is_empty() && given_name != name {
            return Err(ApiError::bad_request(format!(
                "the name of the object ({given_name}) does not match the name on the URL ({name})"
            )));
        }
        let given_namespace = meta_str(&candidate, "namespace");
        if info.namespaced && !given_namespace.is_empty() && given_namespace != namespace {
            return Err(ApiError::bad_request(
                "the namespace of the provided object does not match the namespace sent on the request",
            ));
        }
        let (given_uid, stored_uid) = (meta_str(&candidate, "uid"), meta_str(&old, "uid"));
        if !given_uid.is_empty() && given_uid != stored_uid {
            return Err(ApiError::conflict(
                kind,
                name,
                &format!(
                    "Precondition failed: UID in precondition: {given_uid}, UID in object meta: {stored_uid}"
                ),
            ));
        }
        let given_rv = meta_str(&candidate, "resourceVersion");
        if !given_rv.is_empty() && given_rv != meta_str(&old, "resourceVersion") {
            return Err(ApiError::modified(kind, name));
        }

        let mut new = match scope {
            Scope::Status => {
                let mut new = old.clone();
                set_field(&mut new, "status", candidate.get("status").cloned());
                new
            }
            Scope::Main if info.status_subresource => {
                let mut new = candidate;
                set_field(&mut new, "status", old.get("status").cloned());
                new
            }
            Scope::Main | Scope::Everything => candidate,
        };
        let old_meta = old.get("metadata").and_then(Value::as_object);
        let new_meta = meta_mut(&mut new);
        for field in SERVER_OWNED_METADATA {
            match old_meta.and_then(|m| m.get(field)) {
                Some(value) => new_meta.insert(field.to_owned(), value.clone()),
                None => new_meta.remove(field),
            };
        }
        let mut new = kind.normalize(new).map_err(ApiError::internal)?;
        if new == old {
            return Ok(old);
        }
        if scope != Scope::Status && without_meta_and_status(&new) != without_meta_and_status(&old)
        {
            let generation = old["metadata"]["generation"].as_i64().unwrap_or(0) + 1;
            meta_mut(&mut new).insert("generation".into(), json!(generation));
        }
        let rv = self.next_rv();
        meta_mut(&mut new).insert("resourceVersion".into(), json!(rv.to_string()));
        self.objects.insert(key, new.clone());
        self.publish(kind, ChangeType::Modified, new.clone(), Some(old));
        Ok(new)
    }

    fn patch(
        &mut self,
        kind: Kind,
        namespace: &str,
        name: &str,
        patch_type: PatchType,
        patch: &Value,
        scope: Scope,
    ) -> Result<Value, ApiError> {
        let key = ObjKey::new(kind, namespace, name);
        let mut candidate = self
            .objects
            .get(&key)
            .cloned()
            .ok_or_else(|| ApiError::not_found(kind, name))?;
        if !patch.is_object() {
            return Err(ApiError::bad_request("a patch must be a JSON object"));
        }
        match patch_type {
            PatchType::Merge => merge_patch(&mut candidate, patch),
            PatchType::Strategic => {
                strategic_merge_patch(&mut candidate, patch).map_err(ApiError::bad_request)?
            }
        }
        let candidate = kind.normalize(candidate).map_err(ApiError::bad_request)?;
        self.update(kind, namespace, name, candidate, scope)
    }

    fn delete(
        &mut self,
        kind: Kind,
        namespace: &str,
        name: &str,
        options: &DeleteOptions,
    ) -> Result<Deleted, ApiError> {
        let key = ObjKey::new(kind, namespace, name);
        let old = self
            .objects
            .get(&key)
            .cloned()
            .ok_or_else(|| ApiError::not_found(kind, name))?;
        if let Some(pre) = &options.preconditions {
            let stored_uid = meta_str(&old, "uid");
            if let Some(uid) = pre.uid.as_deref().filter(|u| *u != stored_uid) {
                return Err(ApiError::conflict(
                    kind,
                    name,
                    &format!(
                        "Precondition failed: UID in precondition: {uid}, UID in object meta: {stored_uid}"
                    ),
                ));
            }
            let stored_rv = meta_str(&old, "resourceVersion");
            if let Some(rv) = pre
                .resource_version
                .as_deref()
                .filter(|rv| *rv != stored_rv)
            {
                return Err(ApiError::conflict(
                    kind,
                    name,
                    &format!(
                        "Precondition failed: ResourceVersion in precondition: {rv}, ResourceVersion in object meta: {stored_rv}"
                    ),
                ));
            }
        }
        if kind != Kind::Pod {
            return Ok(self.remove(key, old));
        }

        let requested = options.grace_period_seconds;
        let deletion_ts = old["metadata"]
            .get("deletionTimestamp")
            .and_then(|v| serde_json::from_value::<Time>(v.clone()).ok());
        if let Some(Time(deletion_ts)) = deletion_ts {
            // Already terminating: only an explicit, shorter grace period changes anything.
            let Some(current) = old["metadata"]["deletionGracePeriodSeconds"].as_i64() else {
                return Ok(self.remove(key, old));
            };
            let Some(shorter) = requested.filter(|g| *g < current) else {
                return Ok(Deleted::Pending(old));
            };
            let shorter = shorter.max(0);
            if shorter == 0 {
                return Ok(self.remove(key, old));
            }
            let new_ts = deletion_ts
                .checked_add(SignedDuration::from_secs(shorter - current))
                .unwrap_or(deletion_ts);
            return Ok(Deleted::Pending(
                self.mark_terminating(key, old, new_ts, shorter, false),
            ));
        }

        let mut grace = requested
            .or_else(|| old["spec"]["terminationGracePeriodSeconds"].as_i64())
            .unwrap_or(30);
        if grace < 0 {
            grace = 1;
        }
        let unbound = old["spec"]["nodeName"].as_str().unwrap_or("").is_empty();
        let terminal = matches!(
            old["status"]["phase"].as_str(),
            Some("Succeeded" | "Failed")
        );
        if grace == 0 || unbound || terminal {
            return Ok(self.remove(key, old));
        }
        let deadline = now()
            .checked_add(SignedDuration::from_secs(grace))
            .unwrap_or_else(|_| now());
        Ok(Deleted::Pending(
            self.mark_terminating(key, old, deadline, grace, true),
        ))
    }

    fn mark_terminating(
        &mut self,
        key: ObjKey,
        old: Value,
        deadline: Timestamp,
        grace: i64,
        bump_generation: bool,
    ) -> Value {
        let kind = key.kind;
        let mut new = old.clone();
        let rv = self.next_rv();
        let meta = meta_mut(&mut new);
        meta.insert("deletionTimestamp".into(), time_json(deadline));
        meta.insert("deletionGracePeriodSeconds".into(), json!(grace));
        meta.insert("resourceVersion".into(), json!(rv.to_string()));
        if bump_generation {
            let generation = meta.get("generation").and_then(Value::as_i64).unwrap_or(0);
            meta.insert("generation".into(), json!(generation + 1));
        }
        self.objects.insert(key, new.clone());
        self.publish(kind, ChangeType::Modified, new.clone(), Some(old));
        new
    }

    fn remove(&mut self, key: ObjKey, old: Value) -> Deleted {
        let kind = key.kind;
        self.objects.remove(&key);
        let rv = self.next_rv();
        let mut gone = old;
        meta_mut(&mut gone).insert("resourceVersion".into(), json!(rv.to_string()));
        self.publish(kind, ChangeType::Deleted, gone.clone(), None);
        Deleted::Gone(gone)
    }

    fn list(&self, filter: &Filter) -> Value {
        let info = filter.kind.info();
        let items: Vec<Value> = self
            .objects
            .iter()
            .filter(|(key, object)| key.kind == filter.kind && filter.matches(object))
            .map(|(_, object)| {
                // The real server omits apiVersion/kind on list items.
                let mut item = object.clone();
                if let Some(map) = item.as_object_mut() {
                    map.remove("apiVersion");
                    map.remove("kind");
                }
                item
            })
            .collect();
        json!({
            "kind": format!("{}List", info.kind),
            "apiVersion": info.api_version,
            "metadata": { "resourceVersion": self.rv.to_string() },
            "items": items,
        })
    }

    fn start_watch(
        &mut self,
        filter: Filter,
        params: &WatchParams,
        timeout: Duration,
    ) -> Result<WatchBody, ApiError> {
        let closed = Arc::new(AtomicBool::new(false));
        let rv_param = params.resource_version.as_str();
        let from_now = rv_param.is_empty() || rv_param == "0";
        if params.send_initial_events == Some(true) && !params.allow_bookmarks {
            return Err(ApiError::invalid(
                "sendInitialEvents: Forbidden: sendInitialEvents requires setting allowWatchBookmarks to true",
            ));
        }
        // Like the real server: an unset/"0" RV starts with the current state as ADDED
        // events unless sendInitialEvents=false; sendInitialEvents=true always does, then
        // marks the end of the initial state with a bookmark.
        let send_initial = params.send_initial_events.unwrap_or(from_now);
        let mut initial = VecDeque::new();
        if send_initial {
            for (key, object) in &self.objects {
                if key.kind == filter.kind && filter.matches(object) {
                    initial.push_back(watch_line("ADDED", object));
                }
            }
            if params.send_initial_events == Some(true) {
                initial.push_back(bookmark_line(filter.kind, self.rv, true));
            }
        } else if !from_now {
            let from: u64 = rv_param.parse().map_err(|_| {
                ApiError::bad_request(format!("invalid resource version: {rv_param}"))
            })?;
            if from < self.min_watch_rv {
                let expired = ApiError::new(
                    410,
                    "Expired",
                    format!("too old resource version: {from} ({})", self.min_watch_rv),
                );
                initial.push_back(watch_line("ERROR", &expired.status_json()));
                return Ok(WatchBody::new(initial, None, timeout, closed));
            }
            for change in self.history.iter().filter(|c| c.rv > from) {
                if let Some(line) = filter.render(change) {
                    initial.push_back(line);
                }
            }
        }
        let (tx, rx) = mpsc::channel(self.watch_buffer);
        self.watchers.push(WatchSink {
            filter,
            bookmarks: params.allow_bookmarks,
            tx,
            closed: Arc::clone(&closed),
        });
        Ok(WatchBody::new(initial, Some(rx), timeout, closed))
    }

    fn send_bookmarks(&mut self) {
        let rv = self.rv;
        self.watchers.retain(|w| {
            if w.tx.is_closed() {
                false
            } else if w.bookmarks {
                w.tx.try_send(bookmark_line(w.filter.kind, rv, false))
                    .is_ok()
            } else {
                true
            }
        });
    }

    fn drop_watches(&mut self) {
        for watcher in self.watchers.drain(..) {
            watcher.closed.store(true, Ordering::SeqCst);
        }
    }

    fn compact(&mut self) {
        // Bump the RV so that a relist reports an RV that is watchable again.
        let rv = self.next_rv();
        self.min_watch_rv = rv;
        self.history.clear();
    }
}

fn meta_str<'a>(object: &'a Value, field: &str) -> &'a str {
    object["metadata"][field].as_str().unwrap_or("")
}

/// The `metadata` map of a normalized object (always a JSON object), created if missing.
fn meta_mut(object: &mut Value) -> &mut Map<String, Value> {
    if !object.is_object() {
        *object = Value::Object(Map::new());
    }
    let meta = &mut object["metadata"];
    if !meta.is_object() {
        *meta = Value::Object(Map::new());
    }
    match meta {
        Value::Object(map) => map,
        _ => unreachable!("metadata was just made an object"),
    }
}

fn set_field(object: &mut Value, field: &str, value: Option<Value>) {
    if let Some(map) = object.as_object_mut() {
        match value {
            Some(value) => map.insert(field.to_owned(), value),
            None => map.remove(field),
        };
    }
}

fn without_meta_and_status(object: &Value) -> Value {
    let mut copy = object.clone();
    if let Some(map) = copy.as_object_mut() {
        map.remove("metadata");
        map.remove("status");
    }
    copy
}

/// The current time. (`Timestamp::now` needs jiff's `std` feature, which k8s-openapi does
/// not enable.)
fn now() -> Timestamp {
    let since_epoch = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap_or_default();
    Timestamp::new(since_epoch.as_secs() as i64, 0).unwrap_or(Timestamp::UNIX_EPOCH)
}

fn time_json(ts: Timestamp) -> Value {
    serde_json::to_value(Time(ts)).unwrap_or(Value::Null)
}

fn splitmix64(mut z: u64) -> u64 {
    z = z.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// A version-4-shaped UUID, unique within the process (the low 32 bits of the last group are
/// a process-wide counter), deterministic given the order of creations.
fn new_uid() -> String {
    let n = UID_COUNTER.fetch_add(1, Ordering::Relaxed);
    let a = splitmix64(n);
    let b = splitmix64(n ^ 0x5bd1_e995_5bd1_e995);
    format!(
        "{:08x}-{:04x}-4{:03x}-{:04x}-{:012x}",
        a >> 32,
        (a >> 16) & 0xffff,
        a & 0x0fff,
        0x8000 | (b & 0x3fff),
        ((b >> 14) & 0xffff_0000_0000) | (n & 0xffff_ffff)
    )
}

/// Five characters from the apiserver's generateName alphabet.
fn name_suffix(n: u64) -> String {
    const ALPHABET: &[u8] = b"bcdfghjklmnpqrstvwxz2456789";
    let mut x = splitmix64(n);
    (0..5)
        .map(|_| {
            let c = ALPHABET[(x % ALPHABET.len() as u64) as usize] as char;
            x /= ALPHABET.len() as u64;
            c
        })
        .collect()
}

/// The pod defaults the real apiserver applies that a node agent commonly reads.
fn default_pod(pod: &mut Value) {
    fn default(map: &mut Map<String, Value>, field: &str, value: Value) {
        map.entry(field.to_owned()).or_insert(value);
    }
    let Some(spec) = pod.get_mut("spec").and_then(Value::as_object_mut) else {
        return;
    };
    default(spec, "restartPolicy", json!("Always"));
    default(spec, "terminationGracePeriodSeconds", json!(30));
    default(spec, "dnsPolicy", json!("ClusterFirst"));
    default(spec, "schedulerName", json!("default-scheduler"));
    for list in ["initContainers", "containers"] {
        let Some(containers) = spec.get_mut(list).and_then(Value::as_array_mut) else {
            continue;
        };
        for container in containers.iter_mut().filter_map(Value::as_object_mut) {
            default(
                container,
                "terminationMessagePath",
                json!("/dev/termination-log"),
            );
            default(container, "terminationMessagePolicy", json!("File"));
            let image = container.get("image").and_then(Value::as_str).unwrap_or("");
            let last = image.rsplit('/').next().unwrap_or("");
            let pinned = image.contains('@')
                || last
                    .split_once(':')
                    .is_some_and(|(_, tag)| !tag.is_empty() && tag != "latest");
            let policy = if pinned { "IfNotPresent" } else { "Always" };
            default(container, "imagePullPolicy", json!(policy));
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Patches
// ---------------------------------------------------------------------------------------------

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum PatchType {
    Merge,
    Strategic,
}

/// RFC 7386 JSON merge patch.
fn merge_patch(target: &mut Value, patch: &Value) {
    let Value::Object(patch) = patch else {
        *target = patch.clone();
        return;
    };
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    if let Value::Object(target) = target {
        for (key, value) in patch {
            if value.is_null() {
                target.remove(key);
            } else {
                merge_patch(target.entry(key.clone()).or_insert(Value::Null), value);
            }
        }
    }
}

/// Lists that the Kubernetes types of pods and nodes (and object metadata) declare
/// `patchStrategy:"merge"`, with their merge key. The table is keyed by field name, which is
/// unambiguous for the kinds served here. Lists not named here are replaced whole by a
/// strategic merge patch — in particular `containerStatuses`, `initContainerStatuses` and
/// `ephemeralContainerStatuses`, which upstream are `+listType=atomic`.
pub const SMP_MERGE_KEYS: &[(&str, &str)] = &[
    // PodStatus
    ("conditions", "type"),
    ("podIPs", "ip"),
    ("hostIPs", "ip"),
    ("resourceClaimStatuses", "name"),
    // PodSpec and Container
    ("containers", "name"),
    ("initContainers", "name"),
    ("ephemeralContainers", "name"),
    ("volumes", "name"),
    ("imagePullSecrets", "name"),
    ("hostAliases", "ip"),
    ("resourceClaims", "name"),
    ("schedulingGates", "name"),
    ("env", "name"),
    ("ports", "containerPort"),
    ("volumeMounts", "mountPath"),
    ("volumeDevices", "devicePath"),
    // NodeStatus (conditions above)
    ("addresses", "type"),
    // ObjectMeta
    ("ownerReferences", "uid"),
];

/// Lists of scalars with `patchStrategy:"merge"`: a patch adds its items (set union).
const SMP_MERGE_SCALAR_LISTS: &[&str] = &["finalizers", "podCIDRs"];

/// Strategic merge patch, for the lists in [`SMP_MERGE_KEYS`] and [`SMP_MERGE_SCALAR_LISTS`].
///
/// Directives: `$patch: replace|delete|merge` on maps and (as a list element) on keyed lists;
/// `$retainKeys`; `$deleteFromPrimitiveList/<field>`; `$setElementOrder/<field>` is accepted
/// and ignored (it only orders items, never adds or removes them). Unknown `$` directives are
/// rejected.
fn strategic_merge_patch(target: &mut Value, patch: &Value) -> Result<(), String> {
    let Value::Object(patch) = patch else {
        return Err("a strategic merge patch must be a JSON object".into());
    };
    if !target.is_object() {
        *target = Value::Object(Map::new());
    }
    let Value::Object(target) = target else {
        unreachable!("target was just made an object");
    };
    smp_map(target, patch)
}

fn smp_map(target: &mut Map<String, Value>, patch: &Map<String, Value>) -> Result<(), String> {
    match patch.get("$patch") {
        None => {}
        Some(Value::String(d)) if d == "merge" => {}
        Some(Value::String(d)) if d == "replace" => {
            let mut replacement = Map::new();
            let mut rest = patch.clone();
            rest.remove("$patch");
            smp_map(&mut replacement, &rest)?;
            *target = replacement;
            return Ok(());
        }
        Some(other) => return Err(format!("unsupported $patch directive here: {other}")),
    }
    let mut retain_keys: Option<Vec<String>> = None;
    let mut delete_from: Vec<(&str, &Value)> = Vec::new();
    for (key, value) in patch {
        if key == "$patch" {
            continue;
        }
        if key == "$retainKeys" {
            let keys = value
                .as_array()
                .ok_or("$retainKeys must be a list")?
                .iter()
                .map(|k| {
                    k.as_str()
                        .map(str::to_owned)
                        .ok_or("$retainKeys entries must be strings")
                })
                .collect::<Result<Vec<_>, _>>()?;
            retain_keys = Some(keys);
            continue;
        }
        if key.starts_with("$setElementOrder/") {
            if !value.is_array() {
                return Err(format!("{key} must be a list"));
            }
            continue;
        }
        if let Some(field) = key.strip_prefix("$deleteFromPrimitiveList/") {
            delete_from.push((field, value));
            continue;
        }
        if key.starts_with('$') {
            return Err(format!("unknown strategic merge patch directive {key}"));
        }
        match value {
            Value::Null => {
                target.remove(key);
            }
            Value::Object(child) => {
                if child.get("$patch").and_then(Value::as_str) == Some("delete") {
                    target.remove(key);
                    continue;
                }
                let slot = target
                    .entry(key.clone())
                    .or_insert_with(|| Value::Object(Map::new()));
                if !slot.is_object() {
                    *slot = Value::Object(Map::new());
                }
                if let Value::Object(slot) = slot {
                    smp_map(slot, child)?;
                }
            }
            Value::Array(items) => {
                let merged = if let Some((_, merge_key)) =
                    SMP_MERGE_KEYS.iter().find(|(field, _)| field == key)
                {
                    let current = match target.remove(key) {
                        Some(Value::Array(current)) => current,
                        _ => Vec::new(),
                    };
                    smp_keyed_list(key, merge_key, current, items)?
                } else if SMP_MERGE_SCALAR_LISTS.contains(&key.as_str()) {
                    let mut current = match target.remove(key) {
                        Some(Value::Array(current)) => current,
                        _ => Vec::new(),
                    };
                    for item in items {
                        if !current.contains(item) {
                            current.push(item.clone());
                        }
                    }
                    current
                } else {
                    items.clone()
                };
                target.insert(key.clone(), Value::Array(merged));
            }
            scalar => {
                target.insert(key.clone(), scalar.clone());
            }
        }
    }
    for (field, removed) in delete_from {
        let removed = removed
            .as_array()
            .ok_or_else(|| format!("$deleteFromPrimitiveList/{field} must be a list"))?;
        if let Some(Value::Array(list)) = target.get_mut(field) {
            list.retain(|item| !removed.contains(item));
        }
    }
    if let Some(keys) = retain_keys {
        target.retain(|key, _| keys.iter().any(|k| k == key));
    }
    Ok(())
}

fn smp_keyed_list(
    field: &str,
    merge_key: &str,
    mut current: Vec<Value>,
    patch: &[Value],
) -> Result<Vec<Value>, String> {
    let is_directive =
        |item: &Value, d: &str| item.get("$patch").and_then(Value::as_str) == Some(d);
    if patch.iter().any(|item| is_directive(item, "replace")) {
        // `{"$patch": "replace"}` as an element: the list becomes the other elements.
        let mut replacement = Vec::new();
        for item in patch.iter().filter(|item| !is_directive(item, "replace")) {
            let Value::Object(item) = item else {
                return Err(format!("{field}: list items must be objects"));
            };
            let mut fresh = Map::new();
            smp_map(&mut fresh, item)?;
            replacement.push(Value::Object(fresh));
        }
        return Ok(replacement);
    }
    for item in patch {
        let Value::Object(item) = item else {
            return Err(format!("{field}: list items must be objects"));
        };
        let key_value = item.get(merge_key).ok_or_else(|| {
            format!("map: {item:?} does not contain declared merge key: {merge_key}")
        })?;
        match item.get("$patch").and_then(Value::as_str) {
            Some("delete") => current.retain(|existing| existing.get(merge_key) != Some(key_value)),
            None | Some("merge") => {
                let existing = current
                    .iter_mut()
                    .find(|existing| existing.get(merge_key) == Some(key_value));
                match existing {
                    Some(Value::Object(existing)) => smp_map(existing, item)?,
                    Some(other) => {
                        let mut fresh = Map::new();
                        smp_map(&mut fresh, item)?;
                        *other = Value::Object(fresh);
                    }
                    None => {
                        let mut fresh = Map::new();
                        smp_map(&mut fresh, item)?;
                        current.push(Value::Object(fresh));
                    }
                }
            }
            Some(other) => return Err(format!("{field}: unsupported $patch directive {other}")),
        }
    }
    Ok(current)
}

// ---------------------------------------------------------------------------------------------
// Selectors
// ---------------------------------------------------------------------------------------------

#[derive(Clone, Debug)]
enum LabelReq {
    Exists(String),
    NotExists(String),
    In(String, Vec<String>),
    NotIn(String, Vec<String>),
}

#[derive(Clone, Debug)]
struct FieldReq {
    field: String,
    value: String,
    equal: bool,
}

#[derive(Clone, Debug)]
struct Filter {
    kind: Kind,
    namespace: Option<String>,
    labels: Vec<LabelReq>,
    fields: Vec<FieldReq>,
}

impl Filter {
    fn from_query(kind: Kind, namespace: Option<&str>, query: &Query) -> Result<Filter, ApiError> {
        let labels = match query.get("labelSelector") {
            Some(s) => parse_label_selector(s).map_err(ApiError::bad_request)?,
            None => Vec::new(),
        };
        let fields = match query.get("fieldSelector") {
            Some(s) => parse_field_selector(kind, s).map_err(ApiError::bad_request)?,
            None => Vec::new(),
        };
        Ok(Filter {
            kind,
            namespace: namespace.map(str::to_owned),
            labels,
            fields,
        })
    }

    fn matches(&self, object: &Value) -> bool {
        if self
            .namespace
            .as_ref()
            .is_some_and(|ns| meta_str(object, "namespace") != ns)
        {
            return false;
        }
        let labels = &object["metadata"]["labels"];
        let label = |key: &str| labels.get(key).and_then(Value::as_str);
        let labels_match = self.labels.iter().all(|req| match req {
            LabelReq::Exists(k) => label(k).is_some(),
            LabelReq::NotExists(k) => label(k).is_none(),
            LabelReq::In(k, values) => label(k).is_some_and(|v| values.iter().any(|x| x == v)),
            LabelReq::NotIn(k, values) => !label(k).is_some_and(|v| values.iter().any(|x| x == v)),
        });
        labels_match
            && self
                .fields
                .iter()
                .all(|req| (field_value(object, &req.field) == req.value) == req.equal)
    }

    /// The watch line this watcher gets for `change`, if any. A modification that moves an
    /// object into (out of) the selection is an `ADDED` (`DELETED`), as on the real server.
    fn render(&self, change: &Change) -> Option<Bytes> {
        if change.kind != self.kind {
            return None;
        }
        let now = self.matches(&change.object);
        let event = match change.change {
            ChangeType::Added => now.then_some("ADDED")?,
            ChangeType::Deleted => now.then_some("DELETED")?,
            ChangeType::Modified => {
                let before = change.previous.as_ref().is_some_and(|p| self.matches(p));
                match (before, now) {
                    (true, true) => "MODIFIED",
                    (false, true) => "ADDED",
                    (true, false) => "DELETED",
                    (false, false) => return None,
                }
            }
        };
        Some(watch_line(event, &change.object))
    }
}

fn field_value(object: &Value, path: &str) -> String {
    let mut current = object;
    for part in path.split('.') {
        current = &current[part];
    }
    match current {
        Value::String(s) => s.clone(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        _ => String::new(),
    }
}

/// Splits on commas that are not inside parentheses.
fn split_top_level(s: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let (mut depth, mut start) = (0usize, 0usize);
    for (i, c) in s.char_indices() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            ',' if depth == 0 => {
                parts.push(&s[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&s[start..]);
    parts
}

fn label_token(s: &str) -> Result<String, String> {
    let s = s.trim();
    let bad = |c: char| c.is_whitespace() || "=!(),<>".contains(c);
    if s.is_empty() || s.contains(bad) {
        Err(format!(
            "unable to parse requirement: invalid label key or value {s:?}"
        ))
    } else {
        Ok(s.to_owned())
    }
}

fn label_value(s: &str) -> Result<String, String> {
    let s = s.trim();
    // Values may be empty (`a=`); otherwise the same characters as keys are forbidden.
    if s.is_empty() {
        Ok(String::new())
    } else {
        label_token(s)
    }
}

fn parse_label_selector(s: &str) -> Result<Vec<LabelReq>, String> {
    let mut reqs = Vec::new();
    for term in split_top_level(s) {
        let term = term.trim();
        if term.is_empty() {
            continue;
        }
        if let Some(key) = term.strip_prefix('!') {
            reqs.push(LabelReq::NotExists(label_token(key)?));
        } else if let Some(open) = term.find('(') {
            let Some(inner) = term[open + 1..].strip_suffix(')') else {
                return Err(format!("unable to parse requirement: {term:?}"));
            };
            let head: Vec<&str> = term[..open].split_whitespace().collect();
            let [key, op] = head.as_slice() else {
                return Err(format!("unable to parse requirement: {term:?}"));
            };
            let values = inner
                .split(',')
                .map(label_value)
                .collect::<Result<Vec<_>, _>>()?;
            let key = label_token(key)?;
            match *op {
                "in" => reqs.push(LabelReq::In(key, values)),
                "notin" => reqs.push(LabelReq::NotIn(key, values)),
                _ => {
                    return Err(format!(
                        "unable to parse requirement: unknown operator {op:?}"
                    ));
                }
            }
        } else if let Some((k, v)) = term.split_once("!=") {
            reqs.push(LabelReq::NotIn(label_token(k)?, vec![label_value(v)?]));
        } else if let Some((k, v)) = term.split_once("==") {
            reqs.push(LabelReq::In(label_token(k)?, vec![label_value(v)?]));
        } else if let Some((k, v)) = term.split_once('=') {
            reqs.push(LabelReq::In(label_token(k)?, vec![label_value(v)?]));
        } else {
            reqs.push(LabelReq::Exists(label_token(term)?));
        }
    }
    Ok(reqs)
}

fn parse_field_selector(kind: Kind, s: &str) -> Result<Vec<FieldReq>, String> {
    let mut reqs = Vec::new();
    for term in s.split(',') {
        let term = term.trim();
        if term.is_empty() {
            continue;
        }
        let (field, value, equal) = if let Some((f, v)) = term.split_once("!=") {
            (f, v, false)
        } else if let Some((f, v)) = term.split_once("==") {
            (f, v, true)
        } else if let Some((f, v)) = term.split_once('=') {
            (f, v, true)
        } else {
            return Err(format!(
                "invalid selector: '{s}'; can't understand '{term}'"
            ));
        };
        let field = field.trim();
        let supported = field == "metadata.name"
            || field == "metadata.namespace"
            || kind.info().fields.contains(&field);
        if !supported {
            return Err(format!("field label not supported: {field}"));
        }
        reqs.push(FieldReq {
            field: field.to_owned(),
            value: value.trim().to_owned(),
            equal,
        });
    }
    Ok(reqs)
}

// ---------------------------------------------------------------------------------------------
// Watch streams
// ---------------------------------------------------------------------------------------------

fn watch_line(event: &str, object: &Value) -> Bytes {
    let mut line = format!("{{\"type\":\"{event}\",\"object\":").into_bytes();
    serde_json::to_writer(&mut line, object).expect("serializing a JSON value cannot fail");
    line.extend_from_slice(b"}\n");
    Bytes::from(line)
}

fn bookmark_line(kind: Kind, rv: u64, initial_events_end: bool) -> Bytes {
    let info = kind.info();
    let mut metadata = json!({ "resourceVersion": rv.to_string() });
    if initial_events_end {
        metadata["annotations"] = json!({ "k8s.io/initial-events-end": "true" });
    }
    let object = json!({ "kind": info.kind, "apiVersion": info.api_version, "metadata": metadata });
    watch_line("BOOKMARK", &object)
}

struct WatchParams {
    resource_version: String,
    allow_bookmarks: bool,
    send_initial_events: Option<bool>,
}

/// A chunked watch response: queued lines first (initial state, replayed history or an
/// error), then live changes until the timeout, [`TestApiServer::drop_watches`], or the
/// watcher being dropped for falling behind.
struct WatchBody {
    pending: VecDeque<Bytes>,
    live: Option<mpsc::Receiver<Bytes>>,
    deadline: Pin<Box<tokio::time::Sleep>>,
    closed: Arc<AtomicBool>,
}

impl WatchBody {
    fn new(
        pending: VecDeque<Bytes>,
        live: Option<mpsc::Receiver<Bytes>>,
        timeout: Duration,
        closed: Arc<AtomicBool>,
    ) -> WatchBody {
        WatchBody {
            pending,
            live,
            deadline: Box::pin(tokio::time::sleep(timeout)),
            closed,
        }
    }
}

impl Body for WatchBody {
    type Data = Bytes;
    type Error = Infallible;

    fn poll_frame(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
    ) -> Poll<Option<Result<Frame<Bytes>, Infallible>>> {
        let this = &mut *self;
        if this.closed.load(Ordering::SeqCst) {
            this.live = None;
            return Poll::Ready(None);
        }
        if let Some(line) = this.pending.pop_front() {
            return Poll::Ready(Some(Ok(Frame::data(line))));
        }
        if this.deadline.as_mut().poll(cx).is_ready() {
            this.live = None;
            return Poll::Ready(None);
        }
        let Some(live) = this.live.as_mut() else {
            return Poll::Ready(None);
        };
        match live.poll_recv(cx) {
            Poll::Ready(Some(line)) if !this.closed.load(Ordering::SeqCst) => {
                Poll::Ready(Some(Ok(Frame::data(line))))
            }
            Poll::Ready(_) => {
                this.live = None;
                Poll::Ready(None)
            }
            Poll::Pending => Poll::Pending,
        }
    }
}

// ---------------------------------------------------------------------------------------------
// Request log and fault injection
// ---------------------------------------------------------------------------------------------

struct Control {
    log: VecDeque<RecordedRequest>,
    capacity: usize,
    dropped: u64,
    next_seq: u64,
    fault: Option<FaultConfig>,
    /// Matching requests seen since the fault config was set.
    fault_counter: u64,
    fail_next: VecDeque<(u32, u16)>,
}

impl Control {
    fn record(
        &mut self,
        method: &str,
        path: &str,
        query: &str,
        content_type: Option<String>,
        body: &Bytes,
    ) -> u64 {
        let seq = self.next_seq;
        self.next_seq += 1;
        if self.capacity == 0 {
            self.dropped += 1;
            return seq;
        }
        if self.log.len() >= self.capacity {
            self.log.pop_front();
            self.dropped += 1;
        }
        self.log.push_back(RecordedRequest {
            seq,
            method: method.to_owned(),
            path: path.to_owned(),
            query: query.to_owned(),
            content_type,
            body: serde_json::from_slice(body).ok(),
            raw_body: body.clone(),
            status: None,
            injected_fault: false,
        });
        seq
    }

    fn entry(&mut self, seq: u64) -> Option<&mut RecordedRequest> {
        self.log.iter_mut().rev().find(|r| r.seq == seq)
    }

    /// Latency to add and the status to fail with, if this request is to fail.
    fn decide_fault(&mut self, seq: u64, method: &str, path: &str) -> (Duration, Option<u16>) {
        let mut outcome = (Duration::ZERO, None);
        if let Some((remaining, status)) = self.fail_next.front_mut() {
            outcome.1 = Some(*status);
            *remaining -= 1;
            if *remaining == 0 {
                self.fail_next.pop_front();
            }
        } else if let Some(fault) = self.fault.as_ref().filter(|f| f.applies(method, path)) {
            let rate = u64::from(fault.error_rate_per_million.min(1_000_000));
            let n = self.fault_counter + 1;
            self.fault_counter = n;
            outcome.0 = Duration::from_millis(fault.latency_ms);
            if n * rate / 1_000_000 > (n - 1) * rate / 1_000_000 {
                outcome.1 = Some(fault.error_status);
            }
        }
        if outcome.1.is_some() {
            if let Some(entry) = self.entry(seq) {
                entry.injected_fault = true;
            }
        }
        outcome
    }
}

// ---------------------------------------------------------------------------------------------
// HTTP
// ---------------------------------------------------------------------------------------------

type RespBody = UnsyncBoxBody<Bytes, Infallible>;

struct Shared {
    config: ServerConfig,
    addr: SocketAddr,
    store: Mutex<Store>,
    control: Mutex<Control>,
}

impl Shared {
    fn new(config: ServerConfig, addr: SocketAddr) -> Shared {
        Shared {
            store: Mutex::new(Store::new(&config)),
            control: Mutex::new(Control {
                log: VecDeque::new(),
                capacity: config.request_log_capacity,
                dropped: 0,
                next_seq: 0,
                fault: None,
                fault_counter: 0,
                fail_next: VecDeque::new(),
            }),
            config,
            addr,
        }
    }

    /// The store lock. A panic while it was held (a bug here) must not wedge every later test
    /// assertion, so poisoning is ignored: each write either completes or returns early
    /// before mutating.
    fn store(&self) -> MutexGuard<'_, Store> {
        self.store.lock().unwrap_or_else(|e| e.into_inner())
    }

    fn control(&self) -> MutexGuard<'_, Control> {
        self.control.lock().unwrap_or_else(|e| e.into_inner())
    }
}

async fn accept_loop(listener: TcpListener, shared: Arc<Shared>) {
    // Owning the connections here means aborting this task closes all of them.
    let mut connections = JoinSet::new();
    loop {
        tokio::select! {
            accepted = listener.accept() => {
                let Ok((stream, _)) = accepted else {
                    tokio::time::sleep(Duration::from_millis(10)).await;
                    continue;
                };
                let shared = Arc::clone(&shared);
                connections.spawn(async move {
                    let service = service_fn(move |req| handle(Arc::clone(&shared), req));
                    // Connection errors (client hang-ups) are the client's business.
                    let _ = http1::Builder::new()
                        .serve_connection(TokioIo::new(stream), service)
                        .await;
                });
            }
            Some(_) = connections.join_next(), if !connections.is_empty() => {}
        }
    }
}

async fn bookmark_loop(shared: Arc<Shared>) {
    let mut tick = tokio::time::interval(shared.config.bookmark_interval);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        shared.store().send_bookmarks();
    }
}

async fn handle(
    shared: Arc<Shared>,
    req: Request<Incoming>,
) -> Result<Response<RespBody>, Infallible> {
    let (parts, body) = req.into_parts();
    let path = parts.uri.path().to_owned();
    let raw_query = parts.uri.query().unwrap_or("").to_owned();
    let content_type = parts
        .headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .map(str::to_owned);
    let limit = shared.config.max_body_bytes;
    let declared = parts
        .headers
        .get(header::CONTENT_LENGTH)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok());
    let body: Result<Bytes, ApiError> = if declared.is_some_and(|n| n > limit as u64) {
        Err(ApiError::too_large(limit))
    } else {
        match Limited::new(body, limit).collect().await {
            Ok(collected) => Ok(collected.to_bytes()),
            Err(e) if e.downcast_ref::<LengthLimitError>().is_some() => {
                Err(ApiError::too_large(limit))
            }
            Err(e) => Err(ApiError::bad_request(format!(
                "reading the request body: {e}"
            ))),
        }
    };
    let recorded_body = body.as_ref().cloned().unwrap_or_default();
    let seq = shared.control().record(
        parts.method.as_str(),
        &path,
        &raw_query,
        content_type.clone(),
        &recorded_body,
    );
    let response = match body {
        Err(e) => error_response(&e),
        Ok(body) => {
            let (latency, fault) = shared
                .control()
                .decide_fault(seq, parts.method.as_str(), &path);
            if !latency.is_zero() {
                tokio::time::sleep(latency).await;
            }
            match fault {
                Some(code) => error_response(&ApiError::injected(code)),
                None => {
                    let request = ApiRequest {
                        method: &parts.method,
                        path: &path,
                        query: Query::parse(&raw_query),
                        content_type: content_type.as_deref(),
                        body: &body,
                    };
                    route(&shared, &request).unwrap_or_else(|e| error_response(&e))
                }
            }
        }
    };
    if let Some(entry) = shared.control().entry(seq) {
        entry.status = Some(response.status().as_u16());
    }
    Ok(response)
}

struct ApiRequest<'a> {
    method: &'a Method,
    path: &'a str,
    query: Query,
    content_type: Option<&'a str>,
    body: &'a Bytes,
}

impl ApiRequest<'_> {
    /// The media type without parameters, lower-cased.
    fn media_type(&self) -> Option<String> {
        self.content_type.map(|ct| {
            ct.split(';')
                .next()
                .unwrap_or("")
                .trim()
                .to_ascii_lowercase()
        })
    }

    fn json_body(&self) -> Result<Value, ApiError> {
        if self.media_type().as_deref() != Some("application/json") {
            return Err(ApiError::unsupported_media(self.content_type));
        }
        serde_json::from_slice(self.body)
            .map_err(|e| ApiError::bad_request(format!("the request body is not valid JSON: {e}")))
    }

    fn reject_dry_run(&self) -> Result<(), ApiError> {
        match self.query.get("dryRun") {
            Some(v) if !v.is_empty() => Err(ApiError::bad_request(
                "dryRun is not supported by the test API server",
            )),
            _ => Ok(()),
        }
    }
}

fn json_response(status: StatusCode, value: &Value) -> Response<RespBody> {
    let body = serde_json::to_vec(value).expect("serializing a JSON value cannot fail");
    let mut response = Response::new(Full::new(Bytes::from(body)).boxed_unsync());
    *response.status_mut() = status;
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static("application/json"),
    );
    response
}

fn error_response(error: &ApiError) -> Response<RespBody> {
    let status = StatusCode::from_u16(error.code).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let mut response = json_response(status, &error.status_json());
    if error.code == 429 {
        response
            .headers_mut()
            .insert(header::RETRY_AFTER, header::HeaderValue::from_static("1"));
    }
    response
}

fn route(shared: &Shared, req: &ApiRequest<'_>) -> Result<Response<RespBody>, ApiError> {
    let segments: Vec<&str> = req.path.split('/').filter(|s| !s.is_empty()).collect();
    let discovery = |value: Value| {
        if req.method == Method::GET {
            Ok(json_response(StatusCode::OK, &value))
        } else {
            Err(ApiError::method_not_allowed())
        }
    };
    match segments.as_slice() {
        ["version"] => discovery(json!({
            "major": "1",
            "minor": "37",
            "gitVersion": "v1.37.0-ledgerlet-test",
            "gitCommit": "0000000000000000000000000000000000000000",
            "gitTreeState": "clean",
            "buildDate": "2026-01-01T00:00:00Z",
            "goVersion": "go1.25.0",
            "compiler": "gc",
            "platform": "linux/amd64",
        })),
        ["healthz" | "livez" | "readyz"] => {
            let mut response = Response::new(Full::new(Bytes::from_static(b"ok")).boxed_unsync());
            response.headers_mut().insert(
                header::CONTENT_TYPE,
                header::HeaderValue::from_static("text/plain"),
            );
            Ok(response)
        }
        ["api"] => discovery(json!({
            "kind": "APIVersions",
            "versions": ["v1"],
            "serverAddressByClientCIDRs": [
                { "clientCIDR": "0.0.0.0/0", "serverAddress": shared.addr.to_string() }
            ],
        })),
        ["apis"] => discovery(api_group_list()),
        ["api", "v1"] => discovery(api_resource_list("/api/v1", "v1")),
        ["apis", group, version] => discovery(api_resource_list(
            &format!("/apis/{group}/{version}"),
            &format!("{group}/{version}"),
        )),
        ["api", "v1", rest @ ..] => resource(shared, req, "/api/v1", rest),
        ["apis", group, version, rest @ ..] => {
            resource(shared, req, &format!("/apis/{group}/{version}"), rest)
        }
        _ => Err(ApiError::no_route()),
    }
}

fn api_group_list() -> Value {
    let groups: Vec<Value> = ["coordination.k8s.io", "events.k8s.io"]
        .iter()
        .map(|group| {
            let gv = json!({ "groupVersion": format!("{group}/v1"), "version": "v1" });
            json!({ "name": group, "versions": [gv.clone()], "preferredVersion": gv })
        })
        .collect();
    json!({ "kind": "APIGroupList", "apiVersion": "v1", "groups": groups })
}

fn api_resource_list(prefix: &str, group_version: &str) -> Value {
    let mut resources = Vec::new();
    for kind in ALL_KINDS.into_iter().filter(|k| k.info().prefix == prefix) {
        let info = kind.info();
        resources.push(json!({
            "name": info.plural,
            "singularName": info.singular,
            "namespaced": info.namespaced,
            "kind": info.kind,
            "verbs": ["create", "delete", "get", "list", "patch", "update", "watch"],
        }));
        if info.status_subresource {
            resources.push(json!({
                "name": format!("{}/status", info.plural),
                "singularName": "",
                "namespaced": info.namespaced,
                "kind": info.kind,
                "verbs": ["get", "patch", "update"],
            }));
        }
    }
    json!({
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": group_version,
        "resources": resources,
    })
}

fn resource(
    shared: &Shared,
    req: &ApiRequest<'_>,
    prefix: &str,
    rest: &[&str],
) -> Result<Response<RespBody>, ApiError> {
    let (namespace, rest) = match rest {
        ["namespaces", ns, tail @ ..] if !tail.is_empty() => (Some(*ns), tail),
        _ => (None, rest),
    };
    let (plural, name, subresource) = match rest {
        [plural] => (*plural, None, None),
        [plural, name] => (*plural, Some(*name), None),
        [plural, name, sub] => (*plural, Some(*name), Some(*sub)),
        _ => return Err(ApiError::no_route()),
    };
    let kind = Kind::lookup(prefix, plural).ok_or_else(ApiError::no_route)?;
    let info = kind.info();
    if namespace.is_some() && !info.namespaced {
        return Err(ApiError::no_route());
    }
    if name.is_some() && info.namespaced && namespace.is_none() {
        return Err(ApiError::no_route());
    }
    let namespace_or_empty = namespace.unwrap_or("");
    match (name, subresource) {
        (None, None) => collection(shared, req, kind, namespace),
        (Some(name), None) => object(shared, req, kind, namespace_or_empty, name, Scope::Main),
        (Some(name), Some("status")) if info.status_subresource => {
            object(shared, req, kind, namespace_or_empty, name, Scope::Status)
        }
        _ => Err(ApiError::no_route()),
    }
}

fn collection(
    shared: &Shared,
    req: &ApiRequest<'_>,
    kind: Kind,
    namespace: Option<&str>,
) -> Result<Response<RespBody>, ApiError> {
    match *req.method {
        Method::GET => {
            let filter = Filter::from_query(kind, namespace, &req.query)?;
            if !req.query.bool("watch")? {
                let list = shared.store().list(&filter);
                return Ok(json_response(StatusCode::OK, &list));
            }
            let params = WatchParams {
                resource_version: req.query.get("resourceVersion").unwrap_or("").to_owned(),
                allow_bookmarks: req.query.bool("allowWatchBookmarks")?,
                send_initial_events: match req.query.get("sendInitialEvents") {
                    Some(_) => Some(req.query.bool("sendInitialEvents")?),
                    None => None,
                },
            };
            let timeout =
                match req.query.get("timeoutSeconds") {
                    None | Some("" | "0") => shared.config.default_watch_timeout,
                    Some(s) => Duration::from_secs(s.parse().map_err(|_| {
                        ApiError::bad_request(format!("invalid timeoutSeconds: {s}"))
                    })?),
                };
            let body = shared.store().start_watch(filter, &params, timeout)?;
            let mut response = Response::new(body.boxed_unsync());
            response.headers_mut().insert(
                header::CONTENT_TYPE,
                header::HeaderValue::from_static("application/json"),
            );
            Ok(response)
        }
        Method::POST => {
            let Some(namespace) = namespace.or((!kind.info().namespaced).then_some("")) else {
                return Err(ApiError::method_not_allowed());
            };
            req.reject_dry_run()?;
            let body = req.json_body()?;
            let created = shared
                .store()
                .create(kind, namespace, body, CreateMode::Api)?;
            Ok(json_response(StatusCode::CREATED, &created))
        }
        _ => Err(ApiError::method_not_allowed()),
    }
}

fn object(
    shared: &Shared,
    req: &ApiRequest<'_>,
    kind: Kind,
    namespace: &str,
    name: &str,
    scope: Scope,
) -> Result<Response<RespBody>, ApiError> {
    match *req.method {
        Method::GET => {
            let store = shared.store();
            let object = store
                .objects
                .get(&ObjKey::new(kind, namespace, name))
                .ok_or_else(|| ApiError::not_found(kind, name))?;
            Ok(json_response(StatusCode::OK, object))
        }
        Method::PUT => {
            req.reject_dry_run()?;
            let body = kind
                .normalize(req.json_body()?)
                .map_err(ApiError::bad_request)?;
            let updated = shared.store().update(kind, namespace, name, body, scope)?;
            Ok(json_response(StatusCode::OK, &updated))
        }
        Method::PATCH => {
            req.reject_dry_run()?;
            let patch_type = match req.media_type().as_deref() {
                Some("application/merge-patch+json") => PatchType::Merge,
                Some("application/strategic-merge-patch+json") => PatchType::Strategic,
                _ => return Err(ApiError::unsupported_media(req.content_type)),
            };
            let patch: Value = serde_json::from_slice(req.body)
                .map_err(|e| ApiError::bad_request(format!("the patch is not valid JSON: {e}")))?;
            let patched = shared
                .store()
                .patch(kind, namespace, name, patch_type, &patch, scope)?;
            Ok(json_response(StatusCode::OK, &patched))
        }
        Method::DELETE if scope == Scope::Main => {
            let mut options: DeleteOptions = if req.body.iter().all(u8::is_ascii_whitespace) {
                DeleteOptions::default()
            } else {
                if !matches!(req.media_type().as_deref(), None | Some("application/json")) {
                    return Err(ApiError::unsupported_media(req.content_type));
                }
                serde_json::from_slice(req.body).map_err(|e| {
                    ApiError::bad_request(format!("the body is not a valid DeleteOptions: {e}"))
                })?
            };
            if let Some(grace) = req
                .query
                .get("gracePeriodSeconds")
                .filter(|_| options.grace_period_seconds.is_none())
            {
                options.grace_period_seconds = Some(grace.parse().map_err(|_| {
                    ApiError::bad_request(format!("invalid gracePeriodSeconds: {grace}"))
                })?);
            }
            if options.dry_run.as_ref().is_some_and(|d| !d.is_empty()) {
                return Err(ApiError::bad_request(
                    "dryRun is not supported by the test API server",
                ));
            }
            req.reject_dry_run()?;
            match shared.store().delete(kind, namespace, name, &options)? {
                Deleted::Pending(object) => Ok(json_response(StatusCode::OK, &object)),
                // Like the real server: pods answer with the deleted object, other kinds with
                // a success Status.
                Deleted::Gone(object) if kind == Kind::Pod => {
                    Ok(json_response(StatusCode::OK, &object))
                }
                Deleted::Gone(object) => Ok(json_response(
                    StatusCode::OK,
                    &json!({
                        "kind": "Status",
                        "apiVersion": "v1",
                        "metadata": {},
                        "status": "Success",
                        "details": {
                            "name": name,
                            "kind": kind.info().plural,
                            "uid": meta_str(&object, "uid"),
                        },
                    }),
                )),
            }
        }
        _ => Err(ApiError::method_not_allowed()),
    }
}

/// A decoded query string.
struct Query(Vec<(String, String)>);

impl Query {
    fn parse(raw: &str) -> Query {
        Query(
            raw.split('&')
                .filter(|pair| !pair.is_empty())
                .map(|pair| {
                    let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
                    (percent_decode(k), percent_decode(v))
                })
                .collect(),
        )
    }

    fn get(&self, key: &str) -> Option<&str> {
        self.0
            .iter()
            .rev()
            .find(|(k, _)| k == key)
            .map(|(_, v)| v.as_str())
    }

    /// A boolean parameter as Go's `strconv.ParseBool` reads it; absent = false.
    fn bool(&self, key: &str) -> Result<bool, ApiError> {
        match self.get(key) {
            None | Some("") => Ok(false),
            Some("1" | "t" | "T" | "true" | "TRUE" | "True") => Ok(true),
            Some("0" | "f" | "F" | "false" | "FALSE" | "False") => Ok(false),
            Some(other) => Err(ApiError::bad_request(format!(
                "invalid boolean for {key}: {other}"
            ))),
        }
    }
}

fn percent_decode(s: &str) -> String {
    let hex = |b: u8| (b as char).to_digit(16).map(|d| d as u8);
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'+' => {
                out.push(b' ');
                i += 1;
            }
            b'%' => {
                let digit = |at: usize| bytes.get(at).and_then(|b| hex(*b));
                match (digit(i + 1), digit(i + 2)) {
                    (Some(hi), Some(lo)) => {
                        out.push(hi * 16 + lo);
                        i += 3;
                    }
                    _ => {
                        out.push(b'%');
                        i += 1;
                    }
                }
            }
            b => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn percent_decode_handles_escapes_plus_and_truncated_escapes() {
        assert_eq!(
            percent_decode("spec.nodeName%3Dnode-1"),
            "spec.nodeName=node-1"
        );
        assert_eq!(percent_decode("a+b"), "a b");
        assert_eq!(percent_decode("100%"), "100%");
        assert_eq!(percent_decode("%4"), "%4");
        assert_eq!(percent_decode("%zz"), "%zz");
    }

    #[test]
    fn uids_are_uuid_v4_shaped_and_distinct() {
        let (a, b) = (new_uid(), new_uid());
        assert_ne!(a, b);
        for uid in [a, b] {
            let groups: Vec<&str> = uid.split('-').collect();
            let lens: Vec<usize> = groups.iter().map(|g| g.len()).collect();
            assert_eq!(lens, [8, 4, 4, 4, 12], "{uid}");
            assert!(groups[2].starts_with('4'), "{uid}");
            assert!(
                matches!(groups[3].as_bytes()[0], b'8' | b'9' | b'a' | b'b'),
                "{uid}"
            );
        }
    }

    #[test]
    fn label_selector_supports_equality_existence_and_sets() {
        let pod = json!({"metadata": {"labels": {"app": "web", "tier": "front"}}});
        let filter = |s: &str| Filter {
            kind: Kind::Pod,
            namespace: None,
            labels: parse_label_selector(s).unwrap(),
            fields: Vec::new(),
        };
        assert!(filter("app=web,tier").matches(&pod));
        assert!(filter("app==web,!missing").matches(&pod));
        assert!(!filter("app!=web").matches(&pod));
        assert!(filter("app in (db, web),tier notin (back)").matches(&pod));
        assert!(!filter("app notin (web)").matches(&pod));
        assert!(parse_label_selector("app in web").is_err());
        assert!(parse_label_selector("a b=c").is_err());
    }

    #[test]
    fn field_selector_rejects_unsupported_fields() {
        assert!(parse_field_selector(Kind::Pod, "spec.nodeName=n1").is_ok());
        assert!(parse_field_selector(Kind::Node, "spec.nodeName=n1").is_err());
        assert!(parse_field_selector(Kind::Pod, "nonsense").is_err());
    }

    #[test]
    fn merge_patch_follows_rfc7386() {
        let mut target = json!({"a": "b", "c": {"d": "e", "f": "g"}});
        merge_patch(&mut target, &json!({"a": "z", "c": {"f": null}}));
        assert_eq!(target, json!({"a": "z", "c": {"d": "e"}}));
        let mut target = json!({"a": [1, 2]});
        merge_patch(&mut target, &json!({"a": [3]}));
        assert_eq!(target, json!({"a": [3]}));
    }

    #[test]
    fn strategic_patch_merges_keyed_lists_and_replaces_atomic_ones() {
        let mut pod = json!({"status": {
            "conditions": [{"type": "Ready", "status": "False"}, {"type": "Initialized", "status": "True"}],
            "containerStatuses": [{"name": "a", "ready": false}, {"name": "b", "ready": false}],
        }});
        let patch = json!({"status": {
            "$setElementOrder/conditions": [{"type": "Ready"}, {"type": "Initialized"}],
            "conditions": [{"type": "Ready", "status": "True"}],
            "containerStatuses": [{"name": "a", "ready": true}],
        }});
        strategic_merge_patch(&mut pod, &patch).unwrap();
        assert_eq!(
            pod["status"]["conditions"],
            json!([{"type": "Ready", "status": "True"}, {"type": "Initialized", "status": "True"}])
        );
        assert_eq!(
            pod["status"]["containerStatuses"],
            json!([{"name": "a", "ready": true}])
        );
    }

    #[test]
    fn strategic_patch_directives_delete_replace_and_reject_unknown() {
        let mut pod = json!({"status": {"conditions": [{"type": "A"}, {"type": "B"}], "podIPs": [{"ip": "1"}]},
                             "metadata": {"finalizers": ["x", "y"]}});
        let patch = json!({
            "status": {
                "conditions": [{"$patch": "delete", "type": "A"}],
                "podIPs": [{"$patch": "replace"}, {"ip": "2"}],
            },
            "metadata": {"$deleteFromPrimitiveList/finalizers": ["x"], "finalizers": ["z"]},
        });
        strategic_merge_patch(&mut pod, &patch).unwrap();
        assert_eq!(pod["status"]["conditions"], json!([{"type": "B"}]));
        assert_eq!(pod["status"]["podIPs"], json!([{"ip": "2"}]));
        assert_eq!(pod["metadata"]["finalizers"], json!(["y", "z"]));
        assert!(strategic_merge_patch(&mut pod, &json!({"$bogus": 1})).is_err());
        assert!(strategic_merge_patch(
            &mut pod,
            &json!({"status": {"conditions": [{"status": "x"}]}})
        )
        .is_err());
    }

    #[test]
    fn deterministic_fault_pattern_fails_every_fourth_request_at_quarter_rate() {
        let mut control = Control {
            log: VecDeque::new(),
            capacity: 10,
            dropped: 0,
            next_seq: 0,
            fault: Some(FaultConfig {
                error_rate_per_million: 250_000,
                ..FaultConfig::default()
            }),
            fault_counter: 0,
            fail_next: VecDeque::new(),
        };
        let failed: Vec<bool> = (0..8)
            .map(|seq| control.decide_fault(seq, "GET", "/api/v1/pods").1.is_some())
            .collect();
        assert_eq!(
            failed,
            [false, false, false, true, false, false, false, true]
        );
    }
}
