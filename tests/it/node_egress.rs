//! Egress like a company network, on loopback with a private CA made here: an HTTPS upstream
//! trusted through `ca_file` (JSON and streams, HTTP/2 by ALPN), the same upstream refused
//! without it (a clear journaled reason, the connection cools, the request fails over), an
//! egress CONNECT proxy that sees the tunnel (and one that refuses it), `NO_PROXY` from the
//! environment as the real binary reads it, and the node itself serving HTTPS.

#![expect(
    clippy::unwrap_used,
    reason = "test code: a failed step fails the test loudly"
)]

use crate::support;

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use quotaroute::internals::UpstreamClient;
use quotaroute_mock::{self as mock_upstream, MockUpstream};
use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::CertificateDer;
use serde_json::{json, Value};
use support::*;
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader};
use tokio::net::TcpListener;

/// A private CA and a server certificate it signed for `localhost` and `127.0.0.1`.
struct Pki {
    dir: tempfile::TempDir,
    ca_pem: String,
}

impl Pki {
    fn new() -> Pki {
        let ca_key = KeyPair::generate().unwrap();
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(DnType::CommonName, "quotaroute test CA");
        let ca_cert = ca_params.self_signed(&ca_key).unwrap();
        let issuer = Issuer::new(ca_params, ca_key);
        let leaf_key = KeyPair::generate().unwrap();
        let leaf_params =
            CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()]).unwrap();
        let leaf = leaf_params.signed_by(&leaf_key, &issuer).unwrap();
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("ca.pem"), ca_cert.pem()).unwrap();
        std::fs::write(dir.path().join("server.pem"), leaf.pem()).unwrap();
        std::fs::write(dir.path().join("server.key"), leaf_key.serialize_pem()).unwrap();
        Pki {
            ca_pem: ca_cert.pem(),
            dir,
        }
    }

    fn path(&self, name: &str) -> PathBuf {
        self.dir.path().join(name)
    }

    fn ca_certs(&self) -> Vec<CertificateDer<'static>> {
        CertificateDer::pem_slice_iter(self.ca_pem.as_bytes())
            .map(Result::unwrap)
            .collect()
    }
}

/// The mock upstream served over TLS with the PKI's server certificate; records each
/// connection's ALPN protocol.
async fn start_tls_mock(pki: &Pki) -> (String, MockUpstream, Arc<Mutex<Vec<String>>>) {
    let config =
        quotaroute::internals::server_tls(&pki.path("server.pem"), &pki.path("server.key"))
            .unwrap();
    let acceptor = tokio_rustls::TlsAcceptor::from(config);
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let mock = MockUpstream::new();
    let app = mock_upstream::router(mock.clone());
    let protocols = Arc::new(Mutex::new(Vec::new()));
    let seen = protocols.clone();
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let (acceptor, app, seen) = (acceptor.clone(), app.clone(), seen.clone());
            tokio::spawn(async move {
                let Ok(stream) = acceptor.accept(stream).await else {
                    return;
                };
                let alpn = stream
                    .get_ref()
                    .1
                    .alpn_protocol()
                    .map(|p| String::from_utf8_lossy(p).into_owned());
                seen.lock()
                    .unwrap()
                    .push(alpn.unwrap_or_else(|| "none".into()));
                let service = hyper::service::service_fn(
                    move |request: hyper::Request<hyper::body::Incoming>| {
                        use tower::ServiceExt;
                        app.clone().oneshot(request.map(axum::body::Body::new))
                    },
                );
                let _ = hyper_util::server::conn::auto::Builder::new(
                    hyper_util::rt::TokioExecutor::new(),
                )
                .serve_connection(hyper_util::rt::TokioIo::new(stream), service)
                .await;
            });
        }
    });
    (format!("https://127.0.0.1:{port}"), mock, protocols)
}

