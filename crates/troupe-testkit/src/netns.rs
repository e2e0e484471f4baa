//! Hosts on a virtual network, for tests of troupe across machines: each
//! "host" is a Linux network namespace joined to this one by a veth pair,
//! and a private PostgreSQL cluster listens on the host ends, so a process
//! started in a namespace reaches the store over a link rather than
//! loopback (the namespace's loopback is its own: nothing else of this
//! machine is reachable from it).
//!
//! Making namespaces needs `CAP_NET_ADMIN` (root here and on CI) and the
//! `ip` program (Debian's `iproute2`). Where the machine does not allow it,
//! [`Hosts::start`] falls back to plain processes on loopback and prints why
//! on stderr: a test that runs without namespaces says so, it never passes
//! silently as if it had them. Namespaces and links are removed on drop (a
//! test process killed outright leaves them; their names carry its pid).
//!
//! ```no_run
//! let hosts = troupe_testkit::netns::Hosts::start(2);
//! let mut worker = hosts.command(0, "troupe");
//! worker.env("TROUPE_DATABASE_URL", hosts.url(0));
//! ```

use std::net::Ipv4Addr;
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

use crate::postgres::Cluster;

/// One network namespace and its link: `host` is this side's address,
/// `peer` the namespace's, on a /30 of their own.
#[derive(Debug)]
pub struct Netns {
    name: String,
    link: String,
    host: Ipv4Addr,
    peer: Ipv4Addr,
}

impl Netns {
    /// A namespace with its loopback up and a veth link to this namespace.
    pub fn create() -> Result<Netns, String> {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        let n = NEXT.fetch_add(1, Ordering::Relaxed);
        let pid = std::process::id();
        let name = format!("troupe-{pid}-{n}");
        // Interface names hold at most 15 bytes.
        let (link, inner) = (format!("trh{}x{n}", pid % 1_000_000), format!("trn{}x{n}", pid % 1_000_000));
        let (host, peer) = free_subnet(pid, n)?;
        ip(&["netns", "add", &name])?;
        let ns = Netns { name, link, host, peer };
        // From here on, drop removes what was made.
        ip(&["link", "add", &ns.link, "type", "veth", "peer", "name", &inner])?;
        ip(&["link", "set", &inner, "netns", &ns.name])?;
        ip(&["addr", "add", &format!("{host}/30"), "dev", &ns.link])?;
        ip(&["link", "set", &ns.link, "up"])?;
        ip(&["-n", &ns.name, "addr", "add", &format!("{peer}/30"), "dev", &inner])?;
        ip(&["-n", &ns.name, "link", "set", &inner, "up"])?;
        ip(&["-n", &ns.name, "link", "set", "lo", "up"])?;
        Ok(ns)
    }

    /// This side's address of the link (where a server for the namespace listens).
    pub fn host(&self) -> Ipv4Addr {
        self.host
    }

    /// The namespace's address of the link (what a server sees it connect from).
    pub fn peer(&self) -> Ipv4Addr {
        self.peer
    }

    /// The namespace's name (`ip netns exec <name> …`).
    pub fn name(&self) -> &str {
        &self.name
    }

    /// A route from the namespace to `to`, an address of this machine
    /// (another link's host end), over its own link.
    pub fn route_to(&self, to: Ipv4Addr) -> Result<(), String> {
        ip(&["-n", &self.name, "route", "add", &format!("{to}/32"), "via", &self.host.to_string()])
    }

    /// `program` to be run inside the namespace (`ip netns exec` execs it:
    /// the child's pid is the program's).
    pub fn command(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut c = Command::new("ip");
        c.args(["netns", "exec", &self.name]).arg(program);
        c
    }
}

impl Drop for Netns {
    fn drop(&mut self) {
        // Deleting one end removes the pair at once; the namespace's own
        // deletion would remove it only later, asynchronously.
        let _ = ip(&["link", "del", &self.link]);
        let _ = ip(&["netns", "del", &self.name]);
    }
}

/// Test hosts reaching a private PostgreSQL database: each in its own
/// network namespace where the machine allows it, else on loopback.
#[derive(Debug)]
pub struct Hosts {
    nets: Vec<Netns>,
    cluster: &'static Cluster,
    database: String,
}

