//! Who a request to the kubelet API is (`cmd/kubelet/app/auth.go` `BuildAuthn`).
//!
//! Owns the order: a client certificate verified against `--client-ca-file` (user = CN,
//! groups = O), then a bearer token checked with a TokenReview (answers cached, keyed by the
//! token's SHA-256, never the token), then anonymous when allowed. Must not log, record or
//! keep a token.

use std::sync::Mutex;
use std::time::{Duration, Instant};

use k8s_openapi::api::authentication::v1::{TokenReview, TokenReviewSpec};

use super::decision_cache::DecisionCache;

/// An authenticated user (the kubelet's `user.Info`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct User {
    /// The user name.
    pub name: String,
    /// The groups.
    pub groups: Vec<String>,
    /// The UID, when the authenticator gave one.
    pub uid: Option<String>,
}

/// How long a TokenReview answer is kept: authenticated (the kubelet's
/// `--authentication-token-webhook-cache-ttl`, 2 min) and rejected (30 s).
pub const TOKEN_TTL_AUTHENTICATED: Duration = Duration::from_secs(120);
/// See [`TOKEN_TTL_AUTHENTICATED`].
pub const TOKEN_TTL_REJECTED: Duration = Duration::from_secs(30);
/// At most this many token answers are kept.
pub const TOKEN_CACHE_CAPACITY: usize = 4096;
/// A longer `Authorization` header is not looked at (401).
pub const MAX_TOKEN_LEN: usize = 8192;

/// The user a verified client certificate names: CN is the user, each O a group. `None`
/// when the certificate cannot be parsed or has no CN.
pub fn user_from_certificate(der: &[u8]) -> Option<User> {
    let (_, cert) = x509_parser::parse_x509_certificate(der).ok()?;
    let subject = cert.subject();
    let name = subject
        .iter_common_name()
        .next()?
        .as_str()
        .ok()?
        .to_string();
    if name.is_empty() {
        return None;
    }
    let groups = subject
        .iter_organization()
        .filter_map(|o| o.as_str().ok().map(str::to_string))
        .collect();
    Some(User {
        name,
        groups,
        uid: None,
    })
}

/// The token of an `Authorization: Bearer TOKEN` header value (`None` for another scheme,
/// an empty or oversized token).
pub fn bearer_token(header: &str) -> Option<&str> {
    let (scheme, token) = header.trim().split_once(' ')?;
    let token = token.trim();
    if !scheme.eq_ignore_ascii_case("bearer") || token.is_empty() || token.len() > MAX_TOKEN_LEN {
        return None;
    }
    Some(token)
}

/// The anonymous user (`--anonymous-auth=true`).
pub fn anonymous() -> User {
    User {
        name: "system:anonymous".into(),
        groups: vec!["system:unauthenticated".into()],
        uid: None,
    }
}

/// The cache key of a token: its SHA-256 in hex.
fn token_key(token: &str) -> String {
    let digest = ring::digest::digest(&ring::digest::SHA256, token.as_bytes());
    digest.as_ref().iter().map(|b| format!("{b:02x}")).collect()
}

/// Bearer tokens checked with TokenReview (`--authentication-token-webhook`).
pub struct TokenReviewer {
    client: kube::Client,
    cache: Mutex<DecisionCache<Option<User>>>,
}

impl TokenReviewer {
    /// Reviews through `client` (the node's API client).
    pub fn new(client: kube::Client) -> Self {
        TokenReviewer {
            client,
            cache: Mutex::new(DecisionCache::new(TOKEN_CACHE_CAPACITY)),
        }
    }

    /// The user `token` authenticates as, `None` when the apiserver says it does not;
    /// an error when the review could not be made (not cached).
    pub async fn review(&self, token: &str) -> Result<Option<User>, String> {
        let key = token_key(token);
        if let Some(answer) = self
            .cache
            .lock()
            .expect("token cache")
            .get(&key, Instant::now())
        {
            return Ok(answer);
        }
        let review = TokenReview {
            spec: TokenReviewSpec {
                token: token.to_string(),
                audiences: None,
            },
            ..TokenReview::default()
        };
        let api: kube::Api<TokenReview> = kube::Api::all(self.client.clone());
        let answer = api
            .create(&kube::api::PostParams::default(), &review)
            .await
            .map_err(|e| format!("TokenReview failed: {e}"))?;
        let user = answer
            .status
            .filter(|s| s.authenticated == Some(true))
            .and_then(|s| s.user)
            .and_then(|u| {
                Some(User {
                    name: u.username.filter(|n| !n.is_empty())?,
                    groups: u.groups.unwrap_or_default(),
                    uid: u.uid.filter(|id| !id.is_empty()),
                })
            });
        let ttl = if user.is_some() {
            TOKEN_TTL_AUTHENTICATED
        } else {
            TOKEN_TTL_REJECTED
        };
        self.cache
            .lock()
            .expect("token cache")
            .insert(key, user.clone(), ttl, Instant::now());
        Ok(user)
    }
}

/// How requests are authenticated (the flags).
pub struct Authenticator {
    /// `--authentication-token-webhook`: bearer tokens are reviewed.
    pub tokens: Option<TokenReviewer>,
    /// `--anonymous-auth`.
    pub anonymous: bool,
}

impl Authenticator {
    /// Who the request is: the certificate's user, else the token's, else anonymous if
    /// allowed; `None` is a 401.
    pub async fn authenticate(
        &self,
        certificate_user: Option<User>,
        authorization_header: Option<&str>,
    ) -> Option<User> {
        if let Some(u) = certificate_user {
            return Some(u);
        }
        if let (Some(reviewer), Some(token)) =
            (&self.tokens, authorization_header.and_then(bearer_token))
        {
            match reviewer.review(token).await {
                Ok(Some(u)) => return Some(u),
                Ok(None) => {}
                Err(e) => tracing::warn!(error = %e, "cannot authenticate a bearer token"),
            }
        }
        self.anonymous.then(anonymous)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_bearer_header_yields_its_token_and_other_schemes_none() {
        assert_eq!(bearer_token("Bearer abc.def"), Some("abc.def"));
        assert_eq!(bearer_token("bearer   abc"), Some("abc"));
        assert_eq!(bearer_token("Basic dXNlcjpwdw=="), None);
        assert_eq!(bearer_token("Bearer "), None);
        assert_eq!(bearer_token("Bearer"), None);
        assert_eq!(
            bearer_token(&format!("Bearer {}", "x".repeat(MAX_TOKEN_LEN + 1))),
            None
        );
    }

    #[test]
    fn a_token_is_cached_under_its_digest_never_itself() {
        let key = token_key("secret-token");
        assert_eq!(key.len(), 64);
        assert!(!key.contains("secret"));
    }

    #[test]
    fn a_client_certificate_names_the_user_by_cn_and_groups_by_o() {
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "alice");
        params
            .distinguished_name
            .push(rcgen::DnType::OrganizationName, "devs");
        let key = rcgen::KeyPair::generate().unwrap();
        let cert = params.self_signed(&key).unwrap();
        let user = user_from_certificate(cert.der()).unwrap();
        assert_eq!(user.name, "alice");
        assert_eq!(user.groups, vec!["devs".to_string()]);
    }

    #[test]
    fn garbage_is_no_certificate_user() {
        assert_eq!(user_from_certificate(b"not a certificate"), None);
    }
}
