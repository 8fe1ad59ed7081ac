//! The static pod manifest decoder on YAML input: `ledgerlet::sources::file::parse_manifest`
//! (decode, then defaulting and validation) for a file named `*.yaml`. Any `Err` is fine;
//! a panic, a stall (> 2 s, see scripts/fuzz.sh) or an allocation past the RSS limit is a
//! finding.
#![no_main]

use std::path::Path;

use ledgerlet::ledger::Time;
use ledgerlet::sources::file::parse_manifest;
use libfuzzer_sys::fuzz_target;

fuzz_target!(|data: &[u8]| {
    let path = Path::new("/etc/kubernetes/manifests/fuzz.yaml");
    match parse_manifest(path, data, "node-a", Time::from_unix_secs(1_767_225_600)) {
        // what the source does with the result: the error becomes a ManifestRejected
        // message, the pods go into PodAdded events
        Err(e) => drop(e.to_string()),
        Ok(m) => {
            for (i, pod) in &m.pods {
                let _ = m.label(*i);
                drop(serde_json::to_vec(pod));
            }
        }
    }
});
