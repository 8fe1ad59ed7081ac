//! Registry credentials from a pod's `imagePullSecrets` (kubelet `getPullSecretsForPod`,
//! `credentialprovider/secrets.MakeDockerKeyring`, `BasicDockerKeyring.Lookup`).
//!
//! Owns reading the pod's pull secrets from the API server (one GET per secret, when a sync
//! is about to start containers), parsing their `.dockerconfigjson` / `.dockercfg`
//! payloads into a keyring, registering every credential with the [`Redactor`] before it
//! is used, and finding the credentials for an image (more specific registry paths first;
//! Docker Hub's for unqualified names). Must not put a credential in an error, a log line or
//! a record, and must not keep secrets beyond one sync (a fetch is always current).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Pod, Secret};

use super::api::ApiClient;
use super::redact::Redactor;
use crate::core::pod;
use crate::cri::v1;

/// `kubernetes.io/dockerconfigjson` secrets hold their config under this key.
pub const DOCKER_CONFIG_JSON_KEY: &str = ".dockerconfigjson";
/// `kubernetes.io/dockercfg` secrets hold their config under this key.
pub const DOCKERCFG_KEY: &str = ".dockercfg";
/// Docker Hub's key in a keyring (`defaultRegistryHost`).
pub const DEFAULT_REGISTRY_HOST: &str = "index.docker.io";

/// Credentials by registry location, most specific first.
#[derive(Clone, Default)]
pub struct Keyring {
    /// `(location, credentials)`, reverse-sorted by location (upstream's index order).
    entries: Vec<(String, Vec<v1::AuthConfig>)>,
}

impl std::fmt::Debug for Keyring {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let locations: Vec<&str> = self.entries.iter().map(|(l, _)| l.as_str()).collect();
        write!(f, "Keyring({locations:?})")
    }
}

/// A pod's pull credentials: the keyring (or why it could not be built: pulls then fail
/// with this, as the kubelet's), and the referenced secrets that could not be read.
#[derive(Clone, Debug)]
pub struct PodCredentials {
    /// The keyring of every secret that could be read.
    pub keyring: Result<Keyring, String>,
    /// Names of referenced secrets that could not be read.
    pub missing: Vec<String>,
}

impl Default for PodCredentials {
    fn default() -> Self {
        PodCredentials {
            keyring: Ok(Keyring::default()),
            missing: Vec::new(),
        }
    }
}

impl PodCredentials {
    /// The kubelet's `FailedToRetrieveImagePullSecret` warning, if a secret was missing.
    pub fn missing_warning(&self) -> Option<String> {
        (!self.missing.is_empty()).then(|| {
            format!(
                "Unable to retrieve some image pull secrets ({}); attempting to pull the image \
                 may not succeed.",
                self.missing.join(", ")
            )
        })
    }

    /// The credentials to try for `image`, in order (empty: pull without). An unusable
    /// pull secret is an error naming it.
    pub fn lookup(&self, image: &str) -> Result<Vec<v1::AuthConfig>, String> {
        let keyring = self.keyring.as_ref().map_err(String::clone)?;
        Ok(keyring.lookup(&repository(image)))
    }
}

/// Reads pull secrets.
#[derive(Clone, Default)]
pub struct PullSecrets {
    api: Option<ApiClient>,
    redactor: Redactor,
}

impl PullSecrets {
    /// Reading through `api` (`None`: a standalone node, no secrets), registering every
    /// credential with `redactor`.
    pub fn new(api: Option<ApiClient>, redactor: Redactor) -> PullSecrets {
        PullSecrets { api, redactor }
    }

    /// The credentials of `p`'s `imagePullSecrets`. A secret that cannot be read is
    /// skipped and named in `missing`.
    pub async fn for_pod(&self, p: &Pod) -> PodCredentials {
        let names: Vec<String> = p
            .spec
            .as_ref()
            .and_then(|s| s.image_pull_secrets.as_ref())
            .into_iter()
            .flatten()
            .map(|r| r.name.clone())
            .filter(|n| !n.is_empty())
            .collect();
        let Some(api) = self.api.as_ref().filter(|_| !names.is_empty()) else {
            return PodCredentials::default();
        };
        let ns = pod::namespace(p).to_string();
        let secrets: kube::Api<Secret> = kube::Api::namespaced(api.client(), &ns);
        let mut found = Vec::new();
        let mut missing = Vec::new();
        for name in names {
            match api.call("GET", secrets.get_opt(&name)).await {
                Ok(Some(s)) => found.push(s),
                Ok(None) | Err(_) => missing.push(name),
            }
        }
        let keyring = Keyring::from_secrets(&found);
        if let Ok(k) = &keyring {
            for auth in k.entries.iter().flat_map(|(_, a)| a) {
                for v in [
                    &auth.password,
                    &auth.auth,
                    &auth.identity_token,
                    &auth.registry_token,
                ] {
                    self.redactor.register(v);
                }
            }
        }
        PodCredentials { keyring, missing }
    }
}

