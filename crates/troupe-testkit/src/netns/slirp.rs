//! A network namespace without privileges: a user namespace of its own
//! (the caller's uid mapped to itself, so a CLI that refuses to run as root
//! sees the same user) with a network namespace whose only link is
//! slirp4netns's tap device (Debian's `slirp4netns`). The link's gateway,
//! [`GATEWAY`], stands for this machine's loopback: a process in the
//! namespace reaches a server listening on `127.0.0.1:PORT` here at
//! `10.0.2.2:PORT`, and the namespace's own `127.0.0.1` is its own.
//!
//! This is how a test isolates hosts where `ip netns add` is refused (an
//! unprivileged user) but the kernel allows user namespaces.

use std::net::Ipv4Addr;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Where the namespace reaches this machine's loopback (slirp4netns's default).
pub const GATEWAY: Ipv4Addr = Ipv4Addr::new(10, 0, 2, 2);

/// One user + network namespace and its slirp4netns link; both processes
/// end on drop, or when this process ends (each waits on a pipe from it).
#[derive(Debug)]
pub struct SlirpNetns {
    holder: Child,
    /// None until started: an early return still ends the holder through drop.
    slirp: Option<Child>,
}

impl SlirpNetns {
    /// A namespace whose link is up, or why the machine refuses one.
    pub fn create() -> Result<SlirpNetns, String> {
        // The holder keeps the namespaces alive: `unshare` execs `sh` in
        // them (its pid is the namespaces'), which exits when its stdin
        // (a pipe from this process) closes.
        let holder = Command::new("unshare")
            .args(["--user", "--map-current-user", "--net", "--", "sh", "-c", "read _"])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| format!("unshare (util-linux): {e}"))?;
        let mut ns = SlirpNetns { holder, slirp: None };
        let pid = ns.holder.id();
        ns.wait_for(|| {
            // slirp4netns must join the new namespace, not this one.
            let theirs = std::fs::read_link(format!("/proc/{pid}/ns/net")).ok();
            theirs.is_some() && theirs != std::fs::read_link("/proc/self/ns/net").ok()
        })?;
        // `--exit-fd=0`: slirp4netns ends when its stdin, a pipe from this process, closes.
        let slirp = Command::new("slirp4netns")
            .args(["--configure", "--mtu=65520", "--disable-dns", "--exit-fd=0", &pid.to_string(), "tap0"])
            .stdin(Stdio::piped())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .map_err(|e| format!("slirp4netns (Debian package `slirp4netns`): {e}"))?;
        ns.slirp = Some(slirp);
        // The tap device's default route shows in the namespace's route table once configured.
        ns.wait_for(|| std::fs::read_to_string(format!("/proc/{pid}/net/route")).is_ok_and(|r| r.contains("tap0")))?;
        Ok(ns)
    }

    /// Polls `ready` until it holds, failing with the holder's stderr if
    /// the holder or slirp4netns ends first.
    fn wait_for(&mut self, ready: impl Fn() -> bool) -> Result<(), String> {
        let deadline = Instant::now() + Duration::from_secs(10);
        while !ready() {
            if let Some(status) = self.holder.try_wait().map_err(|e| e.to_string())? {
                let mut why = String::new();
                if let Some(mut err) = self.holder.stderr.take() {
                    let _ = std::io::Read::read_to_string(&mut err, &mut why);
                }
                return Err(format!("unshare --user --net: {status}: {}", why.trim()));
            }
            if let Some(status) =
                self.slirp.as_mut().map(Child::try_wait).transpose().map_err(|e| e.to_string())?.flatten()
            {
                return Err(format!("slirp4netns: {status}"));
            }
            if Instant::now() > deadline {
                return Err("the namespace's link did not come up in 10 s".into());
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        Ok(())
    }

    /// `program` to be run inside the namespaces, as the caller's own user.
    pub fn command(&self, program: impl AsRef<std::ffi::OsStr>) -> Command {
        let mut c = Command::new("nsenter");
        c.args(["--target", &self.holder.id().to_string(), "--user", "--net", "--preserve-credentials", "--"])
            .arg(program);
        c
    }
}

impl Drop for SlirpNetns {
    fn drop(&mut self) {
        for child in self.slirp.iter_mut().chain([&mut self.holder]) {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::io::Read;

    /// The namespace reaches a loopback server of this machine over its
    /// link, at the gateway, and not at `127.0.0.1` (its own loopback).
    #[test]
    fn a_slirp_namespace_reaches_this_machines_loopback_only_over_its_link() {
        let ns = match SlirpNetns::create() {
            Ok(ns) => ns,
            Err(why) if why.contains("unshare --user --net") => {
                eprintln!("skipped: the kernel refuses user and network namespaces here ({why})");
                return;
            }
            Err(why) => panic!("{why}"),
        };
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let port = listener.local_addr().unwrap().port();
        let send = |to: Ipv4Addr| {
            ns.command("bash").args(["-c", &format!("echo hi >/dev/tcp/{to}/{port}")]).stderr(Stdio::null()).status()
        };
        assert!(send(GATEWAY).unwrap().success());
        let mut got = String::new();
        listener.accept().unwrap().0.read_to_string(&mut got).unwrap();
        assert_eq!(got, "hi\n");
        assert!(!send(Ipv4Addr::LOCALHOST).unwrap().success(), "the namespace's loopback is its own");
    }
}
