//! A minimal HTTP/1.1 client over `std::net::TcpStream`, just enough to drive `samebits serve`
//! (docs/serve.md) without an async runtime or a TLS stack:
//! - [`ServerUrl`]: a plain `http://host:port` base URL (https is refused with a clear reason);
//! - [`request`]: one request per connection (`Connection: close`), the body sent with its
//!   `Content-Length`;
//! - [`Response`]: the status, headers and a body framed by `Content-Length`, by chunked transfer
//!   encoding ([`Chunked`]; what axum sends for a stream of server-sent events) or by the end of
//!   the connection;
//! - [`SseData`]: the `data:` payloads of a server-sent event stream, one per event.
//!
//! Errors are `io::Error`s whose text reads as one line; the caller names the server.

use std::fmt;
use std::io::{self, BufRead, BufReader, Read, Write};
use std::net::{TcpStream, ToSocketAddrs};
use std::time::Duration;

/// How long connecting may take.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);
/// How long a read may wait: a queued request gets its first byte only once its prompt is
/// processed, and a stream's events come at least every 15 s (axum's keep-alive).
pub const READ_TIMEOUT: Duration = Duration::from_secs(300);
/// Longest status, header or chunk-size line.
const MAX_HEAD_LINE: u64 = 16 * 1024;
const MAX_HEADERS: usize = 100;
/// Longest server-sent event line (the last event carries the receipt: 70 bytes per token).
const MAX_EVENT_LINE: u64 = 64 * 1024 * 1024;

/// A server's base URL: `http://HOST[:PORT][/PATH]`, the port 80 when left out. A trailing `/`
/// or `/v1` (the OpenAI clients' `base_url`) is dropped; a bare `HOST:PORT` is taken as http.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerUrl {
    host: String,
    port: u16,
    /// Prepended to every request path: empty, or `/something` without a trailing `/`.
    prefix: String,
}

impl ServerUrl {
    /// Parses a base URL; the error says what is wrong in one line.
    pub fn parse(text: &str) -> Result<ServerUrl, String> {
        let text = text.trim();
        let lower = text.to_ascii_lowercase();
        if lower.starts_with("https://") {
            return Err(format!(
                "{text}: https is not supported (samebits tui speaks plain http://, as samebits \
                 serve does; reach a remote server through an SSH tunnel)"
            ));
        }
        let rest = if lower.starts_with("http://") {
            &text["http://".len()..]
        } else if let Some((scheme, _)) = text.split_once("://") {
            return Err(format!(
                "{text}: only http:// URLs are supported, not {scheme}://"
            ));
        } else {
            text
        };
        let (authority, path) = match rest.find('/') {
            Some(at) => rest.split_at(at),
            None => (rest, ""),
        };
        if authority.is_empty() {
            return Err(format!(
                "{text:?}: no host (expected http://HOST:PORT, e.g. http://127.0.0.1:8080)"
            ));
        }
        if authority.contains('@') {
            return Err(format!("{text}: user names in the URL are not supported"));
        }
        if path.contains(['?', '#']) {
            return Err(format!(
                "{text}: a base URL has no query or fragment (expected http://HOST:PORT)"
            ));
        }
        let (host, port) = if let Some(bracketed) = authority.strip_prefix('[') {
            let Some((host, after)) = bracketed.split_once(']') else {
                return Err(format!("{text}: an IPv6 address needs its closing ]"));
            };
            match after {
                "" => (host, None),
                _ => match after.strip_prefix(':') {
                    Some(port) => (host, Some(port)),
                    None => return Err(format!("{text}: expected :PORT after ]")),
                },
            }
        } else {
            match authority.split_once(':') {
                Some((host, port)) => (host, Some(port)),
                None => (authority, None),
            }
        };
        if host.is_empty() {
            return Err(format!("{text}: no host"));
        }
        let port = match port {
            None => 80,
            Some(port) => match port.parse::<u16>() {
                Ok(port) if port > 0 => port,
                _ => return Err(format!("{text}: the port must be 1 to 65535, got {port:?}")),
            },
        };
        let mut prefix = path.trim_end_matches('/');
        prefix = prefix.strip_suffix("/v1").unwrap_or(prefix);
        Ok(ServerUrl {
            host: host.to_string(),
            port,
            prefix: prefix.trim_end_matches('/').to_string(),
        })
    }

