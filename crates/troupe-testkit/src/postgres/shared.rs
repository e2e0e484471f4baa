//! One cluster per test runner. cargo-nextest runs every test in a process of
//! its own, so a cluster per process meant an `initdb` and a server start per
//! PostgreSQL test (about 16 s each on a loaded 2-core machine). The test
//! processes of one runner (their parent: nextest, or cargo for `cargo test`)
//! share one cluster in a folder named by the runner's pid and start time:
//!
//! - `<folder>.lock` (exclusive) is held by whoever checks, starts or stops
//!   the cluster, so two processes never start two and none joins one that
//!   is being stopped;
//! - `<folder>/users` is held shared by every process using the cluster, for
//!   its whole life (the lock goes with the process, however it ends);
//! - a watcher, started with the cluster in a process group of its own (a
//!   Ctrl-C of the runner does not reach it), stops the cluster and removes
//!   its folder once the runner is gone, or once no process has used it for
//!   a minute (a runner that lives on, such as a shell running a test binary
//!   by hand). A later test process then starts a new one.
//!
//! Each test still gets a database of its own ([`Cluster::create_database`]).

use std::fs::File;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::OnceLock;

use nix::fcntl::{Flock, FlockArg};

use super::{Cluster, bin_dir, is_root};

/// How long the cluster may go unused before its watcher stops it.
const IDLE_SECONDS: u32 = 60;

/// Join the cluster of this process's test runner, starting it if there is none.
pub(super) fn join() -> Cluster {
    let runner = std::os::unix::process::parent_id();
    let dir = folder(runner);
    let lock = dir.with_extension("lock");
    let _starting = Flock::lock(open(&lock), FlockArg::LockExclusive).expect("lock the shared cluster");
    let cluster = match running(&dir) {
        Some(port) => Cluster { port, dir: dir.clone() },
        None => {
            // What a stopped or crashed cluster left (its watcher removes it too).
            let _ = std::fs::remove_dir_all(&dir);
            std::fs::create_dir_all(&dir).expect("create the shared cluster's folder");
            let cluster = Cluster::launch(dir.clone(), false, "", |_| {});
            std::fs::write(dir.join("port"), cluster.port.to_string()).expect("write the shared cluster's port");
            watch(runner, &dir, &lock);
            cluster
        }
    };
    // Held until this process ends: the watcher sees the cluster in use.
    static USER: OnceLock<Flock<File>> = OnceLock::new();
    USER.get_or_init(|| Flock::lock(open(&dir.join("users")), FlockArg::LockShared).expect("hold the cluster"));
    cluster
}

/// The port of the cluster in `dir` when its server answers.
fn running(dir: &Path) -> Option<u16> {
    let port: u16 = std::fs::read_to_string(dir.join("port")).ok()?.trim().parse().ok()?;
    std::net::TcpStream::connect(("127.0.0.1", port)).ok().map(|_| port)
}

/// Stop the cluster in `dir` (under `lock`) once `runner` is gone or nobody
/// held `users` for [`IDLE_SECONDS`]. Its output goes nowhere, so no test
/// runner takes it for a test's leaked child.
// Never waited for: it outlives this process by design; init reaps it.
#[allow(clippy::zombie_processes)]
fn watch(runner: u32, dir: &Path, lock: &Path) {
    let stop = format!(
        "{} {} -D '{dir}/data' -m immediate stop; rm -rf '{dir}' '{lock}'",
        if is_root() { "runuser -u postgres --" } else { "" },
        bin_dir().join("pg_ctl").display(),
        dir = dir.display(),
        lock = lock.display(),
    );
    let users = dir.join("users");
    let script = format!(
        "idle=0\n\
         while sleep 1; do\n\
         \x20 if [ ! -e /proc/{runner} ]; then break; fi\n\
         \x20 if flock -n -x '{users}' true; then idle=$((idle+1)); else idle=0; fi\n\
         \x20 if [ $idle -ge {IDLE_SECONDS} ]; then\n\
         \x20   flock -x '{lock}' sh -c \"flock -n -x '{users}' true && {{ {stop}; }}\" && exit 0\n\
         \x20   idle=0\n\
         \x20 fi\n\
         done\n\
         flock -x '{lock}' sh -c \"{stop}\"\n",
        users = users.display(),
        lock = lock.display(),
    );
    use std::os::unix::process::CommandExt;
    Command::new("sh")
        .args(["-c", &script])
        .process_group(0)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .expect("start the shared cluster's watcher");
}

fn open(path: &Path) -> File {
    File::options().create(true).append(true).open(path).unwrap_or_else(|e| panic!("open {}: {e}", path.display()))
}

/// The start time of process `pid` (clock ticks since boot), so that a later
/// runner with the same pid never takes an old cluster for its own.
fn start_time(pid: u32) -> String {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).unwrap_or_default();
    stat.rsplit_once(") ").and_then(|(_, rest)| rest.split_whitespace().nth(19)).unwrap_or("0").to_string()
}

/// The folder of the cluster of test runner `runner`.
fn folder(runner: u32) -> PathBuf {
    let uid = nix::unistd::getuid().as_raw();
    std::env::temp_dir().join(format!("troupe-pg-shared-{uid}-{runner}-{}", start_time(runner)))
}

#[cfg(test)]
mod tests {
    use std::process::Command;

    /// Run by [`two_processes_of_one_runner_share_one_cluster`] as a child:
    /// joins the cluster of its runner (that test's process) and prints a new
    /// database's URL.
    #[test]
    #[ignore = "a child of two_processes_of_one_runner_share_one_cluster"]
    fn probe() {
        println!("url={}", super::super::database());
    }

    #[test]
    fn two_processes_of_one_runner_share_one_cluster() {
        let child = || {
            Command::new(std::env::current_exe().unwrap())
                .args(["--exact", "postgres::shared::tests::probe", "--ignored", "--nocapture", "--test-threads=1"])
                .output()
                .unwrap()
        };
        // At once: the second waits for the first's start instead of starting another.
        let (a, b) = std::thread::scope(|s| {
            let a = s.spawn(child);
            let b = s.spawn(child);
            (a.join().unwrap(), b.join().unwrap())
        });
        let url = |out: &std::process::Output| {
            let text = String::from_utf8_lossy(&out.stdout).into_owned();
            assert!(out.status.success(), "{text}{}", String::from_utf8_lossy(&out.stderr));
            // After the harness's `test probe ... ` on the same line.
            text.lines()
                .find_map(|l| l.split_once("url="))
                .map(|(_, url)| url.to_string())
                .unwrap_or_else(|| panic!("{text}"))
        };
        let (a, b) = (url(&a), url(&b));
        let port = |u: &str| u.rsplit_once(':').unwrap().1.split('/').next().unwrap().to_string();
        assert_eq!(port(&a), port(&b), "{a} and {b}");
        assert_ne!(a, b, "a database of its own each");
        // The cluster outlives both children: this process, their runner, lives on.
        let mut client = postgres::Client::connect(&a, postgres::NoTls).unwrap();
        assert_eq!(client.query_one("SELECT 1", &[]).unwrap().get::<_, i32>(0), 1);
        assert!(super::folder(std::process::id()).join("port").exists());
    }
}
