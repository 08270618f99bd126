//! HTTP clients' set-up shared by `load` and `serve`'s client of the carrier.

/// Installs rustls' process-wide crypto provider, which every reqwest client of this build
/// needs before it is built (a test's blocking client too: features unify). reqwest is built
/// without a provider so that rustls uses ring (already built for other dependencies) rather
/// than compiling aws-lc, whose post-quantum key exchange is why rustls marks ring's provider
/// deprecated; installing it twice is harmless.
pub fn install_tls_provider() {
    #[allow(deprecated)]
    let provider = rustls::crypto::ring::default_provider();
    let _ = provider.install_default();
}
