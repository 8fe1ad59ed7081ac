//! The kubelet API's settings from the command line, and what `/configz` shows of the agent.
//!
//! Owns the flags' meaning (`--port`, `--tls-*`, `--client-ca-file`, `--anonymous-auth`,
//! `--authentication-token-webhook`, `--authorization-mode`) and their checks. Must not put a
//! secret in the `/configz` document: it names files, never their contents.

use super::tls::TlsFiles;

/// `--authorization-mode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum AuthorizationMode {
    /// Every authenticated request is allowed.
    AlwaysAllow,
    /// Each request is reviewed with a SubjectAccessReview.
    Webhook,
}

impl AuthorizationMode {
    /// The flag's spelling.
    pub fn as_str(self) -> &'static str {
        match self {
            AuthorizationMode::AlwaysAllow => "AlwaysAllow",
            AuthorizationMode::Webhook => "Webhook",
        }
    }
}

impl std::str::FromStr for AuthorizationMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        match s {
            "AlwaysAllow" => Ok(AuthorizationMode::AlwaysAllow),
            "Webhook" => Ok(AuthorizationMode::Webhook),
            _ => Err(format!(
                "--authorization-mode must be Webhook or AlwaysAllow, not {s:?}"
            )),
        }
    }
}

/// The secure port's settings.
#[derive(Clone, Debug)]
pub struct ApiOptions {
    /// `--port` (10250; 0 picks a free one, which the node then reports).
    pub port: u16,
    /// Serving certificate and client CA files.
    pub tls: TlsFiles,
    /// `--anonymous-auth`: unauthenticated requests are `system:anonymous`.
    pub anonymous_auth: bool,
    /// `--authentication-token-webhook`: bearer tokens are checked with TokenReview.
    pub token_webhook: bool,
    /// `--authorization-mode`; `None`: Webhook with a kubeconfig, else AlwaysAllow.
    pub authorization_mode: Option<AuthorizationMode>,
}

impl Default for ApiOptions {
    fn default() -> Self {
        ApiOptions {
            port: 10250,
            tls: TlsFiles::default(),
            anonymous_auth: false,
            token_webhook: false,
            authorization_mode: None,
        }
    }
}

impl ApiOptions {
    /// The authorization mode in force, given whether the node joined a cluster; an error
    /// when a webhook is asked for without one.
    pub fn effective_mode(&self, joined: bool) -> Result<AuthorizationMode, String> {
        let mode = self.authorization_mode.unwrap_or(if joined {
            AuthorizationMode::Webhook
        } else {
            AuthorizationMode::AlwaysAllow
        });
        if !joined && mode == AuthorizationMode::Webhook {
            return Err("--authorization-mode Webhook needs --kubeconfig (SubjectAccessReview goes to the apiserver)".into());
        }
        if !joined && self.token_webhook {
            return Err("--authentication-token-webhook needs --kubeconfig (TokenReview goes to the apiserver)".into());
        }
        Ok(mode)
    }

    /// The `authentication`/`authorization` part of `/configz` (file names only).
    pub fn configz(&self, mode: AuthorizationMode, bound_port: u16) -> serde_json::Value {
        let path = |p: &Option<std::path::PathBuf>| p.as_ref().map(|p| p.display().to_string());
        serde_json::json!({
            "port": bound_port,
            "tlsCertFile": path(&self.tls.cert),
            "tlsPrivateKeyFile": path(&self.tls.key),
            "authentication": {
                "x509": { "clientCAFile": path(&self.tls.client_ca) },
                "webhook": { "enabled": self.token_webhook, "cacheTTL": "2m0s" },
                "anonymous": { "enabled": self.anonymous_auth },
            },
            "authorization": {
                "mode": mode.as_str(),
                "webhook": { "cacheAuthorizedTTL": "5m0s", "cacheUnauthorizedTTL": "30s" },
            },
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn authorization_defaults_to_webhook_in_a_cluster_and_always_allow_standalone() {
        let o = ApiOptions::default();
        assert_eq!(o.effective_mode(true), Ok(AuthorizationMode::Webhook));
        assert_eq!(o.effective_mode(false), Ok(AuthorizationMode::AlwaysAllow));
    }

    #[test]
    fn a_webhook_without_a_kubeconfig_is_refused_naming_the_flag() {
        let o = ApiOptions {
            authorization_mode: Some(AuthorizationMode::Webhook),
            ..ApiOptions::default()
        };
        assert!(o
            .effective_mode(false)
            .unwrap_err()
            .contains("--authorization-mode"));
        let o = ApiOptions {
            token_webhook: true,
            ..ApiOptions::default()
        };
        assert!(o
            .effective_mode(false)
            .unwrap_err()
            .contains("--authentication-token-webhook"));
    }

    #[test]
    fn an_unknown_authorization_mode_is_an_error_naming_the_flag() {
        let e = "RBAC".parse::<AuthorizationMode>().unwrap_err();
        assert!(e.contains("--authorization-mode"), "{e}");
    }
}
