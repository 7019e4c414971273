//! TLS settings for the gem's Redis connections (rustls with the ring provider; TLS 1.2 and 1.3).
//!
//! - A `rediss://` URL, or `force` on a `redis://` one (Sidekiq 7's `ssl: true`), turns TLS on.
//! - Server certificates are checked against the system roots (`SSL_CERT_FILE` honoured), or against
//!   `ca_file` alone when given, as Ruby's OpenSSL does.
//! - `cert_file` + `key_file`: a client certificate (mutual TLS).
//! - `verify_peer: false` accepts any certificate (Heroku-style "verify none");
//!   `verify_hostname: false` checks the chain but not the name.
//!
//! Files are read when the client is built, so a missing file is a configuration error naming it.
//! The handshake runs inside redis-rs' connection setup, under the connect timeout.

use std::sync::Once;

use redis::{Client, ClientTlsConfig, ConnectionAddr, ConnectionInfo, TlsCertificates};

use crate::error::{Error, Result};

#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct TlsOptions {
    /// TLS even on a `redis://` URL.
    pub force: bool,
    pub ca_file: Option<String>,
    pub cert_file: Option<String>,
    pub key_file: Option<String>,
    /// PEM text instead of a file (a certificate and key taken from Sidekiq's `ssl_params`).
    pub cert_pem: Option<String>,
    pub key_pem: Option<String>,
    pub verify_peer: bool,
    pub verify_hostname: bool,
}

impl TlsOptions {
    /// Certificates checked (system roots), hostname checked, no client certificate.
    pub fn verified() -> TlsOptions {
        TlsOptions {
            verify_peer: true,
            verify_hostname: true,
            ..TlsOptions::default()
        }
    }
}

/// Builds the redis-rs client for `info` (parsed from the URL) with these TLS options.
pub fn client(mut info: ConnectionInfo, opts: &TlsOptions, server: &str) -> Result<Client> {
    let config_error = |what: String| Error::Configuration(format!("{what} ({server})"));
    let cert = opts.cert_pem.as_ref().map(|p| Ok(p.clone().into_bytes()));
    let cert = cert.or_else(|| {
        opts.cert_file
            .as_ref()
            .map(|f| read(f, "ssl_cert_file", server))
    });
    let key = opts.key_pem.as_ref().map(|p| Ok(p.clone().into_bytes()));
    let key = key.or_else(|| {
        opts.key_file
            .as_ref()
            .map(|f| read(f, "ssl_key_file", server))
    });
    if cert.is_some() != key.is_some() {
        return Err(config_error(
            "a TLS client certificate needs both ssl_cert_file and ssl_key_file".into(),
        ));
    }
    let addr = match info.addr().clone() {
        ConnectionAddr::Tcp(host, port) if opts.force => ConnectionAddr::TcpTls {
            host,
            port,
            insecure: false,
            tls_params: None,
        },
        addr @ ConnectionAddr::TcpTls { .. } => addr,
        other => {
            if uses_tls_settings(opts) {
                return Err(config_error(
                    "TLS settings given for a connection that is not TLS (use rediss://)".into(),
                ));
            }
            let open = |i: ConnectionInfo| Client::open(i);
            return open(info.set_addr(other))
                .map_err(|e| config_error(format!("invalid Redis settings: {e}")));
        }
    };
    install_crypto_provider();
    let ConnectionAddr::TcpTls { host, port, .. } = addr else {
        unreachable!("matched above")
    };
    info = info.set_addr(ConnectionAddr::TcpTls {
        host,
        port,
        insecure: !opts.verify_peer,
        tls_params: None,
    });
    let certificates = TlsCertificates {
        client_tls: match (cert, key) {
            (Some(cert), Some(key)) => Some(ClientTlsConfig {
                client_cert: cert?,
                client_key: key?,
            }),
            _ => None,
        },
        root_cert: match &opts.ca_file {
            Some(ca) => Some(read(ca, "ssl_ca_file", server)?),
            None => None,
        },
    };
    let built = if certificates.client_tls.is_some() || certificates.root_cert.is_some() {
        Client::build_with_tls(info, certificates)
            .map_err(|e| config_error(format!("invalid TLS settings: {e}")))?
    } else {
        Client::open(info).map_err(|e| config_error(format!("invalid Redis settings: {e}")))?
    };
    if opts.verify_peer && !opts.verify_hostname {
        let mut info = built.get_connection_info().clone();
        let mut addr = info.addr().clone();
        addr.set_danger_accept_invalid_hostnames(true);
        info = info.set_addr(addr);
        return Client::open(info).map_err(|e| config_error(format!("invalid TLS settings: {e}")));
    }
    Ok(built)
}

