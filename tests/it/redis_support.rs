//! Real `redis-server` processes for the cluster tests, each on free loopback ports, without
//! persistence, killed by PID when dropped: one plain server, one TLS server with a test CA
//! made here (rcgen), and a three-shard Redis Cluster (`redis-cli --cluster create`).

#![expect(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test code: a failed step fails the test loudly"
)]

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use rcgen::{BasicConstraints, CertificateParams, DnType, IsCa, Issuer, KeyPair};

use crate::support::free_port;

/// One `redis-server` process and the arguments to start it again the same way.
pub struct Server {
    pub port: u16,
    args: Vec<String>,
    child: Option<Child>,
}

impl Server {
    /// Starts `redis-server` on `port` (plain, or TLS when `args` say so) and waits until it
    /// accepts connections.
    pub fn start(port: u16, args: Vec<String>) -> Server {
        let mut server = Server {
            port,
            args,
            child: None,
        };
        server.restart();
        server
    }

    /// Starts it again (after [`Server::kill`]): empty, since nothing persists.
    pub fn restart(&mut self) {
        let child = Command::new("redis-server")
            .args(["--bind", "127.0.0.1"])
            .args(["--save", "", "--appendonly", "no", "--daemonize", "no"])
            .args(&self.args)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("redis-server must be installed (apt-get install redis-server)");
        self.child = Some(child);
        let deadline = Instant::now() + Duration::from_secs(10);
        while std::net::TcpStream::connect(("127.0.0.1", self.port)).is_err() {
            assert!(Instant::now() < deadline, "redis-server did not start");
            std::thread::sleep(Duration::from_millis(10));
        }
    }

    /// Freezes the server for `stall` (SIGSTOP, then SIGCONT): connections stay open and
    /// nothing answers, like a Redis stuck in a slow command; returns at once, the thaw comes
    /// from a thread.
    pub fn stall(&self, stall: Duration) -> std::thread::JoinHandle<()> {
        let pid = self.child.as_ref().expect("running").id().to_string();
        let signal = |name: &str, pid: &str| {
            let status = Command::new("kill").args([name, pid]).status().unwrap();
            assert!(status.success(), "kill {name} {pid}");
        };
        signal("-STOP", &pid);
        std::thread::spawn(move || {
            std::thread::sleep(stall);
            signal("-CONT", &pid);
        })
    }

    /// SIGKILL: Redis goes away without a word, and forgets everything (no persistence).
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        self.kill();
    }
}

/// A plain `redis-server`: `redis://127.0.0.1:<port>`.
pub fn plain() -> Server {
    plain_on(free_port())
}

pub fn plain_on(port: u16) -> Server {
    Server::start(port, vec!["--port".into(), port.to_string()])
}

/// A TLS-only `redis-server` (`--port 0`) with a certificate for `127.0.0.1` from a test CA
/// that no system trusts: the node reaches it only through `[cluster] ca_file`.
pub struct TlsRedis {
    pub server: Server,
    dir: tempfile::TempDir,
}

impl TlsRedis {
    pub fn start() -> TlsRedis {
        let dir = tempfile::tempdir().unwrap();
        let ca_key = KeyPair::generate().unwrap();
        let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
        ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        ca_params
            .distinguished_name
            .push(DnType::CommonName, "quotaroute test Redis CA");
        let ca_cert = ca_params.self_signed(&ca_key).unwrap();
        let issuer = Issuer::new(ca_params, ca_key);
        let leaf_key = KeyPair::generate().unwrap();
        let leaf_params =
            CertificateParams::new(vec!["localhost".to_string(), "127.0.0.1".to_string()]).unwrap();
        let leaf = leaf_params.signed_by(&leaf_key, &issuer).unwrap();
        std::fs::write(dir.path().join("ca.pem"), ca_cert.pem()).unwrap();
        std::fs::write(dir.path().join("redis.pem"), leaf.pem()).unwrap();
        std::fs::write(dir.path().join("redis.key"), leaf_key.serialize_pem()).unwrap();
        let port = free_port();
        let path = |name: &str| dir.path().join(name).display().to_string();
        let args = vec![
            "--port".into(),
            "0".into(),
            "--tls-port".into(),
            port.to_string(),
            "--tls-cert-file".into(),
            path("redis.pem"),
            "--tls-key-file".into(),
            path("redis.key"),
            "--tls-ca-cert-file".into(),
            path("ca.pem"),
            "--tls-auth-clients".into(),
            "no".into(),
        ];
        TlsRedis {
            server: Server::start(port, args),
            dir,
        }
    }

