//! `replay --from URL` against a stub of `GET /admin/journal?since_seq=N&limit=M` on loopback:
//! pages are followed, the admin key is sent as a Bearer token, chunked bodies are decoded, and
//! the timeline equals the one read from the journal directory.

#![expect(clippy::unwrap_used, reason = "test helpers outside #[test] fns")]

use crate::replay_support;

use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;

use quotaroute::journal::envelope_from_json;
use quotaroute::replay::remote::fetch_journal;
use quotaroute::replay::ReplayArgs;
use replay_support::*;

/// Serves the fixture's lines with `seq >= since_seq`, at most `limit`, chunked; 401 without
/// the key. Returns the base URL and a handle that yields the request targets seen.
fn stub(key: &'static str, connections: usize) -> (String, std::thread::JoinHandle<Vec<String>>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/", listener.local_addr().unwrap());
    let lines: Vec<String> = std::fs::read_to_string(fixture_ndjson())
        .unwrap()
        .lines()
        .map(str::to_string)
        .collect();
    let handle = std::thread::spawn(move || {
        let mut targets = Vec::new();
        for stream in listener.incoming().take(connections) {
            let mut stream = stream.unwrap();
            let mut reader = BufReader::new(stream.try_clone().unwrap());
            let mut request_line = String::new();
            reader.read_line(&mut request_line).unwrap();
            let mut authorized = false;
            loop {
                let mut header = String::new();
                reader.read_line(&mut header).unwrap();
                if header.trim().is_empty() {
                    break;
                }
                // Header names are case-insensitive (hyper sends them lower-case).
                authorized |= header.trim().split_once(':').is_some_and(|(name, value)| {
                    name.eq_ignore_ascii_case("authorization")
                        && value.trim() == format!("Bearer {key}")
                });
            }
            let target = request_line.split_whitespace().nth(1).unwrap().to_string();
            targets.push(target.clone());
            if !authorized {
                stream
                    .write_all(b"HTTP/1.1 401 Unauthorized\r\ncontent-length: 0\r\n\r\n")
                    .unwrap();
                continue;
            }
            let query = target.split_once('?').unwrap().1;
            let param = |name: &str| -> u64 {
                query
                    .split('&')
                    .find_map(|kv| kv.strip_prefix(&format!("{name}=")))
                    .unwrap()
                    .parse()
                    .unwrap()
            };
            let (since, limit) = (param("since_seq"), param("limit"));
            let body: String = lines
                .iter()
                .filter(|l| envelope_from_json(l).unwrap().seq >= since)
                .take(limit as usize)
                .map(|l| format!("{l}\n"))
                .collect();
            let mut response =
                b"HTTP/1.1 200 OK\r\ncontent-type: application/x-ndjson\r\ntransfer-encoding: chunked\r\n\r\n"
                    .to_vec();
            for chunk in body.as_bytes().chunks(1000) {
                response.extend_from_slice(format!("{:x}\r\n", chunk.len()).as_bytes());
                response.extend_from_slice(chunk);
                response.extend_from_slice(b"\r\n");
            }
            response.extend_from_slice(b"0\r\n\r\n");
            stream.write_all(&response).unwrap();
        }
        targets
    });
    (url, handle)
}

#[test]
fn item7_from_url_pages_through_the_admin_journal_with_the_key() {
    let (url, server) = stub("admin-secret", 3);
    let items = fetch_journal(&url, Some("admin-secret"), 300).unwrap();
    assert_eq!(items.len(), 828);
    assert!(items.iter().all(Result::is_ok));
    let targets = server.join().unwrap();
    assert_eq!(
        targets,
        [
            "/admin/journal?since_seq=0&limit=300",
            "/admin/journal?since_seq=301&limit=300",
            "/admin/journal?since_seq=601&limit=300",
        ]
    );
}

#[test]
fn item7_replay_from_url_shows_the_same_timeline_as_the_directory() {
    let (url, server) = stub("k3y", 1);
    // The only test in this binary that reads the variable.
    std::env::set_var("QUOTAROUTE_ADMIN_KEY", "k3y");
    let (code, from_node, err) = run(&ReplayArgs {
        from: Some(url),
        ..ReplayArgs::default()
    });
    std::env::remove_var("QUOTAROUTE_ADMIN_KEY");
    assert_eq!(code, 0, "{err}");
    server.join().unwrap();
    let dir = incident_journal();
    let (_, from_dir, _) = run(&args(&dir.path().join("journal")));
    assert_eq!(from_node, from_dir);
}

#[test]
fn item7_a_wrong_key_is_a_clear_error() {
    let (url, server) = stub("right", 1);
    let error = fetch_journal(&url, Some("wrong"), 100).unwrap_err();
    server.join().unwrap();
    let text = error.to_string();
    assert!(
        text.contains("401") && text.contains("QUOTAROUTE_ADMIN_KEY"),
        "{text}"
    );
}
