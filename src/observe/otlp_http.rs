//! The OTLP/HTTP client: posts encoded trace export requests to a collector as binary
//! protobuf (`Content-Type: application/x-protobuf`) over plain HTTP/1.1, the OpenTelemetry
//! specification's `http/protobuf` protocol.
//!
//! Owns one kept-alive connection (opened when first needed, opened again after the
//! collector closed it or an exchange failed), the request headers, and what an answer
//! means: a success's body is an `ExportTraceServiceResponse` (its partial success counts), a
//! failure's a `google.rpc.Status` or text (quoted in the error), its status retryable or
//! not (the bytes are read by `observe::otlp_answer`). Must not encode spans
//! (`observe::otlp_request`), decide when to send or how long to wait (`observe::export`
//! bounds every call), or read the configuration (`observe::otlp_config`). Used from the
//! export thread's single-threaded runtime only.

use std::sync::Mutex;
use std::time::Duration;

use bytes::Bytes;
use http_body_util::{BodyExt, Full, Limited};
use hyper::client::conn::http1::SendRequest;
use hyper::header::{HeaderName, HeaderValue};
use hyper::{HeaderMap, Request, Uri};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

use super::export::{PartialSuccess, SendError, Transport};
use super::otlp_answer::{partial_success, rpc_status};
use super::otlp_config::Compression;
use crate::shell::http_get::join_host_port;

/// The most of a collector's answer that is read (an `ExportTraceServiceResponse` or a
/// `google.rpc.Status` is a few hundred bytes); a longer one is an error.
pub const MAX_ANSWER_BYTES: usize = 64 * 1024;

/// The most of an error answer's text quoted in an error.
const QUOTED_BYTES: usize = 200;

/// The media type of OTLP/HTTP binary protobuf requests and answers.
pub const PROTOBUF: &str = "application/x-protobuf";

/// An OTLP/HTTP trace exporter's connection.
#[derive(Debug)]
pub struct OtlpHttp {
    /// The URI requests are posted to (for errors).
    uri: String,
    /// `host:port`, connected to and sent as `Host`.
    authority: String,
    /// Path and query of the requests.
    path: String,
    /// Sent with every request (the configured ones, then the protocol's own).
    headers: HeaderMap,
    /// How bodies are compressed.
    compression: Compression,
    /// The kept-alive connection, if one is open.
    connection: Mutex<Option<SendRequest<Full<Bytes>>>>,
}

impl OtlpHttp {
    /// A client posting to `uri` (`http://host:port/path`), connecting when first used; every
    /// request carries `headers`, its body compressed with `compression`
    /// (`Content-Encoding: gzip`). A header that HTTP cannot carry is an error naming it.
    pub fn new(
        uri: &str,
        headers: &[(String, String)],
        compression: Compression,
    ) -> Result<OtlpHttp, String> {
        let parsed: Uri = uri
            .parse()
            .map_err(|e| format!("invalid OTLP endpoint {uri:?}: {e}"))?;
        if parsed.scheme_str() != Some("http") {
            return Err(format!(
                "invalid OTLP endpoint {uri:?}: only http:// is supported"
            ));
        }
        let host = parsed
            .host()
            .filter(|h| !h.is_empty())
            .ok_or_else(|| format!("invalid OTLP endpoint {uri:?}: no host"))?;
        let port = parsed.port_u16().unwrap_or(80);
        // the URI's host keeps an IPv6 address's brackets; join_host_port adds them back
        let bare = host.trim_start_matches('[').trim_end_matches(']');
        let authority = join_host_port(bare, port);
        let path = parsed
            .path_and_query()
            .map_or("/", |p| p.as_str())
            .to_string();
        let mut map = HeaderMap::new();
        for (k, v) in headers {
            let name = HeaderName::from_bytes(k.as_bytes())
                .map_err(|e| format!("header name {k:?}: {e}"))?;
            let value = HeaderValue::from_str(v)
                .map_err(|e| format!("header {k:?}: value not allowed in HTTP: {e}"))?;
            map.append(name, value);
        }
        let own = [
            (hyper::header::CONTENT_TYPE, PROTOBUF.to_string()),
            (
                hyper::header::USER_AGENT,
                format!("ledgerlet/{}", env!("CARGO_PKG_VERSION")),
            ),
            (hyper::header::HOST, authority.clone()),
        ];
        if compression == Compression::Gzip {
            map.insert(
                hyper::header::CONTENT_ENCODING,
                HeaderValue::from_static("gzip"),
            );
        }
        for (name, value) in own {
            let value = HeaderValue::from_str(&value)
                .map_err(|e| format!("header {name}: {value:?}: {e}"))?;
            map.insert(name, value);
        }
        Ok(OtlpHttp {
            uri: uri.to_string(),
            authority,
            path,
            headers: map,
            compression,
            connection: Mutex::new(None),
        })
    }