    pub fn url(&self) -> String {
        format!("rediss://127.0.0.1:{}", self.server.port)
    }

    /// The test CA's certificate, for `[cluster] ca_file`.
    pub fn ca_file(&self) -> PathBuf {
        self.dir.path().join("ca.pem")
    }
}

/// Three primaries (no replicas) sharing the 16 384 slots, as `redis-cli --cluster create`
/// splits them: shard 0 holds slots 0–5460, shard 1 5461–10922, shard 2 10923–16383.
/// `cluster-require-full-coverage no`, as managed clusters run: a shard that is down fails
/// only its own slots.
pub struct RedisCluster {
    pub shards: Vec<Server>,
    _dir: tempfile::TempDir,
}

fn redis_cli(port: u16, args: &[&str]) -> String {
    let output = Command::new("redis-cli")
        .args(["-h", "127.0.0.1", "-p", &port.to_string()])
        .args(args)
        .output()
        .expect("redis-cli must be installed (it comes with redis-server)");
    String::from_utf8_lossy(&output.stdout).into_owned()
}

fn shard_args(dir: &Path, port: u16) -> Vec<String> {
    vec![
        "--port".into(),
        port.to_string(),
        "--cluster-enabled".into(),
        "yes".into(),
        "--cluster-config-file".into(),
        dir.join(format!("nodes-{port}.conf")).display().to_string(),
        "--cluster-node-timeout".into(),
        "2000".into(),
        "--cluster-require-full-coverage".into(),
        "no".into(),
        "--dir".into(),
        dir.display().to_string(),
    ]
}

impl RedisCluster {
    pub fn start() -> RedisCluster {
        let dir = tempfile::tempdir().unwrap();
        let shards: Vec<Server> = (0..3)
            .map(|_| {
                let port = free_port();
                Server::start(port, shard_args(dir.path(), port))
            })
            .collect();
        let addresses: Vec<String> = shards
            .iter()
            .map(|s| format!("127.0.0.1:{}", s.port))
            .collect();
        let mut args = vec!["--cluster", "create"];
        args.extend(addresses.iter().map(String::as_str));
        args.extend(["--cluster-replicas", "0", "--cluster-yes"]);
        let created = redis_cli(shards[0].port, &args);
        assert!(created.contains("All 16384 slots covered"), "{created}");
        let cluster = RedisCluster { shards, _dir: dir };
        cluster.wait_ok();
        cluster
    }

    /// Waits (at most 20 s) until every shard says `cluster_state:ok`.
    pub fn wait_ok(&self) {
        let deadline = Instant::now() + Duration::from_secs(20);
        for shard in &self.shards {
            loop {
                if redis_cli(shard.port, &["cluster", "info"]).contains("cluster_state:ok") {
                    break;
                }
                assert!(Instant::now() < deadline, "the cluster never became ok");
                std::thread::sleep(Duration::from_millis(50));
            }
        }
    }

    pub fn url(&self) -> String {
        let hosts: Vec<String> = self
            .shards
            .iter()
            .map(|s| format!("127.0.0.1:{}", s.port))
            .collect();
        format!("redis+cluster://{}", hosts.join(","))
    }

    /// The index of the shard that serves `key`.
    pub fn shard_of(&self, key: &str) -> usize {
        let slot: u32 = redis_cli(self.shards[0].port, &["cluster", "keyslot", key])
            .trim()
            .parse()
            .unwrap();
        match slot {
            0..=5460 => 0,
            5461..=10922 => 1,
            _ => 2,
        }
    }
}