impl Keyring {
    /// `MakeDockerKeyring`: the entries of every `kubernetes.io/dockerconfigjson` and
    /// `kubernetes.io/dockercfg` secret. A payload that does not parse is an error naming
    /// the secret (never its content).
    pub fn from_secrets(secrets: &[Secret]) -> Result<Keyring, String> {
        let mut by_location: BTreeMap<String, Vec<v1::AuthConfig>> = BTreeMap::new();
        for s in secrets {
            let data = |k: &str| {
                s.data
                    .as_ref()
                    .and_then(|d| d.get(k))
                    .map(|b| b.0.as_slice())
                    .filter(|b| !b.is_empty())
            };
            let kind = s.type_.as_deref().unwrap_or_default();
            let name = s.metadata.name.as_deref().unwrap_or_default();
            let config = match (kind, data(DOCKER_CONFIG_JSON_KEY), data(DOCKERCFG_KEY)) {
                ("kubernetes.io/dockerconfigjson", Some(json), _) => {
                    parse_json(json, name)?.get("auths").cloned()
                }
                ("kubernetes.io/dockercfg", _, Some(cfg)) => Some(parse_json(cfg, name)?),
                _ => None,
            };
            let Some(serde_json::Value::Object(entries)) = config else {
                continue;
            };
            for (location, entry) in entries {
                let auth = entry_auth(&entry).ok_or_else(|| {
                    format!("image pull secret {name:?}: the entry for {location:?} is invalid")
                })?;
                by_location
                    .entry(location_key(&location))
                    .or_default()
                    .push(auth);
            }
        }
        let mut entries: Vec<_> = by_location.into_iter().collect();
        entries.reverse();
        Ok(Keyring { entries })
    }

    /// `BasicDockerKeyring.Lookup`: the credentials of every location matching the
    /// repository, most specific first; else Docker Hub's for a Docker Hub image.
    pub fn lookup(&self, repository: &str) -> Vec<v1::AuthConfig> {
        let found: Vec<v1::AuthConfig> = self
            .entries
            .iter()
            .filter(|(location, _)| urls_match(location, repository))
            .flat_map(|(_, auths)| auths.iter().cloned())
            .collect();
        if !found.is_empty() || !is_default_registry(repository) {
            return found;
        }
        self.entries
            .iter()
            .find(|(location, _)| location == DEFAULT_REGISTRY_HOST)
            .map(|(_, auths)| auths.clone())
            .unwrap_or_default()
    }
}

fn parse_json(bytes: &[u8], secret: &str) -> Result<serde_json::Value, String> {
    serde_json::from_slice(bytes)
        .map_err(|_| format!("image pull secret {secret:?}: its payload is not valid JSON"))
}

/// A `DockerConfigEntry`: username and password, or `auth` (base64 `user:password`),
/// which wins.
fn entry_auth(entry: &serde_json::Value) -> Option<v1::AuthConfig> {
    let field = |k: &str| entry.get(k).and_then(|v| v.as_str()).unwrap_or_default();
    let mut auth = v1::AuthConfig {
        username: field("username").to_string(),
        password: field("password").to_string(),
        ..Default::default()
    };
    let encoded = field("auth");
    if !encoded.is_empty() {
        let decoded = String::from_utf8(base64_decode(encoded)?).ok()?;
        let (user, password) = decoded.split_once(':')?;
        auth.username = user.to_string();
        auth.password = password.trim_matches('\0').to_string();
    }
    Some(auth)
}