impl Hosts {
    /// `n` hosts and a fresh database they all reach: in namespaces, a
    /// cluster of their own listening on loopback and on each link's host
    /// end (admitting the namespaces' addresses); else this test binary's
    /// shared cluster, with the reason printed. Every namespace also reaches
    /// [`Hosts::server_ip`], where the test's other servers listen.
    pub fn start(n: usize) -> Hosts {
        let nets = (0..n).map(|_| Netns::create()).collect::<Result<Vec<_>, _>>().and_then(|nets| {
            // The others reach the first link's host end over their own links.
            if let Some((first, rest)) = nets.split_first() {
                rest.iter().try_for_each(|ns| ns.route_to(first.host))?;
            }
            Ok(nets)
        });
        let nets = match nets {
            Ok(nets) => nets,
            Err(why) => {
                eprintln!(
                    "network namespaces are not available here ({why}): the hosts run on this machine's loopback"
                );
                let url = crate::postgres::database();
                return Hosts { nets: Vec::new(), cluster: crate::postgres::cluster(), database: database_of(&url) };
            }
        };
        let listen: Vec<String> =
            std::iter::once("127.0.0.1".to_string()).chain(nets.iter().map(|ns| ns.host.to_string())).collect();
        let peers: Vec<Ipv4Addr> = nets.iter().map(|ns| ns.peer).collect();
        let options = format!("-c listen_addresses={}", listen.join(","));
        // The cluster outlives the test like the shared one: its watcher stops it when the process ends.
        let cluster: &'static Cluster = Box::leak(Box::new(Cluster::start_with(false, &options, |data| {
            let hba = data.join("pg_hba.conf");
            let mut text = std::fs::read_to_string(&hba).expect("read pg_hba.conf");
            for p in &peers {
                text.push_str(&format!("host all all {p}/32 trust\n"));
            }
            std::fs::write(&hba, text).expect("write pg_hba.conf");
        })));
        let database = database_of(&cluster.create_database());
        Hosts { nets, cluster, database }
    }

    /// Whether the hosts run in network namespaces.
    pub fn isolated(&self) -> bool {
        !self.nets.is_empty()
    }

    /// The namespaces (empty on loopback).
    pub fn nets(&self) -> &[Netns] {
        &self.nets
    }

    /// An address of this machine every host reaches, for a server the
    /// hosts' processes use (a stub model API): the first link's host end,
    /// or loopback.
    pub fn server_ip(&self) -> std::net::IpAddr {
        self.nets.first().map_or(Ipv4Addr::LOCALHOST, |ns| ns.host).into()
    }

    /// The database's URL for this machine's processes (over loopback).
    pub fn local_url(&self) -> String {
        self.cluster.url(&self.database)
    }

    /// The database's URL for host `i`: over its link, or loopback.
    pub fn url(&self, i: usize) -> String {
        match self.nets.get(i) {
            Some(ns) => format!("postgres://troupe@{}:{}/{}", ns.host, self.cluster.port(), self.database),
            None => self.local_url(),
        }
    }

    /// The addresses the database's sessions come from now (`pg_stat_activity`).
    pub fn clients(&self) -> Vec<String> {
        let mut c = postgres::Client::connect(&self.local_url(), postgres::NoTls).expect("connect to the database");
        let rows = c
            .query(
                "SELECT DISTINCT host(client_addr) FROM pg_stat_activity WHERE datname = $1 AND client_addr IS NOT NULL",
                &[&self.database],
            )
            .expect("read pg_stat_activity");
        rows.iter().map(|r| r.get(0)).collect()
    }

    /// `program` to be run on host `i`: in its namespace, or plainly.
    pub fn command(&self, i: usize, program: impl AsRef<std::ffi::OsStr>) -> Command {
        match self.nets.get(i) {
            Some(ns) => ns.command(program),
            None => Command::new(program),
        }
    }
}

fn database_of(url: &str) -> String {
    url.rsplit('/').next().unwrap_or_default().to_string()
}

/// A /30 in 10.213.0.0/16 that no interface of this machine uses, picked
/// from the pid and a counter (tests in other processes pick others).
fn free_subnet(pid: u32, n: u32) -> Result<(Ipv4Addr, Ipv4Addr), String> {
    let used = String::from_utf8_lossy(&run(Command::new("ip").args(["-o", "-4", "addr"]))?.stdout).into_owned();
    for step in 0..16_384u32 {
        let slot = (pid.wrapping_mul(64).wrapping_add(n * 7919).wrapping_add(step)) % 16_384;
        let base = u32::from(Ipv4Addr::new(10, 213, 0, 0)) + slot * 4;
        let (host, peer) = (Ipv4Addr::from(base + 1), Ipv4Addr::from(base + 2));
        if !used.contains(&format!(" {host}/")) && !used.contains(&format!(" {peer}/")) {
            return Ok((host, peer));
        }
    }
    Err("no free /30 in 10.213.0.0/16".into())
}

fn ip(args: &[&str]) -> Result<(), String> {
    run(Command::new("ip").args(args)).map(drop)
}

fn run(c: &mut Command) -> Result<std::process::Output, String> {
    let what = format!("{c:?}");
    let out = c.output().map_err(|e| format!("{what}: {e}"))?;
    if out.status.success() { Ok(out) } else { Err(format!("{what}: {}", String::from_utf8_lossy(&out.stderr).trim())) }
}
