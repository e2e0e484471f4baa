//! TLS to the database when the URL asks for it, with libpq's `sslmode`
//! meanings (tokio-postgres itself knows only `disable`, `prefer` and
//! `require`, and no `sslrootcert`):
//!
//! - `disable`: plain; `prefer` (libpq's default): TLS when the server offers
//!   it, plain otherwise; `require`: TLS or nothing. These two check no
//!   certificate, as libpq, unless `sslrootcert` names a file: then the
//!   certificate must chain to it (libpq's `verify-ca`).
//! - `verify-ca`: TLS with a certificate that chains to a trusted root;
//!   `verify-full`: that, and valid for the host connected to.
//!
//! Trusted roots: the PEM file `sslrootcert` names, else the system's
//! (`rustls-native-certs`, which honours `SSL_CERT_FILE` and `SSL_CERT_DIR`).
//! The connector is rustls with ring (no OpenSSL, no aws-lc or cmake).

use std::sync::Arc;

use rustls::client::WebPkiServerVerifier;
use rustls::client::danger::{HandshakeSignatureValid, ServerCertVerified, ServerCertVerifier};
use rustls::crypto::{WebPkiSupportedAlgorithms, verify_tls12_signature, verify_tls13_signature};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, ServerName, UnixTime};
use rustls::{
    CertificateError, ClientConfig, DigitallySignedStruct, Error as TlsError, RootCertStore, SignatureScheme,
};
use tokio_postgres_rustls::MakeRustlsConnect;

use super::url::Pairs;

/// How much TLS a URL asks for (libpq's `sslmode`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SslMode {
    /// No TLS.
    Disable,
    /// TLS when the server offers it (the default).
    Prefer,
    /// TLS, any certificate (or one chaining to `sslrootcert` when given).
    Require,
    /// TLS, a certificate chaining to a trusted root.
    VerifyCa,
    /// TLS, a trusted certificate valid for the host.
    VerifyFull,
}

/// A database URL with the TLS settings tokio-postgres does not parse taken out.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct TlsUrl {
    /// The URL for tokio-postgres (`sslmode` mapped onto its three modes,
    /// `sslrootcert` removed).
    pub url: String,
    /// The mode asked for.
    pub mode: SslMode,
    /// The roots file asked for (`None`, or `system`: the system's roots).
    pub rootcert: Option<String>,
}

/// Take `sslmode` and `sslrootcert` out of `url` (either form: a
/// `postgres://` URL's query, or `key=value` pairs). An unknown `sslmode`
/// is an error naming it.
pub fn split(url: &str) -> Result<TlsUrl, String> {
    let Pairs { head, pairs, sep } = Pairs::of(url);
    let (mut mode, mut rootcert, mut kept) = (SslMode::Prefer, None, Vec::new());
    for pair in pairs {
        match pair.split_once('=') {
            Some(("sslmode", value)) => {
                mode = match super::url::value(value).as_str() {
                    "disable" | "allow" => SslMode::Disable,
                    "prefer" => SslMode::Prefer,
                    "require" => SslMode::Require,
                    "verify-ca" => SslMode::VerifyCa,
                    "verify-full" => SslMode::VerifyFull,
                    other => {
                        return Err(format!(
                            "sslmode `{other}` is not one of disable, allow, prefer, require, verify-ca, verify-full"
                        ));
                    }
                };
                let base = match mode {
                    SslMode::Disable => "disable",
                    SslMode::Prefer => "prefer",
                    _ => "require",
                };
                kept.push(format!("sslmode={base}"));
            }
            Some(("sslrootcert", value)) => rootcert = Some(super::url::value(value)),
            _ => kept.push(pair),
        }
    }
    Ok(TlsUrl { url: Pairs { head, pairs: kept, sep }.url(), mode, rootcert })
}

/// The connector for `mode` with the roots of `rootcert`. Errors name the
/// roots file that could not be read.
pub fn connector(mode: SslMode, rootcert: Option<&str>) -> Result<MakeRustlsConnect, String> {
    let provider = Arc::new(rustls::crypto::ring::default_provider());
    let builder = ClientConfig::builder_with_provider(provider.clone())
        .with_safe_default_protocol_versions()
        .map_err(|e| format!("TLS setup: {e}"))?;
    let file = rootcert.filter(|r| *r != "system");
    let checks = match mode {
        SslMode::Disable | SslMode::Prefer | SslMode::Require if file.is_none() => Checks::None,
        SslMode::VerifyFull => Checks::Full,
        _ => Checks::Chain,
    };
    let config = match checks {
        Checks::None => builder
            .dangerous()
            .with_custom_certificate_verifier(Arc::new(AnyCertificate(provider.signature_verification_algorithms)))
            .with_no_client_auth(),
        _ => {
            let roots = roots(file)?;
            let webpki = WebPkiServerVerifier::builder_with_provider(Arc::new(roots), provider)
                .build()
                .map_err(|e| format!("TLS roots: {e}"))?;
            match checks {
                Checks::Full => builder.with_webpki_verifier(webpki).with_no_client_auth(),
                _ => builder
                    .dangerous()
                    .with_custom_certificate_verifier(Arc::new(AnyName(webpki)))
                    .with_no_client_auth(),
            }
        }
    };
    Ok(MakeRustlsConnect::new(config))
}

