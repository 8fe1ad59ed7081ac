//! Where OTLP traces go, how, and with which headers: the protocol, the collector's URI and
//! the export headers, resolved from `--tracing-protocol`, `--tracing-endpoint` and the
//! OpenTelemetry exporter variables.
//!
//! Owns the resolution rules (a flag over the traces-specific variable over the generic
//! one; the OTLP/HTTP path rules of the OpenTelemetry specification; the header syntax) and
//! their errors, each naming where the bad value came from. Must not connect or send
//! (`observe::otlp_grpc`, `observe::otlp_http`); reads the environment only through the
//! lookup it is given, so its rules are tested without touching the process's environment.

use super::otel::TracingError;

/// The kubelet's default OTLP endpoint (OTLP/gRPC).
pub const DEFAULT_ENDPOINT: &str = "localhost:4317";
/// The default OTLP/HTTP endpoint (the OpenTelemetry specification's port).
pub const DEFAULT_HTTP_ENDPOINT: &str = "localhost:4318";
/// The path OTLP/HTTP trace exports are posted to, under a base endpoint.
pub const HTTP_TRACES_PATH: &str = "v1/traces";

/// Where the protocol is read from, most specific first (after `--tracing-protocol`).
pub const PROTOCOL_VARIABLES: [&str; 2] = [
    "OTEL_EXPORTER_OTLP_TRACES_PROTOCOL",
    "OTEL_EXPORTER_OTLP_PROTOCOL",
];
/// Where the compression is read from, most specific first (after `--tracing-compression`).
pub const COMPRESSION_VARIABLES: [&str; 2] = [
    "OTEL_EXPORTER_OTLP_TRACES_COMPRESSION",
    "OTEL_EXPORTER_OTLP_COMPRESSION",
];
/// The traces-specific endpoint variable: its URI is used as it is.
pub const TRACES_ENDPOINT_VARIABLE: &str = "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT";
/// The generic endpoint variable: for OTLP/HTTP, a base URI that `v1/traces` is added to.
pub const ENDPOINT_VARIABLE: &str = "OTEL_EXPORTER_OTLP_ENDPOINT";
/// Where export headers are read from, most specific first.
pub const HEADER_VARIABLES: [&str; 2] = [
    "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
    "OTEL_EXPORTER_OTLP_HEADERS",
];

/// How spans are sent to the collector.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    /// OTLP/gRPC: `TraceService/Export` over plain HTTP/2. The kubelet's only protocol, and
    /// ledgerlet's default.
    Grpc,
    /// OTLP/HTTP with binary protobuf bodies: `POST` to the traces URI over HTTP/1.1.
    HttpProtobuf,
}

impl Protocol {
    /// The name the OpenTelemetry variables use.
    pub fn as_str(self) -> &'static str {
        match self {
            Protocol::Grpc => "grpc",
            Protocol::HttpProtobuf => "http/protobuf",
        }
    }

    /// Parses a protocol name (`grpc`, `http/protobuf`).
    pub fn parse(value: &str) -> Result<Protocol, String> {
        match value.trim() {
            "grpc" => Ok(Protocol::Grpc),
            "http/protobuf" => Ok(Protocol::HttpProtobuf),
            "http/json" => Err("http/json is not supported; use http/protobuf or grpc".into()),
            _ => Err("expected grpc or http/protobuf".into()),
        }
    }

    /// The endpoint `--tracing-endpoint` means when given without a value.
    pub fn default_endpoint(self) -> &'static str {
        match self {
            Protocol::Grpc => DEFAULT_ENDPOINT,
            Protocol::HttpProtobuf => DEFAULT_HTTP_ENDPOINT,
        }
    }
}

/// How request bodies are compressed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Compression {
    /// Sent as they are (the kubelet's exporter sets no compression).
    #[default]
    None,
    /// gzip: gRPC's `grpc-encoding: gzip` messages, OTLP/HTTP's `Content-Encoding: gzip`.
    Gzip,
}

