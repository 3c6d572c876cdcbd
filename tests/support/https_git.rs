//! Git's smart HTTP over TLS, for the tests of libgit2's https transport:
//! the real `git http-backend` (a CGI program) behind a rustls server on
//! 127.0.0.1, with certificates from a throwaway CA.
//!
//! Each connection is served on its own thread, HTTP/1.1 with keep-alive,
//! request bodies by Content-Length or chunked; a client that refuses the
//! certificate ends its connection in the handshake, and nothing is served.

use std::io::{self, BufRead, BufReader, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair, KeyUsagePurpose, SanType};
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer};
use rustls::{ServerConfig, ServerConnection, StreamOwned};

/// A throwaway certificate authority.
pub struct TestCa {
    issuer: CertifiedIssuer<'static, KeyPair>,
}

/// A server certificate and its key, signed by a [`TestCa`].
pub struct ServerCert {
    chain: Vec<CertificateDer<'static>>,
    key: PrivatePkcs8KeyDer<'static>,
}

impl TestCa {
    pub fn new(name: &str) -> Self {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.distinguished_name.push(DnType::CommonName, name);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::DigitalSignature];
        Self { issuer: CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap() }
    }

    /// Writes the CA certificate (PEM) to `path`: what a client trusts.
    pub fn write_pem(&self, path: &Path) -> PathBuf {
        std::fs::write(path, self.issuer.pem()).unwrap();
        path.to_path_buf()
    }

    /// A server certificate for `san` (an IP address or a DNS name).
    pub fn server(&self, san: &str) -> ServerCert {
        let key = KeyPair::generate().unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name.push(DnType::CommonName, san);
        params.subject_alt_names = vec![match san.parse() {
            Ok(ip) => SanType::IpAddress(ip),
            Err(_) => SanType::DnsName(san.try_into().unwrap()),
        }];
        let cert = params.signed_by(&key, &self.issuer).unwrap();
        ServerCert {
            chain: vec![cert.der().clone(), self.issuer.der().clone()],
            key: PrivatePkcs8KeyDer::from(key.serialize_der()),
        }
    }
}

/// `git http-backend` over https on 127.0.0.1, serving the repositories
/// under a directory; stops accepting when dropped.
pub struct HttpsGit {
    port: u16,
    stop: Arc<AtomicBool>,
    requests: Arc<AtomicUsize>,
}

impl HttpsGit {
    /// Serves the repositories under `root` (`https://127.0.0.1:PORT/<dir>`).
    pub fn start(root: &Path, cert: ServerCert) -> Self {
        let provider = Arc::new(rustls::crypto::aws_lc_rs::default_provider());
        let config = ServerConfig::builder_with_provider(provider)
            .with_safe_default_protocol_versions()
            .unwrap()
            .with_no_client_auth()
            .with_single_cert(cert.chain, PrivateKeyDer::Pkcs8(cert.key))
            .unwrap();
        let config = Arc::new(config);
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let stop = Arc::new(AtomicBool::new(false));
        let requests = Arc::new(AtomicUsize::new(0));
        let root = root.to_path_buf();
        let (stopped, served) = (stop.clone(), requests.clone());
        std::thread::spawn(move || {
            for conn in listener.incoming() {
                if stopped.load(Ordering::SeqCst) {
                    return;
                }
                let Ok(conn) = conn else { continue };
                let (config, root, served) = (config.clone(), root.clone(), served.clone());
                std::thread::spawn(move || {
                    // A refused handshake or a closed connection ends it.
                    let _ = serve(conn, config, &root, &served);
                });
            }
        });
        Self { port, stop, requests }
    }

    /// The https URL of the repository `dir` under the root.
    pub fn url(&self, dir: &str) -> String {
        format!("https://127.0.0.1:{}/{dir}", self.port)
    }

    /// HTTP requests answered so far (a refused handshake answers none).
    pub fn requests(&self) -> usize {
        self.requests.load(Ordering::SeqCst)
    }
}

impl Drop for HttpsGit {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::SeqCst);
        // Wakes the accept loop, which then sees the flag.
        let _ = TcpStream::connect(("127.0.0.1", self.port));
    }
}

fn serve(conn: TcpStream, config: Arc<ServerConfig>, root: &Path, served: &AtomicUsize) -> io::Result<()> {
    let tls = ServerConnection::new(config).map_err(io::Error::other)?;
    let mut stream = BufReader::new(StreamOwned::new(tls, conn));
    while let Some(request) = read_request(&mut stream)? {
        let response = http_backend(root, &request)?;
        stream.get_mut().write_all(&response)?;
        stream.get_mut().flush()?;
        served.fetch_add(1, Ordering::SeqCst);
    }
    Ok(())
}

