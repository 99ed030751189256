//! The one outbound HTTP client (LightRAG, model and embedding endpoints, MinerU): timeouts,
//! a user agent, no redirects,
//! optional bounded retries with exponential backoff for transient failures, and errors that
//! are classified ([`HttpErrorKind`]) and scrubbed: a message never holds a URL's query or
//! userinfo (pre-signed URLs carry signatures) nor a secret ([`HttpError::scrub`]).

use std::time::Duration;

use super::SecretString;

/// `mnote/<version>`, sent unless [`ClientBuilder::user_agent`] says otherwise.
pub const USER_AGENT: &str = concat!("mnote/", env!("CARGO_PKG_VERSION"));
/// Longest wait between two retries.
const MAX_BACKOFF: Duration = Duration::from_secs(30);

/// What went wrong, in the terms callers map to their stable error codes.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HttpErrorKind {
    /// Not reachable, or the server is overloaded / failing (HTTP 408, 429, 5xx): worth
    /// trying again later.
    Unavailable,
    /// No answer within the timeout.
    Timeout,
    /// The credentials were refused (HTTP 401, 403).
    Unauthorized,
    /// An answer that will not get better by asking again (other 4xx, unusable body).
    BadResponse,
}

impl HttpErrorKind {
    /// The kind of a non-success status.
    pub fn of_status(status: reqwest::StatusCode) -> Self {
        match status.as_u16() {
            401 | 403 => HttpErrorKind::Unauthorized,
            408 | 429 => HttpErrorKind::Unavailable,
            _ if status.is_server_error() => HttpErrorKind::Unavailable,
            _ => HttpErrorKind::BadResponse,
        }
    }

    /// Whether a retry may help.
    pub fn is_transient(self) -> bool {
        matches!(self, HttpErrorKind::Unavailable | HttpErrorKind::Timeout)
    }
}

/// A failed request: its kind and a message without URL or secrets.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct HttpError {
    pub kind: HttpErrorKind,
    /// reqwest's message without the URL, followed by its source chain (where reqwest's own
    /// "error sending request" gets its cause: "Connection refused", a DNS or TLS failure).
    pub message: String,
    /// The status, when the server answered.
    pub status: Option<reqwest::StatusCode>,
}

impl HttpError {
    /// A transport error (connect, send, read the body), classified and without its URL.
    pub fn transport(e: reqwest::Error) -> Self {
        let e = e.without_url();
        let kind = if e.is_timeout() { HttpErrorKind::Timeout } else { HttpErrorKind::Unavailable };
        let mut message = e.to_string();
        let mut source = std::error::Error::source(&e);
        while let Some(s) = source {
            message.push_str(": ");
            message.push_str(&s.to_string());
            source = s.source();
        }
        HttpError { kind, message, status: e.status() }
    }

    /// A non-success status.
    pub fn status(status: reqwest::StatusCode) -> Self {
        HttpError { kind: HttpErrorKind::of_status(status), message: format!("HTTP {}", status.as_u16()), status: Some(status) }
    }

    /// A 30x answer: never followed (see [`ClientBuilder::build`]), a `BadResponse`.
    pub fn redirect(status: reqwest::StatusCode) -> Self {
        HttpError {
            kind: HttpErrorKind::BadResponse,
            message: format!("HTTP {}: redirects are not followed", status.as_u16()),
            status: Some(status),
        }
    }

    /// Remove `secret` from the message.
    pub fn scrub(mut self, secret: &SecretString) -> Self {
        self.message = secret.scrub(&self.message);
        self
    }
}

/// `scheme://host[:port]/path` of `url`: what messages may show of it (no userinfo, no
/// query, no fragment).
pub fn display_url(url: &reqwest::Url) -> String {
    format!(
        "{}://{}{}{}",
        url.scheme(),
        url.host_str().unwrap_or(""),
        url.port().map(|p| format!(":{p}")).unwrap_or_default(),
        url.path()
    )
}