enum Checks {
    None,
    Chain,
    Full,
}

/// The roots in the PEM file `file`, or the system's.
fn roots(file: Option<&str>) -> Result<RootCertStore, String> {
    let mut roots = RootCertStore::empty();
    match file {
        Some(path) => {
            let certs = CertificateDer::pem_file_iter(path)
                .and_then(|certs| certs.collect::<Result<Vec<_>, _>>())
                .map_err(|e| format!("cannot read sslrootcert {path}: {e}"))?;
            let (added, _) = roots.add_parsable_certificates(certs);
            if added == 0 {
                return Err(format!("sslrootcert {path} holds no certificate"));
            }
        }
        None => {
            let found = rustls_native_certs::load_native_certs();
            roots.add_parsable_certificates(found.certs);
            if roots.is_empty() {
                return Err("no trusted roots on this system (install ca-certificates, set SSL_CERT_FILE, or give \
                            sslrootcert)"
                    .into());
            }
        }
    }
    Ok(roots)
}

/// `require` and `prefer` without roots: encrypt, trust any certificate
/// (libpq's meaning; the handshake's signatures are still checked).
#[derive(Debug)]
struct AnyCertificate(WebPkiSupportedAlgorithms);

impl ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: UnixTime,
    ) -> Result<ServerCertVerified, TlsError> {
        Ok(ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, TlsError> {
        verify_tls12_signature(message, cert, dss, &self.0)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, TlsError> {
        verify_tls13_signature(message, cert, dss, &self.0)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_schemes()
    }
}

/// `verify-ca`: the chain must lead to a trusted root; the host name is
/// not checked.
#[derive(Debug)]
struct AnyName(Arc<WebPkiServerVerifier>);

impl ServerCertVerifier for AnyName {
    fn verify_server_cert(
        &self,
        end_entity: &CertificateDer<'_>,
        intermediates: &[CertificateDer<'_>],
        server_name: &ServerName<'_>,
        ocsp_response: &[u8],
        now: UnixTime,
    ) -> Result<ServerCertVerified, TlsError> {
        match self.0.verify_server_cert(end_entity, intermediates, server_name, ocsp_response, now) {
            Err(TlsError::InvalidCertificate(
                CertificateError::NotValidForName | CertificateError::NotValidForNameContext { .. },
            )) => Ok(ServerCertVerified::assertion()),
            other => other,
        }
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, TlsError> {
        self.0.verify_tls12_signature(message, cert, dss)
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &DigitallySignedStruct,
    ) -> Result<HandshakeSignatureValid, TlsError> {
        self.0.verify_tls13_signature(message, cert, dss)
    }

    fn supported_verify_schemes(&self) -> Vec<SignatureScheme> {
        self.0.supported_verify_schemes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tls_settings_are_taken_out_of_both_url_forms() {
        for (url, want_url, mode, root) in [
            ("postgres://u@h/db", "postgres://u@h/db", SslMode::Prefer, None),
            ("postgres://u@h/db?sslmode=require", "postgres://u@h/db?sslmode=require", SslMode::Require, None),
            (
                "postgres://u:pw@h/db?sslmode=verify-full&sslrootcert=%2Ftmp%2Fca.crt&connect_timeout=3",
                "postgres://u:pw@h/db?sslmode=require&connect_timeout=3",
                SslMode::VerifyFull,
                Some("/tmp/ca.crt"),
            ),
            ("postgres://h/db?sslrootcert=/ca.pem", "postgres://h/db", SslMode::Prefer, Some("/ca.pem")),
            (
                "host=h dbname=d sslmode=verify-ca sslrootcert=/ca.pem",
                "host=h dbname=d sslmode=require",
                SslMode::VerifyCa,
                Some("/ca.pem"),
            ),
            ("host=h sslmode=disable", "host=h sslmode=disable", SslMode::Disable, None),
        ] {
            let got = split(url).unwrap();
            assert_eq!((got.url.as_str(), got.mode, got.rootcert.as_deref()), (want_url, mode, root), "{url}");
        }
        let err = split("postgres://h/db?sslmode=sometimes").unwrap_err();
        assert!(err.contains("sslmode `sometimes`"), "{err}");
    }

    #[test]
    fn an_unreadable_roots_file_is_named() {
        let err = connector(SslMode::VerifyFull, Some("/nonexistent/ca.crt")).err().unwrap();
        assert!(err.contains("/nonexistent/ca.crt"), "{err}");
        assert!(connector(SslMode::Require, None).is_ok(), "require checks no certificate and needs no roots");
    }
}