impl Compression {
    /// The name the OpenTelemetry variables use.
    pub fn as_str(self) -> &'static str {
        match self {
            Compression::None => "none",
            Compression::Gzip => "gzip",
        }
    }

    /// Parses a compression name (`gzip`, `none`).
    pub fn parse(value: &str) -> Result<Compression, String> {
        match value.trim() {
            "none" => Ok(Compression::None),
            "gzip" => Ok(Compression::Gzip),
            _ => Err("expected gzip or none".into()),
        }
    }
}

/// Where spans go: the protocol, the collector's URI (for OTLP/HTTP, the full URI that
/// requests are posted to) and the compression.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Destination {
    /// How.
    pub protocol: Protocol,
    /// `http://host:port`, plus the path for OTLP/HTTP.
    pub uri: String,
    /// How bodies are compressed.
    pub compression: Compression,
}

/// What the command line says (flags win over the environment).
#[derive(Clone, Copy, Debug, Default)]
pub struct Flags<'a> {
    /// `--tracing-endpoint`: `Some("")` when given without a value.
    pub endpoint: Option<&'a str>,
    /// `--tracing-protocol`.
    pub protocol: Option<&'a str>,
    /// `--tracing-compression`.
    pub compression: Option<&'a str>,
}

/// Where an endpoint came from; for OTLP/HTTP it decides the path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum EndpointSource {
    /// `--tracing-endpoint`: a URI without a path gets `/v1/traces`.
    Flag,
    /// [`TRACES_ENDPOINT_VARIABLE`]: used as it is (the specification's rule).
    TracesVariable,
    /// [`ENDPOINT_VARIABLE`]: a base, `v1/traces` is added to its path.
    Variable,
}

impl EndpointSource {
    fn name(self) -> &'static str {
        match self {
            EndpointSource::Flag => "--tracing-endpoint",
            EndpointSource::TracesVariable => TRACES_ENDPOINT_VARIABLE,
            EndpointSource::Variable => ENDPOINT_VARIABLE,
        }
    }
}

/// The destination, or `None` when no endpoint is configured (tracing off). `env` looks a
/// variable up; blank values count as unset.
pub fn resolve(
    flags: Flags<'_>,
    env: &dyn Fn(&str) -> Option<String>,
) -> Result<Option<Destination>, TracingError> {
    let env = |k: &str| env(k).filter(|v| !v.trim().is_empty());
    let endpoint = match flags.endpoint {
        Some(e) => Some((e.to_string(), EndpointSource::Flag)),
        None => env(TRACES_ENDPOINT_VARIABLE)
            .map(|e| (e, EndpointSource::TracesVariable))
            .or_else(|| env(ENDPOINT_VARIABLE).map(|e| (e, EndpointSource::Variable))),
    };
    let Some((endpoint, source)) = endpoint else {
        return Ok(None);
    };
    let protocol = named(
        flags.protocol,
        "--tracing-protocol",
        &PROTOCOL_VARIABLES,
        &env,
        Protocol::parse,
    )?
    .unwrap_or(Protocol::Grpc);
    let compression = named(
        flags.compression,
        "--tracing-compression",
        &COMPRESSION_VARIABLES,
        &env,
        Compression::parse,
    )?
    .unwrap_or_default();
    let endpoint = if endpoint.trim().is_empty() {
        protocol.default_endpoint().to_string()
    } else {
        endpoint
    };
    let base = normalize_endpoint(&endpoint, source.name())?;
    let uri = match protocol {
        // gRPC's path is the service's, so only the scheme and authority count
        Protocol::Grpc => format!("http://{}", base.authority().map_or("", |a| a.as_str())),
        Protocol::HttpProtobuf => http_traces_uri(&base, source),
    };
    Ok(Some(Destination {
        protocol,
        uri,
        compression,
    }))
}