/// rustls' crypto provider for the process: ring (reqwest is built with `rustls-no-provider`,
/// so it takes the process default; aws-lc-rs, reqwest's own default, is not in the build).
/// Idempotent; [`ClientBuilder::build`], `main` and the tests call it. sqlx's
/// Postgres TLS finds ring by itself (the only provider compiled into rustls).
pub fn install_tls_provider() {
    static ONCE: std::sync::Once = std::sync::Once::new();
    // Err means a provider is installed already: that one stays.
    ONCE.call_once(|| {
        let _ = rustls::crypto::ring::default_provider().install_default();
    });
}

/// Build a [`Client`]: `Client::builder().connect_timeout(..).timeout(..).build()`.
#[derive(Clone, Debug)]
pub struct ClientBuilder {
    connect_timeout: Option<Duration>,
    timeout: Option<Duration>,
    user_agent: String,
    retries: u32,
    backoff: Duration,
    public_only: bool,
}

impl ClientBuilder {
    pub fn connect_timeout(mut self, d: Duration) -> Self {
        self.connect_timeout = Some(d);
        self
    }

    /// Limit for a whole request (connect, send, the full body).
    pub fn timeout(mut self, d: Duration) -> Self {
        self.timeout = Some(d);
        self
    }

    pub fn user_agent(mut self, ua: impl Into<String>) -> Self {
        self.user_agent = ua.into();
        self
    }

    /// Retry a request that failed transiently ([`HttpErrorKind::is_transient`]) up to
    /// `retries` more times, waiting `backoff`, 2·`backoff`, 4·`backoff`, … (at most 30 s)
    /// in between. Default: no retries (callers that retry whole jobs keep it that way).
    pub fn retries(mut self, retries: u32, backoff: Duration) -> Self {
        self.retries = retries;
        self.backoff = backoff;
        self
    }

    /// Connect only to public addresses: a host name that resolves to a loopback, private,
    /// link-local or otherwise non-public address fails to connect ("resolves only to
    /// non-public addresses"), checked on the addresses the connection then uses. For
    /// endpoints allowed by a default list of public providers rather than by the operator.
    /// (An IP literal is not resolved: callers allow only host names this way.)
    pub fn public_only(mut self, on: bool) -> Self {
        self.public_only = on;
        self
    }

    pub fn build(self) -> Result<Client, HttpError> {
        // Never follow a redirect: every endpoint this client calls passed an operator's
        // allow-list, and a 30x would carry the request (its key, the conversation) past it.
        install_tls_provider();
        let mut b = reqwest::Client::builder().user_agent(self.user_agent).redirect(reqwest::redirect::Policy::none());
        if self.public_only {
            b = b.dns_resolver(PublicOnly);
        }
        if let Some(d) = self.connect_timeout {
            b = b.connect_timeout(d);
        }
        if let Some(d) = self.timeout {
            b = b.timeout(d);
        }
        let inner = b.build().map_err(HttpError::transport)?;
        Ok(Client { inner, retries: self.retries, backoff: self.backoff })
    }
}

/// A configured outbound client. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Client {
    inner: reqwest::Client,
    retries: u32,
    backoff: Duration,
}

impl Client {
    pub fn builder() -> ClientBuilder {
        ClientBuilder {
            connect_timeout: None,
            timeout: None,
            user_agent: USER_AGENT.to_string(),
            retries: 0,
            backoff: Duration::from_millis(500),
            public_only: false,
        }
    }

    /// The reqwest client, to build requests with.
    pub fn reqwest(&self) -> &reqwest::Client {
        &self.inner
    }

    pub fn get(&self, url: impl reqwest::IntoUrl) -> reqwest::RequestBuilder {
        self.inner.get(url)
    }

    pub fn post(&self, url: impl reqwest::IntoUrl) -> reqwest::RequestBuilder {
        self.inner.post(url)
    }

