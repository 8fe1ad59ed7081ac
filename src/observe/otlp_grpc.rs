//! The OTLP/gRPC client: sends encoded trace export requests to a collector's
//! `TraceService/Export` over plain HTTP/2 (as the kubelet's tracing endpoint).
//!
//! Owns the channel (made lazily: an unreachable collector is not an error until a send),
//! the request headers as gRPC metadata, and reading the collector's answer (OTLP partial
//! success). Must not encode spans (`observe::otlp_request`), decide when to send
//! (`observe::export`) or read the configuration (`observe::otlp_config`).

use std::time::Duration;

use bytes::{Buf, BufMut, Bytes};
use tonic::codec::{Codec, DecodeBuf, Decoder, EncodeBuf, Encoder};
use tonic::metadata::{MetadataKey, MetadataMap, MetadataValue};
use tonic::transport::Channel;
use tonic::Status;

use super::export::{PartialSuccess, Transport};
use super::otlp_request::EXPORT_PATH;
use super::protobuf::{read_fields, FieldValue};

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
    /// connection attempt bounded by `timeout`; every request carries `headers`. Must be
    /// called inside a tokio runtime.
    pub fn connect_lazy(
        endpoint: &str,
        timeout: Duration,
        headers: &[(String, String)],
    ) -> Result<OtlpGrpc, String> {
        let channel = tonic::transport::Endpoint::from_shared(endpoint.to_string())
            .map_err(|e| format!("invalid OTLP endpoint {endpoint:?}: {e}"))?
            .connect_timeout(timeout)
            .timeout(timeout)
            .user_agent(format!("ledgerlet/{}", env!("CARGO_PKG_VERSION")))
            .map_err(|e| format!("user agent: {e}"))?
            .connect_lazy();
        Ok(OtlpGrpc {
            grpc: tonic::client::Grpc::new(channel),
            headers: metadata(headers)?,
            endpoint: endpoint.to_string(),
        })
    }
}

impl Transport for OtlpGrpc {
    async fn send(&self, request: &[u8]) -> Result<PartialSuccess, String> {
        let mut grpc = self.grpc.clone();
        grpc.ready()
            .await
            .map_err(|e| format!("OTLP collector {}: not reachable: {e}", self.endpoint))?;
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
                format!(
                    "OTLP collector {}: {:?}: {}",
                    self.endpoint,
                    s.code(),
                    s.message()
                )
            })?;
        partial_success(answer.get_ref())
    }
}

/// Reads an `ExportTraceServiceResponse`: its `partial_success`, if any.
pub fn partial_success(response: &[u8]) -> Result<PartialSuccess, String> {
    let bad = |e: String| format!("unreadable ExportTraceServiceResponse: {e}");
    let mut out = PartialSuccess::default();
    for (number, value) in read_fields(response).map_err(bad)? {
        if let (1, FieldValue::Bytes(partial)) = (number, value) {
            for (n, v) in read_fields(partial).map_err(bad)? {
                match (n, v) {
                    // int64: a negative count is nonsense, read as none
                    (1, FieldValue::Varint(r)) => out.rejected_spans = (r as i64).max(0) as u64,
                    (2, FieldValue::Bytes(m)) => {
                        out.error_message = String::from_utf8_lossy(m).into_owned()
                    }
                    _ => {}
                }
            }
        }
    }
    Ok(out)
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
    use crate::observe::protobuf::Writer;
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

    #[tokio::test]
    async fn a_request_reaches_a_real_grpc_collector_with_its_headers_and_its_answer_is_read() {
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let port = listener.local_addr().unwrap().port();
        let collector = Collector::default();
        tokio::spawn(
            tonic::transport::Server::builder()
                .add_service(TraceServiceServer::new(collector.clone()))
                .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener)),
        );
        let body = crate::observe::otlp_request::testing::one_fold_span_request();
        let client = OtlpGrpc::connect_lazy(
            &format!("http://127.0.0.1:{port}"),
            Duration::from_secs(10),
            &crate::observe::otlp_config::parse_headers("X-Tenant=team%20a").unwrap(),
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
    async fn an_unreachable_collector_is_an_error_naming_it_not_a_hang() {
        let port = crate::observe::otlp_request::testing::closed_loopback_port();
        let endpoint = format!("http://127.0.0.1:{port}");
        let client = OtlpGrpc::connect_lazy(&endpoint, Duration::from_secs(5), &[]).unwrap();
        let err = client.send(&[]).await.unwrap_err();
        assert!(
            err.contains(&endpoint) && err.contains("Unavailable"),
            "{err}"
        );
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

    #[test]
    fn a_collectors_partial_success_is_read_and_an_empty_answer_means_all_accepted() {
        assert_eq!(partial_success(&[]).unwrap(), PartialSuccess::default());
        let mut w = Writer::default();
        let p = w.open(1);
        w.int64(1, 3);
        w.string(2, "too old");
        w.close(p);
        assert_eq!(
            partial_success(w.bytes()).unwrap(),
            PartialSuccess {
                rejected_spans: 3,
                error_message: "too old".into(),
            }
        );
        assert!(partial_success(&[0x0a, 9]).is_err());
    }
}