fn uses_tls_settings(opts: &TlsOptions) -> bool {
    opts.ca_file.is_some()
        || opts.cert_file.is_some()
        || opts.cert_pem.is_some()
        || !opts.verify_peer
        || !opts.verify_hostname
}

/// A PEM file's bytes. It must hold what `setting` names: redis-rs accepts a CA file with no
/// certificate, and every handshake then fails with an unknown issuer instead of the file being named.
fn read(path: &str, setting: &str, server: &str) -> Result<Vec<u8>> {
    let bytes = std::fs::read(path).map_err(|e| {
        Error::Configuration(format!("{setting} {path} cannot be read: {e} ({server})"))
    })?;
    let (marker, what) = if setting == "ssl_key_file" {
        ("PRIVATE KEY-----", "PEM private key")
    } else {
        ("-----BEGIN CERTIFICATE-----", "PEM certificate")
    };
    if !contains(&bytes, marker.as_bytes()) {
        return Err(Error::Configuration(format!(
            "{setting} {path} holds no {what} ({server})"
        )));
    }
    Ok(bytes)
}

fn contains(haystack: &[u8], needle: &[u8]) -> bool {
    haystack.windows(needle.len()).any(|w| w == needle)
}

/// rustls needs one process-wide crypto provider; ring is the only one compiled in.
fn install_crypto_provider() {
    static ONCE: Once = Once::new();
    ONCE.call_once(|| {
        // Err means another library of this process installed one first: theirs serves us too.
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

#[cfg(test)]
mod tests {
    use super::*;
    use redis::IntoConnectionInfo;

    fn info(url: &str) -> ConnectionInfo {
        url.into_connection_info().unwrap()
    }

    fn tls_addr(c: &Client) -> (String, u16, bool) {
        match c.get_connection_info().addr() {
            ConnectionAddr::TcpTls {
                host,
                port,
                insecure,
                ..
            } => (host.clone(), *port, *insecure),
            other => panic!("not TLS: {other:?}"),
        }
    }

    #[test]
    fn plain_urls_stay_plain_and_refuse_tls_settings() {
        let c = client(
            info("redis://127.0.0.1:6379/0"),
            &TlsOptions::verified(),
            "s",
        )
        .unwrap();
        assert!(matches!(
            c.get_connection_info().addr(),
            ConnectionAddr::Tcp(..)
        ));
        let opts = TlsOptions {
            ca_file: Some("/etc/hostname".into()),
            ..TlsOptions::verified()
        };
        let err = client(info("redis://127.0.0.1:6379/0"), &opts, "s").unwrap_err();
        assert!(err.message().contains("not TLS"), "{err}");
    }

    #[test]
    fn rediss_or_force_turns_tls_on_and_verify_none_is_insecure() {
        let c = client(info("rediss://cache:6380/0"), &TlsOptions::verified(), "s").unwrap();
        assert_eq!(tls_addr(&c), ("cache".into(), 6380, false));
        let forced = TlsOptions {
            force: true,
            ..TlsOptions::verified()
        };
        let c = client(info("redis://cache:6380/0"), &forced, "s").unwrap();
        assert_eq!(tls_addr(&c), ("cache".into(), 6380, false));
        let none = TlsOptions {
            verify_peer: false,
            ..TlsOptions::verified()
        };
        let c = client(info("rediss://cache:6380/0"), &none, "s").unwrap();
        assert_eq!(tls_addr(&c), ("cache".into(), 6380, true));
    }

    #[test]
    fn unreadable_files_and_half_a_client_certificate_are_configuration_errors() {
        let opts = TlsOptions {
            ca_file: Some("/nonexistent/ca.crt".into()),
            ..TlsOptions::verified()
        };
        let err = client(
            info("rediss://cache:6380/0"),
            &opts,
            "rediss://cache:6380/0",
        )
        .unwrap_err();
        assert!(matches!(err, Error::Configuration(_)));
        assert!(
            err.message().contains("ssl_ca_file /nonexistent/ca.crt"),
            "{err}"
        );
        assert!(err.message().contains("rediss://cache:6380/0"), "{err}");

        let opts = TlsOptions {
            cert_file: Some("/nonexistent/client.crt".into()),
            ..TlsOptions::verified()
        };
        let err = client(info("rediss://cache:6380/0"), &opts, "s").unwrap_err();
        assert!(
            err.message()
                .contains("both ssl_cert_file and ssl_key_file"),
            "{err}"
        );
    }

    #[test]
    fn a_ca_file_that_is_no_certificate_is_a_configuration_error() {
        let opts = TlsOptions {
            ca_file: Some("/etc/hostname".into()),
            ..TlsOptions::verified()
        };
        let err = client(info("rediss://cache:6380/0"), &opts, "s").unwrap_err();
        assert!(matches!(err, Error::Configuration(_)), "{err:?}");
        assert!(err.message().contains("holds no PEM certificate"), "{err}");
    }
}