/// A small CONNECT proxy: records each tunnel's target, answers `refuse` (e.g. 407) instead
/// when set.
async fn start_proxy(refuse: Option<&'static str>) -> (String, Arc<Mutex<Vec<String>>>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    let tunnels = Arc::new(Mutex::new(Vec::new()));
    let seen = tunnels.clone();
    tokio::spawn(async move {
        loop {
            let Ok((stream, _)) = listener.accept().await else {
                continue;
            };
            let seen = seen.clone();
            tokio::spawn(async move {
                let mut reader = BufReader::new(stream);
                let mut head = Vec::new();
                loop {
                    let mut line = String::new();
                    if reader.read_line(&mut line).await.unwrap_or(0) == 0 {
                        return;
                    }
                    if line == "\r\n" {
                        break;
                    }
                    head.push(line.trim_end().to_string());
                }
                let target = head[0]
                    .strip_prefix("CONNECT ")
                    .and_then(|rest| rest.split(' ').next())
                    .unwrap_or("?")
                    .to_string();
                let auth = head
                    .iter()
                    .find(|l| l.to_ascii_lowercase().starts_with("proxy-authorization:"))
                    .cloned();
                seen.lock()
                    .unwrap()
                    .push(format!("{target}{}", auth.map(|_| " (auth)").unwrap_or("")));
                let mut client = reader.into_inner();
                if let Some(status) = refuse {
                    let _ = client
                        .write_all(
                            format!("HTTP/1.1 {status}\r\ncontent-length: 0\r\n\r\n").as_bytes(),
                        )
                        .await;
                    return;
                }
                let Ok(mut upstream) = tokio::net::TcpStream::connect(&target).await else {
                    let _ = client.write_all(b"HTTP/1.1 502 Bad Gateway\r\n\r\n").await;
                    return;
                };
                let _ = client
                    .write_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
                    .await;
                let _ = tokio::io::copy_bidirectional(&mut client, &mut upstream).await;
            });
        }
    });
    (url, tunnels)
}

/// The standard config with the `openai` provider moved to `base` (and `provider_extra`
/// added to it).
fn openai_at(base: &str, provider_extra: &str) -> impl FnOnce(String) -> String {
    let base = base.to_string();
    let provider_extra = provider_extra.to_string();
    move |text: String| {
        let (head, tail) = text.split_once("[[providers]]\nname = \"openai\"").unwrap();
        let (_, rest) = tail.split_once("base_url = ").unwrap();
        let (_, rest) = rest.split_once('\n').unwrap();
        format!(
            "{head}[[providers]]\nname = \"openai\"\nformat = \"openai\"\nbase_url = \"{base}/v1\"\n{provider_extra}\n{rest}"
        )
    }
}

