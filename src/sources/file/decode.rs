//! Manifest bytes to Pod objects: YAML (one Pod per `---` document) or JSON (one Pod).
//!
//! Owns the format choice by file extension and the `apiVersion: v1` / `kind: Pod` check.
//! Must not default or validate (see `defaults`, `validate`) and must not touch the
//! filesystem: it sees bytes and a path to name in errors.

use std::path::Path;

use k8s_openapi::api::core::v1::Pod;
use serde::Deserialize;

use super::error::{ManifestError, Problem};
use super::manifest::Manifest;

/// How a manifest is encoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// `*.yaml`, `*.yml`: a stream of documents, each a Pod.
    Yaml,
    /// `*.json`: one Pod.
    Json,
}

impl Format {
    /// The format of a manifest named `path`, or `None` if the name is not a manifest's.
    pub fn of(path: &Path) -> Option<Format> {
        let ext = path.extension()?.to_str()?;
        if ext.eq_ignore_ascii_case("yaml") || ext.eq_ignore_ascii_case("yml") {
            Some(Format::Yaml)
        } else if ext.eq_ignore_ascii_case("json") {
            Some(Format::Json)
        } else {
            None
        }
    }

    fn name(self) -> &'static str {
        match self {
            Format::Yaml => "YAML",
            Format::Json => "JSON",
        }
    }
}

/// Just enough of a document to tell what it is.
#[derive(Deserialize)]
#[serde(rename_all = "camelCase")]
struct TypeMeta {
    #[serde(default)]
    api_version: Option<String>,
    #[serde(default)]
    kind: Option<String>,
}

/// Decodes `bytes` (named `path` in errors) as `format`.
///
/// A file with no document at all is `Problem::Empty`. YAML is read twice: once for the
/// `apiVersion`/`kind` of every document, then into Pods, so that a Deployment is reported
/// as "not a Pod" rather than as a list of unexpected fields, and so that type errors keep
/// the decoder's field path and line and column.
///
/// Before any decoding, the file's nesting depth and size in YAML nodes are checked against
/// `complexity`'s limits, so a hostile file is refused after a bounded amount of work.
pub fn decode(path: &Path, bytes: &[u8], format: Format) -> Result<Manifest, ManifestError> {
    use super::complexity::{check, Exceeded, MAX_EVENTS, MAX_NESTING_DEPTH};
    if let Err(exceeded) = check(bytes, MAX_NESTING_DEPTH, MAX_EVENTS) {
        let problem = match exceeded {
            Exceeded::Depth(limit) => Problem::TooDeep { limit },
            Exceeded::Events(limit) => Problem::TooManyNodes { limit },
        };
        return Err(ManifestError::file(path, problem));
    }
    match format {
        Format::Yaml => decode_yaml(path, bytes),
        Format::Json => decode_json(path, bytes),
    }
}

fn parse_error(
    path: &Path,
    document: Option<usize>,
    format: Format,
    e: impl ToString,
) -> ManifestError {
    ManifestError {
        path: path.to_owned(),
        document,
        problem: Problem::Parse {
            format: format.name(),
            message: e.to_string(),
        },
    }
}

fn check_type(path: &Path, document: Option<usize>, meta: &TypeMeta) -> Result<(), ManifestError> {
    let api_version = meta.api_version.as_deref().unwrap_or("");
    let kind = meta.kind.as_deref().unwrap_or("");
    if api_version == "v1" && kind == "Pod" {
        return Ok(());
    }
    Err(ManifestError {
        path: path.to_owned(),
        document,
        problem: Problem::NotAPod {
            api_version: api_version.to_owned(),
            kind: kind.to_owned(),
        },
    })
}

fn decode_yaml(path: &Path, bytes: &[u8]) -> Result<Manifest, ManifestError> {
    // Pass 1: what each document is. The document iterator of serde_yaml keeps yielding
    // the same error after a syntax error, so stop at the first one.
    let mut metas: Vec<Option<TypeMeta>> = Vec::new();
    for document in serde_yaml::Deserializer::from_slice(bytes) {
        match Option::<TypeMeta>::deserialize(document) {
            Ok(meta) => metas.push(meta),
            // A later document: we know there is more than one.
            Err(e) => {
                let at = metas.len();
                return Err(parse_error(path, (at > 0).then_some(at), Format::Yaml, e));
            }
        }
    }
    let documents = metas.len();
    let label = |i: usize| (documents > 1).then_some(i);
    for (i, meta) in metas.iter().enumerate() {
        if let Some(meta) = meta {
            check_type(path, label(i), meta)?;
        }
    }
    if metas.iter().all(Option::is_none) {
        return Err(ManifestError::file(path, Problem::Empty));
    }
    // Pass 2: the Pods.
    let documents_again = serde_yaml::Deserializer::from_slice(bytes).zip(&metas);
    let pods = (documents_again.enumerate())
        .filter(|(_, (_, meta))| meta.is_some())
        .map(|(i, (document, _))| match Pod::deserialize(document) {
            Ok(pod) => Ok((i, pod)),
            Err(e) => Err(parse_error(path, label(i), Format::Yaml, e)),
        })
        .collect::<Result<_, _>>()?;
    Ok(Manifest { documents, pods })
}

fn decode_json(path: &Path, bytes: &[u8]) -> Result<Manifest, ManifestError> {
    if bytes.iter().all(u8::is_ascii_whitespace) {
        return Err(ManifestError::file(path, Problem::Empty));
    }
    let meta: TypeMeta =
        serde_json::from_slice(bytes).map_err(|e| parse_error(path, None, Format::Json, e))?;
    check_type(path, None, &meta)?;
    let pod: Pod =
        serde_json::from_slice(bytes).map_err(|e| parse_error(path, None, Format::Json, e))?;
    Ok(Manifest {
        documents: 1,
        pods: vec![(0, pod)],
    })
}