    /// `host:port` as the `Host` header and `connect` take it (an IPv6 host in brackets).
    fn authority(&self) -> String {
        match self.host.contains(':') {
            true => format!("[{}]:{}", self.host, self.port),
            false => format!("{}:{}", self.host, self.port),
        }
    }
}

impl fmt::Display for ServerUrl {
    fn fmt(&self, f: &mut fmt::Formatter) -> fmt::Result {
        write!(f, "http://{}{}", self.authority(), self.prefix)
    }
}

/// A response whose body is still to be read.
pub struct Response<R> {
    pub status: u16,
    /// Names in lower case, values trimmed, in the order received.
    pub headers: Vec<(String, String)>,
    body: Body<R>,
}

impl<R: BufRead> Response<R> {
    /// The first header called `name` (lower case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    /// The body, framed as the headers say.
    pub fn into_body(self) -> Body<R> {
        self.body
    }

    /// The whole body as text (invalid UTF-8 replaced), at most `limit` bytes of it.
    pub fn text(self, limit: u64) -> io::Result<String> {
        let mut bytes = Vec::new();
        self.body.take(limit).read_to_end(&mut bytes)?;
        Ok(String::from_utf8_lossy(&bytes).into_owned())
    }
}

/// Sends `method path` (the URL's prefix put before `path`) with an optional JSON body to
/// `server` and reads the response's status and headers.
pub fn request(
    server: &ServerUrl,
    method: &str,
    path: &str,
    json_body: Option<&str>,
) -> io::Result<Response<BufReader<TcpStream>>> {
    let mut stream = connect(server)?;
    stream.set_read_timeout(Some(READ_TIMEOUT))?;
    stream.set_write_timeout(Some(READ_TIMEOUT))?;
    let mut head = format!(
        "{method} {}{path} HTTP/1.1\r\nHost: {}\r\nAccept: application/json, text/event-stream\r\n\
         Connection: close\r\nUser-Agent: samebits-tui\r\n",
        server.prefix,
        server.authority()
    );
    let body = json_body.unwrap_or("");
    if json_body.is_some() {
        head.push_str(&format!(
            "Content-Type: application/json\r\nContent-Length: {}\r\n",
            body.len()
        ));
    }
    head.push_str("\r\n");
    stream
        .write_all(head.as_bytes())
        .and_then(|()| stream.write_all(body.as_bytes()))
        .and_then(|()| stream.flush())
        .map_err(|e| annotate(e, "sending the request"))?;
    read_response(BufReader::new(stream)).map_err(|e| annotate(e, "reading the response"))
}

/// Connects to the first of the host's addresses that answers.
fn connect(server: &ServerUrl) -> io::Result<TcpStream> {
    let addresses: Vec<_> = (server.host.as_str(), server.port)
        .to_socket_addrs()
        .map_err(|e| io::Error::new(e.kind(), format!("cannot resolve {}: {e}", server.host)))?
        .collect();
    let mut last = io::Error::new(
        io::ErrorKind::NotFound,
        format!("{} has no address", server.host),
    );
    for address in addresses {
        match TcpStream::connect_timeout(&address, CONNECT_TIMEOUT) {
            Ok(stream) => return Ok(stream),
            Err(e) => last = e,
        }
    }
    Err(match last.kind() {
        io::ErrorKind::ConnectionRefused => io::Error::new(
            io::ErrorKind::ConnectionRefused,
            "connection refused (is `samebits serve` running there?)",
        ),
        io::ErrorKind::TimedOut | io::ErrorKind::WouldBlock => io::Error::new(
            io::ErrorKind::TimedOut,
            format!("no answer to connecting within {CONNECT_TIMEOUT:?}"),
        ),
        _ => annotate(last, "cannot connect"),
    })
}

