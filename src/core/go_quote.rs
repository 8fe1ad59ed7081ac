//! Go's `%q` verb (`strconv.Quote`) for the text the kubelet formats with it: names in
//! messages the API shows (a forbidden sysctl) and values in files it writes (the labels and
//! annotations of a downwardAPI volume).
//!
//! Owns the escaping. Must not be used for anything but text that Go would quote (it does not
//! escape non-ASCII the way `%+q` would).

/// `s` in double quotes with Go's escapes for `"`, `\`, newline, tab, carriage return and
/// other ASCII control characters (`\xNN`); every other character as it is.
pub fn go_quote(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + 2);
    out.push('"');
    for ch in s.chars() {
        match ch {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\n' => out.push_str("\\n"),
            '\t' => out.push_str("\\t"),
            '\r' => out.push_str("\\r"),
            c if c.is_ascii_control() => out.push_str(&format!("\\x{:02x}", c as u32)),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

#[cfg(test)]
mod tests {
    use super::go_quote;

    #[test]
    fn quotes_and_escapes_as_go_does() {
        assert_eq!(go_quote("kernel.msgmax"), "\"kernel.msgmax\"");
        assert_eq!(
            go_quote("a\"b\\c\nd\te\rf\u{1}"),
            "\"a\\\"b\\\\c\\nd\\te\\rf\\x01\""
        );
        assert_eq!(go_quote("é"), "\"é\"");
    }
}
