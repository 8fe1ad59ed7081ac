//! The kubelet API (port 10250): its endpoints, each a self-contained router.

pub mod container_logs;
