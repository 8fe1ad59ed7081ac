//! A node's ledger read through the API server, for `explain`, `diff` and `replay` run from a
//! workstation: `GET /api/v1/nodes/NODE/proxy/debug/ledger` with the credentials of a
//! kubeconfig (the node's kubelet API authorizes it as `nodes/proxy`).
//!
//! Owns the request, the bound on what it downloads and the temporary file it lands in. Must
//! not keep the file (it is removed when the [`Fetched`] is dropped) or print credentials.

use std::io::Write;
use std::path::{Path, PathBuf};

use clap::Args;

/// The most a download may hold (a bigger ledger: export it on the node instead).
pub const MAX_REMOTE_LEDGER_BYTES: u64 = 1 << 30;

/// Where a ledger comes from when it is not a file.
#[derive(Args, Debug, Clone, Default)]
pub struct RemoteLedger {
    /// Read the ledger of this node through the API server instead of a file (the node's
    /// kubelet API, authorized as `nodes/proxy`).
    #[arg(long, value_name = "NODE", requires = "kubeconfig")]
    pub node: Option<String>,
    /// The kubeconfig for `--node` (its current context).
    #[arg(long, value_name = "FILE")]
    pub kubeconfig: Option<PathBuf>,
}

/// A downloaded ledger in a temporary file, removed when dropped.
pub struct Fetched {
    /// The file.
    pub path: PathBuf,
}

impl Drop for Fetched {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.path);
    }
}

/// The path of `node`'s `/debug/ledger` (the whole ledger: a fold needs every record)
/// through the API server.
pub fn proxy_path(node: &str) -> String {
    format!("/api/v1/nodes/{}/proxy/debug/ledger", percent(node))
}

/// Percent-encodes everything but unreserved characters.
fn percent(s: &str) -> String {
    s.bytes()
        .map(|b| match b {
            b'A'..=b'Z' | b'a'..=b'z' | b'0'..=b'9' | b'-' | b'.' | b'_' | b'~' => {
                (b as char).to_string()
            }
            _ => format!("%{b:02X}"),
        })
        .collect()
}

/// Downloads `node`'s ledger through the API server of `kubeconfig`
/// into a temporary file. The error says what failed: the kubeconfig, the API server's
/// answer (e.g. `403 Forbidden: nodes "n" is forbidden: …`), or the size bound.
pub fn fetch(kubeconfig: &Path, node: &str) -> Result<Fetched, String> {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("cannot start the async runtime: {e}"))?;
    let path = std::env::temp_dir().join(format!(
        "ledgerlet-{}-{}.ndjson",
        percent(node),
        std::process::id()
    ));
    let fetched = Fetched { path };
    rt.block_on(download(kubeconfig, node, &fetched.path))?;
    Ok(fetched)
}

async fn download(kubeconfig: &Path, node: &str, to: &Path) -> Result<(), String> {
    use futures::AsyncReadExt;
    let kc = kube::config::Kubeconfig::read_from(kubeconfig)
        .map_err(|e| format!("cannot read --kubeconfig {}: {e}", kubeconfig.display()))?;
    let config = kube::Config::from_custom_kubeconfig(kc, &Default::default())
        .await
        .map_err(|e| format!("invalid --kubeconfig {}: {e}", kubeconfig.display()))?;
    let client = kube::Client::try_from(config)
        .map_err(|e| format!("cannot build a client from {}: {e}", kubeconfig.display()))?;
    let uri = proxy_path(node);
    let request = axum::http::Request::get(&uri)
        .body(Vec::new())
        .map_err(|e| format!("GET {uri}: {e}"))?;
    let mut body = client.request_stream(request).await.map_err(|e| match e {
        kube::Error::Api(s) => format!(
            "the API server answered {} {}: {} (GET {uri})",
            s.code, s.reason, s.message
        ),
        other => format!("GET {uri}: {other}"),
    })?;
    let mut file =
        std::fs::File::create(to).map_err(|e| format!("cannot write {}: {e}", to.display()))?;
    let mut buf = vec![0u8; 64 * 1024];
    let mut total: u64 = 0;
    loop {
        let n = body
            .read(&mut buf)
            .await
            .map_err(|e| format!("reading the ledger of node {node}: {e}"))?;
        if n == 0 {
            break;
        }
        total += n as u64;
        if total > MAX_REMOTE_LEDGER_BYTES {
            return Err(format!(
                "the ledger of node {node} is larger than {MAX_REMOTE_LEDGER_BYTES} bytes: \
                 export it on the node (`ledgerlet ledger export`) and read the file"
            ));
        }
        file.write_all(&buf[..n])
            .map_err(|e| format!("cannot write {}: {e}", to.display()))?;
    }
    file.flush()
        .map_err(|e| format!("cannot write {}: {e}", to.display()))
}

#[cfg(test)]
mod tests {
    use super::proxy_path;

    #[test]
    fn the_proxy_path_escapes_the_node_name() {
        assert_eq!(
            proxy_path("node-a"),
            "/api/v1/nodes/node-a/proxy/debug/ledger"
        );
        assert_eq!(
            proxy_path("n a/../x"),
            "/api/v1/nodes/n%20a%2F..%2Fx/proxy/debug/ledger"
        );
    }
}
