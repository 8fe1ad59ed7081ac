//! Volumes whose files the node writes (kubelet `projected`, `configMap`, `secret` and
//! `downwardAPI` volume plugins), as ServiceAccount admission injects `kube-api-access-*`.
//!
//! Owns: resolving each source (ServiceAccount tokens through the TokenRequest API, bound to
//! the pod; ConfigMaps and Secrets by GET under the API client's rate limit; downward API
//! fields from the pod, and the node's allocatable for a `resourceFieldRef` to an unset
//! limit), writing them with the kubelet's AtomicWriter layout under
//! `<pods_dir>/<uid>/volumes/kubernetes.io~projected/<name>/` (or `~configmap`, `~secret`,
//! `~downward-api`), the token manager's bounded cache and refresh rule ([`needs_refresh`]),
//! and the periodic rewrite of the volumes of the pods it prepared ([`Projector::run`]).
//! Registers every token and Secret value with the [`Redactor`] before it is written.
//!
//! Must not: put a token or Secret value in an error, a log line, a span or a record; write
//! outside the volume's directory (item paths are validated); decide when a pod starts or
//! stops (the executor calls [`Projector::prepare`] before it starts containers and
//! [`Projector::forget_pod`] before it removes the pod's directory).

use crate::core::go_quote::go_quote;
use std::collections::{BTreeMap, BTreeSet};
use std::os::unix::fs::PermissionsExt;
use std::path::{Component, Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::{Duration, SystemTime};

use k8s_openapi::api::core::v1::{
    ConfigMap, DownwardAPIVolumeFile, KeyToPath, Pod, Secret, ServiceAccount,
    ServiceAccountTokenProjection, Volume,
};
use k8s_openapi::apimachinery::pkg::api::resource::Quantity;

use super::api::ApiClient;
use super::key_objects::{get_opt, KeyObject};
use super::redact::Redactor;
use crate::core::pod;

/// The projected volume plugin's directory inside a pod's volume directory.
pub const PROJECTED_PLUGIN: &str = "kubernetes.io~projected";
/// The configMap volume plugin's directory.
pub const CONFIGMAP_PLUGIN: &str = "kubernetes.io~configmap";
/// The secret volume plugin's directory.
pub const SECRET_PLUGIN: &str = "kubernetes.io~secret";
/// The downwardAPI volume plugin's directory.
pub const DOWNWARD_API_PLUGIN: &str = "kubernetes.io~downward-api";
/// The mode of a projected file when neither `defaultMode` nor the item's `mode` says.
pub const DEFAULT_MODE: u32 = 0o644;
/// The kubelet's default `expirationSeconds` of a token projection.
pub const DEFAULT_TOKEN_EXPIRATION_S: i64 = 3600;
/// Tokens a node keeps at most (the soonest-expiring are forgotten first past it).
pub const MAX_TOKENS: usize = 4096;
/// Pods whose volumes are kept fresh at most.
pub const MAX_PODS: usize = 1024;
/// How often the volumes of prepared pods are rewritten by default (tokens refreshed when
/// due): the kubelet rewrites them on each periodic pod sync (`--sync-frequency`, 1 min); the
/// daemon passes `--sync-frequency-ms` through [`Projector::with_refresh_period`].
pub const DEFAULT_REFRESH_PERIOD: Duration = Duration::from_secs(60);
/// A token older than this is refreshed whatever its lifetime (the token manager's maxTTL).
pub const MAX_TOKEN_AGE: Duration = Duration::from_secs(24 * 3600);
/// The symlink to the current payload directory.
pub const DATA_DIR: &str = "..data";
const DATA_DIR_TMP: &str = "..data_tmp";

/// The plugin directory of `v`, if it is a volume this module writes.
pub fn plugin_of(v: &Volume) -> Option<&'static str> {
    [
        (v.projected.is_some(), PROJECTED_PLUGIN),
        (v.config_map.is_some(), CONFIGMAP_PLUGIN),
        (v.secret.is_some(), SECRET_PLUGIN),
        (v.downward_api.is_some(), DOWNWARD_API_PLUGIN),
    ]
    .into_iter()
    .find_map(|(is, plugin)| is.then_some(plugin))
}

/// `<pods_dir>/<uid>/volumes/<plugin>/<name>` for a volume this module writes.
pub fn volume_path(pods_dir: &Path, uid: &str, v: &Volume) -> Option<PathBuf> {
    let plugin = plugin_of(v)?;
    let volumes = pods_dir.join(uid).join("volumes");
    Some(volumes.join(plugin).join(&v.name))
}

/// Why a volume could not be set up.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct MountError {
    /// The volume's name.
    pub volume: String,
    /// The plugin's error as the kubelet words it (`configmap "cfg" not found`); never a
    /// value.
    pub cause: String,
    /// The error naming the pod, the volume, the field and the cause.
    pub detail: String,
}

impl MountError {
    /// The message of the kubelet's `FailedMount` event for this error.
    pub fn event_message(&self) -> String {
        format!(
            "MountVolume.SetUp failed for volume {:?} : {}",
            self.volume, self.cause
        )
    }
}

impl std::fmt::Display for MountError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.detail)
    }
}

/// One file of a payload. Its `Debug` never shows the data.
#[derive(Clone, PartialEq, Eq)]
pub struct FileProjection {
    /// The contents.
    pub data: Vec<u8>,
    /// The permission bits.
    pub mode: u32,
}

impl FileProjection {
    /// A file of `data` with permission bits `mode`.
    pub fn new(data: impl Into<Vec<u8>>, mode: u32) -> FileProjection {
        FileProjection {
            data: data.into(),
            mode,
        }
    }
}

impl std::fmt::Debug for FileProjection {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (n, mode) = (self.data.len(), self.mode);
        write!(f, "FileProjection({n} bytes, {mode:o})")
    }
}

/// A volume's files by path relative to the volume.
pub type Payload = BTreeMap<String, FileProjection>;

/// The kubelet's `validatePath`: relative, inside the volume, not a `..`-prefixed name of
/// the writer's own.
pub fn validate_path(path: &str) -> Result<(), String> {
    if path.is_empty() {
        return Err("the path is empty".into());
    }
    if path.len() > 4096 {
        return Err(format!("the path is longer than 4096 bytes: {path:.40}..."));
    }
    if path.starts_with("..") {
        return Err(format!("{path:?} must not start with '..'"));
    }
    let p = Path::new(path);
    if p.is_absolute() {
        return Err(format!("{path:?} must be a relative path"));
    }
    if p.components().any(|c| matches!(c, Component::ParentDir)) {
        return Err(format!("{path:?} must not contain '..'"));
    }
    if p.components().next().is_none() || !p.components().any(|c| matches!(c, Component::Normal(_)))
    {
        return Err(format!("{path:?} names no file"));
    }
    Ok(())
}