/// `e` with what was being done put first; a timed-out read says so.
fn annotate(e: io::Error, doing: &str) -> io::Error {
    let text = match e.kind() {
        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => {
            format!("{doing}: no answer within {} s", READ_TIMEOUT.as_secs())
        }
        _ => format!("{doing}: {e}"),
    };
    io::Error::new(e.kind(), text)
}

fn malformed(message: impl Into<String>) -> io::Error {
    io::Error::new(io::ErrorKind::InvalidData, message.into())
}

/// One line of at most `max` bytes, without its line end (`\n` or `\r\n`); `None` at the end
/// of the input.
fn read_line<R: BufRead>(reader: &mut R, max: u64, what: &str) -> io::Result<Option<String>> {
    let mut bytes = Vec::new();
    let n = reader.by_ref().take(max).read_until(b'\n', &mut bytes)?;
    if n == 0 {
        return Ok(None);
    }
    if bytes.last() != Some(&b'\n') {
        return Err(if n as u64 >= max {
            malformed(format!("{what} longer than {max} bytes"))
        } else {
            io::Error::new(
                io::ErrorKind::UnexpectedEof,
                format!("the connection closed inside {what}"),
            )
        });
    }
    bytes.pop();
    if bytes.last() == Some(&b'\r') {
        bytes.pop();
    }
    String::from_utf8(bytes)
        .map(Some)
        .map_err(|_| malformed(format!("{what} is not UTF-8")))
}

/// Reads a status line and headers and frames the body that follows.
pub fn read_response<R: BufRead>(mut reader: R) -> io::Result<Response<R>> {
    let status_line = read_line(&mut reader, MAX_HEAD_LINE, "the status line")?
        .ok_or_else(|| malformed("the server closed the connection without answering"))?;
    let mut parts = status_line.splitn(3, ' ');
    let (version, code) = (parts.next().unwrap_or(""), parts.next().unwrap_or(""));
    let status = match code.parse::<u16>() {
        Ok(status) if version.starts_with("HTTP/1.") => status,
        _ => {
            return Err(malformed(format!(
                "not an HTTP/1.x status line: {:?}",
                head(&status_line, 80)
            )));
        }
    };
    let mut headers = Vec::new();
    loop {
        let line = read_line(&mut reader, MAX_HEAD_LINE, "a header")?
            .ok_or_else(|| malformed("the connection closed inside the headers"))?;
        if line.is_empty() {
            break;
        }
        if headers.len() == MAX_HEADERS {
            return Err(malformed(format!("more than {MAX_HEADERS} headers")));
        }
        let Some((name, value)) = line.split_once(':') else {
            return Err(malformed(format!("a header without a colon: {line:?}")));
        };
        headers.push((name.trim().to_ascii_lowercase(), value.trim().to_string()));
    }
    let get = |name: &str| {
        headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    };
    let chunked = get("transfer-encoding").is_some_and(|v| {
        v.to_ascii_lowercase()
            .split(',')
            .any(|t| t.trim() == "chunked")
    });
    let body = if chunked {
        Body::Chunked(Chunked::new(reader))
    } else if let Some(length) = get("content-length") {
        let length = length
            .parse::<u64>()
            .map_err(|_| malformed(format!("Content-Length {length:?} is not a number")))?;
        Body::Length(reader.take(length))
    } else if status == 204 || status == 304 || (100..200).contains(&status) {
        Body::Length(reader.take(0))
    } else {
        Body::ToEnd(reader)
    };
    Ok(Response {
        status,
        headers,
        body,
    })
}

/// The first `max` characters of `text`, `…` marking a cut.
pub fn head(text: &str, max: usize) -> String {
    match text.char_indices().nth(max) {
        Some((at, _)) => format!("{}…", &text[..at]),
        None => text.to_string(),
    }
}

/// A response body as its headers frame it.
pub enum Body<R> {
    Length(io::Take<R>),
    Chunked(Chunked<R>),
    /// Neither length nor chunks: the body ends with the connection.
    ToEnd(R),
}

