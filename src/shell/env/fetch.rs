//! Reads what a container's env refers to, when the container is created: its ConfigMaps and
//! Secrets (one GET each, [`key_objects::get_opt`]), the Services of its service links, and
//! the node's allocatable when a `resourceFieldRef` names a limit.
//!
//! Services are read by a List of the pod's namespace (paged, at most
//! [`MAX_SERVICE_LINK_SERVICES`]) and a GET of `default/kubernetes`, per container creation,
//! under the API client's rate limiter, rather than kept in a watch-backed cache as the
//! kubelet's informer does: creations are rare next to the cost of a cache of every Service
//! of the cluster on every node, and the answer is current (no "services have not yet been
//! read" window after a restart). What was last read per namespace is remembered, slim and
//! bounded ([`MAX_REMEMBERED_SERVICE_LISTS`]), and used when a read fails, so a container
//! whose env reads no ConfigMap or Secret keeps restarting while the API server is away, as
//! on a kubelet-run node (ConfigMaps and Secrets are read each time, so those wait for it).
//! The Node authorizer allows a node to list Services and to read its own Node.
//!
//! Registers every Secret value with the [`Redactor`] (in [`key_objects`]) before it is
//! returned. Must not keep a ConfigMap or Secret beyond one creation (only Services are
//! remembered), and must not put a value in an error.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use k8s_openapi::api::core::v1::{
    ConfigMap, Container, Pod, Secret, Service, ServicePort, ServiceSpec,
};
use k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta;

use super::service_links::{self, MASTER_NAMESPACE, MASTER_SERVICES};
use super::EnvSources;
use crate::bounded_map::BoundedMap;
use crate::core::pod;
use crate::shell::api::ApiClient;
use crate::shell::key_objects::{self, KeyObject};
use crate::shell::redact::Redactor;
use crate::shell::{node_allocatable, resource_field};

/// Services of one namespace a container's service links may come from, at most; a
/// namespace with more fails the creation with an error saying so (the environment would
/// not fit in a process's argument space long before).
pub const MAX_SERVICE_LINK_SERVICES: usize = 5000;
/// Namespaces (and master Services) whose last-read Services are remembered, at most.
pub const MAX_REMEMBERED_SERVICE_LISTS: usize = 64;
/// Services per List page.
pub const SERVICE_LIST_PAGE: u32 = 500;

/// Reads env sources through the API; cheap to clone.
#[derive(Clone)]
pub struct EnvResolver {
    api: ApiClient,
    redactor: Redactor,
    node_name: String,
    /// The Services last read per namespace (and for each master Service), slim, for when
    /// the API server cannot be read.
    last_read: Arc<Mutex<BoundedMap<String, Vec<Service>>>>,
}

/// What service links need of a Service (its name, namespace, cluster IP and ports), so the
/// remembered ones stay small.
fn slim(s: &Service) -> Service {
    let spec = s.spec.as_ref();
    let ports = spec.and_then(|sp| sp.ports.as_ref()).map(|ports| {
        ports
            .iter()
            .map(|p| ServicePort {
                name: p.name.clone(),
                port: p.port,
                protocol: p.protocol.clone(),
                ..ServicePort::default()
            })
            .collect()
    });
    Service {
        metadata: ObjectMeta {
            name: s.metadata.name.clone(),
            namespace: s.metadata.namespace.clone(),
            ..ObjectMeta::default()
        },
        spec: Some(ServiceSpec {
            cluster_ip: spec.and_then(|sp| sp.cluster_ip.clone()),
            ports,
            ..ServiceSpec::default()
        }),
        status: None,
    }
}

/// The names a container's env reads, by kind.
fn referenced(c: &Container) -> (Vec<&str>, Vec<&str>) {
    let (mut cms, mut secrets) = (Vec::new(), Vec::new());
    for f in c.env_from.iter().flatten() {
        cms.extend(f.config_map_ref.as_ref().map(|r| r.name.as_str()));
        secrets.extend(f.secret_ref.as_ref().map(|r| r.name.as_str()));
    }
    for f in c.env.iter().flatten().filter_map(|e| e.value_from.as_ref()) {
        cms.extend(f.config_map_key_ref.as_ref().map(|r| r.name.as_str()));
        secrets.extend(f.secret_key_ref.as_ref().map(|r| r.name.as_str()));
    }
    (cms, secrets)
}

impl EnvResolver {
    /// A resolver for the node `node_name`, reading through `api` and registering Secret
    /// values with `redactor`.
    pub fn new(api: ApiClient, redactor: Redactor, node_name: String) -> EnvResolver {
        EnvResolver {
            api,
            redactor,
            node_name,
            last_read: Arc::new(Mutex::new(BoundedMap::new(MAX_REMEMBERED_SERVICE_LISTS))),
        }
    }

