//! The serving certificate and the TLS configuration of the kubelet API.
//!
//! Owns reading `--tls-cert-file`/`--tls-private-key-file` and `--client-ca-file`, and,
//! when no certificate is given, a self-signed one made once under `<root-dir>/pki/`
//! (`kubelet.crt`, `kubelet.key`) and reused after restarts, as the kubelet does. Must not
//! require a client certificate: a request without one may still carry a bearer token.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::Context;
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// Where the serving certificate comes from.
#[derive(Clone, Debug, Default)]
pub struct TlsFiles {
    /// `--tls-cert-file` (with `--tls-private-key-file`).
    pub cert: Option<PathBuf>,
    /// `--tls-private-key-file`.
    pub key: Option<PathBuf>,
    /// `--client-ca-file`.
    pub client_ca: Option<PathBuf>,
}

/// The certificate chain and key from the given files, or the self-signed pair under
/// `root_dir/pki`, made for `names` (DNS names and IP addresses) if it is not there yet.
pub fn serving_pair(
    files: &TlsFiles,
    root_dir: &Path,
    names: &[String],
) -> anyhow::Result<(
    Vec<CertificateDer<'static>>,
    PrivateKeyDer<'static>,
    PathBuf,
)> {
    let (cert, key) = match (&files.cert, &files.key) {
        (Some(c), Some(k)) => (c.clone(), k.clone()),
        (None, None) => self_signed(root_dir, names)?,
        _ => anyhow::bail!(
            "--tls-cert-file and --tls-private-key-file go together: give both or neither"
        ),
    };
    let chain = CertificateDer::pem_file_iter(&cert)
        .and_then(|it| it.collect::<Result<Vec<_>, _>>())
        .with_context(|| {
            format!(
                "cannot read the certificate {} (--tls-cert-file)",
                cert.display()
            )
        })?;
    anyhow::ensure!(
        !chain.is_empty(),
        "no certificate in {} (--tls-cert-file)",
        cert.display()
    );
    let key_der = PrivateKeyDer::from_pem_file(&key).with_context(|| {
        format!(
            "cannot read the private key {} (--tls-private-key-file)",
            key.display()
        )
    })?;
    Ok((chain, key_der, cert))
}

/// `root_dir/pki/kubelet.{crt,key}`, made now if either is missing.
fn self_signed(root_dir: &Path, names: &[String]) -> anyhow::Result<(PathBuf, PathBuf)> {
    let dir = root_dir.join("pki");
    let (cert, key) = (dir.join("kubelet.crt"), dir.join("kubelet.key"));
    if cert.exists() && key.exists() {
        return Ok((cert, key));
    }
    std::fs::create_dir_all(&dir).with_context(|| format!("cannot create {}", dir.display()))?;
    let mut params = rcgen::CertificateParams::new(Vec::<String>::new())
        .context("self-signed serving certificate")?;
    for n in names.iter().filter(|n| !n.is_empty()) {
        let san = match n.parse::<std::net::IpAddr>() {
            Ok(ip) => rcgen::SanType::IpAddress(ip),
            // a name that cannot be a DNS SAN (odd characters) is left out, not fatal
            Err(_) => match n.clone().try_into() {
                Ok(dns) => rcgen::SanType::DnsName(dns),
                Err(_) => continue,
            },
        };
        if !params.subject_alt_names.contains(&san) {
            params.subject_alt_names.push(san);
        }
    }
    let cn = names.first().cloned().unwrap_or_else(|| "ledgerlet".into());
    params
        .distinguished_name
        .push(rcgen::DnType::CommonName, format!("{cn}@ledgerlet"));
    params.extended_key_usages = vec![rcgen::ExtendedKeyUsagePurpose::ServerAuth];
    let pair = rcgen::KeyPair::generate().context("generate the serving key")?;
    let made = params
        .self_signed(&pair)
        .context("self-sign the serving certificate")?;
    write_private(&key, pair.serialize_pem().as_bytes())?;
    std::fs::write(&cert, made.pem())
        .with_context(|| format!("cannot write {}", cert.display()))?;
    Ok((cert, key))
}

fn write_private(path: &Path, bytes: &[u8]) -> anyhow::Result<()> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let mut f = std::fs::OpenOptions::new()
        .write(true)
        .create(true)
        .truncate(true)
        .mode(0o600)
        .open(path)
        .with_context(|| format!("cannot write {}", path.display()))?;
    f.write_all(bytes)
        .with_context(|| format!("cannot write {}", path.display()))
}

/// The server configuration: HTTP/1.1 only; a client certificate is verified against the
/// client CA when one is given and presented, and optional.
pub fn server_config(
    files: &TlsFiles,
    chain: Vec<CertificateDer<'static>>,
    key: PrivateKeyDer<'static>,
) -> anyhow::Result<rustls::ServerConfig> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = rustls::ServerConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .context("TLS protocol versions")?;
    let builder = match &files.client_ca {
        None => builder.with_no_client_auth(),
        Some(ca) => {
            let mut roots = rustls::RootCertStore::empty();
            let certs = CertificateDer::pem_file_iter(ca)
                .and_then(|it| it.collect::<Result<Vec<_>, _>>())
                .with_context(|| format!("cannot read {} (--client-ca-file)", ca.display()))?;
            for c in certs {
                roots.add(c).with_context(|| {
                    format!(
                        "a bad CA certificate in {} (--client-ca-file)",
                        ca.display()
                    )
                })?;
            }
            anyhow::ensure!(
                !roots.is_empty(),
                "no certificate in {} (--client-ca-file)",
                ca.display()
            );
            let verifier = rustls::server::WebPkiClientVerifier::builder_with_provider(
                Arc::new(roots),
                provider,
            )
            .allow_unauthenticated()
            .build()
            .context("client certificate verifier (--client-ca-file)")?;
            builder.with_client_cert_verifier(verifier)
        }
    };
    let mut config = builder.with_single_cert(chain, key).context(
        "the serving certificate and key do not match (--tls-cert-file/--tls-private-key-file)",
    )?;
    config.alpn_protocols = vec![b"http/1.1".to_vec()];
    Ok(config)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_self_signed_pair_is_made_once_and_reused() {
        let root = tempfile::tempdir().unwrap();
        let names = vec!["node-a".to_string(), "127.0.0.1".to_string()];
        let files = TlsFiles::default();
        let (chain, _, path) = serving_pair(&files, root.path(), &names).unwrap();
        assert_eq!(path, root.path().join("pki/kubelet.crt"));
        let (again, _, _) = serving_pair(&files, root.path(), &names).unwrap();
        assert_eq!(chain, again);
        let mode = std::fs::metadata(root.path().join("pki/kubelet.key")).unwrap();
        use std::os::unix::fs::PermissionsExt;
        assert_eq!(mode.permissions().mode() & 0o777, 0o600);
        let (chain, key, _) = serving_pair(&files, root.path(), &names).unwrap();
        server_config(&files, chain, key).unwrap();
    }

    #[test]
    fn a_certificate_without_its_key_is_refused_naming_both_flags() {
        let files = TlsFiles {
            cert: Some("/x.crt".into()),
            ..TlsFiles::default()
        };
        let e = serving_pair(&files, Path::new("/nonexistent"), &[]).unwrap_err();
        assert!(format!("{e:#}").contains("--tls-private-key-file"), "{e:#}");
    }
}
