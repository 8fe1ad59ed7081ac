//! What the PLEG reads (PL-14) on the real agent and runtime: a pod worker's request for a
//! fresh status is answered by the PLEG, and that read becomes the PLEG's view, so a relist
//! never reports the same status of a pod a second time.

mod support;

use ledgerlet::core::record::Event;
use support::agent::Agent;

#[test]
fn pl_14_a_workers_read_is_the_pleg_view_so_no_relist_reports_it_again() {
    // generic relisting, ten times a second: a relist right after each of the worker's
    // reads would repeat it if the read were not the PLEG's own
    let agent = Agent::start(&["--evented-pleg", "false", "--relist-period-ms", "100"]);
    agent.write_manifest(
        "reads.yaml",
        r#"apiVersion: v1
kind: Pod
metadata:
  name: reads
spec:
  restartPolicy: Always
  initContainers:
    - name: init
      image: busybox
      command: ["true"]
  containers:
    - name: main
      image: busybox
      command: ["sleep", "3600"]
"#,
    );
    agent.wait_for("the pod running", 60, |a| {
        let p = a.pod("reads")?;
        (p.status?.phase.as_deref() == Some("Running")).then_some(())
    });
    // a few more relists
    std::thread::sleep(std::time::Duration::from_secs(2));
    let records = agent.ledger();
    let uid = records
        .iter()
        .find_map(|r| match &r.event {
            Event::PodAdded(a)
                if a.pod
                    .metadata
                    .name
                    .as_deref()
                    .is_some_and(|n| n.starts_with("reads")) =>
            {
                a.pod.metadata.uid.clone()
            }
            _ => None,
        })
        .expect("the pod's PodAdded");
    let mut last = None;
    let mut answers = 0;
    let mut repeats = Vec::new();
    for r in &records {
        let Event::RuntimeStatusObserved(o) = &r.event else {
            continue;
        };
        if o.uid.as_str() != uid {
            continue;
        }
        if r.cause.is_some() {
            answers += 1;
        } else if last.as_ref() == Some(&o.status) {
            repeats.push(r.seq);
        }
        last = Some(o.status.clone());
    }
    assert!(answers >= 1, "no InspectPod was answered");
    assert!(
        repeats.is_empty(),
        "relists reported a status the pod already had: records {repeats:?}"
    );
}
