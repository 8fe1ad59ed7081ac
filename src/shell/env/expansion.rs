//! Kubernetes `$(VAR)` expansion (`third_party/forked/golang/expansion`): env values,
//! `command` and `args`.
//!
//! Owns the syntax: `$(NAME)` becomes the value the mapping gives, or stays as written when
//! it gives none; `$$` is one `$`; a `$` before anything else, and an unterminated `$(`,
//! stay as written. Pure; must not know where values come from.

/// `input` with every reference replaced through `mapping`.
pub fn expand<'a>(input: &str, mapping: impl Fn(&str) -> Option<&'a str>) -> String {
    let mut out = String::with_capacity(input.len());
    let mut rest = input;
    while let Some(at) = rest.find('$') {
        out.push_str(&rest[..at]);
        let after = &rest[at + 1..];
        let Some(next) = after.chars().next() else {
            // a `$` at the very end
            out.push('$');
            rest = after;
            break;
        };
        match next {
            '$' => {
                out.push('$');
                rest = &after[1..];
            }
            '(' => match after[1..].find(')') {
                Some(end) => {
                    let name = &after[1..1 + end];
                    match mapping(name) {
                        Some(v) => out.push_str(v),
                        None => {
                            out.push_str("$(");
                            out.push_str(name);
                            out.push(')');
                        }
                    }
                    rest = &after[2 + end..];
                }
                None => {
                    // incomplete: `$(` as written, the rest read on
                    out.push_str("$(");
                    rest = &after[1..];
                }
            },
            other => {
                out.push('$');
                out.push(other);
                rest = &after[other.len_utf8()..];
            }
        }
    }
    out.push_str(rest);
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeMap;

    fn with(vars: &[(&'static str, &'static str)]) -> impl Fn(&str) -> Option<&'static str> {
        let m: BTreeMap<&str, &str> = vars.iter().copied().collect();
        move |k| m.get(k).copied()
    }

    #[test]
    fn references_to_known_variables_are_replaced() {
        let m = with(&[("A", "1"), ("B", "two"), ("EMPTY", "")]);
        assert_eq!(expand("$(A)-$(B)", &m), "1-two");
        assert_eq!(expand("x$(EMPTY)y", &m), "xy");
        assert_eq!(expand("é$(A)é", &m), "é1é");
    }

    #[test]
    fn double_dollar_escapes_a_reference() {
        let m = with(&[("A", "1")]);
        assert_eq!(expand("$$(A)", &m), "$(A)");
        assert_eq!(expand("$$$(A)", &m), "$1");
        assert_eq!(expand("$$$$", &m), "$$");
        assert_eq!(expand("cost: $$5", &m), "cost: $5");
    }

    #[test]
    fn undefined_and_malformed_references_stay_as_written() {
        let m = with(&[("A", "1")]);
        assert_eq!(expand("$(UNDEFINED)", &m), "$(UNDEFINED)");
        assert_eq!(expand("$(unterminated", &m), "$(unterminated");
        assert_eq!(expand("$(A $(A)", &m), "$(A $(A)");
        assert_eq!(expand("$A ${A} $", &m), "$A ${A} $");
        assert_eq!(expand("$é", &m), "$é");
        assert_eq!(expand("$()", &m), "$()");
    }
}