    /// The body sent for `request` (compressed once per send, shared by its attempts).
    fn body(&self, request: &[u8]) -> Bytes {
        match self.compression {
            Compression::None => Bytes::copy_from_slice(request),
            Compression::Gzip => Bytes::from(gzip(request)),
        }
    }

    fn request(&self, body: Bytes) -> Result<Request<Full<Bytes>>, String> {
        let mut req = Request::post(self.path.as_str())
            .body(Full::new(body))
            .map_err(|e| format!("OTLP collector {}: {e}", self.uri))?;
        *req.headers_mut() = self.headers.clone();
        Ok(req)
    }

    /// Opens a connection to the collector.
    async fn connect(&self) -> Result<SendRequest<Full<Bytes>>, SendError> {
        let unreachable = |e: String| {
            SendError::retryable(
                format!("OTLP collector {}: not reachable: {e}", self.uri),
                None,
            )
        };
        let tcp = TcpStream::connect(&self.authority)
            .await
            .map_err(|e| unreachable(e.to_string()))?;
        let _ = tcp.set_nodelay(true);
        let (sender, conn) = hyper::client::conn::http1::handshake(TokioIo::new(tcp))
            .await
            .map_err(|e| unreachable(e.to_string()))?;
        // ends when the sender is dropped or the collector closes the connection
        tokio::spawn(async move {
            let _ = conn.await;
        });
        Ok(sender)
    }

    /// One exchange on `sender`: the answer's status, its `Retry-After` and its body, or why
    /// there is none.
    async fn exchange(
        &self,
        sender: &mut SendRequest<Full<Bytes>>,
        body: Bytes,
    ) -> Result<Answer, String> {
        sender.ready().await.map_err(|e| e.to_string())?;
        let response = sender
            .send_request(self.request(body)?)
            .await
            .map_err(|e| e.to_string())?;
        let status = response.status();
        let retry_after = response
            .headers()
            .get(hyper::header::RETRY_AFTER)
            .and_then(|v| v.to_str().ok())
            .and_then(|v| retry_after(v, std::time::SystemTime::now()));
        let body = Limited::new(response.into_body(), MAX_ANSWER_BYTES)
            .collect()
            .await
            .map_err(|e| format!("reading the answer (at most {MAX_ANSWER_BYTES} bytes): {e}"))?
            .to_bytes();
        Ok(Answer {
            status,
            retry_after,
            body,
        })
    }
}

/// `body` gzip-compressed (the default level, as the Go exporters).
fn gzip(body: &[u8]) -> Vec<u8> {
    use std::io::Write;
    let mut encoder = flate2::write::GzEncoder::new(
        Vec::with_capacity(body.len() / 4 + 64),
        flate2::Compression::default(),
    );
    // writing to a Vec cannot fail
    encoder.write_all(body).expect("gzip into memory");
    encoder.finish().expect("gzip into memory")
}

/// A collector's answer.
struct Answer {
    status: hyper::StatusCode,
    /// Its `Retry-After`, if it has a readable one.
    retry_after: Option<Duration>,
    body: Bytes,
}

/// A `Retry-After` value, received at `now`: a number of seconds, or an HTTP date (the wait
/// until then; none if it has passed). Anything else is not read, and the back-off applies.
fn retry_after(value: &str, now: std::time::SystemTime) -> Option<Duration> {
    let value = value.trim();
    if let Ok(seconds) = value.parse::<u64>() {
        return Some(Duration::from_secs(seconds));
    }
    let at = httpdate::parse_http_date(value).ok()?;
    Some(at.duration_since(now).unwrap_or(Duration::ZERO))
}

