//! The hook answerer: a teammate's tool calls answered by the long-lived
//! troupe process that started it, instead of a `troupe hook` process
//! building everything from nothing on every call.
//!
//! A Builder's write asks the role policy (a `stat` per skill, then the
//! compiled checks) and the store (SQLite opened and its schema parsed, then
//! plan mode's gate, the file's lock and history). Opened once per call, that
//! is most of the hook's time (BENCHMARKS.md, "The hook answerer"). The
//! process that spawns teammates (`troupe run`, `resume`, `agent run`, …)
//! [`host`]s an answerer on an abstract Unix socket and names it in
//! [`ANSWERER_ENV`]; the hook sends it the call and prints what it answers.
//!
//! The answerer runs the very code the hook runs ([`super::answer_call`]),
//! with the caller's environment and folder, so an answer never differs from
//! the one the hook would have given itself. What it keeps between calls is
//! only what it can prove current on every call: the store's connection (a
//! read sees every commit; the database file's identity and the config are
//! checked each call) and the compiled role policy (kept while an inotify
//! watch on the skills saw no change, else under the key of every skill's
//! `stat`). Whatever it cannot answer the same
//! way it declines, and the hook answers itself:
//! - events other than a tool call's PreToolUse and PostToolUse (stops, task
//!   completion: they run quality gates, which must run inside the
//!   teammate's sandbox and environment);
//! - shell commands (the post-run check runs git with the caller's
//!   environment);
//! - a caller whose environment differs from the answerer's in a variable
//!   the served code reads from the process rather than from the call
//!   ([`MUST_MATCH`]), or that names a folder relatively;
//! - an adhoc session's approvals, which wait for a person.
//!
//! Trust: the hook only talks to the process named in [`ANSWERER_ENV`]
//! (checked with `SO_PEERCRED`, as well as the user), so a teammate cannot
//! stand in for the answerer; the answerer only serves its own user. A
//! failure before the call is sent (no answerer: the Lead is gone; a refused
//! connection; another process under the name) means the hook answers
//! itself: the answerer is a shortcut, never a dependency. Once sent, the
//! answerer may have acted on the call, so a reply that never comes (20 s)
//! is a refusal, not a second answer.

use std::collections::BTreeMap;
use std::io::{self, BufReader, BufWriter, Read, Write};
use std::os::fd::AsRawFd;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::ffi::{OsStrExt, OsStringExt};
use std::os::unix::net::{SocketAddr, UnixListener, UnixStream};
use std::path::{Path, PathBuf};
use std::rc::Rc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, mpsc};
use std::time::Duration;

use troupe_gate::answer::Rendered;

/// Names the answerer of this process's teammates: `<pid>:<abstract socket name>`.
pub const ANSWERER_ENV: &str = "TROUPE_HOOK_ANSWERER";

/// Variables the served code reads from its own process, not from the call
/// (the store's URL override, replay's event cut-off, git's repository
/// steering): a call is answered only when the answerer's values are the
/// caller's.
pub const MUST_MATCH: &[&str] = &[
    troupe_store::DATABASE_URL_ENV,
    "TROUPE_REPLAY_LAST_EVENT",
    "GIT_DIR",
    "GIT_COMMON_DIR",
    "GIT_WORK_TREE",
    "GIT_INDEX_FILE",
    "GIT_CONFIG",
    "GIT_CEILING_DIRECTORIES",
    "GIT_DISCOVERY_ACROSS_FILESYSTEM",
];

/// Variables that name folders: served only when absolute, since the
/// answerer's own folder is not the caller's.
const FOLDERS: &[&str] = &["TROUPE_PROJECT", "TROUPE_WORKTREE", "TROUPE_STATE_DIR", "HOME", "XDG_STATE_HOME"];

/// How long either side waits for the other to take a call; past it the
/// hook answers itself (nothing was sent) or the answerer drops the caller.
const PATIENCE: Duration = Duration::from_secs(5);

/// How long the hook waits for the answer to a call it sent: well inside the
/// 30 s the engines give a tool call's hook, so that a call the answerer took
/// and never answered is refused rather than let through by the engine.
const REPLY_PATIENCE: Duration = Duration::from_secs(20);

/// Threads answering at once: a few teammates call at the same moment, and
/// one caller waiting on a busy database must not hold the others.
const WORKERS: usize = 4;

