//! The CLI's one HTTP client, shared by `--post` (the forge's API, over
//! HTTPS with the system's roots) and `suspend`/`resume` (the daemon's
//! webhook port, plain HTTP): a request, its whole answer, a time limit.
//!
//! Hand-built on hyper-util and hyper-rustls, which the build has anyway
//! (kube, the daemon's server), rather than reqwest: reqwest 0.13.5 needs
//! tower-http 0.6 where kube-client has 0.7.1, one more crate in two versions
//! (docs/dependencies.md).

use std::time::Duration;

use axum::body::Bytes;
use http::{Request, StatusCode};
use http_body_util::{BodyExt, Full};
use hyper_rustls::HttpsConnector;
use hyper_util::client::legacy::connect::{Connect, HttpConnector};
use hyper_util::client::legacy::{self, Client as Hyper};
use hyper_util::rt::TokioExecutor;

/// A request to send: its body is sent whole.
pub type Outgoing = Request<Full<Bytes>>;

/// Why a request got no whole answer.
#[derive(Debug, thiserror::Error)]
pub enum Failure {
    /// No connection, or the request could not be sent.
    #[error(transparent)]
    Send(legacy::Error),
    /// The answer's body broke off.
    #[error(transparent)]
    Read(hyper::Error),
    /// No whole answer within the time limit.
    #[error("no answer within {} s", .0.as_secs())]
    Timeout(Duration),
}

/// An HTTP/1 client.
pub struct Client<C> {
    hyper: Hyper<C, Full<Bytes>>,
}

impl Client<HttpConnector> {
    /// Plain HTTP only.
    pub fn http() -> Self {
        Self { hyper: Hyper::builder(TokioExecutor::new()).build_http() }
    }
}

impl Client<HttpsConnector<HttpConnector>> {
    /// HTTPS trusting the system's root certificates, and plain HTTP (a
    /// local test server).
    pub fn https() -> std::io::Result<Self> {
        let https =
            hyper_rustls::HttpsConnectorBuilder::new().with_native_roots()?.https_or_http().enable_http1().build();
        Ok(Self { hyper: Hyper::builder(TokioExecutor::new()).build(https) })
    }
}

impl<C: Connect + Clone + Send + Sync + 'static> Client<C> {
    /// Sends `request`; the answer's status and whole body, within `limit`.
    pub async fn send(&self, request: Outgoing, limit: Duration) -> Result<(StatusCode, Bytes), Failure> {
        let answer = async {
            let response = self.hyper.request(request).await.map_err(Failure::Send)?;
            let status = response.status();
            let body = response.into_body().collect().await.map_err(Failure::Read)?;
            Ok((status, body.to_bytes()))
        };
        tokio::time::timeout(limit, answer).await.unwrap_or(Err(Failure::Timeout(limit)))
    }
}