/// `..2006_01_02_15_04_05.<nanos>` for `t` (UTC), the kubelet's payload directory name.
fn timestamped_name(t: SystemTime, n: u32) -> String {
    let t = jiff::Timestamp::try_from(t).unwrap_or(jiff::Timestamp::UNIX_EPOCH);
    let suffix = if n > 0 {
        format!("_{n}")
    } else {
        String::new()
    };
    let (date, nanos) = (t.strftime("%Y_%m_%d_%H_%M_%S"), t.subsec_nanosecond());
    format!("..{date}.{nanos:09}{suffix}")
}

/// Every regular file under `dir`, by path relative to it.
fn files_under(dir: &Path) -> std::io::Result<BTreeMap<String, PathBuf>> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d)? {
            let e = e?;
            let t = e.file_type()?;
            if t.is_dir() {
                stack.push(e.path());
            } else {
                let rel = e
                    .path()
                    .strip_prefix(dir)
                    .map(|r| r.to_string_lossy().into_owned())
                    .unwrap_or_default();
                out.insert(rel, e.path());
            }
        }
    }
    Ok(out)
}

/// True if the payload directory `current` holds exactly `payload`.
fn holds(current: &Path, payload: &Payload) -> bool {
    let Ok(files) = files_under(current) else {
        return false;
    };
    files.len() == payload.len()
        && payload.iter().all(|(k, f)| {
            files.get(k).is_some_and(|p| {
                std::fs::metadata(p).is_ok_and(|m| m.permissions().mode() & 0o7777 == f.mode)
                    && std::fs::read(p).is_ok_and(|d| d == f.data)
            })
        })
}

fn top_level(path: &str) -> String {
    Path::new(path)
        .components()
        .find_map(|c| match c {
            Component::Normal(s) => Some(s.to_string_lossy().into_owned()),
            _ => None,
        })
        .unwrap_or_default()
}

fn write_payload(ts: &Path, payload: &Payload) -> std::io::Result<()> {
    for (path, f) in payload {
        let full = ts.join(path);
        if let Some(parent) = full.parent() {
            std::fs::create_dir_all(parent)?;
        }
        let mut file = std::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&full)?;
        std::io::Write::write_all(&mut file, &f.data)?;
        file.sync_all()?;
        std::fs::set_permissions(&full, std::fs::Permissions::from_mode(f.mode))?;
    }
    Ok(())
}

/// The kubelet's `AtomicWriter.Write`: the payload goes into a new timestamped directory
/// `..<ts>`, the `..data` symlink is swapped to it with `rename(2)` (readers see the old or
/// the new payload, never a mix), each top-level name is a symlink `name -> ..data/name`,
/// then the old payload directory and names no longer in the payload are removed. Every
/// path is validated first; on a failure before the swap the new directory is removed and
/// the old payload stays. Returns false if the volume already held exactly `payload`.
pub fn write_atomic(dir: &Path, payload: &Payload) -> Result<bool, String> {
    for k in payload.keys() {
        validate_path(k)?;
    }
    let shown = dir.display();
    std::fs::create_dir_all(dir).map_err(|e| format!("cannot create {shown}: {e}"))?;
    let data_link = dir.join(DATA_DIR);
    let old = std::fs::read_link(&data_link).ok();
    let top: BTreeSet<String> = payload.keys().map(|k| top_level(k)).collect();
    let links_ok = top
        .iter()
        .all(|t| std::fs::read_link(dir.join(t)).is_ok_and(|l| l == Path::new(DATA_DIR).join(t)));
    if let Some(old) = &old {
        if links_ok && holds(&dir.join(old), payload) {
            return Ok(false);
        }
    }
    // 1. the new payload directory
    let now = SystemTime::now();
    let mut n = 0;
    let (ts_name, ts) = loop {
        let name = timestamped_name(now, n);
        let path = dir.join(&name);
        match std::fs::create_dir(&path) {
            Ok(()) => break (name, path),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists && n < 1000 => n += 1,
            Err(e) => return Err(format!("cannot create {}: {e}", path.display())),
        }
    };
    let _ = std::fs::set_permissions(&ts, std::fs::Permissions::from_mode(0o755));
    if let Err(e) = write_payload(&ts, payload) {
        let _ = std::fs::remove_dir_all(&ts);
        let ts = ts.display();
        return Err(format!("cannot write the payload into {ts}: {e}"));
    }
    // 2. swap ..data
    let tmp = dir.join(DATA_DIR_TMP);
    let _ = std::fs::remove_file(&tmp);
    let swapped =
        std::os::unix::fs::symlink(&ts_name, &tmp).and_then(|()| std::fs::rename(&tmp, &data_link));
    if let Err(e) = swapped {
        let _ = std::fs::remove_file(&tmp);
        let _ = std::fs::remove_dir_all(&ts);
        return Err(format!("cannot swap {}: {e}", data_link.display()));
    }
    // 3. user-visible names
    for t in &top {
        let link = dir.join(t);
        let want = Path::new(DATA_DIR).join(t);
        match std::fs::symlink_metadata(&link) {
            Ok(m) if !m.file_type().is_symlink() => {
                let link = link.display();
                return Err(format!(
                    "{link} exists and is not a symlink the writer made"
                ));
            }
            Ok(_) if std::fs::read_link(&link).ok().as_deref() == Some(want.as_path()) => continue,
            Ok(_) => {
                let _ = std::fs::remove_file(&link);
            }
            Err(_) => {}
        }
        std::os::unix::fs::symlink(&want, &link)
            .map_err(|e| format!("cannot link {}: {e}", link.display()))?;
    }
    // 4. the old payload and names no longer projected
    if let Some(old) = old.filter(|o| o != Path::new(&ts_name)) {
        let old = dir.join(old);
        if old.starts_with(dir) && old.file_name().is_some_and(|n| n != DATA_DIR) {
            let _ = std::fs::remove_dir_all(old);
        }
    }
    if let Ok(entries) = std::fs::read_dir(dir) {
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            if name.starts_with("..") || top.contains(&name) {
                continue;
            }
            if e.file_type().is_ok_and(|t| t.is_symlink()) {
                let _ = std::fs::remove_file(e.path());
            }
        }
    }
    Ok(true)
}