/// Whether an answer with `status` may be different for the same request later (the OTLP
/// specification's retryable HTTP statuses).
pub fn retryable(status: hyper::StatusCode) -> bool {
    matches!(status.as_u16(), 429 | 502 | 503 | 504)
}

impl Transport for OtlpHttp {
    /// Network failures (a refused or reset connection) are retryable, as gRPC's
    /// `Unavailable` is, so both protocols get over a collector's restart alike.
    async fn send(&self, request: &[u8]) -> Result<PartialSuccess, SendError> {
        let kept = self.connection.lock().expect("OTLP connection").take();
        let (mut sender, reused) = match kept {
            Some(s) if !s.is_closed() => (s, true),
            _ => (self.connect().await?, false),
        };
        let body = self.body(request);
        let mut result = self.exchange(&mut sender, body.clone()).await;
        if result.is_err() && reused {
            // the collector may have closed the idle connection as the request went out:
            // once more on a new one (a transport matter, at once; export_retry's back-off is
            // for the collector's failures)
            sender = self.connect().await?;
            result = self.exchange(&mut sender, body).await;
        }
        let answer = result
            .map_err(|e| SendError::retryable(format!("OTLP collector {}: {e}", self.uri), None))?;
        if !sender.is_closed() {
            *self.connection.lock().expect("OTLP connection") = Some(sender);
        }
        let status = answer.status;
        if status.is_success() {
            return Ok(partial_success(&answer.body)?);
        }
        let message = format!(
            "OTLP collector {}: HTTP {status}{}",
            self.uri,
            error_detail(&answer.body)
        );
        if retryable(status) {
            Err(SendError::retryable(message, answer.retry_after))
        } else {
            Err(SendError::fatal(message))
        }
    }
}