    /// Everything `c`'s env refers to. A missing ConfigMap or Secret is `None` in the
    /// result (whether that is an error is [`super::make_environment`]'s decision); any
    /// other failure to read is an error naming the object.
    pub async fn fetch(&self, p: &Pod, c: &Container) -> Result<EnvSources, String> {
        let ns = pod::namespace(p);
        let (cms, secrets) = referenced(c);
        let mut src = EnvSources {
            joined: true,
            config_maps: self.all::<ConfigMap>(ns, cms).await?,
            secrets: self.all::<Secret>(ns, secrets).await?,
            ..EnvSources::default()
        };
        let enable = p
            .spec
            .as_ref()
            .and_then(|s| s.enable_service_links)
            .unwrap_or(true);
        let own = if enable {
            self.or_last_read(ns.to_string(), self.services(ns)).await?
        } else {
            Vec::new()
        };
        let mut masters = Vec::new();
        if !(enable && ns == MASTER_NAMESPACE) {
            for name in MASTER_SERVICES {
                let key = format!("{MASTER_NAMESPACE}/{name}");
                masters.extend(self.or_last_read(key, self.master(name)).await?);
            }
        } else {
            masters.clone_from(&own);
        }
        src.service_env = service_links::service_env(ns, enable, &masters, &own);
        let refs = c.env.iter().flatten().filter_map(|e| e.value_from.as_ref());
        let mut resources = refs.filter_map(|f| f.resource_field_ref.as_ref());
        if resources.any(resource_field::needs_allocatable) {
            let alloc = node_allocatable::read(&self.api, &self.node_name).await?;
            src.allocatable = Some(alloc);
        }
        Ok(src)
    }

    /// The env keys of each named object (`None`: not found), each read once.
    async fn all<K: KeyObject>(
        &self,
        ns: &str,
        names: Vec<&str>,
    ) -> Result<BTreeMap<String, super::EnvKeys>, String> {
        let mut out = BTreeMap::new();
        for name in names {
            if out.contains_key(name) {
                continue;
            }
            let found = key_objects::get_opt::<K>(&self.api, ns, name).await?;
            let keys = found.map(|o| o.env_keys(&self.redactor));
            out.insert(name.to_string(), keys);
        }
        Ok(out)
    }

    /// The master Service `name` of the `default` namespace (none if it does not exist).
    async fn master(&self, name: &str) -> Result<Vec<Service>, String> {
        let api: kube::Api<Service> = kube::Api::namespaced(self.api.client(), MASTER_NAMESPACE);
        let found = self.api.call("GET", api.get_opt(name)).await;
        let found =
            found.map_err(|e| format!("cannot read Service {MASTER_NAMESPACE}/{name}: {e}"))?;
        Ok(found.into_iter().collect())
    }

    /// The Services `read` gives, remembered under `key` (a namespace, or `default/kubernetes`);
    /// when it fails, the ones last read under `key`, as the kubelet's informer cache keeps
    /// serving while the API server is away. An error only if nothing was ever read.
    async fn or_last_read(
        &self,
        key: String,
        read: impl std::future::Future<Output = Result<Vec<Service>, String>>,
    ) -> Result<Vec<Service>, String> {
        let lock = || self.last_read.lock().unwrap_or_else(|p| p.into_inner());
        match read.await {
            Ok(services) => {
                lock().insert(key, services.iter().map(slim).collect());
                Ok(services)
            }
            Err(e) => match lock().as_map().get(&key) {
                Some(last) => {
                    tracing::warn!(error = %e, services = %key, "using the Services last read for service links");
                    Ok(last.clone())
                }
                None => Err(e),
            },
        }
    }

    /// The Services of `ns`, at most [`MAX_SERVICE_LINK_SERVICES`].
    async fn services(&self, ns: &str) -> Result<Vec<Service>, String> {
        let api: kube::Api<Service> = kube::Api::namespaced(self.api.client(), ns);
        let mut out = Vec::new();
        let mut params = kube::api::ListParams::default().limit(SERVICE_LIST_PAGE);
        loop {
            let page = self.api.call("LIST", api.list(&params)).await;
            let page =
                page.map_err(|e| format!("failed to list services when setting up env vars: {e}"))?;
            out.extend(page.items);
            if out.len() > MAX_SERVICE_LINK_SERVICES {
                return Err(format!(
                    "namespace {ns} has more than {MAX_SERVICE_LINK_SERVICES} Services: too many \
                     service links (set enableServiceLinks: false on the pod)"
                ));
            }
            match page.metadata.continue_.filter(|c| !c.is_empty()) {
                Some(token) => params = params.continue_token(&token),
                None => return Ok(out),
            }
        }
    }
}