    pub fn put(&self, url: impl reqwest::IntoUrl) -> reqwest::RequestBuilder {
        self.inner.put(url)
    }

    pub fn delete(&self, url: impl reqwest::IntoUrl) -> reqwest::RequestBuilder {
        self.inner.delete(url)
    }

    /// Send `req`, retrying transient failures as configured. Any answer is returned, a
    /// non-success status included (once retries are used up): the caller reads its body;
    /// except a redirect (30x), which is an error ([`HttpError::redirect`]).
    /// A request whose body cannot be cloned (a stream) is sent once.
    pub async fn send(&self, req: reqwest::RequestBuilder) -> Result<reqwest::Response, HttpError> {
        let mut attempt = 0u32;
        let mut req = req;
        loop {
            let again = if attempt < self.retries { req.try_clone() } else { None };
            let result = req.send().await;
            let transient = match &result {
                Ok(resp) => !resp.status().is_success() && HttpErrorKind::of_status(resp.status()).is_transient(),
                Err(e) => !e.is_builder(),
            };
            match again {
                Some(next) if transient => {
                    let wait = self.backoff.saturating_mul(1u32 << attempt.min(16)).min(MAX_BACKOFF);
                    tracing::debug!(attempt, ?wait, "transient HTTP failure, retrying");
                    tokio::time::sleep(wait).await;
                    attempt += 1;
                    req = next;
                }
                _ => {
                    let resp = result.map_err(HttpError::transport)?;
                    if resp.status().is_redirection() {
                        return Err(HttpError::redirect(resp.status()));
                    }
                    return Ok(resp);
                }
            }
        }
    }
}

/// The resolver of [`ClientBuilder::public_only`]: the system's answer without non-public
/// addresses, or an error when none is left.
struct PublicOnly;

impl reqwest::dns::Resolve for PublicOnly {
    fn resolve(&self, name: reqwest::dns::Name) -> reqwest::dns::Resolving {
        let host = name.as_str().to_string();
        Box::pin(async move {
            let found: Vec<std::net::SocketAddr> = tokio::net::lookup_host((host.as_str(), 0)).await?.collect();
            let public: Vec<std::net::SocketAddr> = found.into_iter().filter(|a| is_public(a.ip())).collect();
            if public.is_empty() {
                let e = std::io::Error::new(
                    std::io::ErrorKind::PermissionDenied,
                    format!("{host} resolves only to non-public addresses, which this endpoint may not use"),
                );
                return Err(Box::new(e) as Box<dyn std::error::Error + Send + Sync>);
            }
            Ok(Box::new(public.into_iter()) as reqwest::dns::Addrs)
        })
    }
}

/// Whether `ip` is a public unicast address (not loopback, private, shared, link-local,
/// unique-local, documentation, benchmarking, reserved, multicast or unspecified).
pub fn is_public(ip: std::net::IpAddr) -> bool {
    use std::net::IpAddr;
    match ip {
        IpAddr::V4(v4) => {
            let o = v4.octets();
            !(v4.is_private()
                || v4.is_loopback()
                || v4.is_link_local()
                || v4.is_unspecified()
                || v4.is_broadcast()
                || v4.is_documentation()
                || v4.is_multicast()
                || o[0] == 0
                || (o[0] == 100 && (o[1] & 0xc0) == 64)
                || (o[0] == 198 && (o[1] & 0xfe) == 18)
                || (o[0] == 192 && o[1] == 0 && o[2] == 0)
                || o[0] >= 240)
        }
        IpAddr::V6(v6) => {
            if let Some(v4) = v6.to_ipv4_mapped() {
                return is_public(IpAddr::V4(v4));
            }
            let s = v6.segments();
            !(v6.is_loopback()
                || v6.is_unspecified()
                || v6.is_multicast()
                || (s[0] & 0xfe00) == 0xfc00
                || (s[0] & 0xffc0) == 0xfe80
                || (s[0] == 0x2001 && s[1] == 0x0db8)
                || (s[0] == 0x64 && s[1] == 0xff9b))
        }
    }
}

