//! ConfigMaps and Secrets read by key, for volumes (`projected`) and container env (`env`).
//!
//! Owns the one way the node reads a ConfigMap or a Secret (a GET under the API client's
//! rate limit, a missing object being `None`) and the two views of its keys: every key as
//! bytes for volumes (`data` and `binaryData`), and the `data` the kubelet puts in env.
//! Registers every Secret value with the [`Redactor`] before returning it.
//!
//! Must not cache (each caller reads when it needs the object, so it is always current),
//! and must not put a value in an error.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{ConfigMap, Secret};

use super::api::ApiClient;
use super::redact::Redactor;

/// A ConfigMap or a Secret: an object whose keys a volume or a container's env reads.
pub trait KeyObject:
    kube::Resource<Scope = k8s_openapi::NamespaceResourceScope, DynamicType = ()>
    + Clone
    + serde::de::DeserializeOwned
    + std::fmt::Debug
{
    /// The source's field in a volume (`configMap`, `secret`).
    const FIELD: &'static str;
    /// Its keys and values as a volume projects them (a Secret registers its values with
    /// `redactor` first).
    fn keys(self, redactor: &Redactor) -> BTreeMap<String, Vec<u8>>;
    /// Its keys and values as the kubelet puts them in env: a ConfigMap's `data` (not
    /// `binaryData`), a Secret's `data` (a Secret registers its values first).
    fn env_keys(self, redactor: &Redactor) -> BTreeMap<String, String>;
}

impl KeyObject for ConfigMap {
    const FIELD: &'static str = "configMap";
    fn keys(self, _: &Redactor) -> BTreeMap<String, Vec<u8>> {
        let text = self.data.into_iter().flatten();
        let binary = self.binary_data.into_iter().flatten();
        text.map(|(k, v)| (k, v.into_bytes()))
            .chain(binary.map(|(k, v)| (k, v.0)))
            .collect()
    }
    fn env_keys(self, _: &Redactor) -> BTreeMap<String, String> {
        self.data.unwrap_or_default()
    }
}

impl KeyObject for Secret {
    const FIELD: &'static str = "secret";
    fn keys(self, redactor: &Redactor) -> BTreeMap<String, Vec<u8>> {
        let data = self.data.into_iter().flatten();
        let text = self.string_data.into_iter().flatten();
        let keys: BTreeMap<String, Vec<u8>> = data
            .map(|(k, v)| (k, v.0))
            .chain(text.map(|(k, v)| (k, v.into_bytes())))
            .collect();
        // registered before anything else sees them
        for v in keys.values() {
            redactor.register(&String::from_utf8_lossy(v));
        }
        keys
    }
    fn env_keys(self, redactor: &Redactor) -> BTreeMap<String, String> {
        let keys: BTreeMap<String, String> = self
            .data
            .into_iter()
            .flatten()
            .map(|(k, v)| (k, String::from_utf8_lossy(&v.0).into_owned()))
            .collect();
        for v in keys.values() {
            redactor.register(v);
        }
        keys
    }
}

/// The object `ns/name` (`None`: not found). An error names the kind and the object, never
/// a value: the API server's own message when it answered (as the kubelet shows it, e.g.
/// `configmaps "x" is forbidden: …`), else what kept the request from it.
pub async fn get_opt<K: KeyObject>(
    api: &ApiClient,
    ns: &str,
    name: &str,
) -> Result<Option<K>, String> {
    let objects: kube::Api<K> = kube::Api::namespaced(api.client(), ns);
    let kind = K::kind(&());
    api.call("GET", objects.get_opt(name))
        .await
        .map_err(|e| match e.code {
            Some(_) => e.message,
            None => format!("cannot read {kind} {ns}/{name}: {e}"),
        })
}
