//! Starting the test API server the way every cluster test does: on a two-thread tokio
//! runtime of its own, with a kubeconfig file that points the agent (or a client) at it.
//!
//! Owns only that set-up. Must not be used outside tests and benches. Include it next to
//! the server: `#[path = "support/apiserver.rs"] mod apiserver;` and
//! `#[path = "support/api_fixture.rs"] mod api_fixture;`.

use crate::apiserver::TestApiServer;

/// The runtime the server runs on (keep it alive as long as the server), the server, and a
/// kubeconfig file naming it (deleted when dropped).
pub fn start() -> (
    tokio::runtime::Runtime,
    TestApiServer,
    tempfile::NamedTempFile,
) {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()
        .expect("a tokio runtime for the test API server");
    let api = rt.block_on(TestApiServer::start());
    let kubeconfig = kubeconfig_for(&api.url());
    (rt, api, kubeconfig)
}

/// A kubeconfig file with one cluster at `server_url` and an anonymous user.
pub fn kubeconfig_for(server_url: &str) -> tempfile::NamedTempFile {
    let file = tempfile::NamedTempFile::new().expect("a temporary kubeconfig file");
    std::fs::write(
        file.path(),
        format!(
            "apiVersion: v1\nkind: Config\nclusters:\n- name: test\n  cluster:\n    server: {server_url}\ncontexts:\n- name: test\n  context:\n    cluster: test\n    user: test\ncurrent-context: test\nusers:\n- name: test\n  user: {{}}\n"
        ),
    )
    .expect("write the kubeconfig");
    file
}