/// The most bytes of one field of a call (the hook reads at most 16 MiB of input).
const MAX_FIELD: usize = 17 * 1024 * 1024;

/// The call's environment as the gates read it: troupe's own variables,
/// where the session markers live, and [`MUST_MATCH`].
fn forwarded(name: &str) -> bool {
    (name.starts_with("TROUPE_") && name != ANSWERER_ENV)
        || name == "HOME"
        || name == "XDG_STATE_HOME"
        || MUST_MATCH.contains(&name)
}

/// One hook call, as the hook read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Call {
    /// The engine's name (`claude`, …).
    pub engine: String,
    /// The engine's event name.
    pub event: String,
    /// The hook process's folder.
    pub cwd: PathBuf,
    /// The forwarded part of its environment.
    pub env: BTreeMap<String, String>,
    /// Its standard input.
    pub input: Vec<u8>,
}

impl Call {
    /// A call with this process's environment.
    pub fn here(engine: &str, event: &str, cwd: &Path, input: &[u8]) -> Call {
        let env = std::env::vars_os()
            .filter_map(|(k, v)| Some((k.into_string().ok()?, v.into_string().ok()?)))
            .filter(|(k, _)| forwarded(k))
            .collect();
        Call { engine: engine.into(), event: event.into(), cwd: cwd.into(), env, input: input.to_vec() }
    }
}

/// What the hook prints for `call` as answered by the answerer in this
/// process's [`ANSWERER_ENV`], or `None` when there is none or it did not
/// answer (the hook then answers itself).
pub fn ask(engine: &str, event: &str, cwd: &Path, input: &[u8]) -> Option<Rendered> {
    let target = std::env::var(ANSWERER_ENV).ok()?;
    // An adhoc session's approvals wait for a person in the hook's own terminal.
    if std::env::var_os(super::super::adhoc::approval::APPROVALS_ENV).is_some() {
        return None;
    }
    #[cfg(debug_assertions)]
    if std::env::var_os(super::TEST_PANIC_ENV).is_some() {
        return None;
    }
    ask_at(&target, &Call::here(engine, event, cwd, input))
}

/// [`ask`] the answerer named `target` (an [`ANSWERER_ENV`] value).
pub fn ask_at(target: &str, call: &Call) -> Option<Rendered> {
    ask_within(target, call, REPLY_PATIENCE)
}

/// [`ask_at`], waiting at most `patience` for the reply once the call is sent.
fn ask_within(target: &str, call: &Call, patience: Duration) -> Option<Rendered> {
    let (pid, name) = target.split_once(':')?;
    let pid: i32 = pid.parse().ok()?;
    let stream = UnixStream::connect_addr(&SocketAddr::from_abstract_name(name).ok()?).ok()?;
    // Only the process troupe named may answer: another that took the name
    // (the answerer gone, a teammate's own listener) is not asked.
    let peer = peer(&stream)?;
    if peer.pid != pid || peer.uid != nix::unistd::getuid().as_raw() {
        return None;
    }
    stream.set_read_timeout(Some(patience)).ok()?;
    stream.set_write_timeout(Some(PATIENCE)).ok()?;
    let mut out = BufWriter::new(&stream);
    write_call(&mut out, call).ok()?;
    out.flush().ok()?;
    drop(out);
    // Sent: the answerer may act on the call (a message marked read, a write
    // recorded), so the hook must not answer it again. A reply that does not
    // come is a refusal, given before the engine's own timeout (30 s for a
    // tool call) would let the call through unanswered. Declined: the hook
    // answers itself.
    match read_reply(&mut BufReader::new(&stream)) {
        Ok(reply) => reply,
        Err(e) => {
            let why = match e.kind() {
                io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut => format!("within {} s", patience.as_secs_f32()),
                _ => format!("({e})"),
            };
            let detail = format!("troupe (pid {pid}) took the call but gave no answer {why}; try the call again");
            Some(troupe_gate::run::refuse(&call.engine, &call.event, "hook answerer", &detail))
        }
    }
}

/// How many calls this process's answerer answered and declined.
#[derive(Debug, Default)]
pub struct Counts {
    /// Answered.
    pub answered: AtomicU64,
    /// Declined (the hook answered itself).
    pub declined: AtomicU64,
}

