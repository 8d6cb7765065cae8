//! `mcpgate --probe URL`: a health probe for container images without a shell or curl
//! (HEALTHCHECK, exec probes): one HTTP/1.1 GET to a plain `http://host:port/path`, success
//! when the status is 200.
//!
//! Invariant: bounded in time (connect, write and read each time out) and in what it reads
//! (the status line only).

use std::io::{BufRead as _, BufReader, Write as _};
use std::net::{TcpStream, ToSocketAddrs as _};
use std::time::Duration;

use anyhow::{Context as _, bail};

const TIMEOUT: Duration = Duration::from_secs(3);

/// GETs `url`; Ok when it answers 200.
pub fn probe(url: &str) -> anyhow::Result<()> {
    let rest = url.strip_prefix("http://").context("the probe URL must start with http://")?;
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let addr = authority
        .to_socket_addrs()
        .with_context(|| format!("resolving {authority}"))?
        .next()
        .with_context(|| format!("{authority} resolves to nothing"))?;
    let mut stream = TcpStream::connect_timeout(&addr, TIMEOUT).with_context(|| format!("connecting to {addr}"))?;
    stream.set_read_timeout(Some(TIMEOUT))?;
    stream.set_write_timeout(Some(TIMEOUT))?;
    write!(
        stream,
        "GET {path} HTTP/1.1\r\nHost: {authority}\r\nConnection: close\r\nUser-Agent: mcpgate-probe\r\n\r\n"
    )?;
    let mut status = String::new();
    BufReader::new(stream).read_line(&mut status)?;
    match status.split_whitespace().nth(1) {
        Some("200") => Ok(()),
        Some(code) => bail!("{url} answered {code}"),
        None => bail!("{url} sent no status line"),
    }
}
