//! Webhooks reach the leader: a follower that receives a verified push
//! hands the request, unchanged, to the replica that holds the Lease.
//!
//! The Service in front of the replicas delivers a webhook to any of them;
//! only the leader runs rounds. Rather than answer 202 and leave the change
//! waiting for the leader's next poll, the follower forwards the original
//! body and headers to the webhook URL the leader advertises in the Lease
//! (`lease::WEBHOOK_ANNOTATION`). The leader verifies the signature again
//! (the replicas share the secret; the follower adds no credential of its
//! own), so a forwarded request is exactly as trustworthy as a direct one.
//! A forwarded request carries [`FORWARDED_HEADER`] and is never forwarded
//! again, so two replicas that both believe the other leads cannot bounce
//! a request between them. Nor does a follower ever act on one (the header
//! is easily forged, and a follower that suspended itself would answer 200
//! while the leader carried on; issue 23, defect 12): only the leader
//! handles it, a follower answers 409 naming the leader it knows
//! ([`Route::NotLeading`]).
//!
//! When forwarding fails (no leader known, the leader unreachable or
//! refusing), the follower still answers 202: the leader sees the change at
//! its next poll, as before.

use std::time::Duration;

use axum::body::Bytes;
use axum::http::{HeaderMap, HeaderName, Request, header};
use http_body_util::{BodyExt, Full};
use hyper_util::client::legacy::Client;
use hyper_util::client::legacy::connect::HttpConnector;
use hyper_util::rt::TokioExecutor;
use tokio::sync::watch;

/// Marks a request one replica forwarded to another.
pub const FORWARDED_HEADER: &str = "x-winfleet-forwarded-by";

/// How long the leader has to answer a forwarded webhook.
const FORWARD_TIMEOUT: Duration = Duration::from_secs(5);

/// What a follower needs to hand a webhook to the leader.
#[derive(Clone, Debug)]
pub struct Forwarder {
    /// Whether this replica leads right now.
    pub leading: watch::Receiver<bool>,
    /// The webhook URL the Lease's holder advertises.
    pub leader_webhook: watch::Receiver<Option<String>>,
    /// This replica's own advertised URL (never forwarded to).
    pub own: Option<String>,
    /// This replica's identity, sent in [`FORWARDED_HEADER`].
    pub identity: String,
    client: Client<HttpConnector, Full<Bytes>>,
}

/// Why a webhook could not be handed to the leader.
#[derive(Debug, thiserror::Error)]
pub enum ForwardError {
    /// The URL in the Lease is not one a request can be sent to.
    #[error("the leader's webhook URL {url:?} is not usable: {reason}")]
    Url {
        /// The advertised URL.
        url: String,
        /// Why.
        reason: String,
    },
    /// The leader did not answer.
    #[error("the leader at {url} did not answer: {reason}")]
    Unreachable {
        /// The advertised URL.
        url: String,
        /// Why.
        reason: String,
    },
    /// The leader answered with an error.
    #[error("the leader at {url} answered {status}: {message}")]
    Refused {
        /// The advertised URL.
        url: String,
        /// The HTTP status.
        status: u16,
        /// The leader's answer.
        message: String,
    },
}

/// Where a verified webhook or control request goes.
#[derive(Debug, PartialEq, Eq)]
pub enum Route {
    /// Handle it here: this replica leads.
    Here,
    /// Hand it to the leader at this URL.
    Leader(String),
    /// A follower that knows no leader to hand it to.
    NoLeader,
    /// A follower received a forwarded request: it neither handles it nor
    /// forwards it again, and answers 409 with the leader's URL when it
    /// knows one.
    NotLeading(Option<String>),
}

impl Route {
    /// The answer to a forwarded request a follower does not act on.
    pub fn not_leading_message(leader: Option<&str>) -> String {
        let refusal = "this replica does not lead and does not act on a forwarded request";
        match leader {
            Some(url) => format!("{refusal}; the leader is at {url}"),
            None => format!("{refusal}; no leader is known yet, try again"),
        }
    }
}

impl Forwarder {
    /// A forwarder following the election's receivers.
    pub fn new(
        leading: watch::Receiver<bool>,
        leader_webhook: watch::Receiver<Option<String>>,
        own: Option<String>,
        identity: String,
    ) -> Self {
        let client = Client::builder(TokioExecutor::new()).build_http();
        Self { leading, leader_webhook, own, identity, client }
    }

    /// Where a verified request with these headers goes.
    pub fn route(&self, headers: &HeaderMap) -> Route {
        if *self.leading.borrow() {
            return Route::Here;
        }
        let leader = self.leader_webhook.borrow().as_ref().filter(|url| Some(*url) != self.own.as_ref()).cloned();
        match leader {
            _ if headers.contains_key(FORWARDED_HEADER) => Route::NotLeading(leader),
            Some(url) => Route::Leader(url),
            None => Route::NoLeader,
        }
    }