/// What a failure's answer says: a `google.rpc.Status` message, else the start of its text.
fn error_detail(answer: &[u8]) -> String {
    let status_message = rpc_status(answer).map(|s| s.message);
    if let Some(m) = status_message.filter(|m| !m.trim().is_empty()) {
        return format!(": {m}");
    }
    match std::str::from_utf8(answer) {
        Ok(text) if !text.trim().is_empty() => {
            let mut end = text.len().min(QUOTED_BYTES);
            while !text.is_char_boundary(end) {
                end -= 1;
            }
            format!(": {:?}", text[..end].trim())
        }
        _ => String::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::observe::otlp_answer::testing::{partial, status};
    use hyper::service::service_fn;
    use std::convert::Infallible;
    use std::sync::Arc;

    /// A request as the collector received it.
    #[derive(Clone, Debug)]
    struct Received {
        method: String,
        path: String,
        content_type: Option<String>,
        content_encoding: Option<String>,
        tenant: Option<String>,
        host: Option<String>,
        body: Vec<u8>,
        /// Which connection it came on (0, 1, …).
        connection: usize,
    }

    /// A real HTTP/1.1 collector on a loopback port that answers every request with
    /// `status` and `body`, keeping connections alive or not.
    struct Collector {
        port: u16,
        received: Arc<Mutex<Vec<Received>>>,
    }

    impl Collector {
        async fn start(status: u16, body: Vec<u8>, keep_alive: bool) -> Collector {
            Collector::start_with(status, body, keep_alive, None).await
        }

        /// As [`Collector::start`], every answer with this `Retry-After`.
        async fn start_with(
            status: u16,
            body: Vec<u8>,
            keep_alive: bool,
            retry_after: Option<&'static str>,
        ) -> Collector {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let port = listener.local_addr().unwrap().port();
            let received: Arc<Mutex<Vec<Received>>> = Arc::default();
            let keep = received.clone();
            tokio::spawn(async move {
                for connection in 0.. {
                    let (tcp, _) = listener.accept().await.unwrap();
                    let (keep, body) = (keep.clone(), body.clone());
                    let service = service_fn(move |req: Request<hyper::body::Incoming>| {
                        let (keep, body) = (keep.clone(), body.clone());
                        async move {
                            let header = |n: &str| {
                                req.headers()
                                    .get(n)
                                    .and_then(|v| v.to_str().ok())
                                    .map(str::to_string)
                            };
                            let mut got = Received {
                                method: req.method().to_string(),
                                path: req.uri().to_string(),
                                content_type: header("content-type"),
                                content_encoding: header("content-encoding"),
                                tenant: header("x-tenant"),
                                host: header("host"),
                                body: Vec::new(),
                                connection,
                            };
                            got.body = req.into_body().collect().await.unwrap().to_bytes().to_vec();
                            keep.lock().unwrap().push(got);
                            let mut answer = hyper::Response::builder()
                                .status(status)
                                .header("content-type", PROTOBUF);
                            if let Some(after) = retry_after {
                                answer = answer.header("retry-after", after);
                            }
                            let answer = answer.body(Full::new(Bytes::from(body))).unwrap();
                            Ok::<_, Infallible>(answer)
                        }
                    });
                    tokio::spawn(async move {
                        let _ = hyper::server::conn::http1::Builder::new()
                            .keep_alive(keep_alive)
                            .serve_connection(TokioIo::new(tcp), service)
                            .await;
                    });
                }
            });
            Collector { port, received }
        }

        fn uri(&self) -> String {
            format!("http://127.0.0.1:{}/v1/traces", self.port)
        }

        fn received(&self) -> Vec<Received> {
            self.received.lock().unwrap().clone()
        }
    }

    use crate::observe::otlp_request::testing::one_fold_span_request as a_request;

    /// Which connection each of three requests came on.
    async fn connections_of_three_sends(collector: &Collector) -> Vec<usize> {
        let client = OtlpHttp::new(&collector.uri(), &[], Compression::None).unwrap();
        for _ in 0..3 {
            assert_eq!(
                client.send(&a_request()).await.unwrap(),
                PartialSuccess::default()
            );
        }
        collector.received().iter().map(|r| r.connection).collect()
    }

    #[tokio::test]
    async fn a_request_is_posted_as_protobuf_with_its_headers_and_the_answers_partial_success_is_read(
    ) {
        let collector = Collector::start(200, partial(1, "one too many"), true).await;
        let headers = crate::observe::otlp_config::parse_headers("X-Tenant=team%20a").unwrap();
        let client = OtlpHttp::new(&collector.uri(), &headers, Compression::None).unwrap();
        let body = a_request();
        let answer = client.send(&body).await.unwrap();
        assert_eq!(
            answer,
            PartialSuccess {
                rejected_spans: 1,
                error_message: "one too many".into(),
            }
        );
        let got = collector.received();
        assert_eq!(got.len(), 1);
        let r = &got[0];
        assert_eq!(r.method, "POST");
        assert_eq!(r.path, "/v1/traces");
        assert_eq!(r.content_type.as_deref(), Some(PROTOBUF));
        assert_eq!(r.tenant.as_deref(), Some("team a"));
        assert_eq!(r.host, Some(format!("127.0.0.1:{}", collector.port)));
        assert_eq!(
            crate::observe::otlp_request::testing::decode(&r.body),
            crate::observe::otlp_request::testing::decode(&body),
            "the collector got the bytes sent"
        );
        assert_eq!(r.body, body);
    }

    #[tokio::test]
    async fn a_gzip_request_says_so_and_its_body_inflates_to_the_request() {
        let collector = Collector::start(200, Vec::new(), true).await;
        let client = OtlpHttp::new(&collector.uri(), &[], Compression::Gzip).unwrap();
        let body = a_request();
        client.send(&body).await.unwrap();
        let got = collector.received();
        assert_eq!(got[0].content_encoding.as_deref(), Some("gzip"));
        let mut inflated = Vec::new();
        std::io::Read::read_to_end(
            &mut flate2::read::GzDecoder::new(&got[0].body[..]),
            &mut inflated,
        )
        .unwrap();
        assert_eq!(inflated, body);
        assert_ne!(got[0].body, body, "compressed on the wire");
        // without compression, no Content-Encoding
        let client = OtlpHttp::new(&collector.uri(), &[], Compression::None).unwrap();
        client.send(&body).await.unwrap();
        assert_eq!(collector.received()[1].content_encoding, None);
    }

    #[tokio::test]
    async fn the_connection_is_kept_alive_and_opened_again_when_the_collector_closes_it() {
        let kept = Collector::start(200, Vec::new(), true).await;
        let connections = connections_of_three_sends(&kept).await;
        assert_eq!(connections, [0, 0, 0], "one connection for three requests");
        let closing = Collector::start(200, Vec::new(), false).await;
        let connections = connections_of_three_sends(&closing).await;
        assert_eq!(connections, [0, 1, 2], "a new connection after each close");
    }

    #[tokio::test]
    async fn a_failure_is_an_error_with_the_uri_the_status_and_the_collectors_message() {
        let collector = Collector::start(400, status(3, "bad trace id", None), true).await;
        let client = OtlpHttp::new(&collector.uri(), &[], Compression::None).unwrap();
        let err = client.send(&a_request()).await.unwrap_err();
        assert!(
            err.message.contains(&collector.uri())
                && err.message.contains("400")
                && err.message.contains("bad trace id"),
            "{err:?}"
        );
        assert!(!err.retryable, "a bad request stays bad");
        // a plain-text answer is quoted
        let collector = Collector::start(503, b"overloaded, try later".to_vec(), true).await;
        let client = OtlpHttp::new(&collector.uri(), &[], Compression::None).unwrap();
        let err = client.send(&a_request()).await.unwrap_err();
        assert!(
            err.message.contains("503") && err.message.contains("overloaded, try later"),
            "{err:?}"
        );
        assert!(err.retryable, "503 may pass");
    }

    #[tokio::test]
    async fn an_unreachable_collector_is_an_error_naming_it_not_a_hang() {
        let port = crate::observe::otlp_request::testing::closed_loopback_port();
        let uri = format!("http://127.0.0.1:{port}/v1/traces");
        let client = OtlpHttp::new(&uri, &[], Compression::None).unwrap();
        let err = tokio::time::timeout(Duration::from_secs(10), client.send(&a_request()))
            .await
            .expect("refused at once, not hung")
            .unwrap_err();
        assert!(
            err.message.contains(&uri) && err.message.contains("not reachable"),
            "{err:?}"
        );
        assert!(err.retryable, "a collector that is down may come back");
    }

    #[test]
    fn headers_http_cannot_carry_and_non_http_uris_are_errors() {
        let uri = "http://127.0.0.1:4318/v1/traces";
        assert!(
            OtlpHttp::new(uri, &[("bad key".into(), "v".into())], Compression::None)
                .unwrap_err()
                .contains("bad key")
        );
        assert!(OtlpHttp::new(
            uri,
            &[("k".into(), "line\nbreak".into())],
            Compression::None
        )
        .is_err());
        assert!(OtlpHttp::new("https://c:4318/v1/traces", &[], Compression::None).is_err());
        assert!(OtlpHttp::new("http:///v1/traces", &[], Compression::None).is_err());
    }

    #[tokio::test]
    async fn throttling_statuses_are_retryable_with_the_collectors_retry_after() {
        let collector = Collector::start_with(429, Vec::new(), true, Some("7")).await;
        let client = OtlpHttp::new(&collector.uri(), &[], Compression::None).unwrap();
        let err = client.send(&a_request()).await.unwrap_err();
        assert!(err.retryable, "{err:?}");
        assert_eq!(err.retry_after, Some(Duration::from_secs(7)));
        for status in [502, 503, 504] {
            assert!(retryable(hyper::StatusCode::from_u16(status).unwrap()));
        }
        for status in [400, 401, 403, 404, 413, 500] {
            assert!(!retryable(hyper::StatusCode::from_u16(status).unwrap()));
        }
        let now = httpdate::parse_http_date("Wed, 21 Oct 2026 07:28:00 GMT").unwrap();
        assert_eq!(retry_after(" 12 ", now), Some(Duration::from_secs(12)));
        assert_eq!(
            retry_after("Wed, 21 Oct 2026 07:28:30 GMT", now),
            Some(Duration::from_secs(30))
        );
        assert_eq!(
            retry_after("Wed, 21 Oct 2026 07:27:00 GMT", now),
            Some(Duration::ZERO),
            "a date that has passed: no wait of its own"
        );
        assert_eq!(retry_after("soon", now), None);
    }

    #[test]
    fn an_error_answer_is_quoted_short_and_whole_characters() {
        assert_eq!(error_detail(&[]), "");
        let long = "é".repeat(300);
        let d = error_detail(long.as_bytes());
        assert!(d.len() < QUOTED_BYTES + 10, "{d}");
        assert!(d.starts_with(": \"é"), "{d}");
    }
}