/// Why a URL is not on an operator's allow-list.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AllowList {
    /// Not http(s), or with userinfo, a query or a fragment.
    Malformed,
    /// The list is empty.
    NoneAllowed,
    NotAllowed,
}

/// `url` normalised (`scheme://host[:port]/path`, no trailing slash) if it lies under one of
/// `allowed` (URL prefixes, compared after the same normalisation, path-segment aware).
pub fn allow_listed(allowed: &[String], url: &str) -> Result<String, AllowList> {
    let normal = normalise_url(url).ok_or(AllowList::Malformed)?;
    if allowed.is_empty() {
        return Err(AllowList::NoneAllowed);
    }
    if allowed.iter().filter_map(|p| normalise_url(p)).any(|p| normal.starts_with(&p)) {
        Ok(normal.trim_end_matches('/').to_string())
    } else {
        Err(AllowList::NotAllowed)
    }
}

fn normalise_url(url: &str) -> Option<String> {
    let u = reqwest::Url::parse(url.trim()).ok()?;
    if !matches!(u.scheme(), "http" | "https")
        || u.host_str().is_none()
        || !u.username().is_empty()
        || u.password().is_some()
        || u.query().is_some()
        || u.fragment().is_some()
    {
        return None;
    }
    let mut s = u.to_string();
    if !s.ends_with('/') {
        s.push('/');
    }
    Some(s)
}

/// The body of `resp`, refused once it passes `limit` bytes (a `Content-Length` over it is
/// refused before reading): an upstream cannot make us hold an unbounded answer. The error is
/// `BadResponse`, its message names the limit.
pub async fn read_limited(resp: reqwest::Response, limit: usize) -> Result<Vec<u8>, HttpError> {
    let too_large = || HttpError {
        kind: HttpErrorKind::BadResponse,
        message: format!("the response is larger than {limit} bytes"),
        status: None,
    };
    if resp.content_length().is_some_and(|n| n > limit as u64) {
        return Err(too_large());
    }
    let mut body = Vec::new();
    let mut resp = resp;
    while let Some(part) = resp.chunk().await.map_err(HttpError::transport)? {
        if body.len() + part.len() > limit {
            return Err(too_large());
        }
        body.extend_from_slice(&part);
    }
    Ok(body)
}

#[cfg(test)]
mod tests {
    use std::sync::{
        Arc,
        atomic::{AtomicUsize, Ordering},
    };

    use super::*;

    #[test]
    fn statuses_are_classified() {
        use reqwest::StatusCode as S;
        assert_eq!(HttpErrorKind::of_status(S::UNAUTHORIZED), HttpErrorKind::Unauthorized);
        assert_eq!(HttpErrorKind::of_status(S::FORBIDDEN), HttpErrorKind::Unauthorized);
        assert_eq!(HttpErrorKind::of_status(S::TOO_MANY_REQUESTS), HttpErrorKind::Unavailable);
        assert_eq!(HttpErrorKind::of_status(S::BAD_GATEWAY), HttpErrorKind::Unavailable);
        assert_eq!(HttpErrorKind::of_status(S::BAD_REQUEST), HttpErrorKind::BadResponse);
        let e = HttpError::status(S::SERVICE_UNAVAILABLE);
        assert_eq!((e.kind, e.message.as_str()), (HttpErrorKind::Unavailable, "HTTP 503"));
    }

