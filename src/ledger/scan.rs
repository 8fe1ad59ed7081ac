//! Finding where a JSON value ends without parsing it.
//!
//! Owns the scanning the fast line decoder and the intern table need: given the first byte
//! of a value, the index just past its end. Must not validate or decode: a scan of invalid
//! JSON returns some end or `None`, and whatever is taken from the span is validated
//! elsewhere (parsed by serde_json, or compared with a text serde_json already accepted).

/// `w` with the high bit set in each byte equal to `c` (and possibly in bytes above a match,
/// never below one: the lowest set bit is always a real match).
#[inline]
fn bytes_equal_to(w: u64, c: u8) -> u64 {
    const LO: u64 = 0x0101_0101_0101_0101;
    const HI: u64 = 0x8080_8080_8080_8080;
    let x = w ^ (LO * u64::from(c));
    x.wrapping_sub(LO) & !x & HI
}

/// From `i`, eight bytes at a time, the index of the first byte `flag` marks (it sets the high
/// bit of each marked byte of a little-endian word), or of the first byte of the last
/// incomplete word: the caller looks at the remaining bytes one by one.
#[inline(always)]
fn skip_unflagged(b: &[u8], mut i: usize, flag: impl Fn(u64) -> u64) -> usize {
    while let Some(chunk) = b.get(i..i + 8) {
        let m = flag(u64::from_le_bytes(chunk.try_into().expect("8 bytes")));
        if m != 0 {
            return i + (m.trailing_zeros() / 8) as usize;
        }
        i += 8;
    }
    i
}

/// Given `i` just after the opening `"` of a string, the index just after its closing `"`.
#[inline]
pub fn string_end(b: &[u8], mut i: usize) -> Option<usize> {
    loop {
        i = skip_unflagged(b, i, |w| bytes_equal_to(w, b'"') | bytes_equal_to(w, b'\\'));
        match *b.get(i)? {
            b'"' => return Some(i + 1),
            b'\\' => i += 2,
            _ => i += 1,
        }
    }
}

/// Given `i` just after the opening `"` of a string, the index of its closing `"` if the
/// string has no escapes and no control characters (`None` otherwise).
#[inline]
pub fn plain_string_end(b: &[u8], mut i: usize) -> Option<usize> {
    const LO: u64 = 0x0101_0101_0101_0101;
    const HI: u64 = 0x8080_8080_8080_8080;
    loop {
        i = skip_unflagged(b, i, |w| {
            // bytes below 0x20 (control characters), as `bytes_equal_to` does for one value
            let control = w.wrapping_sub(LO * 0x20) & !w & HI;
            bytes_equal_to(w, b'"') | bytes_equal_to(w, b'\\') | control
        });
        match *b.get(i)? {
            b'"' => return Some(i),
            b'\\' => return None,
            c if c < 0x20 => return None,
            _ => i += 1,
        }
    }
}

/// Given `i` at the opening `{` or `[` of a value, the index just after its matching close.
pub fn nested_end(b: &[u8], mut i: usize) -> Option<usize> {
    let mut depth = 0usize;
    loop {
        match *b.get(i)? {
            b'"' => {
                i = string_end(b, i + 1)?;
                continue;
            }
            b'{' | b'[' => depth += 1,
            b'}' | b']' => {
                depth = depth.checked_sub(1)?;
                if depth == 0 {
                    return Some(i + 1);
                }
            }
            _ => {}
        }
        i += 1;
    }
}

/// Given `i` at the first byte of any value, the index just after it.
pub fn value_end(b: &[u8], i: usize) -> Option<usize> {
    match *b.get(i)? {
        b'"' => string_end(b, i + 1),
        b'{' | b'[' => nested_end(b, i),
        _ => {
            let len = b[i..]
                .iter()
                .position(|c| matches!(c, b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r'))
                .unwrap_or(b.len() - i);
            (len > 0).then_some(i + len)
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn values_end_where_serde_json_says_they_do() {
        let values = [
            r#""""#,
            r#""a""#,
            r#""a \"quoted\" \\ string with \u00e9 and more than eight bytes""#,
            r#""ends in a backslash \\""#,
            r#"{}"#,
            r#"{"a":[1,{"b":"}]"}],"c":{"d":"\"{"}}"#,
            r#"[{"x":"y"},[],{}]"#,
            "123",
            "-1.5e3",
            "null",
            "true",
        ];
        for v in values {
            serde_json::from_str::<serde_json::Value>(v).expect(v);
            for tail in ["", ",", "}", " ,", "]"] {
                let text = format!("{v}{tail}");
                assert_eq!(value_end(text.as_bytes(), 0), Some(v.len()), "{text}");
            }
        }
        for bad in [r#""open"#, r#"{"a":1"#, "", "}", r#""\"#] {
            assert!(
                value_end(bad.as_bytes(), 0).is_none_or(|e| e <= bad.len()),
                "{bad}"
            );
        }
        assert_eq!(value_end(b"{\"a\":1", 0), None);
    }

    #[test]
    fn plain_strings_have_no_escapes_and_no_control_characters() {
        for (text, end) in [
            ("\"", Some(0)),
            ("abc\"", Some(3)),
            ("a string longer than eight bytes, with é\",", Some(41)),
            ("esc\\\"aped\"", None),
            ("tab\there\"", None),
            ("0123456789abcdef\u{1f}\"", None),
            ("unterminated", None),
        ] {
            assert_eq!(plain_string_end(text.as_bytes(), 0), end, "{text:?}");
            if let Some(e) = end {
                let json = format!("\"{}", &text[..=e]);
                assert_eq!(serde_json::from_str::<String>(&json).unwrap(), &text[..e]);
            }
        }
        assert_eq!(value_end(b"\"abcdefghijklmnop", 0), None);
    }
}
