//! The static pod source (`--pod-manifest-path`): a directory of Pod manifests (or one
//! manifest file) turned into `PodAdded`/`PodUpdated`/`PodRemoved` events with source
//! `file`, plus `ManifestRejected` for files it cannot use.
//!
//! Owns parsing (YAML, several documents per file; JSON), the kubelet's static pod
//! defaulting (pkg/kubelet/config/common.go `applyDefaults`), a focused validation, and the
//! watch (a poll that diffs against the previous scan). Must not decide what a change means
//! for a pod worker (that is the core's), must not read a clock below the driver, and must
//! never let one bad file stop the others. Where it departs from the kubelet is listed in
//! `source`.
//!
//! Layout: `listing` (what is in the path) → `manifest` (`decode` → `defaults` →
//! `validate`) → `source` (state and diff) → `driver` (the async loop). `complexity`
//! bounds the work a file can cost before `decode` reads it; `error` the error vocabulary.
//! UIDs and change detection use MD5 (the `md-5` crate).

mod complexity;
mod decode;
mod defaults;
mod driver;
mod error;
mod listing;
mod manifest;
mod source;
mod validate;

pub use complexity::{MAX_EVENTS, MAX_NESTING_DEPTH};
pub use decode::Format;
pub use defaults::{default_pull_policy, generated_uid, DEFAULT_TERMINATION_MESSAGE_PATH};
pub use driver::{change_event, run, DEFAULT_PERIOD_MS};
pub use error::{FieldError, ManifestError, Problem};
pub use manifest::{parse_manifest, Manifest};
pub use source::{FileSource, Limits, SourceChange};