    /// Issue 26 item 3: a prefix allows its own origin and the paths under it, segment by
    /// segment; never a look-alike host, another port or scheme, userinfo, or a path that only
    /// starts with the same letters or climbs out with `..`.
    #[test]
    fn allow_list_prefixes_match_whole_origins_and_path_segments() {
        let allowed = vec!["https://api.openai.com/v1".to_string(), "https://api.deepseek.com".to_string()];
        for ok in [
            "https://api.openai.com/v1",
            "https://api.openai.com/v1/",
            "https://API.OpenAI.com/v1",
            "https://api.openai.com:443/v1",
            "https://api.openai.com/v1/chat/completions",
            " https://api.deepseek.com ",
            "https://api.deepseek.com/v1",
        ] {
            assert!(allow_listed(&allowed, ok).is_ok(), "{ok}");
        }
        assert_eq!(allow_listed(&allowed, "https://API.openai.com/v1/").unwrap(), "https://api.openai.com/v1");
        for bad in [
            "https://api.openai.com.evil.example/v1",
            "https://api.openai.com/v1@evil.example",
            "https://api.openai.com/v10",
            "https://api.openai.com/v1evil",
            "https://api.openai.com/v1/../admin",
            "https://api.openai.com/v1/%2e%2e/admin",
            "https://api.openai.com:8443/v1",
            "http://api.openai.com/v1",
            "https://api.openai.com./v1",
            "https://evil.example/https://api.openai.com/v1",
            "https://api.deepseek.com.evil.example/v1",
            "https://api.deepseek.com:444",
        ] {
            assert_eq!(allow_listed(&allowed, bad), Err(AllowList::NotAllowed), "{bad}");
        }
        for malformed in [
            "https://api.openai.com@evil.example/v1",
            "https://user:pw@api.openai.com/v1",
            "https://api.openai.com/v1?x=1",
            "https://api.openai.com/v1#f",
            "ftp://api.openai.com/v1",
            "api.openai.com/v1",
        ] {
            assert_eq!(allow_listed(&allowed, malformed), Err(AllowList::Malformed), "{malformed}");
        }
        assert_eq!(allow_listed(&[], "https://api.openai.com/v1"), Err(AllowList::NoneAllowed));
    }

    #[test]
    fn only_public_unicast_addresses_are_public() {
        for ip in [
            "10.0.0.1",
            "172.16.5.4",
            "192.168.1.1",
            "127.0.0.1",
            "169.254.169.254",
            "100.64.0.1",
            "0.0.0.0",
            "::1",
            "fd00::1",
            "fe80::1",
            "::ffff:10.0.0.1",
            "::ffff:127.0.0.1",
            "224.0.0.1",
            "255.255.255.255",
        ] {
            assert!(!is_public(ip.parse().unwrap()), "{ip}");
        }
        for ip in ["104.18.6.192", "8.8.8.8", "2606:4700::6812:6c0", "::ffff:8.8.8.8"] {
            assert!(is_public(ip.parse().unwrap()), "{ip}");
        }
    }

    /// A host name that resolves to a non-public address is never connected to by a
    /// public-only client (`localhost` here), while an ordinary client reaches it.
    #[tokio::test]
    async fn a_public_only_client_refuses_a_name_that_resolves_to_a_private_address() {
        let (url, hits) = flaky_server(0).await;
        let url = url.replace("127.0.0.1", "localhost");
        let c = Client::builder().public_only(true).connect_timeout(Duration::from_secs(5)).build().unwrap();
        let e = c.send(c.get(&url)).await.unwrap_err();
        assert_eq!(e.kind, HttpErrorKind::Unavailable, "{e}");
        assert!(e.message.contains("resolves only to non-public addresses"), "{}", e.message);
        assert_eq!(hits.load(Ordering::SeqCst), 0);
        let c = Client::builder().connect_timeout(Duration::from_secs(5)).build().unwrap();
        assert_eq!(c.send(c.get(&url)).await.unwrap().status(), 200);
    }

    #[test]
    fn urls_are_shown_without_query_or_userinfo() {
        let u = reqwest::Url::parse("https://user:pw@cdn.example:8443/a/b.zip?X-Amz-Signature=abc#f").unwrap();
        assert_eq!(display_url(&u), "https://cdn.example:8443/a/b.zip");
    }

