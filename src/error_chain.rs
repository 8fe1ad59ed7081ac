//! One line for an error and its causes, for logs and recorded messages.
//!
//! Owns only that formatting. Transport errors (hyper, tonic, kube) say little at the top
//! ("client error (Connect)"); the cause ("Connection refused (os error 111)") is below.

use std::error::Error;

/// `err: cause: cause…`, skipping a cause whose text the line already holds.
pub fn error_chain(err: &dyn Error) -> String {
    let mut out = err.to_string();
    let mut cur = err.source();
    while let Some(e) = cur {
        let s = e.to_string();
        if !out.contains(&s) {
            out.push_str(": ");
            out.push_str(&s);
        }
        cur = e.source();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Debug, thiserror::Error)]
    #[error("client error (Connect)")]
    struct Outer(#[source] std::io::Error);

    #[test]
    fn the_cause_follows_the_error_and_repeats_are_skipped() {
        let e = Outer(std::io::Error::new(
            std::io::ErrorKind::ConnectionRefused,
            "Connection refused (os error 111)",
        ));
        assert_eq!(
            error_chain(&e),
            "client error (Connect): Connection refused (os error 111)"
        );
    }
}
