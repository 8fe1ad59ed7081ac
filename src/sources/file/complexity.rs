//! The work bound of a manifest: its nesting depth and its number of YAML events, checked by
//! streaming libyaml's events (the parser `serde_yaml` itself runs on) before any decoding.
//!
//! Why: `serde_yaml` loads a whole document's events before it deserializes, and libyaml's
//! scanner does work proportional to the flow-nesting level for every token, so a file of
//! 100,000 nested `[` kept the source busy for about 50 s, stalling every other static pod.
//! Streaming stops at the first event past a limit, so a hostile file costs at most a few
//! thousand tokens' work; a well-formed pod is far inside both limits. JSON is checked by
//! the same pass (JSON is YAML flow syntax; a JSON file libyaml cannot read is left to
//! `serde_json`, whose own depth limit is 128).
//!
//! Owns the limits and the streaming check. Must not decide anything else about the
//! document: a syntax error here is not a rejection (the decoder reports it with its own
//! message).

use std::mem::MaybeUninit;

/// The deepest nesting of sequences and mappings accepted; a Pod needs about 10.
pub const MAX_NESTING_DEPTH: usize = 64;

/// The most YAML events (scalars, collection starts and ends, aliases) accepted in one
/// file: a Pod with a thousand environment variables has about 5,000. It bounds the memory
/// of the decoder's event buffer too.
pub const MAX_EVENTS: usize = 250_000;

/// What made a manifest too complex to decode.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Exceeded {
    /// Nesting deeper than this limit.
    Depth(usize),
    /// More events than this limit.
    Events(usize),
}

/// Checks `bytes` against `max_depth` and `max_events`, reading only as far as the first
/// event past a limit. Unreadable YAML passes: the decoder reports it.
pub fn check(bytes: &[u8], max_depth: usize, max_events: usize) -> Result<(), Exceeded> {
    let Some(mut parser) = Parser::new(bytes) else {
        return Ok(());
    };
    let mut depth = 0usize;
    for events in 1.. {
        let Some(kind) = parser.next_event() else {
            return Ok(());
        };
        if events > max_events {
            return Err(Exceeded::Events(max_events));
        }
        match kind {
            unsafe_libyaml::YAML_SEQUENCE_START_EVENT
            | unsafe_libyaml::YAML_MAPPING_START_EVENT => {
                depth += 1;
                if depth > max_depth {
                    return Err(Exceeded::Depth(max_depth));
                }
            }
            unsafe_libyaml::YAML_SEQUENCE_END_EVENT | unsafe_libyaml::YAML_MAPPING_END_EVENT => {
                depth = depth.saturating_sub(1);
            }
            unsafe_libyaml::YAML_STREAM_END_EVENT => return Ok(()),
            _ => {}
        }
    }
    Ok(())
}

/// A libyaml parser over borrowed bytes, deleted on drop. Boxed: libyaml keeps pointers
/// into its own struct, so it must not move once initialized.
struct Parser<'a> {
    parser: Box<MaybeUninit<unsafe_libyaml::yaml_parser_t>>,
    _input: &'a [u8],
}

impl<'a> Parser<'a> {
    fn new(input: &'a [u8]) -> Option<Parser<'a>> {
        let mut parser = Box::<unsafe_libyaml::yaml_parser_t>::new_uninit();
        // SAFETY: `initialize` fills the struct it is given; on success it is deleted in
        // `drop`. The input outlives the parser (`'a`), which reads it in place.
        unsafe {
            if unsafe_libyaml::yaml_parser_initialize(parser.as_mut_ptr()).fail {
                return None;
            }
            unsafe_libyaml::yaml_parser_set_encoding(
                parser.as_mut_ptr(),
                unsafe_libyaml::YAML_UTF8_ENCODING,
            );
            unsafe_libyaml::yaml_parser_set_input_string(
                parser.as_mut_ptr(),
                input.as_ptr(),
                input.len() as u64,
            );
        }
        Some(Parser {
            parser,
            _input: input,
        })
    }

    /// The next event's kind, or `None` at a syntax error.
    fn next_event(&mut self) -> Option<unsafe_libyaml::yaml_event_type_t> {
        let mut event = MaybeUninit::<unsafe_libyaml::yaml_event_t>::uninit();
        // SAFETY: the parser is initialized; an event that `parse` filled is deleted once.
        unsafe {
            if unsafe_libyaml::yaml_parser_parse(self.parser.as_mut_ptr(), event.as_mut_ptr()).fail
            {
                return None;
            }
            let kind = (*event.as_ptr()).type_;
            unsafe_libyaml::yaml_event_delete(event.as_mut_ptr());
            Some(kind)
        }
    }
}

impl Drop for Parser<'_> {
    fn drop(&mut self) {
        // SAFETY: initialized in `new` (a failed initialization never builds a `Parser`).
        unsafe { unsafe_libyaml::yaml_parser_delete(self.parser.as_mut_ptr()) }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn nested(open: &str, close: &str, depth: usize) -> String {
        format!("spec: {}{}\n", open.repeat(depth), close.repeat(depth))
    }

    /// `check` with the production limits.
    fn limits(text: &str) -> Result<(), Exceeded> {
        check(text.as_bytes(), MAX_NESTING_DEPTH, MAX_EVENTS)
    }

    #[test]
    fn a_pod_and_its_json_form_are_within_the_limits() {
        let yaml = "apiVersion: v1\nkind: Pod\nmetadata: {name: a, labels: {x: y}}\nspec:\n  containers:\n  - name: c\n    image: busybox\n    command: [sh, -c, 'echo [[[[ not nesting']\n";
        assert_eq!(limits(yaml), Ok(()));
        let json = r#"{"apiVersion":"v1","kind":"Pod","spec":{"containers":[{"name":"c","args":["[[[["]}]}}"#;
        assert_eq!(limits(json), Ok(()));
    }

    #[test]
    fn nesting_at_the_limit_passes_and_one_level_more_is_refused() {
        // the top-level mapping is one level
        assert_eq!(limits(&nested("[", "]", MAX_NESTING_DEPTH - 1)), Ok(()));
        let over = nested("{a: ", "}", MAX_NESTING_DEPTH);
        assert_eq!(limits(&over), Err(Exceeded::Depth(MAX_NESTING_DEPTH)));
    }

    #[test]
    fn a_hundred_thousand_nested_brackets_are_refused_after_reading_the_first_few() {
        // ten megabytes of nesting: refused at level 65, whatever follows
        let deep = nested("[", "]", 5_000_000);
        assert_eq!(limits(&deep), Err(Exceeded::Depth(MAX_NESTING_DEPTH)));
        let deep_block: String = (0..200).map(|i| format!("{}- \n", " ".repeat(i))).collect();
        assert_eq!(limits(&deep_block), Err(Exceeded::Depth(MAX_NESTING_DEPTH)));
    }

    #[test]
    fn more_events_than_the_budget_are_refused() {
        let wide = format!("spec: [{}]\n", "a,".repeat(1000));
        assert_eq!(check(wide.as_bytes(), 64, 500), Err(Exceeded::Events(500)));
        assert_eq!(check(wide.as_bytes(), 64, 2_000), Ok(()));
    }

    #[test]
    fn unreadable_yaml_is_left_to_the_decoder() {
        assert_eq!(check(b"a: [b\n c: }", 64, 100), Ok(()));
        assert_eq!(check(&[0xff, 0xfe, 0x00, 0x5b], 64, 100), Ok(()));
    }
}