    async fn flaky_server(fail_first: usize) -> (String, Arc<AtomicUsize>) {
        let hits = Arc::new(AtomicUsize::new(0));
        let h = hits.clone();
        let app = axum::Router::new().route(
            "/x",
            axum::routing::get(move || {
                let h = h.clone();
                async move {
                    if h.fetch_add(1, Ordering::SeqCst) < fail_first {
                        axum::http::StatusCode::SERVICE_UNAVAILABLE
                    } else {
                        axum::http::StatusCode::OK
                    }
                }
            }),
        );
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
        (format!("http://{addr}/x?token=sk-secret"), hits)
    }

    #[tokio::test]
    async fn transient_failures_are_retried_a_bounded_number_of_times() {
        let (url, hits) = flaky_server(2).await;
        let c = Client::builder().retries(3, Duration::from_millis(1)).build().unwrap();
        assert_eq!(c.send(c.get(&url)).await.unwrap().status(), 200);
        assert_eq!(hits.load(Ordering::SeqCst), 3);

        let (url, hits) = flaky_server(10).await;
        let c = Client::builder().retries(2, Duration::from_millis(1)).build().unwrap();
        assert_eq!(c.send(c.get(&url)).await.unwrap().status(), 503);
        assert_eq!(hits.load(Ordering::SeqCst), 3);

        let (url, hits) = flaky_server(10).await;
        let c = Client::builder().build().unwrap();
        assert_eq!(c.send(c.get(&url)).await.unwrap().status(), 503);
        assert_eq!(hits.load(Ordering::SeqCst), 1, "retries are off by default");
    }

    #[tokio::test]
    async fn transport_errors_are_unavailable_and_carry_no_url() {
        let port = std::net::TcpListener::bind("127.0.0.1:0").unwrap().local_addr().unwrap().port();
        let c = Client::builder().connect_timeout(Duration::from_secs(2)).build().unwrap();
        let e = c.send(c.get(format!("http://127.0.0.1:{port}/x?token=sk-secret"))).await.unwrap_err();
        assert_eq!(e.kind, HttpErrorKind::Unavailable, "{e}");
        assert!(!e.message.contains("sk-secret") && !e.message.contains("/x"), "{}", e.message);
        let e = e.scrub(&SecretString::new("refused"));
        assert!(!e.message.contains("refused"), "{}", e.message);
    }

    /// Issue 31 item 4: a 30x is an error ("redirects are not followed"), and the place it
    /// points to is never asked (with the request's credentials or body).
    #[tokio::test]
    async fn redirects_are_not_followed() {
        let target_hits = Arc::new(AtomicUsize::new(0));
        let h = target_hits.clone();
        let target = axum::Router::new().fallback(move || {
            let h = h.clone();
            async move {
                h.fetch_add(1, Ordering::SeqCst);
                "reached"
            }
        });
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let to = format!("http://{}/elsewhere", listener.local_addr().unwrap());
        tokio::spawn(async move { axum::serve(listener, target).await.unwrap() });
        for status in [301u16, 302, 303, 307, 308] {
            let to = to.clone();
            let app = axum::Router::new().fallback(move || {
                let to = to.clone();
                async move { (axum::http::StatusCode::from_u16(status).unwrap(), [(axum::http::header::LOCATION, to)]) }
            });
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
            let url = format!("http://{}/x", listener.local_addr().unwrap());
            tokio::spawn(async move { axum::serve(listener, app).await.unwrap() });
            let c = Client::builder().retries(2, Duration::from_millis(1)).build().unwrap();
            let e = c.send(c.post(&url).bearer_auth("sk-secret").body("the conversation")).await.unwrap_err();
            assert_eq!((e.kind, e.status.map(|s| s.as_u16())), (HttpErrorKind::BadResponse, Some(status)), "{e}");
            assert!(e.message.contains("redirects are not followed"), "{}", e.message);
        }
        assert_eq!(target_hits.load(Ordering::SeqCst), 0, "a redirect was followed");
    }
}