impl<R: BufRead> Read for Body<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self {
            Body::Length(r) => {
                let limit = r.limit();
                let n = r.read(buf)?;
                if n == 0 && limit > 0 && !buf.is_empty() {
                    return Err(malformed(format!(
                        "the connection closed {limit} bytes before the body's end"
                    )));
                }
                Ok(n)
            }
            Body::Chunked(r) => r.read(buf),
            Body::ToEnd(r) => r.read(buf),
        }
    }
}

/// Decodes chunked transfer encoding: `SIZE(hex)[;extensions]\r\n DATA \r\n`, ..., then a
/// chunk of size 0 and optional trailers up to an empty line.
pub struct Chunked<R> {
    inner: R,
    /// Bytes left in the current chunk.
    left: u64,
    done: bool,
}

impl<R: BufRead> Chunked<R> {
    pub fn new(inner: R) -> Chunked<R> {
        Chunked {
            inner,
            left: 0,
            done: false,
        }
    }
}

impl<R: BufRead> Read for Chunked<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        if self.done || buf.is_empty() {
            return Ok(0);
        }
        if self.left == 0 {
            let line = read_line(&mut self.inner, MAX_HEAD_LINE, "a chunk size")?
                .ok_or_else(|| malformed("the connection closed before the last chunk"))?;
            let size = line.split(';').next().unwrap_or("").trim();
            self.left = u64::from_str_radix(size, 16)
                .map_err(|_| malformed(format!("chunk size {size:?} is not hexadecimal")))?;
            if self.left == 0 {
                // Trailers, up to the empty line.
                while read_line(&mut self.inner, MAX_HEAD_LINE, "a trailer")?
                    .is_some_and(|l| !l.is_empty())
                {}
                self.done = true;
                return Ok(0);
            }
        }
        let want = buf
            .len()
            .min(usize::try_from(self.left).unwrap_or(usize::MAX));
        let n = self.inner.read(&mut buf[..want])?;
        if n == 0 {
            return Err(malformed("the connection closed inside a chunk"));
        }
        self.left -= n as u64;
        if self.left == 0 {
            match read_line(&mut self.inner, 2, "a chunk's end") {
                Ok(Some(l)) if l.is_empty() => {}
                Ok(None) => return Err(malformed("the connection closed after a chunk")),
                Err(e) if e.kind() != io::ErrorKind::InvalidData => return Err(e),
                _ => return Err(malformed("a chunk does not end with CRLF")),
            }
        }
        Ok(n)
    }
}

/// The `data` of each event of a server-sent event stream (the WHATWG format): `data:` lines
/// (one space after the colon dropped) joined by `\n`, an event ending at an empty line; comment
/// lines (`:`, axum's keep-alive) and other fields (`event`, `id`, `retry`) are skipped, and an
/// event cut off by the stream's end is dropped, as the format says.
pub struct SseData<R> {
    inner: R,
}

impl<R: BufRead> SseData<R> {
    pub fn new(inner: R) -> SseData<R> {
        SseData { inner }
    }
}

impl<R: BufRead> Iterator for SseData<R> {
    type Item = io::Result<String>;