impl Counts {
    /// (answered, declined) so far.
    pub fn load(&self) -> (u64, u64) {
        (self.answered.load(Ordering::Relaxed), self.declined.load(Ordering::Relaxed))
    }
}

/// A running answerer: its threads live as long as the process.
#[derive(Debug)]
pub struct Answerer {
    target: String,
    /// What it did so far.
    pub counts: Arc<Counts>,
}

impl Answerer {
    /// The [`ANSWERER_ENV`] value that names it.
    pub fn target(&self) -> &str {
        &self.target
    }
}

/// Start an answerer in this process: listening, with its workers.
pub fn start() -> io::Result<Answerer> {
    let pid = std::process::id();
    let name = format!("troupe-hooks-{pid}-{:016x}", nonce());
    let listener = UnixListener::bind_addr(&SocketAddr::from_abstract_name(&name)?)?;
    let counts = Arc::new(Counts::default());
    // The role policy stays compiled between calls, watched (see troupe_gate::skill_cache).
    troupe_gate::skill_cache::keep_in_memory();
    let (send, receive) = mpsc::channel::<UnixStream>();
    let receive = Arc::new(Mutex::new(receive));
    for i in 0..WORKERS {
        let (receive, counts) = (receive.clone(), counts.clone());
        std::thread::Builder::new().name(format!("hook-answerer-{i}")).spawn(move || work(&receive, &counts))?;
    }
    let me = nix::unistd::getuid().as_raw();
    std::thread::Builder::new().name("hook-answerer".into()).spawn(move || {
        for stream in listener.incoming().flatten() {
            // Another user's process is not this teammate's hook.
            if peer(&stream).is_some_and(|p| p.uid == me) && send.send(stream).is_err() {
                return;
            }
        }
    })?;
    Ok(Answerer { target: format!("{pid}:{name}"), counts })
}

/// The answerer of this process, started on first call and named in its
/// environment for every child to come (teammates inherit it). Called by
/// the commands that spawn teammates, before any other thread exists. A
/// failure to start leaves the hooks answering themselves.
pub fn host() -> Option<&'static Answerer> {
    static HOSTED: std::sync::OnceLock<Option<Answerer>> = std::sync::OnceLock::new();
    HOSTED
        .get_or_init(|| {
            let answerer = start().ok()?;
            // SAFETY: called from `dispatch` before the command starts any
            // thread other than the answerer's, which never read the
            // environment; nothing else reads or writes it concurrently.
            unsafe { std::env::set_var(ANSWERER_ENV, answerer.target()) };
            Some(answerer)
        })
        .as_ref()
}

/// `troupe __hook-answerer`: host an answerer, print `TROUPE_HOOK_ANSWERER=<target>`,
/// answer until standard input ends, then print the counts on standard error.
/// Plumbing for tests and benchmarks, which have no Lead to host one.
pub fn serve_until_stdin_ends() -> std::process::ExitCode {
    let Some(answerer) = host() else {
        eprintln!("error: cannot start the hook answerer");
        return std::process::ExitCode::from(70);
    };
    println!("{ANSWERER_ENV}={}", answerer.target());
    let _ = io::stdout().flush();
    let _ = io::copy(&mut io::stdin().lock(), &mut io::sink());
    let (answered, declined) = answerer.counts.load();
    eprintln!("answered {answered} declined {declined}");
    std::process::ExitCode::SUCCESS
}

/// A worker: answers calls one after another, keeping stores between them.
fn work(receive: &Mutex<mpsc::Receiver<UnixStream>>, counts: &Counts) {
    let kept = Rc::new(super::Kept::default());
    loop {
        let stream = match receive.lock().unwrap_or_else(|e| e.into_inner()).recv() {
            Ok(stream) => stream,
            Err(_) => return,
        };
        let _ = serve(&stream, &kept, counts);
    }
}

fn serve(stream: &UnixStream, kept: &Rc<super::Kept>, counts: &Counts) -> io::Result<()> {
    stream.set_read_timeout(Some(PATIENCE))?;
    stream.set_write_timeout(Some(PATIENCE))?;
    let call = read_call(&mut BufReader::new(stream))?;
    let reply = answer(&call, kept);
    let counter = if reply.is_some() { &counts.answered } else { &counts.declined };
    counter.fetch_add(1, Ordering::Relaxed);
    let mut out = BufWriter::new(stream);
    write_reply(&mut out, reply.as_ref())?;
    out.flush()
}

