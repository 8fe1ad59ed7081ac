//! The OTLP/gRPC client: sends encoded trace export requests to a collector's
//! `TraceService/Export` over plain HTTP/2 (as the kubelet's tracing endpoint).
//!
//! Owns the channel (made lazily: an unreachable collector is not an error until a send),
//! the request headers as gRPC metadata, and which failures are retryable (the answers'
//! bytes are read by `observe::otlp_answer`). Must not encode spans
//! (`observe::otlp_request`), decide when to send (`observe::export`) or read the
//! configuration (`observe::otlp_config`).

use std::time::Duration;

use bytes::{Buf, BufMut, Bytes};
use tonic::codec::{Codec, CompressionEncoding, DecodeBuf, Decoder, EncodeBuf, Encoder};
use tonic::metadata::{MetadataKey, MetadataMap, MetadataValue};
use tonic::transport::Channel;
use tonic::Status;

use super::export::{PartialSuccess, SendError, Transport};
use super::otlp_answer::{partial_success, rpc_status};
use super::otlp_config::Compression;
use super::otlp_request::EXPORT_PATH;

/// Passes bytes that are already a protobuf message through gRPC framing unchanged.
#[derive(Clone, Copy, Debug, Default)]
struct EncodedCodec;

impl Codec for EncodedCodec {
    type Encode = Bytes;
    type Decode = Bytes;
    type Encoder = EncodedCodec;
    type Decoder = EncodedCodec;

    fn encoder(&mut self) -> Self::Encoder {
        *self
    }

    fn decoder(&mut self) -> Self::Decoder {
        *self
    }
}

impl Encoder for EncodedCodec {
    type Item = Bytes;
    type Error = Status;

    fn encode(&mut self, item: Bytes, dst: &mut EncodeBuf<'_>) -> Result<(), Status> {
        dst.put(item);
        Ok(())
    }
}

impl Decoder for EncodedCodec {
    type Item = Bytes;
    type Error = Status;

    fn decode(&mut self, src: &mut DecodeBuf<'_>) -> Result<Option<Bytes>, Status> {
        Ok(Some(src.copy_to_bytes(src.remaining())))
    }
}

/// An OTLP/gRPC trace exporter's connection.
#[derive(Debug, Clone)]
pub struct OtlpGrpc {
    grpc: tonic::client::Grpc<Channel>,
    headers: MetadataMap,
    /// The collector's URI, for errors.
    endpoint: String,
}

impl OtlpGrpc {
    /// A client of `endpoint` (an `http://host:port` URI), connecting when first used, each
    /// connection attempt bounded by `timeout`; every request carries `headers`, its message
    /// compressed with `compression` (`grpc-encoding: gzip`). Must be called inside a tokio
    /// runtime.
    pub fn connect_lazy(
        endpoint: &str,
        timeout: Duration,
        headers: &[(String, String)],
        compression: Compression,
    ) -> Result<OtlpGrpc, String> {
        let channel = tonic::transport::Endpoint::from_shared(endpoint.to_string())
            .map_err(|e| format!("invalid OTLP endpoint {endpoint:?}: {e}"))?
            .connect_timeout(timeout)
            .timeout(timeout)
            .user_agent(format!("ledgerlet/{}", env!("CARGO_PKG_VERSION")))
            .map_err(|e| format!("user agent: {e}"))?
            .connect_lazy();
        let grpc = tonic::client::Grpc::new(channel).accept_compressed(CompressionEncoding::Gzip);
        let grpc = match compression {
            Compression::None => grpc,
            Compression::Gzip => grpc.send_compressed(CompressionEncoding::Gzip),
        };
        Ok(OtlpGrpc {
            grpc,
            headers: metadata(headers)?,
            endpoint: endpoint.to_string(),
        })
    }
}

impl Transport for OtlpGrpc {
    async fn send(&self, request: &[u8]) -> Result<PartialSuccess, SendError> {
        let mut grpc = self.grpc.clone();
        grpc.ready().await.map_err(|e| {
            let message = format!("OTLP collector {}: not reachable: {e}", self.endpoint);
            SendError::retryable(message, None)
        })?;
        let mut req = tonic::Request::new(Bytes::copy_from_slice(request));
        *req.metadata_mut() = self.headers.clone();
        let answer = grpc
            .unary(
                req,
                tonic::codegen::http::uri::PathAndQuery::from_static(EXPORT_PATH),
                EncodedCodec,
            )
            .await
            .map_err(|s| {
                // a connection that fails is an Unavailable status too, with the cause
                let message = format!(
                    "OTLP collector {}: {:?}: {}",
                    self.endpoint,
                    s.code(),
                    s.message()
                );
                let delay = rpc_status(s.details()).and_then(|st| st.retry_delay);
                if retryable(s.code(), delay) {
                    SendError::retryable(message, delay)
                } else {
                    SendError::fatal(message)
                }
            })?;
        Ok(partial_success(answer.get_ref())?)
    }
}

