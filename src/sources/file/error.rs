//! Why the static pod source could not use a manifest.
//!
//! Owns the error vocabulary: `ManifestError` (which file, which document), `Problem` (what
//! is wrong) and `FieldError` (one field, in the API server's wording: `Required value`,
//! `Invalid value: ...`). Must not decide what happens to a rejected file's pods; the
//! source keeps them (see `source`).

use std::fmt;
use std::path::PathBuf;

/// A manifest (or the manifest path) the source could not use.
///
/// Displays as `<file>: <problem>`, or `<file>: document[<i>]: <problem>` when the file
/// holds more than one YAML document (`i` counts from 0 in file order).
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{}{}: {problem}", path.display(), document.map_or(String::new(), |i| format!(": document[{i}]")))]
pub struct ManifestError {
    /// The manifest file, or the manifest path for errors about the directory.
    pub path: PathBuf,
    /// The YAML document the problem is in, when the file holds more than one.
    pub document: Option<usize>,
    /// What is wrong.
    pub problem: Problem,
}

impl ManifestError {
    /// A problem with the whole file.
    pub fn file(path: impl Into<PathBuf>, problem: Problem) -> ManifestError {
        ManifestError {
            path: path.into(),
            document: None,
            problem,
        }
    }

    /// The `reason` label of `ledgerlet_manifest_errors_total`.
    pub fn reason(&self) -> &'static str {
        self.problem.reason()
    }
}

/// What is wrong with a manifest.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum Problem {
    /// The YAML or JSON could not be decoded into a Pod: a syntax error, or a field of the
    /// wrong type. The decoder's message names the line and column (and, for YAML type
    /// errors, the field).
    #[error("cannot parse {format}: {message}")]
    Parse {
        /// `YAML` or `JSON`.
        format: &'static str,
        /// The decoder's message, with its `at line L column C`.
        message: String,
    },
    /// The document is not a `v1` `Pod`.
    #[error("not a Pod: apiVersion {api_version:?}, kind {kind:?} (want apiVersion \"v1\", kind \"Pod\")")]
    NotAPod {
        /// The document's `apiVersion` ("" if missing).
        api_version: String,
        /// The document's `kind` ("" if missing).
        kind: String,
    },
    /// The file holds no document (empty, or only comments). Rejected rather than read as
    /// "no pods", so a file caught half-written does not stop its pod.
    #[error("no pod in the manifest")]
    Empty,
    /// The pod failed validation.
    #[error("{}", FieldErrors(.0))]
    Invalid(Vec<FieldError>),
    /// Another manifest already declares this `metadata.uid`.
    #[error("metadata.uid: Duplicate value: {uid:?}: already declared by {other}")]
    DuplicateUid {
        /// The UID.
        uid: String,
        /// The file (and document) that keeps it.
        other: String,
    },
    /// Nested deeper than the limit (sequences and mappings): refused before decoding.
    #[error("nesting is deeper than {limit} levels, the limit; not decoded")]
    TooDeep {
        /// The limit.
        limit: usize,
    },
    /// More YAML events (scalars, collections, aliases) than the limit: refused before
    /// decoding.
    #[error("more than {limit} YAML nodes, the limit; not decoded")]
    TooManyNodes {
        /// The limit.
        limit: usize,
    },
    /// The file is larger than `max_manifest_bytes`.
    #[error("manifest is {size} bytes, more than the limit of {limit} bytes")]
    TooLarge {
        /// The file's size (at least `limit + 1` when it grew while being read).
        size: u64,
        /// The limit.
        limit: u64,
    },
    /// The directory holds more manifests than `max_manifests`; this one is ignored.
    #[error("more than {limit} manifests in the directory; this one is ignored")]
    TooMany {
        /// The limit.
        limit: usize,
    },
    /// The manifest path does not exist (its pods, if any, are removed, as the kubelet does).
    #[error("path does not exist")]
    Missing,
    /// Reading failed.
    #[error("{0}")]
    Io(String),
}

impl Problem {
    /// The `reason` label of `ledgerlet_manifest_errors_total`.
    pub fn reason(&self) -> &'static str {
        match self {
            Problem::Parse { .. } | Problem::NotAPod { .. } | Problem::Empty => "parse",
            Problem::Invalid(_) | Problem::DuplicateUid { .. } => "invalid",
            Problem::TooLarge { .. } => "too_large",
            Problem::TooDeep { .. } | Problem::TooManyNodes { .. } => "too_complex",
            Problem::TooMany { .. } => "too_many",
            Problem::Missing | Problem::Io(_) => "io",
        }
    }
}

/// One invalid field, worded as the API server words it (`k8s.io/apimachinery` `field.Error`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct FieldError {
    /// The field path, e.g. `spec.containers[0].image`.
    pub field: String,
    /// What is wrong, e.g. `Required value`.
    pub detail: String,
}

impl fmt::Display for FieldError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.field, self.detail)
    }
}

impl FieldError {
    /// `<field>: Required value`.
    pub fn required(field: impl Into<String>) -> FieldError {
        FieldError {
            field: field.into(),
            detail: "Required value".into(),
        }
    }

    /// `<field>: Invalid value: <value>: <why>`; `value` is already rendered (quoted strings).
    pub fn invalid(field: impl Into<String>, value: impl fmt::Display, why: &str) -> FieldError {
        FieldError {
            field: field.into(),
            detail: format!("Invalid value: {value}: {why}"),
        }
    }

    /// `<field>: Duplicate value: "<value>"`.
    pub fn duplicate(field: impl Into<String>, value: &str) -> FieldError {
        FieldError {
            field: field.into(),
            detail: format!("Duplicate value: {value:?}"),
        }
    }

    /// `<field>: Unsupported value: "<value>": supported values: "A", "B"`.
    pub fn not_supported(field: impl Into<String>, value: &str, supported: &[&str]) -> FieldError {
        let list: Vec<String> = supported.iter().map(|s| format!("{s:?}")).collect();
        FieldError {
            field: field.into(),
            detail: format!(
                "Unsupported value: {value:?}: supported values: {}",
                list.join(", ")
            ),
        }
    }

    /// `<field>: Forbidden: <why>`.
    pub fn forbidden(field: impl Into<String>, why: &str) -> FieldError {
        FieldError {
            field: field.into(),
            detail: format!("Forbidden: {why}"),
        }
    }
}

/// Several field errors, joined as the API server's aggregate does: one alone as itself,
/// more as `[a, b]`.
struct FieldErrors<'a>(&'a [FieldError]);

impl fmt::Display for FieldErrors<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.0 {
            [one] => one.fmt(f),
            many => {
                let all: Vec<String> = many.iter().map(FieldError::to_string).collect();
                write!(f, "[{}]", all.join(", "))
            }
        }
    }
}
