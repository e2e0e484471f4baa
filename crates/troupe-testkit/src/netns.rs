//! Hosts on a virtual network, for tests of troupe across machines: each
//! "host" is a Linux network namespace joined to this one by a veth pair,
//! and a private PostgreSQL cluster listens on the host ends, so a process
//! started in a namespace reaches the store over a link rather than
//! loopback (the namespace's loopback is its own: nothing else of this
//! machine is reachable from it).
//!
//! Making veth links needs `CAP_NET_ADMIN` (root here and on CI) and the
//! `ip` program (Debian's `iproute2`). Without it (an unprivileged user),
//! [`Hosts::start`] makes user namespaces linked by slirp4netns instead
//! ([`SlirpNetns`]); where the kernel refuses those too, it falls back to
//! plain processes on loopback and prints why on stderr: a test that runs
//! without namespaces says so, it never passes silently as if it had them.
//! Namespaces and links are removed on drop (a test process killed outright
//! leaves veth ones; their names carry its pid).
//!
//! ```no_run
//! let hosts = troupe_testkit::netns::Hosts::start(2);
//! let mut worker = hosts.command(0, "troupe");
//! worker.env("TROUPE_DATABASE_URL", hosts.url(0));
//! ```

use std::net::{IpAddr, Ipv4Addr, SocketAddr};
use std::process::Command;
use std::sync::atomic::{AtomicU32, Ordering};

use crate::postgres::Cluster;

mod slirp;
pub use slirp::{GATEWAY, SlirpNetns};

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

/// How test hosts are kept apart.
#[derive(Debug)]
enum Isolation {
    /// Namespaces joined to this one by veth links (needs `CAP_NET_ADMIN`).
    Veth(Vec<Netns>),
    /// Unprivileged user + network namespaces linked by slirp4netns.
    Slirp(Vec<SlirpNetns>),
    /// None: plain processes on this machine's loopback.
    Loopback,
}

/// Test hosts reaching a private PostgreSQL database: each in its own
/// network namespace where the machine allows it, else on loopback.
#[derive(Debug)]
pub struct Hosts {
    isolation: Isolation,
    cluster: &'static Cluster,
    database: String,
}

impl Hosts {
    /// `n` hosts and a fresh database they all reach. With veth links, a
    /// cluster of their own listens on loopback and on each link's host end
    /// (admitting the namespaces' addresses), and every namespace reaches
    /// [`Hosts::server_ip`]. Where `ip netns add` is refused (an unprivileged
    /// user, or `TROUPE_TEST_NETNS=user` to try this path as root), user
    /// namespaces linked by slirp4netns reach this test binary's shared
    /// cluster on loopback through their gateway. Where the kernel refuses
    /// those too, the hosts are plain processes, with the reasons printed.
    pub fn start(n: usize) -> Hosts {
        let veth = if std::env::var_os("TROUPE_TEST_NETNS").is_some_and(|v| v == "user") {
            Err("TROUPE_TEST_NETNS=user".to_string())
        } else {
            (0..n).map(|_| Netns::create()).collect::<Result<Vec<_>, _>>().and_then(|nets| {
                // The others reach the first link's host end over their own links.
                if let Some((first, rest)) = nets.split_first() {
                    rest.iter().try_for_each(|ns| ns.route_to(first.host))?;
                }
                Ok(nets)
            })
        };
        let why_not_veth = match veth {
            Ok(nets) => return Hosts::on_veth(nets),
            Err(why) => why,
        };
        let isolation = match (0..n).map(|_| SlirpNetns::create()).collect::<Result<Vec<_>, _>>() {
            Ok(nets) => Isolation::Slirp(nets),
            Err(why) => {
                eprintln!(
                    "network namespaces are not available here (veth links: {why_not_veth}; user namespaces: {why}): the hosts run on this machine's loopback"
                );
                Isolation::Loopback
            }
        };
        let url = crate::postgres::database();
        Hosts { isolation, cluster: crate::postgres::cluster(), database: database_of(&url) }
    }

    fn on_veth(nets: Vec<Netns>) -> Hosts {
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
        Hosts { isolation: Isolation::Veth(nets), cluster, database }
    }

    /// Whether the hosts run in network namespaces.
    pub fn isolated(&self) -> bool {
        !matches!(self.isolation, Isolation::Loopback)
    }

    /// An address of this machine to bind a server the hosts' processes use
    /// (a stub model API) on: the first veth link's host end, or loopback.
    /// The hosts reach it at [`Hosts::reach`].
    pub fn server_ip(&self) -> IpAddr {
        match &self.isolation {
            Isolation::Veth(nets) => nets.first().map_or(Ipv4Addr::LOCALHOST, |ns| ns.host),
            _ => Ipv4Addr::LOCALHOST,
        }
        .into()
    }

    /// Where the hosts reach a server of this machine bound at `addr` on
    /// [`Hosts::server_ip`]: the same address, or over a slirp4netns link
    /// its gateway.
    pub fn reach(&self, addr: SocketAddr) -> SocketAddr {
        match &self.isolation {
            Isolation::Slirp(_) if addr.ip().is_loopback() => SocketAddr::new(GATEWAY.into(), addr.port()),
            _ => addr,
        }
    }

    /// The database's URL for this machine's processes (over loopback).
    pub fn local_url(&self) -> String {
        self.cluster.url(&self.database)
    }

    /// The database's URL for host `i`: over its link, or loopback.
    pub fn url(&self, i: usize) -> String {
        let at = match &self.isolation {
            Isolation::Veth(nets) => nets.get(i).map(|ns| ns.host),
            Isolation::Slirp(nets) => nets.get(i).map(|_| GATEWAY),
            Isolation::Loopback => None,
        };
        match at {
            Some(ip) => format!("postgres://troupe@{ip}:{}/{}", self.cluster.port(), self.database),
            None => self.local_url(),
        }
    }

    /// Checks that every host is connected to the database over its link:
    /// with veth links, each namespace's address is among the database's
    /// clients (`pg_stat_activity`). slirp4netns connects for its namespace
    /// from this machine's loopback, so there the sessions look local; the
    /// namespace reaches nothing of this machine but through its gateway.
    pub fn assert_connected_over_links(&self) {
        let Isolation::Veth(nets) = &self.isolation else { return };
        let mut c = postgres::Client::connect(&self.local_url(), postgres::NoTls).expect("connect to the database");
        let rows = c
            .query(
                "SELECT DISTINCT host(client_addr) FROM pg_stat_activity WHERE datname = $1 AND client_addr IS NOT NULL",
                &[&self.database],
            )
            .expect("read pg_stat_activity");
        let clients: Vec<String> = rows.iter().map(|r| r.get(0)).collect();
        let peers: Vec<String> = nets.iter().map(|n| n.peer.to_string()).collect();
        assert!(peers.iter().all(|p| clients.contains(p)), "hosts connect from {peers:?}; clients: {clients:?}");
    }

    /// `program` to be run on host `i`: in its namespace, or plainly.
    pub fn command(&self, i: usize, program: impl AsRef<std::ffi::OsStr>) -> Command {
        match &self.isolation {
            Isolation::Veth(nets) if i < nets.len() => nets[i].command(program),
            Isolation::Slirp(nets) if i < nets.len() => nets[i].command(program),
            _ => Command::new(program),
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
