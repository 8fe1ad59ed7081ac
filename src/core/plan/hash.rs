//! The container spec hash (kubelet `HashContainer`), recorded on each container the shell
//! creates and compared by the plan to detect spec changes (RT-10) and by the backoff key
//! (BO-06).
//!
//! Owns the hash function. Must not depend on anything but the `Container` value: the
//! hash is a lowercase hexadecimal 64-bit FNV-1a (offset basis 0xcbf29ce484222325, prime
//! 0x100000001b3) over the canonical JSON of the container as `serde_json` writes it from
//! k8s-openapi (fields in a fixed order, unset optional fields omitted, maps sorted), with
//! no leading zeros (Go's `strconv.FormatUint(h, 16)`). Changing any of this restarts every
//! container on upgrade, so it is pinned by a test.

use k8s_openapi::api::core::v1::Container;

const FNV_OFFSET: u64 = 0xcbf2_9ce4_8422_2325;
const FNV_PRIME: u64 = 0x0100_0000_01b3;

/// The stable spec hash of a container (see the module documentation for the exact
/// definition).
pub fn container_hash(c: &Container) -> String {
    // Serialising a k8s-openapi Container cannot fail (all map keys are strings); an empty
    // input would still give a stable (if useless) hash.
    let json = serde_json::to_vec(c).unwrap_or_default();
    format!("{:x}", fnv1a64(&json))
}

/// True if a runtime container created from `recorded_hash` no longer matches `c`. An
/// empty recorded hash (a container created by another agent) counts as unchanged.
pub(crate) fn spec_changed(c: &Container, recorded_hash: &str) -> bool {
    !recorded_hash.is_empty() && recorded_hash != container_hash(c)
}

fn fnv1a64(bytes: &[u8]) -> u64 {
    bytes.iter().fold(FNV_OFFSET, |h, b| {
        (h ^ u64::from(*b)).wrapping_mul(FNV_PRIME)
    })
}
