//! The PEM files a config names — `providers.ca_file`, `server.tls_cert` / `server.tls_key` —
//! read and checked when the config is validated, so a bad file is an error that names its key
//! before the node starts, not a handshake that fails at the first request.

use std::path::Path;
use std::sync::Arc;

use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer};

/// Every certificate in the PEM file `path`; an error when it cannot be read or holds none.
pub fn read_certificates(path: &Path) -> Result<Vec<CertificateDer<'static>>, String> {
    let text = std::fs::read(path)
        .map_err(|error| format!("cannot read `{}`: {error}", path.display()))?;
    let certificates: Result<Vec<_>, _> = CertificateDer::pem_slice_iter(&text).collect();
    match certificates {
        Ok(certificates) if !certificates.is_empty() => Ok(certificates),
        Ok(_) => Err(format!(
            "`{}` holds no PEM certificate (expected -----BEGIN CERTIFICATE-----)",
            path.display()
        )),
        Err(error) => Err(format!("`{}` is not valid PEM: {error:?}", path.display())),
    }
}

/// The HTTPS server config for `cert` (a chain, leaf first) and `key`: HTTP/2 and HTTP/1.1 by
/// ALPN. The key must belong to the leaf certificate.
pub fn server_tls(cert: &Path, key: &Path) -> Result<Arc<rustls::ServerConfig>, String> {
    let chain = read_certificates(cert)?;
    let key_text =
        std::fs::read(key).map_err(|error| format!("cannot read `{}`: {error}", key.display()))?;
    let private_key = PrivateKeyDer::from_pem_slice(&key_text).map_err(|_| {
        format!(
            "`{}` holds no PEM private key (PKCS#8, PKCS#1 or SEC1)",
            key.display()
        )
    })?;
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let mut config = rustls::ServerConfig::builder_with_provider(provider)
        .with_safe_default_protocol_versions()
        .map_err(|error| error.to_string())?
        .with_no_client_auth()
        .with_single_cert(chain, private_key)
        .map_err(|error| match error {
            rustls::Error::InconsistentKeys(_) => format!(
                "the key in `{}` does not belong to the certificate in `{}`",
                key.display(),
                cert.display()
            ),
            other => format!(
                "cannot use `{}` with `{}`: {other}",
                cert.display(),
                key.display()
            ),
        })?;
    config.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
    Ok(Arc::new(config))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair() -> (String, String) {
        let cert = rcgen::generate_simple_self_signed(vec!["localhost".into()]).unwrap();
        (cert.cert.pem(), cert.signing_key.serialize_pem())
    }

    #[test]
    fn a_matching_pair_loads_and_a_foreign_key_is_named() {
        let dir = tempfile::tempdir().unwrap();
        let (cert, key) = pair();
        let (_, other_key) = pair();
        let cert_path = dir.path().join("cert.pem");
        let key_path = dir.path().join("key.pem");
        let other_path = dir.path().join("other.pem");
        std::fs::write(&cert_path, cert).unwrap();
        std::fs::write(&key_path, key).unwrap();
        std::fs::write(&other_path, other_key).unwrap();
        let config = server_tls(&cert_path, &key_path).unwrap();
        assert_eq!(config.alpn_protocols[0], b"h2");
        let error = server_tls(&cert_path, &other_path).unwrap_err();
        assert!(
            error.contains("does not belong to the certificate"),
            "{error}"
        );
    }

    #[test]
    fn unreadable_and_non_pem_files_are_clear_errors() {
        let dir = tempfile::tempdir().unwrap();
        let missing = dir.path().join("missing.pem");
        assert!(read_certificates(&missing)
            .unwrap_err()
            .starts_with("cannot read"));
        let junk = dir.path().join("junk.pem");
        std::fs::write(&junk, "not a certificate").unwrap();
        assert!(read_certificates(&junk)
            .unwrap_err()
            .contains("holds no PEM certificate"));
        let (_, key) = pair();
        let key_only = dir.path().join("key-only.pem");
        std::fs::write(&key_only, key).unwrap();
        assert!(read_certificates(&key_only)
            .unwrap_err()
            .contains("holds no PEM certificate"));
    }
}
