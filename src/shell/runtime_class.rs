//! The runtime handler of a pod's sandbox (kubelet `pkg/kubelet/runtimeclass`,
//! `LookupRuntimeHandler`).
//!
//! Owns resolving `spec.runtimeClassName` to its RuntimeClass's `handler`, read from the API
//! server when the sandbox is created (one GET, under the client's rate limit). No class
//! name resolves to the runtime's default handler (""), as does every pod of a standalone
//! node (no API server), as the kubelet's. Must not cache classes (a fetch is always
//! current) nor call the runtime.

use k8s_openapi::api::core::v1::Pod;
use k8s_openapi::api::node::v1::RuntimeClass;

use super::api::ApiClient;

/// Resolves runtime handlers.
#[derive(Clone, Default)]
pub struct RuntimeClasses {
    api: Option<ApiClient>,
}

impl RuntimeClasses {
    /// Resolving through `api` (`None`: a standalone node, every handler is the default).
    pub fn new(api: Option<ApiClient>) -> RuntimeClasses {
        RuntimeClasses { api }
    }

    /// The handler for `p`'s sandbox. A RuntimeClass that does not exist is an error with
    /// the API's wording (`runtimeclass.node.k8s.io "NAME" not found`), as the kubelet's.
    pub async fn handler(&self, p: &Pod) -> Result<String, String> {
        let name = p
            .spec
            .as_ref()
            .and_then(|s| s.runtime_class_name.as_deref())
            .unwrap_or_default();
        let Some(api) = self.api.as_ref().filter(|_| !name.is_empty()) else {
            return Ok(String::new());
        };
        let classes: kube::Api<RuntimeClass> = kube::Api::all(api.client());
        match api.call("GET", classes.get_opt(name)).await {
            Ok(Some(rc)) => Ok(rc.handler),
            Ok(None) => Err(format!("runtimeclass.node.k8s.io {name:?} not found")),
            Err(e) => Err(format!("failed to lookup RuntimeClass {name}: {e}")),
        }
    }
}
