//! Env values from `secretKeyRef`, fetched from the API server when a container is created.
//!
//! Owns reading the Secrets a container's env names (one GET per Secret per container
//! creation, under the API client's rate limit) and registering every value it hands out
//! with the [`Redactor`], before the container exists, so no later record can carry it in
//! clear. Must not cache values beyond one container creation (the kubelet's secret manager
//! watches; this node fetches, which is always current), and must not put values in errors.

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, Pod, Secret};

use super::api::ApiClient;
use super::redact::Redactor;
use crate::core::pod;

/// Resolved values by (Secret name, key).
pub type SecretValues = BTreeMap<(String, String), String>;

/// Fetches Secrets for container env.
#[derive(Clone)]
pub struct SecretResolver {
    api: ApiClient,
    redactor: Redactor,
}

impl SecretResolver {
    /// A resolver reading Secrets through `api` and registering values with `redactor`.
    pub fn new(api: ApiClient, redactor: Redactor) -> SecretResolver {
        SecretResolver { api, redactor }
    }

    /// The values `c`'s env refers to. A missing optional Secret or key is left out; a
    /// missing required one is an error naming the container, the variable and the Secret.
    pub async fn resolve(&self, p: &Pod, c: &Container) -> Result<SecretValues, String> {
        let ns = pod::namespace(p).to_string();
        let mut wanted: BTreeMap<String, Vec<(String, String, bool)>> = BTreeMap::new();
        for (i, e) in c.env.iter().flatten().enumerate() {
            if let Some(r) = e
                .value_from
                .as_ref()
                .and_then(|f| f.secret_key_ref.as_ref())
            {
                wanted.entry(r.name.clone()).or_default().push((
                    format!("env[{i}] ({})", e.name),
                    r.key.clone(),
                    r.optional.unwrap_or(false),
                ));
            }
        }
        let mut out = SecretValues::new();
        for (name, refs) in wanted {
            let api: kube::Api<Secret> = kube::Api::namespaced(self.api.client(), &ns);
            let secret = self
                .api
                .call("GET", api.get_opt(&name))
                .await
                .map_err(|e| {
                    format!("container {}: cannot read Secret {ns}/{name}: {e}", c.name)
                })?;
            for (field, key, optional) in refs {
                let value = secret
                    .as_ref()
                    .and_then(|s| s.data.as_ref())
                    .and_then(|d| d.get(&key))
                    .map(|b| String::from_utf8_lossy(&b.0).into_owned());
                match value {
                    Some(v) => {
                        self.redactor.register(&v);
                        out.insert((name.clone(), key), v);
                    }
                    None if optional => {}
                    None if secret.is_none() => {
                        return Err(format!(
                            "container {}: {field}: secret \"{name}\" not found",
                            c.name
                        ))
                    }
                    None => {
                        return Err(format!(
                            "container {}: {field}: couldn't find key {key} in Secret {ns}/{name}",
                            c.name
                        ))
                    }
                }
            }
        }
        Ok(out)
    }
}
