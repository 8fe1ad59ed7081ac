//! Whether an authenticated user may make a request (`cmd/kubelet/app/auth.go` `BuildAuthz`).
//!
//! Owns the two modes (`AlwaysAllow`, `Webhook`: a SubjectAccessReview per attribute set,
//! answers cached 5 min when allowed and 30 s when denied, bounded) and the cache key. Must
//! not decide which attributes a request has (that is `attributes`).

use std::sync::Mutex;
use std::time::{Duration, Instant};

use k8s_openapi::api::authorization::v1::{
    ResourceAttributes, SubjectAccessReview, SubjectAccessReviewSpec,
};

use super::attributes::Attributes;
use super::authn::User;
use super::decision_cache::DecisionCache;

/// How long an allowed answer is kept (`--authorization-webhook-cache-authorized-ttl`).
pub const AUTHORIZED_TTL: Duration = Duration::from_secs(300);
/// How long a denial is kept (`--authorization-webhook-cache-unauthorized-ttl`).
pub const UNAUTHORIZED_TTL: Duration = Duration::from_secs(30);
/// At most this many answers are kept.
pub const DECISION_CACHE_CAPACITY: usize = 4096;

/// The outcome for one request.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Decision {
    /// One of the request's subresources is allowed.
    Allowed,
    /// None is: a 403.
    Denied,
    /// A review could not be made (a 500 naming the subresource).
    Error {
        /// The subresource whose review failed.
        subresource: &'static str,
        /// Why.
        reason: String,
    },
}

/// The cache key of one user and one subresource check (no secret in it).
pub fn cache_key(user: &User, verb: &str, subresource: &str, node: &str) -> String {
    let mut groups = user.groups.clone();
    groups.sort();
    format!(
        "{}\u{0}{}\u{0}{}\u{0}{verb}\u{0}{subresource}\u{0}{node}",
        user.name,
        user.uid.as_deref().unwrap_or(""),
        groups.join("\u{1}")
    )
}

/// `--authorization-mode`.
pub enum Authorizer {
    /// Everyone authenticated may do everything.
    AlwaysAllow,
    /// SubjectAccessReview through the node's API client.
    Webhook {
        /// The node's API client.
        client: kube::Client,
        /// Past answers.
        cache: Mutex<DecisionCache<bool>>,
    },
}

impl Authorizer {
    /// A webhook authorizer with an empty cache.
    pub fn webhook(client: kube::Client) -> Self {
        Authorizer::Webhook {
            client,
            cache: Mutex::new(DecisionCache::new(DECISION_CACHE_CAPACITY)),
        }
    }

    /// The decision for `user` doing `attrs` on node `node`: allowed as soon as one
    /// subresource is (in order, as the kubelet).
    pub async fn authorize(&self, user: &User, attrs: &Attributes, node: &str) -> Decision {
        let Authorizer::Webhook { client, cache } = self else {
            return Decision::Allowed;
        };
        for subresource in &attrs.subresources {
            let key = cache_key(user, attrs.verb, subresource, node);
            let cached = cache
                .lock()
                .expect("decision cache")
                .get(&key, Instant::now());
            let allowed = match cached {
                Some(a) => a,
                None => match review(client, user, attrs.verb, subresource, node).await {
                    Ok(a) => {
                        let ttl = if a { AUTHORIZED_TTL } else { UNAUTHORIZED_TTL };
                        cache
                            .lock()
                            .expect("decision cache")
                            .insert(key, a, ttl, Instant::now());
                        a
                    }
                    Err(reason) => {
                        return Decision::Error {
                            subresource,
                            reason,
                        }
                    }
                },
            };
            if allowed {
                return Decision::Allowed;
            }
        }
        Decision::Denied
    }
}

/// One SubjectAccessReview: may `user` `verb` `nodes/<subresource>` named `node`?
async fn review(
    client: &kube::Client,
    user: &User,
    verb: &str,
    subresource: &str,
    node: &str,
) -> Result<bool, String> {
    let sar = SubjectAccessReview {
        spec: SubjectAccessReviewSpec {
            user: Some(user.name.clone()),
            groups: Some(user.groups.clone()),
            uid: user.uid.clone(),
            resource_attributes: Some(ResourceAttributes {
                verb: Some(verb.to_string()),
                group: Some(String::new()),
                version: Some("v1".into()),
                resource: Some("nodes".into()),
                subresource: Some(subresource.to_string()),
                name: Some(node.to_string()),
                ..ResourceAttributes::default()
            }),
            ..SubjectAccessReviewSpec::default()
        },
        ..SubjectAccessReview::default()
    };
    let api: kube::Api<SubjectAccessReview> = kube::Api::all(client.clone());
    let answer = api
        .create(&kube::api::PostParams::default(), &sar)
        .await
        .map_err(|e| format!("SubjectAccessReview failed: {e}"))?;
    Ok(answer.status.is_some_and(|s| s.allowed))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn user(name: &str, groups: &[&str]) -> User {
        User {
            name: name.into(),
            groups: groups.iter().map(|g| g.to_string()).collect(),
            uid: None,
        }
    }

    #[test]
    fn the_cache_key_does_not_depend_on_group_order() {
        assert_eq!(
            cache_key(&user("u", &["a", "b"]), "get", "proxy", "n"),
            cache_key(&user("u", &["b", "a"]), "get", "proxy", "n")
        );
    }

    #[test]
    fn the_cache_key_tells_users_verbs_subresources_and_nodes_apart() {
        let base = cache_key(&user("u", &["g"]), "get", "proxy", "n");
        assert_ne!(base, cache_key(&user("v", &["g"]), "get", "proxy", "n"));
        assert_ne!(base, cache_key(&user("u", &["h"]), "get", "proxy", "n"));
        assert_ne!(base, cache_key(&user("u", &["g"]), "create", "proxy", "n"));
        assert_ne!(base, cache_key(&user("u", &["g"]), "get", "pods", "n"));
        assert_ne!(base, cache_key(&user("u", &["g"]), "get", "proxy", "m"));
        // a name cannot pose as a group list
        assert_ne!(
            cache_key(&user("u\u{0}\u{0}g", &[]), "get", "proxy", "n"),
            cache_key(&user("u", &["g"]), "get", "proxy", "n")
        );
    }

    #[test]
    fn always_allow_allows_everyone() {
        let rt = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        let attrs = super::super::attributes::for_request("POST", "/exec/a/b/c");
        let d = rt.block_on(Authorizer::AlwaysAllow.authorize(&user("x", &[]), &attrs, "n"));
        assert_eq!(d, Decision::Allowed);
    }
}