/// The keyring key of a config location: scheme dropped, `/v1/` and `/v2/` paths meaning
/// the host, no trailing `/`.
fn location_key(location: &str) -> String {
    let rest = location
        .strip_prefix("https://")
        .or_else(|| location.strip_prefix("http://"))
        .unwrap_or(location);
    let (host, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, ""),
    };
    let path = if path.starts_with("/v1/") || path.starts_with("/v2/") {
        &path[3..]
    } else {
        path
    };
    let key = if path.is_empty() || path == "/" {
        host.to_string()
    } else {
        format!("{host}{path}")
    };
    key.trim_end_matches('/').to_string()
}

/// Host parts, port and path of a schemeless URL.
fn split_url(url: &str) -> (Vec<&str>, &str, &str) {
    let (host, path) = match url.find('/') {
        Some(i) => (&url[..i], &url[i..]),
        None => (url, ""),
    };
    let (name, port) = host.rsplit_once(':').unwrap_or((host, ""));
    (name.split('.').collect(), port, path)
}

/// `URLsMatch`: same port, same number of host parts each matching its glob, and the
/// location's path a prefix of the image's.
fn urls_match(location: &str, image: &str) -> bool {
    let (glob_parts, glob_port, glob_path) = split_url(location);
    let (parts, port, path) = split_url(image);
    glob_port == port
        && glob_parts.len() == parts.len()
        && path.starts_with(glob_path)
        && glob_parts.iter().zip(&parts).all(|(g, p)| glob(g, p))
}

/// `filepath.Match` for one host part: `*` any run, `?` any one character.
fn glob(pattern: &str, s: &str) -> bool {
    let (p, s): (Vec<char>, Vec<char>) = (pattern.chars().collect(), s.chars().collect());
    let (mut pi, mut si) = (0, 0);
    let (mut star, mut mark) = (None, 0);
    while si < s.len() {
        if pi < p.len() && (p[pi] == '?' || p[pi] == s[si]) {
            pi += 1;
            si += 1;
        } else if pi < p.len() && p[pi] == '*' {
            star = Some(pi);
            mark = si;
            pi += 1;
        } else if let Some(st) = star {
            pi = st + 1;
            mark += 1;
            si = mark;
        } else {
            return false;
        }
    }
    p[pi..].iter().all(|c| *c == '*')
}

/// `isDefaultRegistryMatch`: an image Docker Hub serves.
fn is_default_registry(image: &str) -> bool {
    let first = image.split('/').next().unwrap_or_default();
    if first.is_empty() {
        return false;
    }
    !image.contains('/')
        || first == "docker.io"
        || first == DEFAULT_REGISTRY_HOST
        || !first.contains(['.', ':'])
}

/// The repository an image is pulled from (`parsers.ParseImageName`): no tag or digest,
/// Docker Hub names in full (`busybox` → `docker.io/library/busybox`).
pub fn repository(image: &str) -> String {
    let name = image.split('@').next().unwrap_or(image);
    let name = match name.rfind(':') {
        Some(i) if !name[i..].contains('/') => &name[..i],
        _ => name,
    };
    let first = name.split('/').next().unwrap_or_default();
    let has_domain = name.contains('/') && (first.contains(['.', ':']) || first == "localhost");
    if has_domain {
        name.to_string()
    } else if name.contains('/') {
        format!("docker.io/{name}")
    } else {
        format!("docker.io/library/{name}")
    }
}

