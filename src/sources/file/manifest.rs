//! One manifest's bytes to its static pods: decode, default, validate.
//!
//! Owns the pipeline and the all-or-nothing rule: a file whose any document fails yields
//! no pods, only the error of its first failing document. Must not touch the filesystem or
//! know about other files (UID conflicts between files are the source's business).

use std::path::Path;

use k8s_openapi::api::core::v1::Pod;

use super::decode::{decode, Format};
use super::defaults::apply_defaults;
use super::error::{ManifestError, Problem};
use super::validate::validate;
use crate::core::record::Time;

/// The static pods of one manifest file (as decoded, then as defaulted and validated).
#[derive(Debug)]
pub struct Manifest {
    /// How many YAML documents the file holds, empty ones included (1 for JSON).
    pub documents: usize,
    /// Each non-empty document's index (from 0, in file order) and its pod, in file order.
    pub pods: Vec<(usize, Pod)>,
}

impl Manifest {
    /// `Some(document)` when the file has more than one document, for error messages.
    pub fn label(&self, document: usize) -> Option<usize> {
        (self.documents > 1).then_some(document)
    }
}

/// Parses `bytes`, the content of the manifest `path` (its format from the extension; YAML
/// for any other name, as for a `--pod-manifest-path` naming one file), into defaulted and
/// validated pods for `node_name`, stamped `kubernetes.io/config.seen = seen`.
pub fn parse_manifest(
    path: &Path,
    bytes: &[u8],
    node_name: &str,
    seen: Time,
) -> Result<Manifest, ManifestError> {
    let format = Format::of(path).unwrap_or(Format::Yaml);
    let mut manifest = decode(path, bytes, format)?;
    let documents = manifest.documents;
    for (i, pod) in &mut manifest.pods {
        apply_defaults(pod, path, *i, node_name, seen);
        let errors = validate(pod);
        if !errors.is_empty() {
            return Err(ManifestError {
                path: path.to_owned(),
                document: (documents > 1).then_some(*i),
                problem: Problem::Invalid(errors),
            });
        }
    }
    Ok(manifest)
}