/// The answer the hook would give `call`, or `None` when it is not one the
/// answerer gives the same way (see the module's list).
pub(super) fn answer(call: &Call, kept: &Rc<super::Kept>) -> Option<Rendered> {
    declined(call).is_none().then(|| {
        let lookup = |k: &str| call.env.get(k).cloned();
        let stores = super::Stores::keeping(kept.clone());
        super::answer_call(&call.engine, &call.event, &call.input, &lookup, &call.cwd, &stores).0
    })
}

/// Why `call` is declined, if it is.
fn declined(call: &Call) -> Option<&'static str> {
    use troupe_gate::tools::{ToolCall, classify};
    use troupe_gate::{Engine, Event, input};
    if call.env.contains_key(super::super::adhoc::approval::APPROVALS_ENV) {
        return Some("an adhoc session's approvals");
    }
    if MUST_MATCH.iter().any(|name| call.env.get(*name).map(String::as_str) != std::env::var(name).ok().as_deref()) {
        return Some("an environment the answerer does not share");
    }
    let relative = |p: &str| !p.is_empty() && !Path::new(p).is_absolute();
    if !call.cwd.is_absolute() || FOLDERS.iter().any(|name| call.env.get(*name).is_some_and(|v| relative(v))) {
        return Some("a relative folder");
    }
    let Ok(engine) = call.engine.parse::<Engine>() else { return Some("an unknown engine") };
    let event = match Event::parse(engine, &call.event) {
        Ok(event @ (Event::PreToolUse | Event::PostToolUse)) => event,
        _ => return Some("not a tool call's event"),
    };
    let Ok(hook) = input::parse(engine, event, &call.input) else { return Some("input the hook refuses") };
    match hook.tool_name.as_deref().map(|tool| classify(engine, tool, &hook.tool_input)) {
        Some(Ok(ToolCall::Shell { .. })) => Some("a shell command"),
        _ => None,
    }
}

/// The credentials of the process at the other end of `stream`.
fn peer(stream: &UnixStream) -> Option<nix::libc::ucred> {
    let mut cred = nix::libc::ucred { pid: 0, uid: 0, gid: 0 };
    let mut len = std::mem::size_of::<nix::libc::ucred>() as nix::libc::socklen_t;
    // SAFETY: `cred` and `len` are valid for writes of a `ucred`, the
    // option's documented value, and the descriptor is open for the call.
    let done = unsafe {
        nix::libc::getsockopt(
            stream.as_raw_fd(),
            nix::libc::SOL_SOCKET,
            nix::libc::SO_PEERCRED,
            (&raw mut cred).cast(),
            &mut len,
        )
    };
    (done == 0 && cred.pid > 0).then_some(cred)
}

/// A name no earlier answerer of this pid had: the clock's nanoseconds
/// through the standard library's randomly keyed hasher.
fn nonce() -> u64 {
    use std::hash::{BuildHasher, Hasher};
    let mut h = std::collections::hash_map::RandomState::new().build_hasher();
    h.write_u128(std::time::SystemTime::now().duration_since(std::time::UNIX_EPOCH).unwrap_or_default().as_nanos());
    h.finish()
}

// The wire: each field a little-endian u32 length and its bytes.

fn write_field(w: &mut impl Write, bytes: &[u8]) -> io::Result<()> {
    let len = u32::try_from(bytes.len()).map_err(|_| io::Error::other("field too long"))?;
    w.write_all(&len.to_le_bytes())?;
    w.write_all(bytes)
}

fn read_field(r: &mut impl Read) -> io::Result<Vec<u8>> {
    let mut len = [0; 4];
    r.read_exact(&mut len)?;
    let len = u32::from_le_bytes(len) as usize;
    if len > MAX_FIELD {
        return Err(io::Error::other("field too long"));
    }
    let mut bytes = vec![0; len];
    r.read_exact(&mut bytes)?;
    Ok(bytes)
}

fn read_text(r: &mut impl Read) -> io::Result<String> {
    String::from_utf8(read_field(r)?).map_err(io::Error::other)
}