/// The token manager's rule: refresh once 80 % of the token's lifetime has passed, or when
/// it is older than 24 h.
pub fn needs_refresh(issued: SystemTime, expires: SystemTime, now: SystemTime) -> bool {
    let ttl = expires.duration_since(issued).unwrap_or_default();
    let age = now.duration_since(issued).unwrap_or_default();
    age >= ttl.mul_f64(0.8) || age >= MAX_TOKEN_AGE
}

fn format_map(m: Option<&BTreeMap<String, String>>) -> String {
    m.into_iter()
        .flatten()
        .map(|(k, v)| format!("{k}={}", go_quote(v)))
        .collect::<Vec<_>>()
        .join("\n")
}

/// The value of a downward API `fieldRef` in a volume (the fields the kubelet allows there).
pub fn downward_field(p: &Pod, field_path: &str) -> Result<String, String> {
    let meta = &p.metadata;
    let subscript = |prefix: &str| {
        field_path
            .strip_prefix(prefix)
            .and_then(|r| r.strip_prefix("['"))
            .and_then(|r| r.strip_suffix("']"))
            .map(str::to_string)
    };
    Ok(match field_path {
        "metadata.name" => pod::name(p).to_string(),
        "metadata.namespace" => pod::namespace(p).to_string(),
        "metadata.uid" => pod::uid_str(p).to_string(),
        "metadata.labels" => format_map(meta.labels.as_ref()),
        "metadata.annotations" => format_map(meta.annotations.as_ref()),
        _ => {
            let (map, key) = if let Some(k) = subscript("metadata.labels") {
                (&meta.labels, k)
            } else if let Some(k) = subscript("metadata.annotations") {
                (&meta.annotations, k)
            } else {
                return Err(format!(
                    "fieldRef {field_path:?} is not supported in a volume (metadata.name, \
                     metadata.namespace, metadata.uid, metadata.labels, metadata.annotations)"
                ));
            };
            map.as_ref()
                .and_then(|m| m.get(&key))
                .cloned()
                .unwrap_or_default()
        }
    })
}

fn mode_of(m: Option<i32>, default: u32) -> u32 {
    m.map_or(default, |m| (m as u32) & 0o7777)
}

/// The downward API items of a volume or projection; `allocatable` is the node's, for a
/// `resourceFieldRef` to an unset limit.
pub fn downward_payload(
    p: &Pod,
    items: &[DownwardAPIVolumeFile],
    default_mode: u32,
    allocatable: Option<&BTreeMap<String, Quantity>>,
) -> Result<Payload, String> {
    let mut out = Payload::new();
    for (i, item) in items.iter().enumerate() {
        let value = if let Some(f) = &item.field_ref {
            downward_field(p, &f.field_path)
        } else if let Some(r) = &item.resource_field_ref {
            super::resource_field::value(p, None, r, allocatable)
        } else {
            Err("neither fieldRef nor resourceFieldRef".into())
        }
        .map_err(|e| format!("items[{i}] ({}): {e}", item.path))?;
        let file = FileProjection::new(value, mode_of(item.mode, default_mode));
        out.insert(item.path.clone(), file);
    }
    Ok(out)
}

#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct TokenKey {
    namespace: String,
    service_account: String,
    audiences: Vec<String>,
    expiration_s: i64,
    pod_uid: String,
}

struct CachedToken {
    token: String,
    issued: SystemTime,
    expires: SystemTime,
}

#[derive(Default)]
struct State {
    tokens: BTreeMap<TokenKey, CachedToken>,
    /// Pods whose volumes were prepared and are kept fresh, by uid.
    pods: BTreeMap<String, Pod>,
}

/// Writes the volumes of this module; cheap to clone.
#[derive(Clone)]
pub struct Projector {
    api: Option<ApiClient>,
    redactor: Redactor,
    pods_dir: PathBuf,
    /// The node whose allocatable an unset limit is (empty: not known).
    node_name: String,
    /// How often [`Projector::run`] rewrites the volumes.
    refresh_period: Duration,
    state: Arc<Mutex<State>>,
}

impl std::fmt::Debug for Projector {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Projector")
    }
}

/// Which keys of which ConfigMap or Secret a volume source wants.
struct KeySource<'a> {
    name: &'a str,
    items: Option<&'a [KeyToPath]>,
    optional: bool,
}

impl<'a> KeySource<'a> {
    fn new(name: &'a str, items: &'a Option<Vec<KeyToPath>>, optional: Option<bool>) -> Self {
        let (items, optional) = (items.as_deref(), optional.unwrap_or(false));
        KeySource {
            name,
            items,
            optional,
        }
    }
}