struct Request {
    method: String,
    target: String,
    /// Header names in lower case.
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Request {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers.iter().find(|(n, _)| n == name).map(|(_, v)| v.as_str())
    }
}

/// One request, or None when the client closed the connection.
fn read_request(stream: &mut impl BufRead) -> io::Result<Option<Request>> {
    let mut line = String::new();
    if stream.read_line(&mut line)? == 0 {
        return Ok(None);
    }
    let mut parts = line.split_whitespace();
    let (method, target) = (parts.next().unwrap_or("").to_owned(), parts.next().unwrap_or("").to_owned());
    let mut headers = Vec::new();
    loop {
        let mut line = String::new();
        stream.read_line(&mut line)?;
        let line = line.trim_end();
        if line.is_empty() {
            break;
        }
        if let Some((name, value)) = line.split_once(':') {
            headers.push((name.trim().to_ascii_lowercase(), value.trim().to_owned()));
        }
    }
    let mut request = Request { method, target, headers, body: Vec::new() };
    if request.header("transfer-encoding").is_some_and(|v| v.eq_ignore_ascii_case("chunked")) {
        request.body = read_chunked(stream)?;
    } else if let Some(length) = request.header("content-length") {
        let mut body = vec![0; length.parse().map_err(io::Error::other)?];
        stream.read_exact(&mut body)?;
        request.body = body;
    }
    Ok(Some(request))
}

fn read_chunked(stream: &mut impl BufRead) -> io::Result<Vec<u8>> {
    let mut body = Vec::new();
    loop {
        let mut size = String::new();
        stream.read_line(&mut size)?;
        let size = usize::from_str_radix(size.trim().split(';').next().unwrap_or(""), 16).map_err(io::Error::other)?;
        if size == 0 {
            // Trailers, up to the empty line.
            loop {
                let mut line = String::new();
                stream.read_line(&mut line)?;
                if line.trim_end().is_empty() {
                    return Ok(body);
                }
            }
        }
        let start = body.len();
        body.resize(start + size, 0);
        stream.read_exact(&mut body[start..])?;
        let mut crlf = [0; 2];
        stream.read_exact(&mut crlf)?;
    }
}

/// Runs `git http-backend` for the request (CGI) and frames its answer as
/// an HTTP/1.1 response.
fn http_backend(root: &Path, request: &Request) -> io::Result<Vec<u8>> {
    let (path, query) = request.target.split_once('?').unwrap_or((&request.target, ""));
    let mut cgi = Command::new("git");
    cgi.arg("http-backend")
        .env("GIT_PROJECT_ROOT", root)
        .env("GIT_HTTP_EXPORT_ALL", "1")
        .env("REQUEST_METHOD", &request.method)
        .env("PATH_INFO", path)
        .env("QUERY_STRING", query)
        .env("CONTENT_LENGTH", request.body.len().to_string())
        .env("CONTENT_TYPE", request.header("content-type").unwrap_or(""))
        .env("REMOTE_ADDR", "127.0.0.1")
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if let Some(protocol) = request.header("git-protocol") {
        cgi.env("GIT_PROTOCOL", protocol);
    }
    let mut child = cgi.spawn()?;
    let mut stdin = child.stdin.take().unwrap();
    let body = request.body.clone();
    let writer = std::thread::spawn(move || stdin.write_all(&body));
    let output = child.wait_with_output()?;
    writer.join().unwrap()?;
    let out = output.stdout;
    let (head, body) = match out.windows(4).position(|w| w == b"\r\n\r\n") {
        Some(i) => (&out[..i], &out[i + 4..]),
        None => match out.windows(2).position(|w| w == b"\n\n") {
            Some(i) => (&out[..i], &out[i + 2..]),
            None => (&out[..0], &out[..]),
        },
    };
    let mut status = "200 OK".to_owned();
    let mut headers = String::new();
    for line in String::from_utf8_lossy(head).lines() {
        match line.split_once(':') {
            Some((name, value)) if name.eq_ignore_ascii_case("status") => status = value.trim().to_owned(),
            Some(_) => headers.push_str(&format!("{line}\r\n")),
            None => {}
        }
    }
    let mut response = format!("HTTP/1.1 {status}\r\n{headers}Content-Length: {}\r\n\r\n", body.len()).into_bytes();
    response.extend_from_slice(body);
    Ok(response)
}
