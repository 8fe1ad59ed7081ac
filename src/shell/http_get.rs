//! One HTTP(S) GET the way the kubelet's probe and lifecycle clients make it: a fresh
//! connection per request (`DisableKeepAlives`), TLS without certificate verification
//! (`InsecureSkipVerify`), `User-Agent` and `Accept: */*` unless the spec sets them, a
//! `Host` header from the spec honoured, same-host redirects followed (at most ten
//! requests), a redirect to another host returned as is (`RedirectChecker(false)`), the
//! body read up to 10 KiB, and one timeout for the whole exchange.
//!
//! Owns the HTTP mechanics over hyper's client connection and rustls. Must not interpret
//! status codes: the prober and the hook runner decide what a response means.

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Empty};
use hyper::header::{HeaderName, HeaderValue};
use hyper::{Request, Uri};
use hyper_util::rt::TokioIo;
use tokio::io::{AsyncRead, AsyncWrite};
use tokio::net::TcpStream;

/// The most of a response body kept (`maxRespBodyLength`, 10 KiB).
pub const MAX_BODY_BYTES: usize = 10 * 1024;

/// At most this many requests are made following same-host redirects (Go's client stops
/// with "stopped after 10 redirects").
pub const MAX_REQUESTS: usize = 10;

/// `http` or `https`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Scheme {
    /// Plain HTTP.
    Http,
    /// HTTPS (certificates are not verified).
    Https,
}

impl Scheme {
    fn as_str(self) -> &'static str {
        match self {
            Scheme::Http => "http",
            Scheme::Https => "https",
        }
    }
}

/// Where to GET, resolved from an `httpGet` action.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Target {
    /// The scheme.
    pub scheme: Scheme,
    /// Host name or IP (no brackets).
    pub host: String,
    /// Port.
    pub port: u16,
    /// Path (and query), as in the spec; `/` if empty.
    pub path: String,
    /// Request headers from the spec, in order (`Host` among them overrides the host header).
    pub headers: Vec<(String, String)>,
}

/// `net.JoinHostPort`: `host:port`, with brackets around an IPv6 address.
pub fn join_host_port(host: &str, port: u16) -> String {
    if host.contains(':') {
        format!("[{host}]:{port}")
    } else {
        format!("{host}:{port}")
    }
}

#[derive(Clone, Debug, PartialEq, Eq)]
struct Url {
    scheme: Scheme,
    host: String,
    port: u16,
    path: String,
}

impl Url {
    fn of(target: &Target) -> Url {
        Url {
            scheme: target.scheme,
            host: target.host.clone(),
            port: target.port,
            path: with_leading_slash(&target.path),
        }
    }
}

impl std::fmt::Display for Url {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}://{}{}",
            self.scheme.as_str(),
            join_host_port(&self.host, self.port),
            self.path
        )
    }
}

fn with_leading_slash(path: &str) -> String {
    if path.starts_with('/') {
        path.to_string()
    } else {
        format!("/{path}")
    }
}

/// Resolves a `Location` header against the URL it came from.
fn resolve(base: &Url, location: &str) -> Result<Url, String> {
    let bad = || format!("invalid redirect location {location:?}");
    let absolute = if location.starts_with("//") {
        Some(format!("{}:{location}", base.scheme.as_str()))
    } else if location.contains("://") {
        Some(location.to_string())
    } else {
        None
    };
    if let Some(abs) = absolute {
        let uri: Uri = abs.parse().map_err(|_| bad())?;
        let scheme = match uri.scheme_str() {
            Some("http") => Scheme::Http,
            Some("https") => Scheme::Https,
            _ => return Err(bad()),
        };
        let host = uri.host().ok_or_else(bad)?;
        let host = host
            .trim_start_matches('[')
            .trim_end_matches(']')
            .to_string();
        let port = uri.port_u16().unwrap_or(match scheme {
            Scheme::Http => 80,
            Scheme::Https => 443,
        });
        let path = uri.path_and_query().map_or("/", |p| p.as_str()).to_string();
        return Ok(Url {
            scheme,
            host,
            port,
            path: with_leading_slash(&path),
        });
    }
    let path = if location.starts_with('/') {
        location.to_string()
    } else {
        // relative to the directory of the current path (query dropped)
        let current = base.path.split('?').next().unwrap_or("/");
        let dir = &current[..current.rfind('/').map_or(0, |i| i + 1)];
        format!("{}{location}", with_leading_slash(dir))
    };
    Ok(Url {
        path,
        ..base.clone()
    })
}

