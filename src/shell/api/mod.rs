//! Talking to the Kubernetes API server: the client, its rate limit and its metrics, and the
//! executors of the core's API writes (status sync, node writes) and Events.
//!
//! Owns HTTP to the API server. Must not decide what to write: every write comes from a
//! command, and every outcome goes back as a record. kube's automatic retries are off, so
//! each failure is seen, recorded and retried by the core's own rules.

pub mod events;
pub mod limiter;
pub mod node_sync;
pub mod status_sync;

use std::future::Future;
use std::path::Path;
use std::sync::Arc;
use std::time::Instant;

use anyhow::Context;
use limiter::TokenBucket;

/// An API call that failed, with the HTTP status when there was one.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ApiError {
    /// HTTP status.
    pub code: Option<u16>,
    /// What the server (or the transport) said.
    pub message: String,
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.code {
            Some(c) => write!(f, "{c}: {}", self.message),
            None => f.write_str(&self.message),
        }
    }
}

impl From<kube::Error> for ApiError {
    fn from(e: kube::Error) -> ApiError {
        match e {
            kube::Error::Api(s) => ApiError {
                code: Some(s.code),
                message: if s.message.is_empty() {
                    s.reason.clone()
                } else {
                    s.message.clone()
                },
            },
            other => ApiError {
                code: None,
                message: crate::error_chain::error_chain(&other),
            },
        }
    }
}

impl ApiError {
    /// True for 404.
    pub fn is_not_found(&self) -> bool {
        self.code == Some(404)
    }

    /// True for 409.
    pub fn is_conflict(&self) -> bool {
        self.code == Some(409)
    }
}

/// The kube client with the kubelet's QPS/burst limit and `rest_client_*` metrics.
#[derive(Clone)]
pub struct ApiClient {
    client: kube::Client,
    limiter: Arc<TokenBucket>,
    host: String,
}

/// Rate limits of the API client.
#[derive(Clone, Copy, Debug)]
pub struct ApiLimits {
    /// Requests per second (kubelet `--kube-api-qps`, 50).
    pub qps: f64,
    /// Burst (kubelet `--kube-api-burst`, 100).
    pub burst: u32,
}

impl Default for ApiLimits {
    fn default() -> Self {
        ApiLimits {
            qps: 50.0,
            burst: 100,
        }
    }
}

impl ApiClient {
    /// A client for the cluster in `kubeconfig` (its current context).
    pub async fn from_kubeconfig(
        kubeconfig: &Path,
        limits: ApiLimits,
    ) -> anyhow::Result<ApiClient> {
        let kc = kube::config::Kubeconfig::read_from(kubeconfig)
            .with_context(|| format!("cannot read --kubeconfig {}", kubeconfig.display()))?;
        let mut config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
            .await
            .with_context(|| format!("invalid --kubeconfig {}", kubeconfig.display()))?;
        config.default_retry = false;
        let host = config.cluster_url.host().unwrap_or("").to_string();
        let client = kube::Client::try_from(config)
            .with_context(|| format!("cannot build a client from {}", kubeconfig.display()))?;
        Ok(ApiClient {
            client,
            limiter: Arc::new(TokenBucket::new(limits.qps, limits.burst)),
            host,
        })
    }

    /// The same client with its own rate limit (Events are limited separately).
    pub fn with_limits(&self, limits: ApiLimits) -> ApiClient {
        ApiClient {
            client: self.client.clone(),
            limiter: Arc::new(TokenBucket::new(limits.qps, limits.burst)),
            host: self.host.clone(),
        }
    }

    /// The underlying client (watches are not rate limited, as in client-go).
    pub fn client(&self) -> kube::Client {
        self.client.clone()
    }

    /// Runs one request under the rate limit, recording `rest_client_requests_total` and
    /// `rest_client_request_duration_seconds`.
    pub async fn call<T>(
        &self,
        verb: &'static str,
        request: impl Future<Output = Result<T, kube::Error>>,
    ) -> Result<T, ApiError> {
        self.limiter.acquire().await;
        let started = Instant::now();
        let result = request.await.map_err(ApiError::from);
        let code = match &result {
            Ok(_) => if verb == "POST" { "201" } else { "200" }.to_string(),
            Err(e) => e.code.map_or("<error>".to_string(), |c| c.to_string()),
        };
        metrics::counter!("rest_client_requests_total", "code" => code, "method" => verb, "host" => self.host.clone())
            .increment(1);
        metrics::histogram!("rest_client_request_duration_seconds", "verb" => verb, "host" => self.host.clone())
            .record(started.elapsed().as_secs_f64());
        result
    }
}
