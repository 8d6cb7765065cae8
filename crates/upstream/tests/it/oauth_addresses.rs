//! Requests to authorization servers reach only the addresses the upstream's policy allows
//! (SSRF through discovery): a token or registration endpoint on loopback, as an IP literal or
//! as a name that resolves there, is refused with an error naming the setting, and the server
//! there never sees a connection — unless loopback is allowed (the upstream itself on loopback),
//! when the same requests do reach it.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use mcpgate_upstream::oauth::{AddressPolicy, ClientAuth, ClientRegistration, OAuthClient, ServerMetadata};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

/// A listener that counts the connections it accepts and answers each with a 400.
async fn counting_server() -> (u16, Arc<AtomicUsize>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.expect("bind");
    let port = listener.local_addr().expect("addr").port();
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = Arc::clone(&accepted);
    tokio::spawn(async move {
        while let Ok((mut socket, _)) = listener.accept().await {
            count.fetch_add(1, Ordering::SeqCst);
            read_request(&mut socket).await;
            let _ = socket
                .write_all(b"HTTP/1.1 400 Bad Request\r\ncontent-type: application/json\r\ncontent-length: 25\r\nconnection: close\r\n\r\n{\"error\":\"invalid_grant\"}")
                .await;
        }
    });
    (port, accepted)
}

/// Reads one request (head, then a body of its `content-length`) so that the answer follows it.
async fn read_request(socket: &mut tokio::net::TcpStream) {
    let mut request = Vec::new();
    let mut chunk = [0u8; 4096];
    loop {
        let Ok(n) = socket.read(&mut chunk).await else { return };
        if n == 0 {
            return;
        }
        request.extend_from_slice(&chunk[..n]);
        let text = String::from_utf8_lossy(&request).to_ascii_lowercase();
        if let Some(head) = text.find("\r\n\r\n") {
            let length = text
                .lines()
                .find_map(|l| l.strip_prefix("content-length:").and_then(|v| v.trim().parse::<usize>().ok()))
                .unwrap_or(0);
            if request.len() >= head + 4 + length {
                return;
            }
        }
    }
}

fn server_at(base: &str) -> ServerMetadata {
    serde_json::from_value(serde_json::json!({
        "issuer": base, "authorization_endpoint": format!("{base}/authorize"),
        "token_endpoint": format!("{base}/token"), "registration_endpoint": format!("{base}/register"),
        "code_challenge_methods_supported": ["S256"],
    }))
    .expect("metadata")
}

fn client() -> ClientRegistration {
    ClientRegistration { client_id: "gw".to_owned(), client_secret: None, auth: ClientAuth::None }
}

#[tokio::test]
async fn a_loopback_authorization_server_is_refused_unless_the_upstream_is_on_loopback() {
    let (port, accepted) = counting_server().await;
    let public =
        OAuthClient::new(Duration::from_secs(5)).and_then(|c| c.guarded_by(AddressPolicy::PUBLIC)).expect("client");
    for base in [format!("http://127.0.0.1:{port}"), format!("http://[::1]:{port}"), format!("http://localhost:{port}")]
    {
        let server = server_at(&base);
        let refused = public.refresh(&server, &client(), "rt", "https://mcp.example/mcp").await.expect_err("refused");
        let text = refused.client_text();
        assert!(text.contains("loopback") && text.contains("allow_private_addresses"), "{base}: {text}");
        let refused = public.register(&server, "mcpgate", "https://gw.example/cb").await.expect_err("refused");
        assert!(refused.client_text().contains("loopback"), "{base}: {refused}");
    }
    assert_eq!(accepted.load(Ordering::SeqCst), 0, "no connection reached the loopback server");

    // The positive control: next to a loopback upstream, the same requests reach it.
    let upstream = reqwest::Url::parse("http://127.0.0.1:1/mcp").expect("url");
    let beside = OAuthClient::new(Duration::from_secs(5))
        .and_then(|c| c.guarded_by(AddressPolicy::for_upstream(&upstream, false)))
        .expect("client");
    let server = server_at(&format!("http://localhost:{port}"));
    let answered = beside.refresh(&server, &client(), "rt", "https://mcp.example/mcp").await.expect_err("a 400");
    assert!(answered.to_string().contains("invalid_grant"), "the server answered: {answered}");
    assert_eq!(accepted.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn private_link_local_and_metadata_addresses_are_refused_before_any_request() {
    let public =
        OAuthClient::new(Duration::from_secs(5)).and_then(|c| c.guarded_by(AddressPolicy::PUBLIC)).expect("client");
    for (base, kind) in [
        ("https://169.254.169.254", "link-local"),
        ("https://10.0.0.7", "private"),
        ("https://[fd00:ec2::254]", "private"),
        ("https://[::ffff:192.168.0.1]", "private"),
    ] {
        let refused =
            public.refresh(&server_at(base), &client(), "rt", "https://mcp.example/mcp").await.expect_err("refused");
        assert!(
            refused.client_text().contains(kind) && refused.client_text().contains("no request made"),
            "{base}: {refused}"
        );
    }
}