/// A final response.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Response {
    /// Status code.
    pub status: u16,
    /// The body, at most `MAX_BODY_BYTES` (lossy UTF-8).
    pub body: String,
}

/// Accepts any server certificate (the kubelet's probes use `InsecureSkipVerify`); the
/// handshake signatures are still checked.
#[derive(Debug)]
struct AnyCertificate(Arc<rustls::crypto::CryptoProvider>);

impl rustls::client::danger::ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &rustls::pki_types::CertificateDer<'_>,
        _intermediates: &[rustls::pki_types::CertificateDer<'_>],
        _server_name: &rustls::pki_types::ServerName<'_>,
        _ocsp_response: &[u8],
        _now: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &rustls::pki_types::CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

fn tls_config() -> Result<Arc<rustls::ClientConfig>, String> {
    static CONFIG: OnceLock<Result<Arc<rustls::ClientConfig>, String>> = OnceLock::new();
    CONFIG
        .get_or_init(|| {
            let provider = Arc::new(rustls::crypto::ring::default_provider());
            let config = rustls::ClientConfig::builder_with_provider(provider.clone())
                .with_safe_default_protocol_versions()
                .map_err(|e| format!("TLS configuration: {e}"))?
                .dangerous()
                .with_custom_certificate_verifier(Arc::new(AnyCertificate(provider)))
                .with_no_client_auth();
            Ok(Arc::new(config))
        })
        .clone()
}

/// Go's description of a dial error (`connect: connection refused`, …).
pub fn dial_error(e: &std::io::Error) -> String {
    use std::io::ErrorKind;
    match e.kind() {
        ErrorKind::ConnectionRefused => "connect: connection refused".into(),
        ErrorKind::ConnectionReset => "read: connection reset by peer".into(),
        ErrorKind::TimedOut => "i/o timeout".into(),
        _ => e.to_string(),
    }
}

/// A response with the redirect target, if any.
struct Raw {
    response: Response,
    location: Option<String>,
}

async fn send_on<S>(io: S, req: Request<Empty<Bytes>>) -> Result<Raw, String>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let (mut sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(io))
        .await
        .map_err(|e| e.to_string())?;
    let driver = tokio::spawn(async move {
        let _ = conn.await;
    });
    let result = async {
        let resp = sender.send_request(req).await.map_err(|e| e.to_string())?;
        let status = resp.status().as_u16();
        let location = resp
            .headers()
            .get(hyper::header::LOCATION)
            .and_then(|v| v.to_str().ok())
            .map(str::to_string);
        let mut body = resp.into_body();
        let mut bytes = Vec::new();
        while bytes.len() < MAX_BODY_BYTES {
            match body.frame().await {
                Some(Ok(frame)) => {
                    if let Ok(data) = frame.into_data() {
                        let room = MAX_BODY_BYTES - bytes.len();
                        bytes.extend_from_slice(&data[..data.len().min(room)]);
                    }
                }
                Some(Err(e)) => return Err(e.to_string()),
                None => break,
            }
        }
        Ok(Raw {
            response: Response {
                status,
                body: String::from_utf8_lossy(&bytes).into_owned(),
            },
            location,
        })
    }
    .await;
    driver.abort();
    result
}

