//! The TLS settings of the native HTTP client (rustls, ring provider): the server's certificate
//! is verified, with its host name, against the operating system's trust store (read once, by
//! `rustls-native-certs`) or against the CA certificates of a PEM file given instead. Turning
//! verification off takes an explicit [`Verify::DangerouslyNone`]; nothing else turns it off.

use std::path::{Path, PathBuf};
use std::sync::{Arc, OnceLock};

use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{verify_tls12_signature, verify_tls13_signature, CryptoProvider};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{ClientConfig, DigitallySignedStruct, RootCertStore, SignatureScheme};

use crate::error::{Error, Result};

/// Whom the client trusts.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub enum Verify {
    /// The operating system's trust store, host name checked (the default).
    #[default]
    System,
    /// The CA certificates of this PEM file instead of the system's, host name checked.
    CaFile(PathBuf),
    /// Any certificate for any name: anyone on the path can read and forge the traffic. Only
    /// for a test against a server whose certificate cannot be made right.
    DangerouslyNone,
}

fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// The client configuration for `verify` (ALPN is set by the connector).
pub fn client_config(verify: &Verify) -> Result<ClientConfig> {
    let builder = ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .map_err(|e| Error::Invalid(format!("TLS: {e}")))?;
    let config = match verify {
        Verify::System => builder
            .with_root_certificates(system_roots()?)
            .with_no_client_auth(),
        Verify::CaFile(path) => builder
            .with_root_certificates(file_roots(path)?)
            .with_no_client_auth(),
        Verify::DangerouslyNone => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(NoVerification(provider())))
            .with_no_client_auth(),
    };
    Ok(config)
}

/// The system's trust store, read on first use and kept (an empty or unreadable one is an
/// error each time it is asked for, naming the way out: a CA file).
fn system_roots() -> Result<RootCertStore> {
    static ROOTS: OnceLock<std::result::Result<RootCertStore, String>> = OnceLock::new();
    ROOTS
        .get_or_init(|| {
            let found = rustls_native_certs::load_native_certs();
            let mut store = RootCertStore::empty();
            let (added, _ignored) = store.add_parsable_certificates(found.certs);
            if added == 0 {
                let why = found
                    .errors
                    .first()
                    .map_or_else(|| "none found".to_owned(), ToString::to_string);
                return Err(format!(
                    "no CA certificate could be read from the operating system's trust store \
                     ({why}): install one (ca-certificates) or give a CA file"
                ));
            }
            Ok(store)
        })
        .clone()
        .map_err(Error::Invalid)
}

fn file_roots(path: &Path) -> Result<RootCertStore> {
    let certs = CertificateDer::pem_file_iter(path)
        .and_then(|iter| iter.collect::<std::result::Result<Vec<_>, _>>())
        .map_err(|e| Error::Io {
            path: path.to_owned(),
            message: format!("cannot read CA certificates (PEM): {e}"),
        })?;
    let mut store = RootCertStore::empty();
    let (added, _ignored) = store.add_parsable_certificates(certs);
    if added == 0 {
        return Err(Error::Io {
            path: path.to_owned(),
            message: "holds no usable CA certificate (PEM `BEGIN CERTIFICATE` blocks)".into(),
        });
    }
    Ok(store)
}

/// Accepts every certificate (signatures are still checked, so the handshake is well formed).
#[derive(Debug)]
struct NoVerification(Arc<CryptoProvider>);

impl ServerCertVerifier for NoVerification {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp: &[u8],
        _now: UnixTime,
    ) -> std::result::Result<ServerCertVerified, rustls::Error> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> std::result::Result<HandshakeSignatureValid, rustls::Error> {
        verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_ca_file_that_is_missing_or_holds_no_certificate_says_so() {
        let missing = client_config(&Verify::CaFile("/nonexistent/ca.pem".into())).unwrap_err();
        assert!(missing
            .to_string()
            .starts_with("/nonexistent/ca.pem: cannot read"));
        let dir = std::env::temp_dir().join(format!("cmdc_tls_{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let empty = dir.join("empty.pem");
        std::fs::write(&empty, "not a certificate\n").unwrap();
        let err = client_config(&Verify::CaFile(empty)).unwrap_err();
        assert!(
            err.to_string().contains("holds no usable CA certificate"),
            "{err}"
        );
        std::fs::remove_dir_all(dir).unwrap();
    }

    #[test]
    fn verification_off_is_possible_only_by_name() {
        assert_eq!(Verify::default(), Verify::System);
        assert!(client_config(&Verify::DangerouslyNone).is_ok());
    }
}