/// Whether a call that ended with `code` may succeed if sent again (the OTLP specification's
/// retryable codes, as the Go exporter reads them): `ResourceExhausted` only when the
/// collector said when to come back (`delay`, its `RetryInfo`).
pub fn retryable(code: tonic::Code, delay: Option<Duration>) -> bool {
    use tonic::Code;
    match code {
        Code::Cancelled
        | Code::DeadlineExceeded
        | Code::Aborted
        | Code::OutOfRange
        | Code::Unavailable
        | Code::DataLoss => true,
        Code::ResourceExhausted => delay.is_some(),
        _ => false,
    }
}

fn metadata(headers: &[(String, String)]) -> Result<MetadataMap, String> {
    let mut map = MetadataMap::new();
    for (k, v) in headers {
        let key =
            MetadataKey::from_bytes(k.as_bytes()).map_err(|e| format!("header name {k:?}: {e}"))?;
        let value = MetadataValue::try_from(v.as_str())
            .map_err(|e| format!("header {k:?}: value not allowed in HTTP/2 metadata: {e}"))?;
        map.insert(key, value);
    }
    Ok(map)
}

#[cfg(test)]
mod tests {
    use super::*;
    use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
        TraceService, TraceServiceServer,
    };
    use opentelemetry_proto::tonic::collector::trace::v1::{
        ExportTracePartialSuccess, ExportTraceServiceRequest, ExportTraceServiceResponse,
    };
    use std::sync::{Arc, Mutex};

    /// A collector (opentelemetry-proto's generated server) that keeps what it receives and
    /// rejects one span of each request.
    #[derive(Default, Clone)]
    struct Collector(Arc<Mutex<Vec<Received>>>);

    /// A request as the collector received it, with its `x-tenant` header.
    type Received = (Option<String>, ExportTraceServiceRequest);

    #[tonic::async_trait]
    impl TraceService for Collector {
        async fn export(
            &self,
            request: tonic::Request<ExportTraceServiceRequest>,
        ) -> Result<tonic::Response<ExportTraceServiceResponse>, Status> {
            let tenant = request
                .metadata()
                .get("x-tenant")
                .and_then(|v| v.to_str().ok())
                .map(str::to_string);
            self.0.lock().unwrap().push((tenant, request.into_inner()));
            Ok(tonic::Response::new(ExportTraceServiceResponse {
                partial_success: Some(ExportTracePartialSuccess {
                    rejected_spans: 1,
                    error_message: "one too many".into(),
                }),
            }))
        }
    }

    /// Serves `service` (a real tonic server) on a loopback port; its endpoint.
    async fn serve<T: TraceService>(service: TraceServiceServer<T>) -> String {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        tokio::spawn(
            tonic::transport::Server::builder()
                .add_service(service)
                .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener)),
        );
        format!("http://127.0.0.1:{port}")
    }

    /// A client of `endpoint` without headers.
    fn client(endpoint: &str, compression: Compression) -> OtlpGrpc {
        OtlpGrpc::connect_lazy(endpoint, Duration::from_secs(10), &[], compression).unwrap()
    }

    #[tokio::test]
    async fn a_request_reaches_a_real_grpc_collector_with_its_headers_and_its_answer_is_read() {
        let collector = Collector::default();
        let endpoint = serve(TraceServiceServer::new(collector.clone())).await;
        let body = crate::observe::otlp_request::testing::one_fold_span_request();
        let client = OtlpGrpc::connect_lazy(
            &endpoint,
            Duration::from_secs(10),
            &crate::observe::otlp_config::parse_headers("X-Tenant=team%20a").unwrap(),
            Compression::None,
        )
        .unwrap();
        let answer = client.send(&body).await.unwrap();
        assert_eq!(
            answer,
            PartialSuccess {
                rejected_spans: 1,
                error_message: "one too many".into(),
            }
        );
        let got = collector.0.lock().unwrap().clone();
        assert_eq!(got.len(), 1);
        assert_eq!(got[0].0.as_deref(), Some("team a"));
        assert_eq!(
            got[0].1,
            crate::observe::otlp_request::testing::decode(&body),
            "the collector decoded the bytes sent"
        );
        assert_eq!(got[0].1.resource_spans[0].scope_spans[0].spans.len(), 1);
    }

    #[tokio::test]
    async fn a_gzip_request_reaches_a_real_grpc_collector_that_accepts_gzip() {
        let collector = Collector::default();
        let gzip =
            TraceServiceServer::new(collector.clone()).accept_compressed(CompressionEncoding::Gzip);
        let endpoint = serve(gzip).await;
        let body = crate::observe::otlp_request::testing::one_fold_span_request();
        client(&endpoint, Compression::Gzip)
            .send(&body)
            .await
            .unwrap();
        let got = collector.0.lock().unwrap().clone();
        assert_eq!(
            got[0].1,
            crate::observe::otlp_request::testing::decode(&body),
            "the collector inflated the bytes sent"
        );
        // the message really is compressed: a collector without gzip refuses it
        let plain = serve(TraceServiceServer::new(Collector::default())).await;
        let err = client(&plain, Compression::Gzip)
            .send(&body)
            .await
            .unwrap_err();
        assert!(err.message.contains("gzip"), "{err:?}");
    }

    #[tokio::test]
    async fn an_unreachable_collector_is_an_error_naming_it_not_a_hang() {
        let port = crate::observe::otlp_request::testing::closed_loopback_port();
        let endpoint = format!("http://127.0.0.1:{port}");
        let err = client(&endpoint, Compression::None)
            .send(&[])
            .await
            .unwrap_err();
        assert!(
            err.message.contains(&endpoint) && err.message.contains("Unavailable"),
            "{err:?}"
        );
        assert!(err.retryable, "a collector that is down may come back");
    }

    /// Always answers with `status`.
    #[derive(Clone)]
    struct Fails(Status);

    #[tonic::async_trait]
    impl TraceService for Fails {
        async fn export(
            &self,
            _request: tonic::Request<ExportTraceServiceRequest>,
        ) -> Result<tonic::Response<ExportTraceServiceResponse>, Status> {
            Err(self.0.clone())
        }
    }

    #[test]
    fn retryable_codes_are_the_otlp_specifications() {
        use tonic::Code;
        for code in [
            Code::Cancelled,
            Code::DeadlineExceeded,
            Code::Aborted,
            Code::OutOfRange,
            Code::Unavailable,
            Code::DataLoss,
        ] {
            assert!(retryable(code, None), "{code:?}");
        }
        for code in [
            Code::InvalidArgument,
            Code::Unauthenticated,
            Code::PermissionDenied,
            Code::Unimplemented,
            Code::Internal,
        ] {
            assert!(!retryable(code, None), "{code:?}");
        }
        assert!(!retryable(Code::ResourceExhausted, None));
        assert!(retryable(
            Code::ResourceExhausted,
            Some(Duration::from_secs(1))
        ));
    }

    #[tokio::test]
    async fn a_real_collectors_failure_status_and_its_retry_info_decide_the_retry() {
        let failing = |status: Status| async move {
            let endpoint = serve(TraceServiceServer::new(Fails(status))).await;
            client(&endpoint, Compression::None)
        };
        let body = crate::observe::otlp_request::testing::one_fold_span_request();
        let throttled = failing(Status::with_details(
            tonic::Code::ResourceExhausted,
            "slow down",
            Bytes::from(crate::observe::otlp_answer::testing::status(
                8,
                "slow down",
                Some((3, 0)),
            )),
        ))
        .await;
        let err = throttled.send(&body).await.unwrap_err();
        assert!(err.retryable, "{err:?}");
        assert_eq!(err.retry_after, Some(Duration::from_secs(3)));
        assert!(err.message.contains("slow down"), "{err:?}");
        let refused = failing(Status::invalid_argument("bad span")).await;
        let err = refused.send(&body).await.unwrap_err();
        assert!(!err.retryable, "{err:?}");
        assert!(err.message.contains("InvalidArgument"), "{err:?}");
    }

    #[test]
    fn headers_that_http2_metadata_cannot_carry_are_errors() {
        assert!(metadata(&[("bad key".into(), "v".into())]).is_err());
        assert!(metadata(&[("k".into(), "line\nbreak".into())]).is_err());
        assert_eq!(
            metadata(&[("k".into(), "v".into())])
                .unwrap()
                .get("k")
                .unwrap(),
            "v"
        );
    }
}
