//! CRI (Container Runtime Interface) API: the generated `runtime.v1` protobuf
//! and gRPC code, and [`CriClient`], the agent's client for a CRI runtime on a
//! unix socket.
//!
//! Owns: the wire types and the client side of the conversation with a
//! runtime, including containerd's own task-exit events on the same socket
//! (a containerd whose CRI plugin has no event stream). Must not: hold
//! pod/container policy (that is the agent's job) or talk to anything but one
//! CRI endpoint.

/// Generated from `proto/cri/api.proto` (package `runtime.v1`).
#[allow(clippy::all, missing_docs, rustdoc::all)]
pub mod v1 {
    tonic::include_proto!("runtime.v1");
}

/// Generated from `proto/containerd/events/v1/events.proto` (containerd's event service,
/// the task-exit part).
#[allow(clippy::all, missing_docs, rustdoc::all)]
pub mod containerd_events {
    tonic::include_proto!("containerd.services.events.v1");
}

mod client;

pub(crate) use client::parse_unix_endpoint;
pub use client::{
    CriClient, CriClientOptions, CriError, DEFAULT_CONNECT_TIMEOUT_MS, DEFAULT_REQUEST_TIMEOUT_MS,
    MAX_MESSAGE_SIZE,
};