/// One source of a volume's files: a projected volume has several, the others one each.
enum Source<'a> {
    Token(&'a ServiceAccountTokenProjection),
    ConfigMap(KeySource<'a>),
    Secret(KeySource<'a>),
    Downward(&'a [DownwardAPIVolumeFile]),
}

/// The sources of `v`, each with the prefix that names it in the volume (`None`: a kind of
/// projected source ledgerlet does not write), and the volume's `defaultMode`.
#[allow(clippy::type_complexity)]
fn sources(v: &Volume) -> (Option<i32>, Vec<(String, Option<Source<'_>>)>) {
    let one = |s| vec![(String::new(), Some(s))];
    fn downward(items: &Option<Vec<DownwardAPIVolumeFile>>) -> Source<'_> {
        Source::Downward(items.as_deref().unwrap_or_default())
    }
    if let Some(proj) = &v.projected {
        let sources = proj.sources.iter().flatten().enumerate().map(|(j, s)| {
            let source = if let Some(t) = &s.service_account_token {
                Some(Source::Token(t))
            } else if let Some(c) = &s.config_map {
                let keys = KeySource::new(&c.name, &c.items, c.optional);
                Some(Source::ConfigMap(keys))
            } else if let Some(c) = &s.secret {
                let keys = KeySource::new(&c.name, &c.items, c.optional);
                Some(Source::Secret(keys))
            } else {
                s.downward_api.as_ref().map(|d| downward(&d.items))
            };
            (format!("projected.sources[{j}]."), source)
        });
        (proj.default_mode, sources.collect())
    } else if let Some(c) = &v.config_map {
        let keys = KeySource::new(&c.name, &c.items, c.optional);
        (c.default_mode, one(Source::ConfigMap(keys)))
    } else if let Some(s) = &v.secret {
        let name = s.secret_name.as_deref().unwrap_or_default();
        let keys = KeySource::new(name, &s.items, s.optional);
        (s.default_mode, one(Source::Secret(keys)))
    } else if let Some(d) = &v.downward_api {
        (d.default_mode, one(downward(&d.items)))
    } else {
        (None, Vec::new())
    }
}

impl Projector {
    /// A projector writing under `pods_dir`, reading from `api` (None: standalone) and
    /// registering tokens and Secret values with `redactor`.
    pub fn new(api: Option<ApiClient>, redactor: Redactor, pods_dir: PathBuf) -> Projector {
        Projector {
            api,
            redactor,
            pods_dir,
            node_name: String::new(),
            refresh_period: DEFAULT_REFRESH_PERIOD,
            state: Arc::default(),
        }
    }

    /// The same projector on the node `node_name`: a downward API `resourceFieldRef` to an
    /// unset limit reads that Node's allocatable.
    pub fn on_node(mut self, node_name: &str) -> Projector {
        self.node_name = node_name.to_string();
        self
    }

    /// The same projector rewriting the volumes every `period` (at least 1 s).
    pub fn with_refresh_period(mut self, period: Duration) -> Projector {
        self.refresh_period = period.max(Duration::from_secs(1));
        self
    }

    /// The node's allocatable when one of `items` needs it and the node can read it.
    async fn allocatable_for(
        &self,
        items: &[DownwardAPIVolumeFile],
    ) -> Result<Option<BTreeMap<String, Quantity>>, String> {
        let mut refs = items.iter().filter_map(|i| i.resource_field_ref.as_ref());
        match &self.api {
            Some(api) if !self.node_name.is_empty() => {
                if !refs.any(super::resource_field::needs_allocatable) {
                    return Ok(None);
                }
                super::node_allocatable::read(api, &self.node_name)
                    .await
                    .map(Some)
            }
            _ => Ok(None),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Writes every volume of the pod this module owns and, once they are all written,
    /// remembers the pod for the periodic refresh. Returns their host paths by volume name.
    ///
    /// A pod whose volumes were all written before keeps them as they are when a rewrite
    /// fails (its ConfigMap deleted, say): the kubelet's volume manager keeps a mounted volume
    /// mounted when a remount fails, so its containers still restart.
    pub async fn prepare(&self, p: &Pod) -> Result<super::volumes::VolumePaths, MountError> {
        let uid = pod::uid_str(p).to_string();
        let paths = match self.write_pod(p, false).await {
            Ok(paths) => paths,
            Err(e) if self.lock().pods.contains_key(&uid) => {
                tracing::warn!(error = %e, "cannot rewrite the pod's volumes; they keep their files");
                let volumes = p.spec.as_ref().and_then(|s| s.volumes.as_deref());
                let written = volumes.into_iter().flatten().filter_map(|v| {
                    volume_path(&self.pods_dir, &uid, v).map(|dir| (v.name.clone(), dir))
                });
                return Ok(written.collect());
            }
            Err(e) => return Err(e),
        };
        if paths.is_empty() {
            return Ok(paths);
        }
        let mut st = self.lock();
        if !st.pods.contains_key(&uid) && st.pods.len() >= MAX_PODS {
            st.pods.pop_first();
        }
        st.pods.insert(uid, p.clone());
        Ok(paths)
    }

    /// The pod as the latest sync sees it, for a pod whose volumes were prepared: kept for
    /// the periodic refresh, and its volumes rewritten at once when its labels or
    /// annotations changed (the kubelet remounts a pod's volumes on every sync, so a
    /// downwardAPI file follows the pod's metadata within a sync). A pod not prepared is
    /// ignored.
    pub async fn update_pod(&self, p: &Pod) {
        let uid = pod::uid_str(p).to_string();
        let metadata_changed = {
            let mut st = self.lock();
            let Some(known) = st.pods.get_mut(&uid) else {
                return;
            };
            let changed = known.metadata.labels != p.metadata.labels
                || known.metadata.annotations != p.metadata.annotations;
            *known = p.clone();
            changed
        };
        if metadata_changed {
            if let Err(e) = self.write_pod(p, true).await {
                tracing::warn!(error = %e, "cannot rewrite the pod's volumes after its metadata changed");
            }
        }
    }

    /// Forgets a pod: no more refreshes, and its tokens are dropped. Called before its
    /// directory is removed.
    pub fn forget_pod(&self, uid: &str) {
        let mut st = self.lock();
        st.pods.remove(uid);
        st.tokens.retain(|k, _| k.pod_uid != uid);
    }

    /// Rewrites the volumes of every remembered pod (tokens refreshed when due; ConfigMap
    /// and Secret changes picked up). Failures are logged; they never name a value.
    pub async fn refresh_all(&self) {
        let pods: Vec<Pod> = self.lock().pods.values().cloned().collect();
        for p in pods {
            if let Err(e) = self.write_pod(&p, true).await {
                tracing::warn!(error = %e, "cannot refresh the pod's volumes");
            }
        }
    }

    /// Refreshes every refresh period ([`DEFAULT_REFRESH_PERIOD`] unless set), forever.
    pub async fn run(self) {
        let mut tick = tokio::time::interval(self.refresh_period);
        tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
        tick.tick().await;
        loop {
            tick.tick().await;
            self.refresh_all().await;
        }
    }

    async fn write_pod(
        &self,
        p: &Pod,
        only_if_remembered: bool,
    ) -> Result<super::volumes::VolumePaths, MountError> {
        let uid = pod::uid_str(p).to_string();
        let mut out = super::volumes::VolumePaths::new();
        let volumes = p
            .spec
            .as_ref()
            .and_then(|s| s.volumes.as_deref())
            .unwrap_or_default();
        for (i, v) in volumes.iter().enumerate() {
            let Some(dir) = volume_path(&self.pods_dir, &uid, v) else {
                continue;
            };
            let err = |(field, cause): (String, String)| {
                let what = if field.is_empty() {
                    cause.clone()
                } else {
                    format!("{field}: {cause}")
                };
                MountError {
                    volume: v.name.clone(),
                    detail: super::volumes::volume_error(p, i, v, "", what),
                    cause,
                }
            };
            let payload = self.payload(p, v).await.map_err(err)?;
            let payload = super::fs_group::with_group_modes(p, payload);
            // the write and the check that the pod is still wanted are one step, so a
            // refresh never recreates a directory the executor just removed
            let st = self.lock();
            if only_if_remembered && !st.pods.contains_key(&uid) {
                return Ok(out);
            }
            if write_atomic(&dir, &payload).map_err(|e| err((String::new(), e)))? {
                // as the kubelet's writer's setPerms: each new payload gets the fsGroup
                super::fs_group::set_volume_ownership(p, &dir, true)
                    .and_then(|()| super::fs_group::own_tokens(p, v, &dir))
                    .map_err(|e| err((String::new(), format!("fsGroup: {e}"))))?;
            }
            drop(st);
            out.insert(v.name.clone(), dir);
        }
        Ok(out)
    }

    fn api(&self) -> Result<&ApiClient, String> {
        self.api.as_ref().ok_or_else(|| {
            "needs the node to be joined to a cluster (--kubeconfig); this node runs standalone"
                .to_string()
        })
    }

    /// The volume's files; an error is the field at fault and the cause as the kubelet
    /// words it.
    async fn payload(&self, p: &Pod, v: &Volume) -> Result<Payload, (String, String)> {
        let (mode, sources) = sources(v);
        let default_mode = mode_of(mode, DEFAULT_MODE);
        let mut out = Payload::new();
        for (at, source) in sources {
            out.extend(match source {
                Some(Source::Token(t)) => {
                    let what = format!("{at}serviceAccountToken");
                    let sa = p
                        .spec
                        .as_ref()
                        .and_then(|s| s.service_account_name.clone())
                        .filter(|s| !s.is_empty())
                        .unwrap_or_else(|| "default".into());
                    let token = self
                        .token(p, &sa, t.audience.as_deref(), t.expiration_seconds)
                        .await
                        .map_err(|e| (what, e))?;
                    let mode = super::fs_group::token_mode(p, default_mode);
                    let file = FileProjection::new(token, mode);
                    Ok(Payload::from([(t.path.clone(), file)]))
                }
                Some(Source::ConfigMap(k)) => {
                    self.keys_of::<ConfigMap>(p, k, default_mode, &at).await
                }
                Some(Source::Secret(k)) => self.keys_of::<Secret>(p, k, default_mode, &at).await,
                Some(Source::Downward(items)) => {
                    let what = format!("{at}downwardAPI");
                    match self.allocatable_for(items).await {
                        Ok(alloc) => downward_payload(p, items, default_mode, alloc.as_ref()),
                        Err(e) => Err(e),
                    }
                    .map_err(|e| (what, e))
                }
                None => Err((
                    at.trim_end_matches('.').to_string(),
                    "only serviceAccountToken, configMap, secret and downwardAPI sources are \
                     supported by ledgerlet so far"
                        .to_string(),
                )),
            }?);
        }
        Ok(out)
    }

    /// The payload of a ConfigMap's or a Secret's keys: every key, or the `items` (a missing
    /// key is an error unless optional); a missing object is an empty payload when
    /// optional, an error otherwise. `at` names the source in a projected volume; an error
    /// is the field and the kubelet's words (`configmap "NAME" not found`, `configmap
    /// references non-existent config key: KEY`, `references non-existent secret key: KEY`).
    async fn keys_of<K: KeyObject>(
        &self,
        p: &Pod,
        s: KeySource<'_>,
        default_mode: u32,
        at: &str,
    ) -> Result<Payload, (String, String)> {
        let (ns, name, kind) = (pod::namespace(p), s.name, K::kind(&()));
        let what = format!("{at}{} {name:?}", K::FIELD);
        let api = self.api().map_err(|e| (what.clone(), e))?;
        let found = get_opt::<K>(api, ns, name)
            .await
            .map_err(|e| (what.clone(), e))?;
        let lower = kind.to_lowercase();
        let Some(object) = found else {
            if s.optional {
                return Ok(Payload::new());
            }
            return Err((what, format!("{lower} \"{name}\" not found")));
        };
        let data = object.keys(&self.redactor);
        let file =
            |data: &Vec<u8>, mode| FileProjection::new(data.clone(), mode_of(mode, default_mode));
        let Some(items) = s.items else {
            return Ok(data
                .iter()
                .map(|(k, v)| (k.clone(), file(v, None)))
                .collect());
        };
        let mut out = Payload::new();
        for (i, item) in items.iter().enumerate() {
            match data.get(&item.key) {
                Some(v) => {
                    out.insert(item.path.clone(), file(v, item.mode));
                }
                None if s.optional => {}
                None => {
                    let missing = if lower == "secret" {
                        "references non-existent secret key"
                    } else {
                        "configmap references non-existent config key"
                    };
                    return Err((
                        format!("{what}.items[{i}]"),
                        format!("{missing}: {}", item.key),
                    ));
                }
            }
        }
        Ok(out)
    }

    /// A token for the pod's ServiceAccount, from the cache unless due for a refresh.
    async fn token(
        &self,
        p: &Pod,
        sa: &str,
        audience: Option<&str>,
        expiration_s: Option<i64>,
    ) -> Result<String, String> {
        let api = self.api()?;
        let ns = pod::namespace(p).to_string();
        let key = TokenKey {
            namespace: ns.clone(),
            service_account: sa.to_string(),
            audiences: audience
                .filter(|a| !a.is_empty())
                .map(|a| vec![a.to_string()])
                .unwrap_or_default(),
            expiration_s: expiration_s.unwrap_or(DEFAULT_TOKEN_EXPIRATION_S),
            pod_uid: pod::uid_str(p).to_string(),
        };
        if let Some(t) = self.lock().tokens.get(&key) {
            if !needs_refresh(t.issued, t.expires, SystemTime::now()) {
                return Ok(t.token.clone());
            }
        }
        use k8s_openapi::api::authentication::v1::{
            BoundObjectReference, TokenRequest, TokenRequestSpec,
        };
        let request = TokenRequest {
            spec: Some(TokenRequestSpec {
                audiences: Some(key.audiences.clone()),
                expiration_seconds: Some(key.expiration_s),
                bound_object_ref: Some(BoundObjectReference {
                    api_version: Some("v1".into()),
                    kind: Some("Pod".into()),
                    name: Some(pod::name(p).to_string()),
                    uid: Some(key.pod_uid.clone()),
                }),
                ..Default::default()
            }),
            ..Default::default()
        };
        let sas: kube::Api<ServiceAccount> = kube::Api::namespaced(api.client(), &ns);
        let issued = SystemTime::now();
        let response = api
            .call(
                "POST",
                sas.create_token_request(sa, &kube::api::PostParams::default(), &request),
            )
            .await
            .map_err(|e| format!("cannot request a token for ServiceAccount {ns}/{sa}: {e}"))?;
        let token = response
            .status
            .and_then(|s| s.token)
            .filter(|t| !t.is_empty())
            .ok_or_else(|| {
                format!("the TokenRequest for ServiceAccount {ns}/{sa} returned no token")
            })?;
        self.redactor.register(&token);
        let expires = issued + Duration::from_secs(key.expiration_s.max(1) as u64);
        let mut st = self.lock();
        if !st.tokens.contains_key(&key) && st.tokens.len() >= MAX_TOKENS {
            // forget the soonest-expiring
            if let Some(k) = st
                .tokens
                .iter()
                .min_by_key(|(_, t)| t.expires)
                .map(|(k, _)| k.clone())
            {
                st.tokens.remove(&k);
            }
        }
        st.tokens.insert(
            key,
            CachedToken {
                token: token.clone(),
                issued,
                expires,
            },
        );
        Ok(token)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::Ordering::SeqCst;
    use std::time::UNIX_EPOCH;

    /// The text of the file at `path`.
    fn read(path: impl AsRef<Path>) -> String {
        std::fs::read_to_string(path).unwrap()
    }

    fn payload(entries: &[(&str, &str, u32)]) -> Payload {
        entries
            .iter()
            .map(|(k, v, m)| (k.to_string(), FileProjection::new(*v, *m)))
            .collect()
    }

    fn ts_dirs(dir: &Path) -> Vec<String> {
        let mut v: Vec<String> = std::fs::read_dir(dir)
            .unwrap()
            .flatten()
            .map(|e| e.file_name().to_string_lossy().into_owned())
            .filter(|n| n.starts_with("..") && n != DATA_DIR)
            .collect();
        v.sort();
        v
    }

    #[test]
    fn atomic_writer_lays_out_data_symlinks_and_modes() {
        let t = tempfile::tempdir().unwrap();
        let dir = t.path().join("vol");
        let p = payload(&[
            ("token", "tok-1", 0o600),
            ("ca.crt", "CA", 0o644),
            ("sub/dir/file", "deep", 0o640),
        ]);
        assert!(write_atomic(&dir, &p).unwrap());
        let data = std::fs::read_link(dir.join(DATA_DIR)).unwrap();
        let data = data.to_string_lossy().into_owned();
        assert!(data.starts_with("..2"), "{data}");
        assert_eq!(ts_dirs(&dir), vec![data.clone()]);
        for (link, to) in [("token", "..data/token"), ("sub", "..data/sub")] {
            assert_eq!(std::fs::read_link(dir.join(link)).unwrap(), Path::new(to));
        }
        assert_eq!(read(dir.join("token")), "tok-1");
        assert_eq!(read(dir.join("sub/dir/file")), "deep");
        let mode = |f: &str| std::fs::metadata(dir.join(f)).unwrap().permissions().mode() & 0o777;
        assert_eq!(mode("token"), 0o600);
        assert_eq!(mode("ca.crt"), 0o644);
        assert_eq!(mode("sub/dir/file"), 0o640);
        // the same payload again changes nothing
        assert!(!write_atomic(&dir, &p).unwrap());
        assert_eq!(ts_dirs(&dir), vec![data.clone()]);
        // a new payload: swapped, the old directory and dropped names are gone
        let p2 = payload(&[("token", "tok-2", 0o600), ("namespace", "ns", 0o644)]);
        assert!(write_atomic(&dir, &p2).unwrap());
        let data2 = std::fs::read_link(dir.join(DATA_DIR)).unwrap();
        assert_ne!(data2.to_string_lossy(), data);
        assert_eq!(ts_dirs(&dir), vec![data2.to_string_lossy().into_owned()]);
        assert_eq!(read(dir.join("token")), "tok-2");
        assert!(std::fs::symlink_metadata(dir.join("ca.crt")).is_err());
        assert!(std::fs::symlink_metadata(dir.join("sub")).is_err());
        assert!(std::fs::symlink_metadata(dir.join(DATA_DIR_TMP)).is_err());
        // a mode change alone is a change
        let p3 = payload(&[("token", "tok-2", 0o400), ("namespace", "ns", 0o644)]);
        assert!(write_atomic(&dir, &p3).unwrap());
        assert_eq!(mode("token"), 0o400);
    }

    #[test]
    fn a_failed_write_leaves_the_old_payload_whole() {
        let t = tempfile::tempdir().unwrap();
        let dir = t.path().join("vol");
        let p = payload(&[("token", "old", 0o644)]);
        write_atomic(&dir, &p).unwrap();
        let before = ts_dirs(&dir);
        // "a" as a file and as a directory: the write fails half way
        let bad = payload(&[
            ("a", "x", 0o644),
            ("a/b", "y", 0o644),
            ("token", "new", 0o644),
        ]);
        assert!(write_atomic(&dir, &bad).is_err());
        assert_eq!(ts_dirs(&dir), before);
        assert_eq!(read(dir.join("token")), "old");
        assert!(std::fs::symlink_metadata(dir.join("a")).is_err());
    }

    #[test]
    fn paths_that_escape_the_volume_are_refused_before_anything_is_written() {
        for bad in [
            "../x",
            "/etc/passwd",
            "a/../../x",
            "..data",
            "..x",
            "",
            ".",
            "a/..",
        ] {
            assert!(validate_path(bad).is_err(), "{bad:?} accepted");
            let t = tempfile::tempdir().unwrap();
            let dir = t.path().join("vol");
            let p = payload(&[("ok", "1", 0o644), (bad, "2", 0o644)]);
            assert!(write_atomic(&dir, &p).is_err(), "{bad:?} written");
            assert!(!dir.exists());
        }
        for good in ["token", "a/b/c", "a..b", ".hidden"] {
            validate_path(good).unwrap();
        }
    }

    fn pod() -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {
                "name": "web", "namespace": "shop", "uid": "u-1",
                "labels": {"app": "web", "tier": "front \"end\""},
                "annotations": {"a": "1"}
            },
            "spec": {"containers": [{
                "name": "c",
                "resources": {"limits": {"cpu": "1500m", "memory": "64Mi"}}
            }]}
        }))
        .unwrap()
    }

    #[test]
    fn downward_api_values_are_the_kubelets() {
        let p = pod();
        for (field, want) in [
            ("metadata.namespace", "shop"),
            ("metadata.name", "web"),
            ("metadata.uid", "u-1"),
            ("metadata.labels", "app=\"web\"\ntier=\"front \\\"end\\\"\""),
            ("metadata.annotations", "a=\"1\""),
            ("metadata.labels['app']", "web"),
        ] {
            assert_eq!(downward_field(&p, field).unwrap(), want, "{field}");
        }
        assert!(downward_field(&p, "spec.nodeName")
            .unwrap_err()
            .contains("not supported"));
        let items: Vec<DownwardAPIVolumeFile> = serde_json::from_value(serde_json::json!([
            {"path": "namespace", "fieldRef": {"fieldPath": "metadata.namespace"}},
            {"path": "cpu", "mode": 0o600, "resourceFieldRef": {"containerName": "c", "resource": "limits.cpu", "divisor": "1m"}},
            {"path": "cores", "resourceFieldRef": {"containerName": "c", "resource": "limits.cpu"}},
            {"path": "mem", "resourceFieldRef": {"containerName": "c", "resource": "limits.memory", "divisor": "1Mi"}}
        ]))
        .unwrap();
        let out = downward_payload(&p, &items, 0o644, None).unwrap();
        assert_eq!(out["namespace"], FileProjection::new("shop", 0o644));
        assert_eq!(out["cpu"], FileProjection::new("1500", 0o600));
        assert_eq!(out["cores"], FileProjection::new("2", 0o644));
        assert_eq!(out["mem"], FileProjection::new("64", 0o644));
    }

    #[test]
    fn tokens_are_refreshed_at_80_percent_of_their_life_or_after_a_day() {
        let t0 = UNIX_EPOCH + Duration::from_secs(1_000_000);
        let exp = t0 + Duration::from_secs(3600);
        assert!(!needs_refresh(t0, exp, t0));
        assert!(!needs_refresh(t0, exp, t0 + Duration::from_secs(2879)));
        assert!(needs_refresh(t0, exp, t0 + Duration::from_secs(2880)));
        assert!(needs_refresh(t0, exp, exp + Duration::from_secs(1)));
        let year = t0 + Duration::from_secs(365 * 86_400);
        assert!(!needs_refresh(t0, year, t0 + Duration::from_secs(86_399)));
        assert!(needs_refresh(t0, year, t0 + Duration::from_secs(86_400)));
        // a clock that went backwards does not refresh
        assert!(!needs_refresh(t0, exp, t0 - Duration::from_secs(10)));
    }

    #[test]
    fn debug_never_shows_file_data_and_standalone_sources_name_the_volume() {
        let f = FileProjection::new("s3cr3t-value", 0o644);
        assert!(!format!("{f:?}").contains("s3cr3t"));
        let t = tempfile::tempdir().unwrap();
        let proj = Projector::new(None, Redactor::new(), t.path().to_path_buf());
        let p: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p", "namespace": "ns", "uid": "u1"},
            "spec": {"containers": [{"name": "c"}], "volumes": [{
                "name": "kube-api-access-abcde",
                "projected": {"sources": [
                    {"serviceAccountToken": {"path": "token", "expirationSeconds": 3607}}
                ]}
            }]}
        }))
        .unwrap();
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let e = rt.block_on(proj.prepare(&p)).unwrap_err().to_string();
        for part in [
            "pod ns/p",
            "kube-api-access-abcde",
            "serviceAccountToken",
            "standalone",
        ] {
            assert!(e.contains(part), "{e}");
        }
        // a downward API volume needs no cluster
        let p: Pod = serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p", "namespace": "ns", "uid": "u2"},
            "spec": {"containers": [{"name": "c"}], "volumes": [{
                "name": "info",
                "downwardAPI": {"items": [{"path": "ns", "fieldRef": {"fieldPath": "metadata.namespace"}}]}
            }]}
        }))
        .unwrap();
        let paths = rt.block_on(proj.prepare(&p)).unwrap();
        let dir = t.path().join("u2/volumes/kubernetes.io~downward-api/info");
        assert_eq!(paths["info"], dir);
        assert_eq!(read(dir.join("ns")), "ns");
        assert_eq!(
            proj.lock().pods.len(),
            1,
            "only the prepared pod is refreshed"
        );
        proj.forget_pod("u2");
        assert!(proj.lock().pods.is_empty());
    }

    /// An HTTP API server with the token, a ConfigMap and a Secret; 404 for anything else.
    /// Counts TokenRequests.
    async fn fake_api(
        tokens: Arc<std::sync::atomic::AtomicUsize>,
    ) -> (ApiClient, tempfile::NamedTempFile) {
        use axum::routing::{get, post};
        use axum::Json;
        use serde_json::json;
        let ns = "/api/v1/namespaces/ns";
        let token = move || async move {
            let n = tokens.fetch_add(1, SeqCst);
            Json(json!({
                "apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest",
                "metadata": {},
                "status": {"token": format!("eyJfake.tok3n-value-{n}"),
                           "expirationTimestamp": "2030-01-01T00:00:00Z"}
            }))
        };
        let config_map = json!({"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "kube-root-ca.crt"},
            "data": {"ca.crt": "-----BEGIN CERTIFICATE-----\nCA\n"}});
        let secret = json!({"apiVersion": "v1", "kind": "Secret",
            "metadata": {"name": "db"},
            "data": {"password": "aHVudGVyMi1wYXNzd29yZA=="}});
        let not_found = json!({"apiVersion": "v1", "kind": "Status",
            "status": "Failure", "reason": "NotFound", "code": 404,
            "message": "not found"});
        let app = axum::Router::new()
            .route(&format!("{ns}/serviceaccounts/default/token"), post(token))
            .route(
                &format!("{ns}/configmaps/kube-root-ca.crt"),
                get(|| async { Json(config_map) }),
            )
            .route(&format!("{ns}/secrets/db"), get(|| async { Json(secret) }))
            .fallback(|| async { (axum::http::StatusCode::NOT_FOUND, Json(not_found)) });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(async move { axum::serve(listener, app).await });
        let mut kubeconfig = tempfile::NamedTempFile::new().unwrap();
        std::io::Write::write_all(
            &mut kubeconfig,
            format!(
                "apiVersion: v1\nkind: Config\nclusters:\n- name: c\n  cluster:\n    server: \
                 http://127.0.0.1:{port}\nusers:\n- name: u\n  user: {{}}\ncontexts:\n- name: \
                 c\n  context: {{cluster: c, user: u}}\ncurrent-context: c\n"
            )
            .as_bytes(),
        )
        .unwrap();
        let api = ApiClient::from_kubeconfig(kubeconfig.path(), Default::default())
            .await
            .unwrap();
        (api, kubeconfig)
    }

    fn api_pod(uid: &str, extra_volume: serde_json::Value) -> Pod {
        serde_json::from_value(serde_json::json!({
            "metadata": {"name": "p", "namespace": "ns", "uid": uid},
            "spec": {"containers": [{"name": "c"}], "volumes": [{
                "name": "kube-api-access-abcde",
                "projected": {"defaultMode": 0o644, "sources": [
                    {"serviceAccountToken": {"path": "token", "expirationSeconds": 3607}},
                    {"configMap": {"name": "kube-root-ca.crt", "items": [{"key": "ca.crt", "path": "ca.crt"}]}},
                    {"downwardAPI": {"items": [{"path": "namespace", "fieldRef": {"apiVersion": "v1", "fieldPath": "metadata.namespace"}}]}}
                ]}
            }, extra_volume]}
        }))
        .unwrap()
    }

    #[tokio::test]
    async fn a_downward_api_volume_follows_the_pods_labels_once_a_sync_sees_them() {
        let t = tempfile::tempdir().unwrap();
        let proj = Projector::new(None, Redactor::new(), t.path().to_path_buf());
        let pod = |labels: serde_json::Value| -> Pod {
            serde_json::from_value(serde_json::json!({
                "metadata": {"name": "p", "namespace": "ns", "uid": "u9", "labels": labels},
                "spec": {"containers": [{"name": "c"}], "volumes": [{"name": "info", "downwardAPI": {
                    "items": [{"path": "labels", "fieldRef": {"fieldPath": "metadata.labels"}}]}}]}
            }))
            .unwrap()
        };
        let v1 = pod(serde_json::json!({"key1": "value1"}));
        // a pod whose volumes were never prepared is not written
        proj.update_pod(&v1).await;
        assert!(!t.path().join("u9").exists());
        let paths = proj.prepare(&v1).await.unwrap();
        let labels = paths["info"].join("labels");
        assert_eq!(read(labels.clone()), "key1=\"value1\"");
        proj.update_pod(&pod(
            serde_json::json!({"key1": "value1", "key3": "value3"}),
        ))
        .await;
        assert_eq!(read(labels), "key1=\"value1\"\nkey3=\"value3\"");
    }

    #[tokio::test]
    async fn tokens_and_secret_values_are_redacted_cached_and_forgotten_with_the_pod() {
        let count = Arc::new(std::sync::atomic::AtomicUsize::new(0));
        let (api, _kubeconfig) = fake_api(count.clone()).await;
        let t = tempfile::tempdir().unwrap();
        let redactor = Redactor::new();
        let proj = Projector::new(Some(api), redactor.clone(), t.path().to_path_buf());
        let p = api_pod(
            "u1",
            serde_json::json!({"name": "creds", "secret": {"secretName": "db", "defaultMode": 0o400}}),
        );
        let paths = proj.prepare(&p).await.unwrap();
        let vol = &paths["kube-api-access-abcde"];
        assert_eq!(
            vol,
            &t.path()
                .join("u1/volumes/kubernetes.io~projected/kube-api-access-abcde")
        );
        let token = read(vol.join("token"));
        assert_eq!(token, "eyJfake.tok3n-value-0");
        assert_eq!(read(vol.join("namespace")), "ns");
        assert!(read(vol.join("ca.crt")).starts_with("-----BEGIN CERTIFICATE-----"));
        let creds = &paths["creds"];
        assert!(creds.ends_with("u1/volumes/kubernetes.io~secret/creds"));
        assert_eq!(read(creds.join("password")), "hunter2-password");
        let mode = std::fs::metadata(creds.join("password"))
            .unwrap()
            .permissions()
            .mode();
        assert_eq!(mode & 0o777, 0o400);
        // both values are registered before anything could record them
        use crate::core::record::event::{ActionOutcome, RuntimeAction, RuntimeActionFinished};
        let e = crate::core::record::Event::RuntimeActionFinished(RuntimeActionFinished {
            uid: "u1".into(),
            sync_id: 1,
            action: RuntimeAction::RemoveContainer {
                id: format!("{token} hunter2-password"),
            },
            outcome: ActionOutcome::Ok {
                id: None,
                detail: None,
            },
            duration_ms: 0,
        });
        let shown = format!("{:?}", redactor.redact(e));
        assert!(!shown.contains("tok3n-value"), "{shown}");
        assert!(!shown.contains("hunter2"), "{shown}");
        // the cached token is reused until it is due; the pod's removal forgets it
        proj.prepare(&p).await.unwrap();
        proj.refresh_all().await;
        assert_eq!(count.load(SeqCst), 1);
        proj.forget_pod("u1");
        assert!(proj.lock().tokens.is_empty());
        proj.prepare(&p).await.unwrap();
        assert_eq!(count.load(SeqCst), 2);
        assert_eq!(read(vol.join("token")), "eyJfake.tok3n-value-1");
        // a missing source names the pod, the volume, the source and the object, and no
        // value
        let p2 = api_pod(
            "u2",
            serde_json::json!({"name": "cfg", "configMap": {"name": "missing"}}),
        );
        let e = proj.prepare(&p2).await.unwrap_err();
        assert_eq!(
            e.event_message(),
            "MountVolume.SetUp failed for volume \"cfg\" : configmap \"missing\" not found"
        );
        let e = e.to_string();
        for part in ["pod ns/p", "\"cfg\"", "configMap \"missing\"", "not found"] {
            assert!(e.contains(part), "{e}");
        }
        assert!(!e.contains("tok3n"), "{e}");
        // a key missing from the object: the kubelet's words, unless optional
        for (volume, cause) in [
            (
                serde_json::json!({"name": "cfg", "configMap": {"name": "kube-root-ca.crt",
                    "items": [{"key": "nope", "path": "x"}]}}),
                "configmap references non-existent config key: nope",
            ),
            (
                serde_json::json!({"name": "cfg", "secret": {"secretName": "db",
                    "items": [{"key": "nope", "path": "x"}]}}),
                "references non-existent secret key: nope",
            ),
        ] {
            let e = proj.prepare(&api_pod("u4", volume)).await.unwrap_err();
            assert_eq!(e.cause, cause);
            assert!(e.detail.contains(".items[0]"), "{}", e.detail);
        }
        let optional = serde_json::json!({"name": "cfg", "secret": {"secretName": "db",
            "optional": true, "items": [{"key": "nope", "path": "x"}, {"key": "password", "path": "pw"}]}});
        let paths = proj.prepare(&api_pod("u5", optional)).await.unwrap();
        assert_eq!(read(paths["cfg"].join("pw")), "hunter2-password");
        assert!(!paths["cfg"].join("x").exists());
        // optional: an empty volume
        let p3 = api_pod(
            "u3",
            serde_json::json!({"name": "cfg", "configMap": {"name": "missing", "optional": true}}),
        );
        proj.prepare(&p3).await.unwrap();
        // a pod prepared before keeps its files when a rewrite fails (its object gone)
        let p3_gone = api_pod(
            "u3",
            serde_json::json!({"name": "cfg", "configMap": {"name": "missing"}}),
        );
        let kept = proj.prepare(&p3_gone).await.unwrap();
        assert!(kept["cfg"].ends_with("u3/volumes/kubernetes.io~configmap/cfg"));
        assert!(kept["kube-api-access-abcde"].join("namespace").exists());
    }
}