    /// Sends the request to `path` at the leader; its answer's text on success.
    pub async fn forward(
        &self,
        url: &str,
        path: &str,
        headers: &HeaderMap,
        body: Bytes,
    ) -> Result<String, ForwardError> {
        let target = format!("{}{path}", url.trim_end_matches('/'));
        let bad_url = |reason: String| ForwardError::Url { url: url.to_owned(), reason };
        if !target.starts_with("http://") {
            return Err(bad_url("only http:// URLs are forwarded to (the replicas talk inside the cluster)".into()));
        }
        let mut request = Request::post(&target);
        for (name, value) in headers {
            if !is_hop_header(name) {
                request = request.header(name, value);
            }
        }
        let request = request
            .header(FORWARDED_HEADER, &self.identity)
            .body(Full::new(body))
            .map_err(|e| bad_url(e.to_string()))?;
        let unreachable = |reason: String| ForwardError::Unreachable { url: url.to_owned(), reason };
        let answer = async {
            let response = self.client.request(request).await.map_err(|e| unreachable(e.to_string()))?;
            let status = response.status();
            let text = response.into_body().collect().await.map_err(|e| unreachable(e.to_string()))?.to_bytes();
            Ok((status, String::from_utf8_lossy(&text).chars().take(200).collect::<String>()))
        };
        let (status, message) = tokio::time::timeout(FORWARD_TIMEOUT, answer)
            .await
            .map_err(|_| unreachable(format!("no answer within {}s", FORWARD_TIMEOUT.as_secs())))??;
        if status.is_success() {
            Ok(message)
        } else {
            Err(ForwardError::Refused { url: url.to_owned(), status: status.as_u16(), message })
        }
    }
}

/// Headers that describe one connection, not the request.
fn is_hop_header(name: &HeaderName) -> bool {
    [header::HOST, header::CONTENT_LENGTH, header::CONNECTION, header::TRANSFER_ENCODING, header::EXPECT].contains(name)
        || name.as_str() == FORWARDED_HEADER
}

/// The URL the other replicas reach this replica's webhook at: the
/// configured one, else the bound address when it is a specific one, else
/// `POD_IP` (the downward API) with the bound port.
pub fn advertise(configured: Option<&str>, bound: std::net::SocketAddr, pod_ip: Option<&str>) -> Option<String> {
    if let Some(url) = configured.map(str::trim).filter(|u| !u.is_empty()) {
        return Some(url.trim_end_matches('/').to_owned());
    }
    if !bound.ip().is_unspecified() {
        return Some(format!("http://{bound}"));
    }
    let ip: std::net::IpAddr = pod_ip?.trim().parse().ok()?;
    Some(format!("http://{}", std::net::SocketAddr::new(ip, bound.port())))
}

#[cfg(test)]
#[allow(clippy::unwrap_used)]
mod tests {
    use super::*;

    fn forwarder(leading: bool, leader: Option<&str>) -> Forwarder {
        let (_, leading) = watch::channel(leading);
        let (_, leader) = watch::channel(leader.map(str::to_owned));
        Forwarder::new(leading, leader, Some("http://10.0.0.1:8080".into()), "winfleet-0-abcde".into())
    }

    #[tokio::test]
    async fn a_follower_routes_to_the_advertised_leader_and_never_to_itself() {
        let headers = HeaderMap::new();
        let to = |f: Forwarder| f.route(&headers);
        assert_eq!(to(forwarder(false, Some("http://10.0.0.2:8080"))), Route::Leader("http://10.0.0.2:8080".into()));
        assert_eq!(to(forwarder(true, Some("http://10.0.0.2:8080"))), Route::Here);
        assert_eq!(to(forwarder(false, None)), Route::NoLeader);
        assert_eq!(to(forwarder(false, Some("http://10.0.0.1:8080"))), Route::NoLeader);
    }

    #[tokio::test]
    async fn a_forwarded_request_is_never_forwarded_again_and_only_the_leader_acts_on_it() {
        let mut headers = HeaderMap::new();
        headers.insert(FORWARDED_HEADER, "winfleet-1-fghij".parse().unwrap());
        let leader = Some("http://10.0.0.2:8080".to_owned());
        assert_eq!(forwarder(false, leader.as_deref()).route(&headers), Route::NotLeading(leader.clone()));
        assert_eq!(forwarder(false, None).route(&headers), Route::NotLeading(None));
        assert_eq!(forwarder(false, Some("http://10.0.0.1:8080")).route(&headers), Route::NotLeading(None));
        assert_eq!(forwarder(true, leader.as_deref()).route(&headers), Route::Here);
        let text = Route::not_leading_message(leader.as_deref());
        assert!(text.ends_with("the leader is at http://10.0.0.2:8080"), "{text}");
    }

    #[test]
    fn the_advertised_url_prefers_configuration_then_a_specific_address_then_the_pod_ip() {
        let any: std::net::SocketAddr = "0.0.0.0:8080".parse().unwrap();
        let lo: std::net::SocketAddr = "127.0.0.1:41234".parse().unwrap();
        assert_eq!(advertise(Some("http://leader.example:9000/"), any, None).unwrap(), "http://leader.example:9000");
        assert_eq!(advertise(None, lo, Some("10.1.2.3")).unwrap(), "http://127.0.0.1:41234");
        assert_eq!(advertise(None, any, Some("10.1.2.3")).unwrap(), "http://10.1.2.3:8080");
        assert_eq!(advertise(None, any, Some("fd00::7")).unwrap(), "http://[fd00::7]:8080");
        assert_eq!(advertise(None, any, None), None);
        assert_eq!(advertise(None, any, Some("not-an-ip")), None);
    }

    #[tokio::test]
    async fn only_http_urls_are_forwarded_to() {
        let f = forwarder(false, None);
        let error = f.forward("https://10.0.0.2:8443", "/webhook", &HeaderMap::new(), Bytes::new()).await.unwrap_err();
        assert!(error.to_string().contains("only http://"), "{error}");
    }
}
