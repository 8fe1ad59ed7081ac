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
    // The JSON is hashed as it is written, never held. Serialising a k8s-openapi Container
    // cannot fail (all map keys are strings); if it did, the hash of what was written so far
    // would still be stable.
    let mut h = Fnv1a64(FNV_OFFSET);
    let _ = serde_json::to_writer(&mut h, c);
    lower_hex(h.0)
}

/// FNV-1a over everything written to it.
struct Fnv1a64(u64);

impl std::io::Write for Fnv1a64 {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0 = fnv1a64_from(self.0, bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// `strconv.FormatUint(h, 16)`: lowercase, no leading zeros.
fn lower_hex(mut h: u64) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut buf = [0u8; 16];
    let mut i = buf.len();
    loop {
        i -= 1;
        buf[i] = DIGITS[(h & 0xf) as usize];
        h >>= 4;
        if h == 0 {
            break;
        }
    }
    buf[i..].iter().map(|&b| char::from(b)).collect()
}

/// True if a runtime container created from `recorded_hash` no longer matches `c`. An
/// empty recorded hash (a container created by another agent) counts as unchanged.
pub(crate) fn spec_changed(c: &Container, recorded_hash: &str) -> bool {
    !recorded_hash.is_empty() && recorded_hash != container_hash(c)
}

fn fnv1a64_from(h: u64, bytes: &[u8]) -> u64 {
    bytes
        .iter()
        .fold(h, |h, b| (h ^ u64::from(*b)).wrapping_mul(FNV_PRIME))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_hex_form_is_go_format_uint_base_16() {
        assert_eq!(lower_hex(0), "0");
        assert_eq!(lower_hex(0xf), "f");
        assert_eq!(lower_hex(0x0abc), "abc");
        assert_eq!(lower_hex(u64::MAX), "ffffffffffffffff");
        assert_eq!(lower_hex(0x1000_0000_0000_0000), "1000000000000000");
    }

    #[test]
    fn hashing_as_written_equals_hashing_the_whole_json() {
        let c = Container {
            name: "app".into(),
            image: Some("busybox".into()),
            ..Container::default()
        };
        let json = serde_json::to_vec(&c).unwrap();
        assert_eq!(
            container_hash(&c),
            format!("{:x}", fnv1a64_from(FNV_OFFSET, &json))
        );
    }
}