fn toml_path(path: &Path) -> String {
    path.display().to_string()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_https_upstream_signed_by_a_private_ca_is_trusted_through_ca_file() {
    let pki = Pki::new();
    let (base, mock, protocols) = start_tls_mock(&pki).await;
    let harness = Harness::start_editing(openai_at(
        &base,
        &format!("ca_file = \"{}\"", toml_path(&pki.path("ca.pem"))),
    ))
    .await;
    let response = harness.chat("team").await;
    assert_eq!(response.status(), 200);
    let value: Value = response.json().await.unwrap();
    assert!(value["usage"]["prompt_tokens"].as_u64().unwrap() > 0);
    let response = harness
        .post_json(
            "/v1/chat/completions",
            json!({"model": "team", "stream": true, "messages": [{"role": "user", "content": "hi"}]}),
        )
        .await;
    assert_eq!(response.status(), 200);
    assert!(response.text().await.unwrap().contains("[DONE]"));
    assert_eq!(mock.stats().total, 2);
    // HTTP/2 by ALPN, and the connection was pooled: one TLS handshake for both requests.
    assert_eq!(*protocols.lock().unwrap(), vec!["h2".to_string()]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn requests_in_flight_at_once_share_one_h2_connection() {
    let pki = Pki::new();
    let (base, mock, protocols) = start_tls_mock(&pki).await;
    // Each answer waits, so the requests below are in progress together.
    mock.set_rules(vec![mock_upstream::Rule::always(
        mock_upstream::Fault::Latency { ms: 300 },
    )]);
    let client = UpstreamClient::with_egress(&pki.ca_certs(), None);
    let chat = json!({"model": "gpt-4o-mini", "messages": [{"role": "user", "content": "hi"}]});
    let url = format!("{base}/v1/chat/completions");
    // The first request learns, by ALPN, that the upstream speaks h2.
    let (status, body) = request(&client, "POST", &url, Some(chat.clone())).await;
    assert_eq!(status, 200, "{body}");
    let answers = futures_util::future::join_all(
        (0..4).map(|_| request(&client, "POST", &url, Some(chat.clone()))),
    )
    .await;
    assert!(answers.iter().all(|(status, _)| *status == 200));
    let stats = mock.stats();
    assert_eq!(stats.total, 5);
    assert!(
        stats.max_in_flight.values().any(|&peak| peak >= 2),
        "the requests overlapped: {:?}",
        stats.max_in_flight
    );
    assert_eq!(
        *protocols.lock().unwrap(),
        vec!["h2".to_string()],
        "one multiplexed connection"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn without_its_ca_the_upstream_is_refused_clearly_and_the_request_fails_over() {
    let pki = Pki::new();
    let (tls_base, tls_mock, _) = start_tls_mock(&pki).await;
    // Provider `openai` (oa-1..3) speaks TLS with an unknown CA; `team` fails over to a plain
    // provider's key listed after them.
    let harness = Harness::start_editing(|text| {
        // The plain provider uses the harness's own mock, where the anthropic provider points.
        let plain_base = text
            .split("name = \"anthropic\"\nformat = \"anthropic\"\nbase_url = \"")
            .nth(1)
            .and_then(|rest| rest.split('"').next())
            .unwrap()
            .to_string();
        let text = openai_at(&tls_base, "")(text);
        text.replace(
            "[[combos]]\nname = \"team\"\ntargets = [\n",
            "[[combos]]\nname = \"team\"\nstrategy = \"priority\"\nmax_attempts = 4\ntargets = [\n",
        )
        .replace(
            "  { connection = \"oa-3\", model = \"gpt-4o-mini\", weight = 1 },\n",
            "  { connection = \"oa-3\", model = \"gpt-4o-mini\", weight = 1 },\n  { connection = \"plain-1\", model = \"gpt-4o-mini\" },\n",
        ) + &format!(
            "\n[[providers]]\nname = \"plain\"\nformat = \"openai\"\nbase_url = \"{plain_base}\"\n\n[[connections]]\nid = \"plain-1\"\nprovider = \"plain\"\napi_key = \"{}\"\n",
            upstream_key("plain-1")
        )
    })
    .await;

    let response = harness.chat("team").await;
    assert_eq!(response.status(), 200);
    assert_eq!(header(&response, "x-quotaroute-connection"), "plain-1");
    assert_eq!(header(&response, "x-quotaroute-attempts"), "4");
    assert_eq!(
        tls_mock.stats().total,
        0,
        "no request crossed the refused TLS"
    );
    harness.settle().await;
    let events = harness.journal_events().await;
    let failed: Vec<&Value> = events
        .iter()
        .filter(|e| e["kind"] == "request_failed")
        .collect();
    assert_eq!(failed.len(), 3);
    for event in &failed {
        assert_eq!(event["class"], "network");
        let message = event["message"].as_str().unwrap();
        assert!(
            message.starts_with("certificate signed by unknown authority for 127.0.0.1:"),
            "{message}"
        );
        assert!(message.ends_with("(add its CA to providers.ca_file)"));
    }
    let state = harness.admin_get("/admin/state").await;
    assert!(
        connection(&state, "oa-1")["cooldown_remaining_ms"]
            .as_u64()
            .unwrap()
            > 0
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_egress_proxy_carries_the_tunnel_and_a_refusal_names_the_proxy_not_its_password() {
    let pki = Pki::new();
    let (base, mock, _) = start_tls_mock(&pki).await;
    let upstream_port = base.rsplit(':').next().unwrap().to_string();
    let (proxy, tunnels) = start_proxy(None).await;
    let harness = Harness::start_editing(openai_at(
        &base,
        &format!(
            "ca_file = \"{}\"\nproxy = \"{proxy}\"",
            toml_path(&pki.path("ca.pem"))
        ),
    ))
    .await;
    let response = harness.chat("team").await;
    assert_eq!(response.status(), 200);
    assert_eq!(mock.stats().total, 1);
    assert_eq!(
        *tunnels.lock().unwrap(),
        vec![format!("127.0.0.1:{upstream_port}")]
    );

    // A proxy that refuses (407 here), reached with credentials in its URL.
    let (refusing, refused) = start_proxy(Some("407 Proxy Authentication Required")).await;
    let with_password = refusing.replacen("http://", "http://alice:s3cret-proxy-pass@", 1);
    let harness = Harness::start_editing(openai_at(
        &base,
        &format!(
            "ca_file = \"{}\"\nproxy = \"{with_password}\"",
            toml_path(&pki.path("ca.pem"))
        ),
    ))
    .await;
    let response = harness.chat("team").await;
    assert_eq!(response.status(), 502);
    let body = response.text().await.unwrap();
    // The client hears the provider and the class; the proxy and its address are the log's
    // and the journal's.
    assert!(
        body.contains("upstream `openai` failed (network)"),
        "{body}"
    );
    assert!(!body.contains("127.0.0.1"), "{body}");
    assert!(!body.contains("s3cret"));
    assert!(refused.lock().unwrap()[0].ends_with("(auth)"));
    harness.settle().await;
    let journal = harness
        .admin_text("/admin/journal?since_seq=0&limit=1000")
        .await;
    assert!(journal.contains("egress proxy refused the tunnel to 127.0.0.1"));
    assert!(
        !journal.contains("s3cret"),
        "the proxy password leaked into the journal"
    );
}

/// The real binary on `config`, with `env` added to a clean environment.
fn spawn_node(config: &Path, env: &[(&str, &str)]) -> KillOnDrop {
    let mut command = Command::new(env!("CARGO_BIN_EXE_quotaroute"));
    command
        .args(["serve", "--config"])
        .arg(config)
        .env_clear()
        .env("RUST_LOG", "warn")
        .stdout(Stdio::null())
        .stderr(Stdio::null());
    for (name, value) in env {
        command.env(name, value);
    }
    KillOnDrop(command.spawn().unwrap())
}

/// Sends `request` through a client trusting the test CA (HTTPS) or plain HTTP.
async fn request(
    client: &UpstreamClient,
    method: &str,
    url: &str,
    body: Option<Value>,
) -> (u16, String) {
    let mut builder = http::Request::builder().method(method).uri(url);
    builder = builder.header("authorization", format!("Bearer {CLIENT_KEY}"));
    let body = match body {
        Some(body) => {
            builder = builder.header("content-type", "application/json");
            Bytes::from(serde_json::to_vec(&body).unwrap())
        }
        None => Bytes::new(),
    };
    let response = client
        .send_within(
            builder.body(Full::new(body)).unwrap(),
            Duration::from_secs(10),
        )
        .await
        .unwrap();
    let status = response.status().as_u16();
    let bytes = response.into_body().collect().await.unwrap().to_bytes();
    (status, String::from_utf8_lossy(&bytes).into_owned())
}

async fn wait_ready(client: &UpstreamClient, base: &str) {
    let deadline = Instant::now() + Duration::from_secs(20);
    loop {
        let url = format!("{base}/healthz");
        let ok = tokio::time::timeout(Duration::from_secs(2), async {
            let request = http::Request::get(url.as_str())
                .body(Full::new(Bytes::new()))
                .unwrap();
            client.send_within(request, Duration::from_secs(1)).await
        })
        .await;
        if let Ok(Ok(response)) = ok {
            if response.status() == 200 {
                return;
            }
        }
        assert!(Instant::now() < deadline, "node did not become ready");
        tokio::time::sleep(Duration::from_millis(30)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_real_binary_reads_https_proxy_and_no_proxy_from_its_environment() {
    let pki = Pki::new();
    let (base, mock, _) = start_tls_mock(&pki).await;
    let (proxy, tunnels) = start_proxy(None).await;
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let config_text = openai_at(
        &base,
        &format!("ca_file = \"{}\"", toml_path(&pki.path("ca.pem"))),
    )(standard_config(
        "http://127.0.0.1:9",
        &dir.path().join("journal"),
        "",
    ))
    .replace(
        "listen = \"127.0.0.1:0\"",
        &format!("listen = \"127.0.0.1:{port}\""),
    );
    let config = dir.path().join("quotaroute.toml");
    std::fs::write(&config, config_text).unwrap();
    let client = UpstreamClient::new();
    let node_base = format!("http://127.0.0.1:{port}");
    let chat = json!({"model": "team", "messages": [{"role": "user", "content": "hi"}]});

    // HTTPS_PROXY alone: the upstream is reached through the tunnel.
    let node = spawn_node(&config, &[("HTTPS_PROXY", &proxy)]);
    wait_ready(&client, &node_base).await;
    let (status, body) = request(
        &client,
        "POST",
        &format!("{node_base}/v1/chat/completions"),
        Some(chat.clone()),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(tunnels.lock().unwrap().len(), 1);
    drop(node);

    // NO_PROXY naming the upstream's host: straight there, the proxy sees nothing more.
    let _node = spawn_node(
        &config,
        &[("HTTPS_PROXY", &proxy), ("NO_PROXY", "localhost,127.0.0.1")],
    );
    wait_ready(&client, &node_base).await;
    let (status, _) = request(
        &client,
        "POST",
        &format!("{node_base}/v1/chat/completions"),
        Some(chat),
    )
    .await;
    assert_eq!(status, 200);
    assert_eq!(tunnels.lock().unwrap().len(), 1);
    assert_eq!(mock.stats().total, 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_node_serves_https_over_h2_and_http1() {
    let pki = Pki::new();
    let harness = Harness::start_editing(|text| {
        text.replace(
            "shutdown_grace_ms = 2000",
            &format!(
                "shutdown_grace_ms = 2000\ntls_cert = \"{}\"\ntls_key = \"{}\"",
                toml_path(&pki.path("server.pem")),
                toml_path(&pki.path("server.key"))
            ),
        )
    })
    .await;
    let base = harness.base.replace("http://", "https://");
    let trusting = UpstreamClient::with_egress(&pki.ca_certs(), None);
    let (status, body) = request(
        &trusting,
        "POST",
        &format!("{base}/v1/chat/completions"),
        Some(json!({"model": "team", "messages": [{"role": "user", "content": "hi"}]})),
    )
    .await;
    assert_eq!(status, 200, "{body}");
    let (status, body) = request(&trusting, "GET", &format!("{base}/v1/models"), None).await;
    assert_eq!(status, 200);
    assert!(body.contains("\"team\""));
    // An early answer (401 before the body is read) says `Connection: close` on HTTP/1.1;
    // over h2 that header is not allowed and must not break the answer.
    let unauthorized = http::Request::post(format!("{base}/v1/chat/completions"))
        .header("content-type", "application/json")
        .body(Full::new(Bytes::from_static(b"{}")))
        .unwrap();
    let response = trusting
        .send_within(unauthorized, Duration::from_secs(5))
        .await
        .unwrap();
    assert_eq!(response.version(), http::Version::HTTP_2);
    assert_eq!(response.status(), 401);
    // A client without the CA is refused by its own TLS, and plain HTTP gets no answer.
    let distrusting = UpstreamClient::new();
    let request = http::Request::get(format!("{base}/healthz"))
        .body(Full::new(Bytes::new()))
        .unwrap();
    let error = distrusting
        .send_within(request, Duration::from_secs(5))
        .await
        .unwrap_err();
    assert!(
        error.message.contains("unknown authority"),
        "{}",
        error.message
    );
    assert!(harness
        .client
        .get(harness.url("/healthz"))
        .send()
        .await
        .is_err());

    // The official Python SDK over HTTPS, trusting the CA through SSL_CERT_FILE.
    let venv = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(".venv-sdk/bin/python");
    if !venv.exists() {
        assert!(std::env::var("CI").is_err(), "CI must install the SDK venv");
        return;
    }
    let script = format!(
        "import openai\nc = openai.OpenAI(base_url='{base}/v1', api_key='{CLIENT_KEY}', max_retries=0)\nr = c.chat.completions.create(model='team', messages=[{{'role': 'user', 'content': 'hi'}}])\nprint(r.choices[0].message.content)\n"
    );
    let ca = pki.path("ca.pem");
    let output = tokio::task::spawn_blocking(move || {
        Command::new(venv)
            .args(["-c", &script])
            .env("SSL_CERT_FILE", ca)
            .output()
            .unwrap()
    })
    .await
    .unwrap();
    assert!(
        output.status.success(),
        "{}",
        String::from_utf8_lossy(&output.stderr)
    );
    assert!(!String::from_utf8_lossy(&output.stdout).trim().is_empty());
}
