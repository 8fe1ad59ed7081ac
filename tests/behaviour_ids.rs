//! Every behaviour ID cited in the repository (`PW-12`, `SM-04`, `RT-09b`, …) must be defined
//! in `docs/behaviour.md`, the project's behaviour spec, as a line starting with `**ID `.
//!
//! The walk covers `src/`, `tests/`, `benches/`, `docs/` and `README.md`. An ID is what the
//! pattern `\b[A-Z]{2,4}-[0-9]{2}[a-z]?\b` matches (the optional letter is for IDs inserted
//! between two others, like `RT-09b`); the matching is written by hand, without a regex crate.

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

/// Tokens that have the shape of a behaviour ID but are not one, each with what it is. Add to
/// this list rather than rewording the text that contains the token.
const NOT_BEHAVIOUR_IDS: &[(&str, &str)] = &[
    (
        "FNV-32a",
        "the 32-bit FNV-1a hash the kubelet uses for container specs (docs/runtime-plan.md)",
    ),
    ("UTF-16", "a character encoding"),
    ("UTF-32", "a character encoding"),
];

/// What is searched for citations, relative to the repository root.
const CITING_PATHS: &[&str] = &["src", "tests", "benches", "docs", "README.md"];

/// The spec that defines the IDs.
const SPEC: &str = "docs/behaviour.md";

fn is_word(c: char) -> bool {
    c.is_alphanumeric() || c == '_'
}

/// Every ID-shaped token in `line`, as `\b[A-Z]{2,4}-[0-9]{2}[a-z]?\b` would find them.
fn ids_in(line: &str) -> Vec<&str> {
    let chars: Vec<(usize, char)> = line.char_indices().collect();
    let at = |i: usize| chars.get(i).map(|&(_, c)| c);
    let byte = |i: usize| chars.get(i).map_or(line.len(), |&(b, _)| b);
    let mut found = Vec::new();
    let mut i = 0;
    while i < chars.len() {
        // a word starts here: the previous character is not a word character
        let starts_word = i == 0 || !at(i - 1).is_some_and(is_word);
        let letters = (i..)
            .take_while(|&k| at(k).is_some_and(|c| c.is_ascii_uppercase()))
            .count();
        if !starts_word || !(2..=4).contains(&letters) {
            i += 1;
            continue;
        }
        let dash = i + letters;
        let digits_ok = at(dash) == Some('-')
            && at(dash + 1).is_some_and(|c| c.is_ascii_digit())
            && at(dash + 2).is_some_and(|c| c.is_ascii_digit());
        if digits_ok {
            let mut end = dash + 3;
            // an optional lowercase suffix letter, if a word boundary follows it
            if at(end).is_some_and(|c| c.is_ascii_lowercase()) && !at(end + 1).is_some_and(is_word)
            {
                end += 1;
            }
            if !at(end).is_some_and(is_word) {
                found.push(&line[byte(i)..byte(end)]);
                i = end;
                continue;
            }
        }
        i += 1;
    }
    found
}

fn collect_files(path: &Path, out: &mut Vec<PathBuf>) {
    let meta = fs::metadata(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    if meta.is_dir() {
        let mut entries: Vec<PathBuf> = fs::read_dir(path)
            .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
            .map(|e| e.expect("directory entry").path())
            .collect();
        entries.sort();
        for entry in entries {
            collect_files(&entry, out);
        }
    } else if meta.is_file() {
        out.push(path.to_path_buf());
    }
}

/// The IDs `docs/behaviour.md` defines, with how often each is defined.
fn defined_ids(root: &Path) -> BTreeMap<String, usize> {
    let spec = fs::read_to_string(root.join(SPEC)).expect("docs/behaviour.md exists");
    let mut defined = BTreeMap::new();
    for line in spec.lines() {
        let Some(rest) = line.strip_prefix("**") else {
            continue;
        };
        if let Some(id) = ids_in(rest).first() {
            if rest.starts_with(&format!("{id} ")) {
                *defined.entry(id.to_string()).or_insert(0) += 1;
            }
        }
    }
    defined
}

#[test]
fn every_behaviour_id_cited_in_the_repository_is_defined_in_docs_behaviour_md() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let defined = defined_ids(root);
    assert!(
        defined.len() > 100,
        "docs/behaviour.md defines only {} IDs: is the `**ID ` line format still used?",
        defined.len()
    );
    let duplicated: Vec<_> = defined.iter().filter(|(_, &n)| n > 1).collect();
    assert!(
        duplicated.is_empty(),
        "defined more than once in docs/behaviour.md: {duplicated:?}"
    );

    let mut files = Vec::new();
    for p in CITING_PATHS {
        collect_files(&root.join(p), &mut files);
    }
    // undefined ID → where it is cited
    let mut undefined: BTreeMap<&str, Vec<String>> = BTreeMap::new();
    let mut cited: BTreeSet<String> = BTreeSet::new();
    let contents: Vec<(String, String)> = files
        .iter()
        .map(|f| {
            let bytes = fs::read(f).unwrap_or_else(|e| panic!("{}: {e}", f.display()));
            let rel = f.strip_prefix(root).unwrap_or(f).display().to_string();
            (rel, String::from_utf8_lossy(&bytes).into_owned())
        })
        .collect();
    for (rel, text) in &contents {
        for (n, line) in text.lines().enumerate() {
            for id in ids_in(line) {
                if NOT_BEHAVIOUR_IDS.iter().any(|&(not_id, _)| not_id == id) {
                    continue;
                }
                cited.insert(id.to_string());
                if !defined.contains_key(id) {
                    undefined
                        .entry(id)
                        .or_default()
                        .push(format!("{rel}:{}", n + 1));
                }
            }
        }
    }
    assert!(
        cited.len() > 50,
        "only {} distinct IDs cited: is the walk finding the sources?",
        cited.len()
    );
    if !undefined.is_empty() {
        let list: Vec<String> = undefined
            .iter()
            .map(|(id, at)| format!("  {id}: cited at {}", at.join(", ")))
            .collect();
        panic!(
            "{} behaviour ID(s) cited but not defined in docs/behaviour.md (add an entry \
             `**ID Title.** …`, or, if the token is not a behaviour ID, add it to \
             NOT_BEHAVIOUR_IDS in tests/behaviour_ids.rs):\n{}",
            undefined.len(),
            list.join("\n")
        );
    }
}

#[test]
fn the_id_matcher_finds_ids_and_only_ids() {
    assert_eq!(ids_in("pinned by PL-10 and SM-04."), ["PL-10", "SM-04"]);
    assert_eq!(
        ids_in("RT-07…RT-09b and (PW-05)"),
        ["RT-07", "RT-09b", "PW-05"]
    );
    assert_eq!(ids_in("**RT-33 Sidecars"), ["RT-33"]);
    // not IDs: too long or short a prefix, lowercase, glued to a word, three digits
    assert!(ids_in("ABCDE-12 X-25 pod-01 xPW-01 PW-012 PW-01x2 DNS-1123 SHA-256").is_empty());
    assert_eq!(ids_in("FNV-32a"), ["FNV-32a"]);
    assert_eq!(ids_in("ÄPW-01 PW-01_x"), Vec::<&str>::new());
}