    fn next(&mut self) -> Option<io::Result<String>> {
        let mut data: Option<String> = None;
        loop {
            let line = match read_line(&mut self.inner, MAX_EVENT_LINE, "an event line") {
                Ok(Some(line)) => line,
                // The end, or a last line cut off: its event is incomplete.
                Ok(None) => return None,
                Err(e) if e.kind() == io::ErrorKind::UnexpectedEof => return None,
                Err(e) => return Some(Err(e)),
            };
            if line.is_empty() {
                match data.take() {
                    Some(data) => return Some(Ok(data)),
                    None => continue,
                }
            }
            let (field, value) = match line.split_once(':') {
                Some((field, value)) => (field, value.strip_prefix(' ').unwrap_or(value)),
                None => (line.as_str(), ""),
            };
            if field == "data" {
                match &mut data {
                    Some(data) => {
                        data.push('\n');
                        data.push_str(value);
                    }
                    None => data = Some(value.to_string()),
                }
            }
        }
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use std::io::Cursor;

    fn url(text: &str) -> Result<String, String> {
        ServerUrl::parse(text).map(|u| u.to_string())
    }

    #[test]
    fn urls_parse_to_host_port_and_prefix() {
        assert_eq!(
            url("http://127.0.0.1:8080"),
            Ok("http://127.0.0.1:8080".into())
        );
        assert_eq!(
            url(" HTTP://localhost:8000/ "),
            Ok("http://localhost:8000".into())
        );
        assert_eq!(
            url("http://example.org"),
            Ok("http://example.org:80".into())
        );
        assert_eq!(url("127.0.0.1:9000"), Ok("http://127.0.0.1:9000".into()));
        // The OpenAI clients' base URL ends in /v1; the paths here start with /v1 themselves.
        assert_eq!(url("http://h:1/v1/"), Ok("http://h:1".into()));
        assert_eq!(url("http://h:1/proxy/v1"), Ok("http://h:1/proxy".into()));
        assert_eq!(url("http://[::1]:8080"), Ok("http://[::1]:8080".into()));
        let parsed = ServerUrl::parse("http://[::1]:8080/x").unwrap();
        assert_eq!(
            (parsed.host.as_str(), parsed.port, parsed.prefix.as_str()),
            ("::1", 8080, "/x")
        );
    }

    #[test]
    fn bad_urls_say_why_in_one_line() {
        for (text, says) in [
            ("https://h:1", "https is not supported"),
            ("ftp://h", "only http:// URLs are supported"),
            ("http://", "no host"),
            ("http://:80", "no host"),
            ("http://h:0", "the port must be 1 to 65535"),
            ("http://h:99999", "the port must be 1 to 65535"),
            ("http://h:x", "the port must be 1 to 65535"),
            ("http://u:p@h:1", "user names"),
            ("http://h:1/?a=b", "no query"),
            ("http://[::1", "closing ]"),
        ] {
            let error = url(text).unwrap_err();
            assert!(error.contains(says), "{text}: {error}");
            assert!(!error.contains('\n'), "{error}");
        }
    }

    fn response(raw: &str) -> io::Result<(u16, String)> {
        let response = read_response(Cursor::new(raw.as_bytes().to_vec()))?;
        let status = response.status;
        let mut body = String::new();
        response.into_body().read_to_string(&mut body)?;
        Ok((status, body))
    }

    #[test]
    fn bodies_are_framed_by_length_chunks_or_the_end() {
        assert_eq!(
            response("HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nhello, and more").unwrap(),
            (200, "hello".into())
        );
        // axum's streams: chunked, a chunk extension, a trailer, bare \n line ends.
        let chunked = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n\
                       5\r\nhello\r\n7;ext=1\r\n, world\r\n0\r\nX-Trailer: t\r\n\r\n";
        assert_eq!(response(chunked).unwrap(), (200, "hello, world".into()));
        assert_eq!(
            response("HTTP/1.0 404 Not Found\nServer: x\n\nno route").unwrap(),
            (404, "no route".into())
        );
        let big = "x".repeat(70_000);
        let one_chunk = format!(
            "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n{:x}\r\n{big}\r\n0\r\n\r\n",
            big.len()
        );
        assert_eq!(response(&one_chunk).unwrap().1, big);
    }

    #[test]
    fn broken_responses_are_errors_not_panics() {
        for (raw, says) in [
            ("", "without answering"),
            ("SSH-2.0-OpenSSH\r\n\r\n", "not an HTTP/1.x status line"),
            ("HTTP/1.1 200 OK\r\nbad header\r\n\r\n", "without a colon"),
            (
                "HTTP/1.1 200 OK\r\ncontent-length: 10\r\n\r\nshort",
                "before the body's end",
            ),
            (
                "HTTP/1.1 200 OK\r\ncontent-length: x\r\n\r\n",
                "not a number",
            ),
            (
                "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\nzz\r\n",
                "not hexadecimal",
            ),
            (
                "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n9\r\nabc",
                "inside a chunk",
            ),
            (
                "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabcXY",
                "CRLF",
            ),
            (
                "HTTP/1.1 200 OK\r\ntransfer-encoding: chunked\r\n\r\n3\r\nabc\r\n",
                "before the last chunk",
            ),
        ] {
            let error = response(raw).unwrap_err().to_string();
            assert!(error.contains(says), "{raw:?}: {error}");
        }
    }

    fn events(stream: &str) -> Vec<String> {
        SseData::new(Cursor::new(stream.as_bytes().to_vec()))
            .collect::<io::Result<_>>()
            .unwrap()
    }

    #[test]
    fn events_give_their_data() {
        assert_eq!(
            events("data: {\"a\":1}\n\n:\n\ndata:[DONE]\r\n\r\n"),
            ["{\"a\":1}", "[DONE]"]
        );
        // Several data lines join with \n; other fields and comments are skipped; one space
        // after the colon is dropped, a second one kept.
        assert_eq!(
            events("event: x\nid: 3\ndata: one\ndata:  two\n: keep-alive\n\n\n\n"),
            ["one\n two"]
        );
        // An event cut off by the end of the stream is not dispatched.
        assert_eq!(events("data: whole\n\ndata: cut"), ["whole"]);
        assert!(events("").is_empty());
    }

    #[test]
    fn events_read_through_a_chunked_body() {
        // Chunk boundaries fall inside events and lines.
        let raw = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\
                   transfer-encoding: chunked\r\n\r\n\
                   4\r\ndata\r\nc\r\n: a\n\ndata: b\r\n2\r\n\n\n\r\n0\r\n\r\n";
        let response = read_response(Cursor::new(raw.as_bytes().to_vec())).unwrap();
        assert_eq!(response.header("content-type"), Some("text/event-stream"));
        let data: Vec<String> = SseData::new(BufReader::new(response.into_body()))
            .collect::<io::Result<_>>()
            .unwrap();
        assert_eq!(data, ["a", "b"]);
    }

    /// A local URL where nothing listens, and its port: a port bound then dropped (almost
    /// certainly closed now).
    pub(crate) fn closed_server() -> (ServerUrl, u16) {
        let port = std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port();
        let url = ServerUrl::parse(&format!("http://127.0.0.1:{port}")).unwrap();
        (url, port)
    }

    #[test]
    fn a_closed_port_is_refused_in_one_line() {
        let (server, _) = closed_server();
        let error = request(&server, "GET", "/health", None)
            .err()
            .expect("nothing listens there")
            .to_string();
        assert!(error.starts_with("connection refused"), "{error}");
    }

    #[test]
    fn a_request_goes_out_with_its_length_and_the_prefix() {
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let serve = std::thread::spawn(move || {
            let (stream, _) = listener.accept().unwrap();
            let mut reader = BufReader::new(stream);
            let mut head = String::new();
            while !head.ends_with("\r\n\r\n") {
                reader.read_line(&mut head).unwrap();
            }
            let mut body = [0u8; 13];
            reader.read_exact(&mut body).unwrap();
            let mut stream = reader.into_inner();
            stream
                .write_all(b"HTTP/1.1 201 Created\r\ncontent-length: 2\r\n\r\nok")
                .unwrap();
            (head, String::from_utf8(body.to_vec()).unwrap())
        });
        let server = ServerUrl::parse(&format!("http://127.0.0.1:{port}/base/v1")).unwrap();
        let response = request(&server, "POST", "/v1/x", Some("{\"prompt\":1}\n")).unwrap();
        assert_eq!(response.status, 201);
        assert_eq!(response.text(100).unwrap(), "ok");
        let (head, body) = serve.join().unwrap();
        assert!(head.starts_with("POST /base/v1/x HTTP/1.1\r\n"), "{head}");
        assert!(
            head.contains(&format!("Host: 127.0.0.1:{port}\r\n")),
            "{head}"
        );
        assert!(head.contains("Content-Length: 13\r\n"), "{head}");
        assert_eq!(body, "{\"prompt\":1}\n");
    }
}