/// Standard base64 (with or without padding); `None` if it is not.
fn base64_decode(s: &str) -> Option<Vec<u8>> {
    let value = |c: u8| -> Option<u32> {
        Some(match c {
            b'A'..=b'Z' => c - b'A',
            b'a'..=b'z' => c - b'a' + 26,
            b'0'..=b'9' => c - b'0' + 52,
            b'+' => 62,
            b'/' => 63,
            _ => return None,
        } as u32)
    };
    let bytes: Vec<u8> = s.trim_end_matches('=').bytes().collect();
    let mut out = Vec::with_capacity(bytes.len() * 3 / 4);
    for chunk in bytes.chunks(4) {
        if chunk.len() == 1 {
            return None;
        }
        let mut n = 0u32;
        for (i, c) in chunk.iter().enumerate() {
            n |= value(*c)? << (18 - 6 * i);
        }
        out.push((n >> 16) as u8);
        if chunk.len() > 2 {
            out.push((n >> 8) as u8);
        }
        if chunk.len() > 3 {
            out.push(n as u8);
        }
    }
    Some(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn secret(name: &str, kind: &str, key: &str, payload: serde_json::Value) -> Secret {
        let bytes = serde_json::to_vec(&payload).unwrap();
        Secret {
            metadata: k8s_openapi::apimachinery::pkg::apis::meta::v1::ObjectMeta {
                name: Some(name.into()),
                ..Default::default()
            },
            type_: Some(kind.into()),
            data: Some([(key.to_string(), k8s_openapi::ByteString(bytes))].into()),
            ..Default::default()
        }
    }

    fn users(auths: &[v1::AuthConfig]) -> Vec<&str> {
        auths.iter().map(|a| a.username.as_str()).collect()
    }

    #[test]
    fn image_names_are_normalised_to_their_repository() {
        assert_eq!(repository("busybox"), "docker.io/library/busybox");
        assert_eq!(repository("me/app:1"), "docker.io/me/app");
        assert_eq!(repository("127.0.0.1:5000/app:1"), "127.0.0.1:5000/app");
        assert_eq!(repository("quay.io/a/b@sha256:abc"), "quay.io/a/b");
        assert_eq!(repository("localhost/x"), "localhost/x");
    }

    #[test]
    fn the_most_specific_location_comes_first_and_docker_hub_serves_short_names() {
        let json = secret(
            "regcred",
            "kubernetes.io/dockerconfigjson",
            DOCKER_CONFIG_JSON_KEY,
            serde_json::json!({"auths": {
                "https://quay.io": {"username": "broad", "password": "p1"},
                "quay.io/team": {"auth": "bmFycm93OnAy"},
                "https://index.docker.io/v1/": {"username": "hub", "password": "p3"},
                "*.example.com:5000": {"username": "wild", "password": "p4"}
            }}),
        );
        let k = Keyring::from_secrets(&[json]).unwrap();
        let team = k.lookup(&repository("quay.io/team/app:1"));
        assert_eq!(users(&team), ["narrow", "broad"]);
        assert_eq!(team[0].password, "p2");
        assert_eq!(
            users(&k.lookup(&repository("quay.io/other/app"))),
            ["broad"]
        );
        assert_eq!(users(&k.lookup(&repository("busybox"))), ["hub"]);
        assert_eq!(
            users(&k.lookup(&repository("r.example.com:5000/x"))),
            ["wild"]
        );
        assert!(k.lookup(&repository("r.example.com/x")).is_empty());
        assert!(k.lookup(&repository("gcr.io/x")).is_empty());
    }

    #[test]
    fn dockercfg_secrets_count_and_other_secrets_do_not() {
        let cfg = secret(
            "old",
            "kubernetes.io/dockercfg",
            DOCKERCFG_KEY,
            serde_json::json!({"gcr.io": {"username": "old", "password": "p"}}),
        );
        let opaque = secret(
            "opaque",
            "Opaque",
            DOCKER_CONFIG_JSON_KEY,
            serde_json::json!({"auths": {"gcr.io": {"username": "no", "password": "p"}}}),
        );
        let k = Keyring::from_secrets(&[cfg, opaque]).unwrap();
        assert_eq!(users(&k.lookup("gcr.io/x")), ["old"]);
    }

    #[test]
    fn an_unusable_secret_is_an_error_naming_it_without_its_content() {
        let bad = secret(
            "broken",
            "kubernetes.io/dockerconfigjson",
            DOCKER_CONFIG_JSON_KEY,
            serde_json::json!({"auths": {"gcr.io": {"auth": "!!not-base64-hunter2"}}}),
        );
        let e = Keyring::from_secrets(&[bad]).unwrap_err();
        assert!(e.contains("\"broken\"") && e.contains("gcr.io"), "{e}");
        assert!(!e.contains("hunter2"), "{e}");
        let creds = PodCredentials {
            keyring: Err(e.clone()),
            missing: vec!["a".into(), "b".into()],
        };
        assert_eq!(creds.lookup("gcr.io/x").unwrap_err(), e);
        assert_eq!(
            creds.missing_warning().unwrap(),
            "Unable to retrieve some image pull secrets (a, b); attempting to pull the image \
             may not succeed."
        );
    }

    #[test]
    fn base64_decodes_with_and_without_padding() {
        assert_eq!(base64_decode("dXNlcjpwYXNz").unwrap(), b"user:pass");
        assert_eq!(base64_decode("YQ==").unwrap(), b"a");
        assert_eq!(base64_decode("YWI").unwrap(), b"ab");
        assert!(base64_decode("a$").is_none());
    }
}
