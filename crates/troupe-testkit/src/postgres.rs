//! A private PostgreSQL cluster for tests: `initdb` in a temporary folder,
//! started on a free loopback port, one per test runner (shared by every test
//! process it starts: cargo-nextest runs each test in a process of its own,
//! and a cluster per process cost seconds per test), with a fresh database per
//! test. Nothing depends on a database set
//! up by hand; CI installs Debian's `postgresql` package, which puts the
//! binaries in `/usr/lib/postgresql/<version>/bin` (or set `TROUPE_PG_BIN`).
//!
//! PostgreSQL refuses to run as root, so as root the cluster runs as the
//! `postgres` user (`runuser`). The cluster stops when the test process ends,
//! however it ends: a watcher waits on a pipe only this process holds open.
//!
//! ```no_run
//! let url = troupe_testkit::postgres::database();
//! // postgres://troupe@127.0.0.1:<port>/t_<n>
//! ```

use std::io::Write;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;
use std::sync::atomic::{AtomicU32, Ordering};

mod shared;

/// A running cluster.
#[derive(Debug)]
pub struct Cluster {
    port: u16,
    dir: PathBuf,
}

impl Cluster {
    /// Start a cluster. `durable`: keep PostgreSQL's default `fsync` and
    /// `synchronous_commit` (for benchmarks); tests turn both off.
    pub fn start(durable: bool) -> Cluster {
        Cluster::start_with(durable, "", |_| {})
    }

    /// Start a cluster that speaks TLS (`ssl=on`) with a throwaway CA made
    /// here by the `openssl` program: the server's certificate is valid for
    /// `127.0.0.1` only (not `localhost`, so a client verifying the host
    /// name can be shown to fail). Returns the cluster and the CA's
    /// certificate (PEM), which clients trust through `sslrootcert`.
    pub fn start_tls() -> (Cluster, PathBuf) {
        let cluster =
            Cluster::start_with(false, "-c ssl=on -c ssl_cert_file=server.crt -c ssl_key_file=server.key", |data| {
                tls_files(data)
            });
        let ca = cluster.dir.join("data").join("ca.crt");
        (cluster, ca)
    }

    /// Start a cluster with more server `options` (`-c name=value`), after
    /// `prepare` wrote what they need into the data folder (as this user;
    /// the files are then handed to the server's user).
    pub fn start_with(durable: bool, options: &str, prepare: impl FnOnce(&Path)) -> Cluster {
        let dir = tempfile::Builder::new().prefix("troupe-pg-").tempdir().expect("temp dir").keep();
        let cluster = Cluster::launch(dir, durable, options, prepare);
        watch(is_root(), &bin_dir(), &cluster.dir.join("data"), &cluster.dir);
        cluster
    }

    /// initdb in the empty folder `dir` and start the server, with nothing
    /// that stops it: the caller arranges that.
    fn launch(dir: PathBuf, durable: bool, options: &str, prepare: impl FnOnce(&Path)) -> Cluster {
        let bin = bin_dir();
        let as_root = is_root();
        if as_root {
            run(Command::new("chown").arg("-R").arg("postgres").arg(&dir), "chown the cluster folder");
        }
        let data = dir.join("data");
        run(
            user(as_root, &bin.join("initdb")).arg("-D").arg(&data).args([
                "-A",
                "trust",
                "-U",
                "troupe",
                "--no-sync",
                "-E",
                "UTF8",
                "--locale=C.UTF-8",
            ]),
            "initdb",
        );
        prepare(&data);
        if as_root {
            run(Command::new("chown").arg("-R").arg("postgres").arg(&data), "chown the cluster's files");
        }
        let extra = options;
        let mut options = format!("-k {} -c listen_addresses=127.0.0.1 -c max_connections=400", dir.display());
        if !extra.is_empty() {
            options.push(' ');
            options.push_str(extra);
        }
        if !durable {
            options.push_str(" -c fsync=off -c synchronous_commit=off -c full_page_writes=off");
        }
        // A free port can be taken between choosing and binding it: try a few.
        for _ in 0..5 {
            let port = free_port();
            let status = user(as_root, &bin.join("pg_ctl"))
                .arg("-D")
                .arg(&data)
                .arg("-o")
                .arg(format!("-p {port} {options}"))
                .arg("-l")
                .arg(dir.join("log"))
                .args(["-w", "-t", "60", "start"])
                .stdout(Stdio::null())
                .status()
                .expect("run pg_ctl");
            if status.success() {
                return Cluster { port, dir };
            }
        }
        let log = std::fs::read_to_string(dir.join("log")).unwrap_or_default();
        panic!("PostgreSQL did not start in {}:\n{log}", dir.display());
    }

    /// The URL of database `name` in this cluster.
    pub fn url(&self, name: &str) -> String {
        format!("postgres://troupe@127.0.0.1:{}/{name}", self.port)
    }