fn write_call(w: &mut impl Write, call: &Call) -> io::Result<()> {
    write_field(w, call.engine.as_bytes())?;
    write_field(w, call.event.as_bytes())?;
    write_field(w, call.cwd.as_os_str().as_bytes())?;
    write_field(w, &(call.env.len() as u32).to_le_bytes())?;
    for (k, v) in &call.env {
        write_field(w, k.as_bytes())?;
        write_field(w, v.as_bytes())?;
    }
    write_field(w, &call.input)
}

fn read_call(r: &mut impl Read) -> io::Result<Call> {
    let engine = read_text(r)?;
    let event = read_text(r)?;
    let cwd = PathBuf::from(std::ffi::OsString::from_vec(read_field(r)?));
    let count = read_field(r)?;
    let count = u32::from_le_bytes(count.try_into().map_err(|_| io::Error::other("bad count"))?);
    let mut env = BTreeMap::new();
    for _ in 0..count.min(4096) {
        env.insert(read_text(r)?, read_text(r)?);
    }
    let input = read_field(r)?;
    Ok(Call { engine, event, cwd, env, input })
}

fn write_reply(w: &mut impl Write, reply: Option<&Rendered>) -> io::Result<()> {
    match reply {
        None => write_field(w, b"declined"),
        Some(r) => {
            write_field(w, &[r.exit_code])?;
            write_field(w, r.stdout.as_bytes())?;
            write_field(w, r.stderr.as_bytes())
        }
    }
}

/// `Ok(None)`: declined.
fn read_reply(r: &mut impl Read) -> io::Result<Option<Rendered>> {
    let head = read_field(r)?;
    let [exit_code] = head.as_slice() else { return Ok(None) };
    Ok(Some(Rendered { exit_code: *exit_code, stdout: read_text(r)?, stderr: read_text(r)? }))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A listener in this process under a fresh name, and its target.
    fn fake() -> (UnixListener, String) {
        let name = format!("troupe-hooks-test-{}-{:016x}", std::process::id(), nonce());
        let listener = UnixListener::bind_addr(&SocketAddr::from_abstract_name(&name).unwrap()).unwrap();
        (listener, format!("{}:{name}", std::process::id()))
    }

    fn call() -> Call {
        let input = br#"{"session_id":"s","hook_event_name":"PreToolUse","tool_name":"Write","tool_input":{}}"#;
        Call::here("claude", "PreToolUse", Path::new("/"), input)
    }

    /// Nothing sent (nobody under the name, or another process under it):
    /// the hook answers itself. Sent and never answered, or the connection
    /// dropped after taking it: a refusal, never a second answer.
    #[test]
    fn a_call_taken_and_not_answered_is_refused_and_one_never_sent_is_answered_by_the_hook() {
        let (listener, target) = fake();
        let (_, name) = target.split_once(':').unwrap();
        assert_eq!(ask_within(&format!("1:{name}"), &call(), PATIENCE), None, "another pid: not asked");
        let (_, nobody) = fake();
        let gone = format!("{}:{}", std::process::id(), nobody.split_once(':').unwrap().1.replace("test", "gone"));
        assert_eq!(ask_within(&gone, &call(), PATIENCE), None, "no one listening");

        let held = std::thread::spawn(move || {
            // The first call sent (the connection of the wrong-pid attempt above sent none).
            let (taken, stream) = loop {
                let (stream, _) = listener.accept().unwrap();
                if let Ok(taken) = read_call(&mut BufReader::new(&stream)) {
                    break (taken, stream);
                }
            };
            // Silent until the caller gave up, then the next caller: dropped once read.
            let _ = listener.accept().map(|(next, _)| read_call(&mut BufReader::new(&next)));
            (taken, stream)
        });
        // Claude's exit 2 refuses a tool call; the reason goes to the model.
        let refused = ask_within(&target, &call(), Duration::from_millis(200)).expect("a refusal");
        assert_eq!(refused.exit_code, 2, "{refused:?}");
        assert!(refused.stderr.contains("gave no answer within 0.2 s"), "{refused:?}");
        let dropped = ask_within(&target, &call(), PATIENCE).expect("a refusal");
        assert_eq!(dropped.exit_code, 2, "{dropped:?}");
        assert!(dropped.stderr.contains("gave no answer ("), "{dropped:?}");
        let (taken, _) = held.join().unwrap();
        assert_eq!(taken, call(), "what was sent is what the answerer read");
    }
}