/// A setting from its flag (named `flag_name`), else the first of `variables` set; `None`
/// when none is; a value `parse` refuses is an error naming it and where it came from.
fn named<T>(
    flag: Option<&str>,
    flag_name: &'static str,
    variables: &[&'static str],
    env: &dyn Fn(&str) -> Option<String>,
    parse: fn(&str) -> Result<T, String>,
) -> Result<Option<T>, TracingError> {
    let given = flag
        .map(|v| (v.to_string(), flag_name))
        .or_else(|| variables.iter().find_map(|k| env(k).map(|v| (v, *k))));
    let Some((value, origin)) = given else {
        return Ok(None);
    };
    parse(&value)
        .map(Some)
        .map_err(|reason| TracingError::Setting {
            value,
            origin,
            reason,
        })
}

/// `host:port` (the kubelet's form) becomes `http://host:port`; a URI is checked: plain
/// `http` with a host (TLS is not built). `origin` names where it came from, for errors.
pub fn normalize_endpoint(
    endpoint: &str,
    origin: &'static str,
) -> Result<tonic::codegen::http::Uri, TracingError> {
    let e = endpoint.trim();
    let uri = if e.contains("://") {
        e.to_string()
    } else {
        format!("http://{e}")
    };
    let bad = |reason: String| TracingError::Endpoint {
        endpoint: endpoint.to_string(),
        origin,
        reason,
    };
    let parsed: tonic::codegen::http::Uri = uri.parse().map_err(|e| bad(format!("{e}")))?;
    match parsed.scheme_str() {
        Some("http") => {}
        Some("https") => {
            return Err(bad(
                "TLS is not supported; the kubelet's tracing endpoint is plain gRPC too (use http:// or host:port)".into(),
            ))
        }
        other => return Err(bad(format!("unsupported scheme {other:?}"))),
    }
    if parsed.host().is_none_or(str::is_empty) {
        return Err(bad("no host".into()));
    }
    Ok(parsed)
}

/// The URI OTLP/HTTP posts to: the traces variable's as it is; a base (the generic
/// variable's, or the flag's when it has no path) with `v1/traces` added to its path.
fn http_traces_uri(base: &tonic::codegen::http::Uri, source: EndpointSource) -> String {
    let scheme = base.scheme_str().unwrap_or("http");
    let authority = base.authority().map_or("", |a| a.as_str());
    let path = base.path();
    let query = base.query().map(|q| format!("?{q}")).unwrap_or_default();
    let add_path = match source {
        EndpointSource::TracesVariable => false,
        EndpointSource::Flag => path.is_empty() || path == "/",
        EndpointSource::Variable => true,
    };
    let path = if !add_path {
        path.to_string()
    } else if path.ends_with('/') {
        format!("{path}{HTTP_TRACES_PATH}")
    } else {
        format!("{path}/{HTTP_TRACES_PATH}")
    };
    format!("{scheme}://{authority}{path}{query}")
}

/// The export headers from the environment (the first of [`HEADER_VARIABLES`] that is set
/// and not blank), as the OpenTelemetry specification writes them: `key=value` pairs
/// separated by commas, values percent-encoded. An entry without `=`, an empty key or a
/// bad percent escape is an error naming the variable and the entry.
pub fn headers_from_env() -> Result<Vec<(String, String)>, String> {
    for var in HEADER_VARIABLES {
        if let Ok(v) = std::env::var(var) {
            if !v.trim().is_empty() {
                return parse_headers(&v).map_err(|e| format!("{var}: {e}"));
            }
        }
    }
    Ok(Vec::new())
}

/// Parses `key=value,key2=value2` (values percent-decoded, keys lowercased).
pub fn parse_headers(s: &str) -> Result<Vec<(String, String)>, String> {
    let mut out = Vec::new();
    for entry in s.split(',').map(str::trim).filter(|e| !e.is_empty()) {
        let (k, v) = entry
            .split_once('=')
            .ok_or_else(|| format!("header entry {entry:?} has no '='"))?;
        let key = k.trim().to_ascii_lowercase();
        if key.is_empty() {
            return Err(format!("header entry {entry:?} has an empty key"));
        }
        out.push((
            key,
            percent_decode(v.trim()).map_err(|e| format!("header {k:?}: {e}"))?,
        ));
    }
    Ok(out)
}

fn percent_decode(s: &str) -> Result<String, String> {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'%' {
            let hex = b
                .get(i + 1..i + 3)
                .and_then(|h| std::str::from_utf8(h).ok())
                .and_then(|h| u8::from_str_radix(h, 16).ok())
                .ok_or_else(|| format!("bad percent escape at byte {i} of {s:?}"))?;
            out.push(hex);
            i += 3;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8(out).map_err(|_| format!("{s:?} is not UTF-8 once decoded"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn env_of<'a>(vars: &'a [(&'a str, &'a str)]) -> impl Fn(&str) -> Option<String> + 'a {
        move |k| {
            vars.iter()
                .find(|(name, _)| *name == k)
                .map(|(_, v)| v.to_string())
        }
    }

    fn resolved(flags: Flags<'_>, vars: &[(&str, &str)]) -> Option<Destination> {
        resolve(flags, &env_of(vars)).unwrap()
    }

    /// The message of the error `flags` and `vars` resolve to.
    fn refused(flags: Flags<'_>, vars: &[(&str, &str)]) -> String {
        resolve(flags, &env_of(vars)).unwrap_err().to_string()
    }

    fn dest(protocol: Protocol, uri: &str) -> Option<Destination> {
        Some(Destination {
            protocol,
            uri: uri.into(),
            compression: Compression::None,
        })
    }

    #[test]
    fn grpc_endpoints_follow_the_kubelets_forms_and_the_flag_wins() {
        let flag = |e| Flags {
            endpoint: Some(e),
            ..Flags::default()
        };
        assert_eq!(
            resolved(flag(""), &[]),
            dest(Protocol::Grpc, "http://localhost:4317")
        );
        assert_eq!(
            resolved(
                flag("collector:4317"),
                &[(ENDPOINT_VARIABLE, "http://other:1")]
            ),
            dest(Protocol::Grpc, "http://collector:4317")
        );
        assert_eq!(
            resolved(
                Flags::default(),
                &[
                    (ENDPOINT_VARIABLE, "http://generic:1"),
                    (TRACES_ENDPOINT_VARIABLE, "traces:2")
                ]
            ),
            dest(Protocol::Grpc, "http://traces:2")
        );
        assert_eq!(
            resolved(Flags::default(), &[(TRACES_ENDPOINT_VARIABLE, "  ")]),
            None,
            "a blank variable is unset"
        );
        assert_eq!(resolved(Flags::default(), &[]), None, "no endpoint: off");
    }

    #[test]
    fn bad_endpoints_are_errors_naming_where_they_came_from() {
        let e = refused(
            Flags {
                endpoint: Some("https://collector:4317"),
                ..Flags::default()
            },
            &[],
        );
        assert!(e.contains("--tracing-endpoint"), "{e}");
        assert!(e.contains("TLS"), "{e}");
        let e = refused(Flags::default(), &[(ENDPOINT_VARIABLE, "ftp://x:1")]);
        assert!(e.contains(ENDPOINT_VARIABLE), "{e}");
        let e = refused(Flags::default(), &[(TRACES_ENDPOINT_VARIABLE, "http://")]);
        assert!(e.contains(TRACES_ENDPOINT_VARIABLE), "{e}");
    }

    #[test]
    fn the_protocol_comes_from_the_flag_then_the_traces_variable_then_the_generic_one() {
        let endpoint = Flags {
            endpoint: Some("c:1"),
            ..Flags::default()
        };
        assert_eq!(resolved(endpoint, &[]).unwrap().protocol, Protocol::Grpc);
        let vars = [
            ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
            ("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL", "http/protobuf"),
        ];
        assert_eq!(
            resolved(endpoint, &vars).unwrap().protocol,
            Protocol::HttpProtobuf
        );
        assert_eq!(
            resolved(endpoint, &vars[..1]).unwrap().protocol,
            Protocol::Grpc
        );
        let flag = Flags {
            protocol: Some("grpc"),
            ..endpoint
        };
        assert_eq!(resolved(flag, &vars).unwrap().protocol, Protocol::Grpc);
        // bad values name the value, where it came from and what would do
        let e = refused(endpoint, &[("OTEL_EXPORTER_OTLP_PROTOCOL", "http/json")]);
        assert!(
            e.contains("OTEL_EXPORTER_OTLP_PROTOCOL") && e.contains("\"http/json\""),
            "{e}"
        );
        assert!(e.contains("use http/protobuf or grpc"), "{e}");
        let flag = Flags {
            protocol: Some("udp"),
            ..endpoint
        };
        let e = refused(flag, &[]);
        assert!(
            e.contains("--tracing-protocol") && e.contains("\"udp\""),
            "{e}"
        );
        // without an endpoint a protocol alone turns nothing on and is not checked
        assert_eq!(
            resolved(Flags::default(), &[("OTEL_EXPORTER_OTLP_PROTOCOL", "udp")]),
            None
        );
    }

    #[test]
    fn compression_comes_from_the_flag_then_the_variables_and_is_off_by_default() {
        let endpoint = Flags {
            endpoint: Some("c:1"),
            ..Flags::default()
        };
        let compression = |flags, vars: &[(&str, &str)]| resolved(flags, vars).unwrap().compression;
        assert_eq!(compression(endpoint, &[]), Compression::None);
        let vars = [
            ("OTEL_EXPORTER_OTLP_COMPRESSION", "none"),
            ("OTEL_EXPORTER_OTLP_TRACES_COMPRESSION", "gzip"),
        ];
        assert_eq!(compression(endpoint, &vars), Compression::Gzip);
        assert_eq!(compression(endpoint, &vars[..1]), Compression::None);
        let flag = Flags {
            compression: Some("none"),
            ..endpoint
        };
        assert_eq!(compression(flag, &vars), Compression::None);
        let e = refused(endpoint, &[("OTEL_EXPORTER_OTLP_COMPRESSION", "zstd")]);
        assert!(
            e.contains("OTEL_EXPORTER_OTLP_COMPRESSION")
                && e.contains("\"zstd\"")
                && e.contains("gzip or none"),
            "{e}"
        );
    }

    #[test]
    fn http_uris_follow_the_specifications_path_rules() {
        let http = |endpoint| Flags {
            endpoint: Some(endpoint),
            protocol: Some("http/protobuf"),
            ..Flags::default()
        };
        let uri = |flags, vars: &[(&str, &str)]| resolved(flags, vars).unwrap().uri;
        // the flag: alone, the default port; without a path, /v1/traces; with one, as it is
        assert_eq!(uri(http(""), &[]), "http://localhost:4318/v1/traces");
        assert_eq!(uri(http("c:4318"), &[]), "http://c:4318/v1/traces");
        assert_eq!(uri(http("http://c:4318/"), &[]), "http://c:4318/v1/traces");
        assert_eq!(
            uri(http("http://c:4318/custom/traces"), &[]),
            "http://c:4318/custom/traces"
        );
        // the traces variable: as it is, even without a path; the generic variable: a base
        // that v1/traces is added to
        for (var, value, expected) in [
            (
                TRACES_ENDPOINT_VARIABLE,
                "http://c:4318/x",
                "http://c:4318/x",
            ),
            (TRACES_ENDPOINT_VARIABLE, "http://c:4318", "http://c:4318/"),
            (
                ENDPOINT_VARIABLE,
                "http://c:4318",
                "http://c:4318/v1/traces",
            ),
            (
                ENDPOINT_VARIABLE,
                "http://c:4318/otlp/",
                "http://c:4318/otlp/v1/traces",
            ),
            (
                ENDPOINT_VARIABLE,
                "http://c:4318/otlp",
                "http://c:4318/otlp/v1/traces",
            ),
            (
                ENDPOINT_VARIABLE,
                "http://c:4318/otlp?tenant=a",
                "http://c:4318/otlp/v1/traces?tenant=a",
            ),
        ] {
            let vars = [
                ("OTEL_EXPORTER_OTLP_PROTOCOL", "http/protobuf"),
                (var, value),
            ];
            assert_eq!(uri(Flags::default(), &vars), expected, "{var}={value}");
        }
    }

    #[test]
    fn headers_are_comma_separated_percent_encoded_pairs_and_bad_ones_are_named() {
        assert_eq!(
            parse_headers("Authorization=Basic%20YWJj, x-tenant = a=b ,").unwrap(),
            [
                ("authorization".to_string(), "Basic YWJj".to_string()),
                ("x-tenant".to_string(), "a=b".to_string()),
            ]
        );
        assert!(parse_headers("").unwrap().is_empty());
        assert!(parse_headers("novalue").unwrap_err().contains("novalue"));
        assert!(parse_headers("=v").unwrap_err().contains("empty key"));
        assert!(parse_headers("k=%zz").unwrap_err().contains("percent"));
    }
}