    /// The port the cluster listens on (loopback).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The cluster's folder (data, log, socket).
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    /// Create a new, empty database and return its URL.
    pub fn create_database(&self) -> String {
        static NEXT: AtomicU32 = AtomicU32::new(1);
        let name = format!("t_{}_{}", std::process::id(), NEXT.fetch_add(1, Ordering::Relaxed));
        let mut admin = postgres::Client::connect(&self.url("postgres"), postgres::NoTls).expect("connect as admin");
        // template0: nothing to copy but the catalog, and no lock shared with other creators.
        admin.batch_execute(&format!("CREATE DATABASE {name} TEMPLATE template0")).expect("create a database");
        self.url(&name)
    }
}

/// A CA and a server certificate for `127.0.0.1` signed by it, in `data`
/// (`ca.crt`, `server.crt`, `server.key`; the key readable by its owner
/// only, as PostgreSQL requires).
fn tls_files(data: &Path) {
    let openssl = |args: &[&str]| {
        run(Command::new("openssl").args(args).current_dir(data).stdout(Stdio::null()), "openssl (a throwaway CA)")
    };
    openssl(&[
        "req",
        "-x509",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
        "-days",
        "2",
        "-subj",
        "/CN=troupe test CA",
        "-keyout",
        "ca.key",
        "-out",
        "ca.crt",
    ]);
    openssl(&[
        "req",
        "-newkey",
        "ec",
        "-pkeyopt",
        "ec_paramgen_curve:prime256v1",
        "-nodes",
        "-subj",
        "/CN=127.0.0.1",
        "-keyout",
        "server.key",
        "-out",
        "server.csr",
    ]);
    std::fs::write(data.join("san.ext"), "subjectAltName = IP:127.0.0.1\n").expect("write the SAN extension");
    openssl(&[
        "x509",
        "-req",
        "-in",
        "server.csr",
        "-CA",
        "ca.crt",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-days",
        "2",
        "-extfile",
        "san.ext",
        "-out",
        "server.crt",
    ]);
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(data.join("server.key"), std::fs::Permissions::from_mode(0o600)).expect("chmod the key");
}

/// The cluster this test process shares with every other test process of
/// its test runner (see `shared`), joined or started on first use.
pub fn cluster() -> &'static Cluster {
    static CLUSTER: OnceLock<Cluster> = OnceLock::new();
    CLUSTER.get_or_init(shared::join)
}

/// A fresh database in the shared cluster: its URL.
pub fn database() -> String {
    cluster().create_database()
}

/// Stop the cluster and remove its folder when this process exits: the
/// watcher's stdin is a pipe whose only writer is this process.
// The watcher outlives this process by design (it stops the cluster after
// the exit), so it is never waited for; init reaps it.
#[allow(clippy::zombie_processes)]
fn watch(as_root: bool, bin: &Path, data: &Path, dir: &Path) {
    let script = format!(
        "read _; {} {} -D '{}' -m immediate stop >/dev/null 2>&1; rm -rf '{}'",
        if as_root { "runuser -u postgres --" } else { "" },
        bin.join("pg_ctl").display(),
        data.display(),
        dir.display()
    );
    let mut child = Command::new("sh")
        .args(["-c", &script])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the cluster's watcher");
    let stdin = child.stdin.take().expect("watcher stdin");
    // Held (never written) until the process exits.
    static HELD: OnceLock<std::sync::Mutex<Vec<std::process::ChildStdin>>> = OnceLock::new();
    let held = HELD.get_or_init(Default::default);
    let mut held = held.lock().unwrap_or_else(|p| p.into_inner());
    let mut stdin = stdin;
    let _ = stdin.flush();
    held.push(stdin);
}

/// Where PostgreSQL's programs are: `TROUPE_PG_BIN`, or Debian's newest.
pub fn bin_dir() -> PathBuf {
    if let Some(dir) = std::env::var_os("TROUPE_PG_BIN") {
        return PathBuf::from(dir);
    }
    let mut versions: Vec<(u32, PathBuf)> = std::fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| Some((e.file_name().to_str()?.parse().ok()?, e.path().join("bin"))))
        .filter(|(_, bin)| bin.join("initdb").exists())
        .collect();
    versions.sort();
    versions.pop().map(|(_, bin)| bin).unwrap_or_else(|| {
        panic!("PostgreSQL is not installed: apt-get install postgresql (or set TROUPE_PG_BIN to its bin folder)")
    })
}

fn user(as_root: bool, program: &Path) -> Command {
    if as_root {
        let mut c = Command::new("runuser");
        c.args(["-u", "postgres", "--"]).arg(program);
        c
    } else {
        Command::new(program)
    }
}

fn is_root() -> bool {
    std::fs::read_to_string("/proc/self/status")
        .ok()
        .and_then(|s| s.lines().find(|l| l.starts_with("Uid:")).map(|l| l.split_whitespace().nth(2) == Some("0")))
        .unwrap_or(false)
}

fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0").and_then(|l| l.local_addr()).map(|a| a.port()).expect("a free port")
}

fn run(command: &mut Command, what: &str) {
    let out = command.output().unwrap_or_else(|e| panic!("{what}: {e}"));
    assert!(
        out.status.success(),
        "{what} failed: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}