async fn send_once(
    url: &Url,
    headers: &[(String, String)],
    user_agent: &str,
) -> Result<Raw, String> {
    let authority = join_host_port(&url.host, url.port);
    let mut builder = Request::get(url.path.as_str());
    let mut has_host = false;
    let mut has_user_agent = false;
    let mut accept: Option<&str> = None;
    for (name, value) in headers {
        let n = HeaderName::from_bytes(name.as_bytes())
            .map_err(|_| format!("invalid header name {name:?}"))?;
        if n == hyper::header::HOST {
            has_host = true;
        } else if n == hyper::header::USER_AGENT {
            has_user_agent = true;
        } else if n == hyper::header::ACCEPT {
            accept = Some(value);
            if value.is_empty() {
                continue; // an empty Accept removes the header
            }
        }
        let v = HeaderValue::from_str(value)
            .map_err(|_| format!("invalid value for header {name:?}"))?;
        builder = builder.header(n, v);
    }
    if !has_host {
        builder = builder.header(hyper::header::HOST, authority.as_str());
    }
    if !has_user_agent {
        builder = builder.header(hyper::header::USER_AGENT, user_agent);
    }
    if accept.is_none() {
        builder = builder.header(hyper::header::ACCEPT, "*/*");
    }
    builder = builder.header(hyper::header::CONNECTION, "close");
    let req = builder
        .body(Empty::<Bytes>::new())
        .map_err(|e| e.to_string())?;
    let tcp = TcpStream::connect((url.host.as_str(), url.port))
        .await
        .map_err(|e| format!("dial tcp {authority}: {}", dial_error(&e)))?;
    let _ = tcp.set_nodelay(true);
    match url.scheme {
        Scheme::Http => send_on(tcp, req).await,
        Scheme::Https => {
            let connector = tokio_rustls::TlsConnector::from(tls_config()?);
            let name = rustls::pki_types::ServerName::try_from(url.host.clone())
                .map_err(|e| format!("invalid TLS server name {:?}: {e}", url.host))?;
            let tls = connector
                .connect(name, tcp)
                .await
                .map_err(|e| format!("tls: {e}"))?;
            send_on(tls, req).await
        }
    }
}

async fn get_following(target: &Target, user_agent: &str) -> Result<Response, String> {
    let mut url = Url::of(target);
    let mut requests = 0usize;
    loop {
        requests += 1;
        let raw = send_once(&url, &target.headers, user_agent)
            .await
            .map_err(|e| format!("Get \"{url}\": {e}"))?;
        if !matches!(raw.response.status, 301 | 302 | 303 | 307 | 308) {
            return Ok(raw.response);
        }
        let Some(location) = raw.location.as_deref() else {
            return Ok(raw.response);
        };
        let next = resolve(&url, location).map_err(|e| format!("Get \"{url}\": {e}"))?;
        if next.host != target.host {
            return Ok(raw.response); // not followed: the caller sees the redirect
        }
        if requests >= MAX_REQUESTS {
            return Err(format!("Get \"{next}\": stopped after 10 redirects"));
        }
        url = next;
    }
}

/// GETs `target` within `timeout` (connection, redirects and body together), identifying as
/// `user_agent` unless the spec's headers set one. `Err` is a transport error, a timeout,
/// or too many redirects, worded as Go's HTTP client words them.
pub async fn get(target: &Target, timeout: Duration, user_agent: &str) -> Result<Response, String> {
    match tokio::time::timeout(timeout, get_following(target, user_agent)).await {
        Ok(r) => r,
        Err(_) => Err(format!(
            "Get \"{}\": context deadline exceeded (Client.Timeout exceeded while awaiting headers)",
            Url::of(target)
        )),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn base() -> Url {
        Url {
            scheme: Scheme::Http,
            host: "10.0.0.1".into(),
            port: 8080,
            path: "/a/b?x=1".into(),
        }
    }

    #[test]
    fn redirect_locations_resolve_like_a_browser() {
        let r = |l: &str| resolve(&base(), l).unwrap().to_string();
        assert_eq!(r("/healthz"), "http://10.0.0.1:8080/healthz");
        assert_eq!(r("c?y=2"), "http://10.0.0.1:8080/a/c?y=2");
        assert_eq!(r("http://example.com/x"), "http://example.com:80/x");
        assert_eq!(r("https://[::1]:9443"), "https://[::1]:9443/");
        assert_eq!(r("//other:81/p"), "http://other:81/p");
        assert!(resolve(&base(), "ftp://x/").is_err());
    }

    #[test]
    fn join_host_port_brackets_ipv6() {
        assert_eq!(join_host_port("::1", 80), "[::1]:80");
        assert_eq!(join_host_port("127.0.0.1", 80), "127.0.0.1:80");
    }
}
