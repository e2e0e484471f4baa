//! The schema and its migrations. `PRAGMA user_version` holds the number of
//! migrations applied; `PRAGMA application_id` marks the file as troupe's, so a
//! foreign SQLite file is refused instead of being written into.

/// `TRUP` in ASCII: the `application_id` every troupe database carries.
pub const APPLICATION_ID: i32 = 0x5452_5550;

/// Migrations, in order. Migration `i` brings the schema from version `i` to
/// `i + 1`. Never edit one that has shipped: append a new one.
pub const MIGRATIONS: &[&str] = &[
    V1,
    V2,
    V3,
    V4,
    V5,
    V6_USAGE,
    V7_LOCKS,
    V8_SESSIONS,
    V9_USAGE_UNKNOWN_COST,
    V10_PLANS,
    V11_LEASES,
    V12_GATEWAY_CALL_COUNTS,
    V13_WORKERS,
    V14_CLAIM_FUNCTIONS,
    V15_PLAN_DIGESTS,
    V16_LEANER_CLAIMS,
    V17_INTEGER_TASK_DEPENDENCIES,
    V18_EVENTS_WITHOUT_GLOBAL_ORDER,
];

/// The schema version this build writes.
pub const LATEST: i64 = MIGRATIONS.len() as i64;

// Times are microseconds since the Unix epoch (INTEGER): they sort, compare and
// port to PostgreSQL (`bigint`) without parsing.
//
// `open_blockers` caches how many of a task's blockers are not completed, so
// that `available` is an index range scan instead of a join over the whole
// dependency graph; every write that changes a blocker's status keeps it true
// in the same transaction, and `SqliteStore::verify` checks it.
const V1: &str = r#"
CREATE TABLE tasks (
    seq           INTEGER PRIMARY KEY,
    id            TEXT NOT NULL UNIQUE,
    subject       TEXT NOT NULL CHECK (length(trim(subject)) > 0),
    description   TEXT NOT NULL DEFAULT '',
    status        TEXT NOT NULL DEFAULT 'pending'
                  CHECK (status IN ('pending', 'in_progress', 'completed')),
    assignee      TEXT,
    created_by    TEXT NOT NULL,
    blocked_by    TEXT NOT NULL DEFAULT '[]',
    open_blockers INTEGER NOT NULL DEFAULT 0 CHECK (open_blockers >= 0),
    feature       TEXT,
    wave          INTEGER,
    grp           TEXT,
    files         TEXT NOT NULL DEFAULT '[]',
    created_at    INTEGER NOT NULL,
    updated_at    INTEGER NOT NULL,
    completed_at  INTEGER,
    CHECK ((status = 'completed') = (completed_at IS NOT NULL)),
    CHECK (status = 'pending' OR assignee IS NOT NULL),
    CHECK (status = 'pending' OR open_blockers = 0)
);
CREATE INDEX idx_tasks_status ON tasks(status);
CREATE INDEX idx_tasks_assignee ON tasks(assignee);
CREATE INDEX idx_tasks_feature ON tasks(feature, wave);
-- The ready set, in claim order; feature, wave and group are in the index so a
-- filtered `available` or `claim_next` skips other features' rows without
-- reading them.
CREATE INDEX idx_tasks_ready ON tasks(seq, feature, wave, grp, assignee)
    WHERE status = 'pending' AND open_blockers = 0;

CREATE TABLE task_deps (
    task_id    TEXT NOT NULL REFERENCES tasks(id) ON DELETE CASCADE,
    blocker_id TEXT NOT NULL REFERENCES tasks(id),
    PRIMARY KEY (task_id, blocker_id),
    CHECK (task_id <> blocker_id)
) WITHOUT ROWID;
CREATE INDEX idx_task_deps_blocker ON task_deps(blocker_id, task_id);

CREATE TABLE plans (
    feature     TEXT PRIMARY KEY,
    digest      TEXT NOT NULL,
    tasks       TEXT NOT NULL,
    imported_at INTEGER NOT NULL
);

CREATE TABLE messages (
    id           INTEGER PRIMARY KEY AUTOINCREMENT,
    sender       TEXT NOT NULL,
    recipient    TEXT NOT NULL,
    broadcast    INTEGER NOT NULL DEFAULT 0 CHECK (broadcast IN (0, 1)),
    priority     INTEGER NOT NULL CHECK (priority BETWEEN 1 AND 5),
    kind         TEXT NOT NULL CHECK (kind IN ('text', 'shutdown_request', 'shutdown_response', 'plan',
                     'plan_decision', 'recovery_notice', 'nudge', 'findings')),
    body         TEXT NOT NULL,
    in_reply_to  INTEGER REFERENCES messages(id),
    thread       INTEGER NOT NULL,
    created_at   INTEGER NOT NULL,
    delivered_at INTEGER,
    read_at      INTEGER
);
CREATE INDEX idx_messages_inbox ON messages(recipient, read_at, priority DESC, id);
CREATE INDEX idx_messages_thread ON messages(thread, id);

CREATE TABLE agents (
    id            TEXT PRIMARY KEY,
    name          TEXT NOT NULL,
    role          TEXT NOT NULL,
    engine        TEXT NOT NULL,
    model         TEXT,
    feature       TEXT,
    task          TEXT,
    pid           INTEGER,
    status        TEXT NOT NULL CHECK (status IN ('READY', 'PROCESSING', 'WAITING', 'DONE', 'SHUTTING_DOWN',
                      'FAILED')),
    session_id    TEXT,
    started_at    INTEGER NOT NULL,
    last_event_at INTEGER NOT NULL
);

CREATE TABLE events (
    id      INTEGER PRIMARY KEY AUTOINCREMENT,
    at      INTEGER NOT NULL,
    kind    TEXT NOT NULL,
    actor   TEXT,
    subject TEXT,
    data    TEXT NOT NULL DEFAULT '{}'
);
CREATE TRIGGER events_append_only_update BEFORE UPDATE ON events
BEGIN SELECT RAISE(ABORT, 'the event log is append-only'); END;
CREATE TRIGGER events_append_only_delete BEFORE DELETE ON events
BEGIN SELECT RAISE(ABORT, 'the event log is append-only'); END;

CREATE TABLE audit (
    id                 INTEGER PRIMARY KEY AUTOINCREMENT,
    at                 INTEGER NOT NULL,
    agent              TEXT NOT NULL,
    role               TEXT NOT NULL,
    tool               TEXT NOT NULL,
    decision           TEXT NOT NULL CHECK (decision IN ('allowed', 'denied', 'rate_limited')),
    reason             TEXT,
    duration_ms        INTEGER CHECK (duration_ms IS NULL OR duration_ms >= 0),
    argument_shape     TEXT NOT NULL DEFAULT '{}',
    thinking_signature TEXT
);
CREATE INDEX idx_audit_agent ON audit(agent, id);
CREATE INDEX idx_audit_tool ON audit(tool, id);
CREATE TRIGGER audit_append_only_update BEFORE UPDATE ON audit
BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END;
CREATE TRIGGER audit_append_only_delete BEFORE DELETE ON audit
BEGIN SELECT RAISE(ABORT, 'the audit log is append-only'); END;
"#;

// V2: an agent whose run was cut short (Ctrl-C, a closed output) is
// INTERRUPTED, not FAILED. SQLite cannot change a CHECK constraint in place, so
// the table is rebuilt with the same columns and rows.
const V2: &str = r#"
CREATE TABLE agents_v2 (
    id            TEXT PRIMARY KEY,
    name          TEXT NOT NULL,
    role          TEXT NOT NULL,
    engine        TEXT NOT NULL,
    model         TEXT,
    feature       TEXT,
    task          TEXT,
    pid           INTEGER,
    status        TEXT NOT NULL CHECK (status IN ('READY', 'PROCESSING', 'WAITING', 'DONE', 'SHUTTING_DOWN',
                      'FAILED', 'INTERRUPTED')),
    session_id    TEXT,
    started_at    INTEGER NOT NULL,
    last_event_at INTEGER NOT NULL
);
INSERT INTO agents_v2 (id, name, role, engine, model, feature, task, pid, status, session_id, started_at,
                       last_event_at)
    SELECT id, name, role, engine, model, feature, task, pid, status, session_id, started_at, last_event_at
    FROM agents;
DROP TABLE agents;
ALTER TABLE agents_v2 RENAME TO agents;
"#;

// V3: the MCP gateway's shared state. `gateway_tokens` binds the hash of each
// agent's bearer token to its id (the token itself is never stored);
// `gateway_calls` holds the last hour of each agent's calls, which rate limits
// count, so every gateway process serving an agent draws on one budget.
const V3: &str = r#"
CREATE TABLE gateway_tokens (
    agent      TEXT PRIMARY KEY,
    hash       TEXT NOT NULL,
    created_at INTEGER NOT NULL
);
CREATE TABLE gateway_calls (
    id    INTEGER PRIMARY KEY,
    agent TEXT NOT NULL,
    tool  TEXT NOT NULL,
    at    INTEGER NOT NULL
);
CREATE INDEX idx_gateway_calls ON gateway_calls(agent, at);
CREATE INDEX idx_gateway_calls_tool ON gateway_calls(agent, tool, at);
"#;

// V4: the tasks clients asked for over A2A (troupe-server) and their push
// notification targets. `body` is the task document the server owns; the
// columns beside it are what ListTasks filters and orders by (newest change
// first, `seq` breaking ties so a page cursor is exact), and `last_event` is
// the event its last change appended, where a stream of the task resumes.
const V4: &str = r#"
CREATE TABLE a2a_tasks (
    seq        INTEGER PRIMARY KEY,
    id         TEXT NOT NULL UNIQUE CHECK (length(id) > 0),
    context_id TEXT NOT NULL CHECK (length(context_id) > 0),
    state      TEXT NOT NULL,
    body       TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    updated_at INTEGER NOT NULL,
    last_event INTEGER NOT NULL
);
CREATE INDEX idx_a2a_tasks_updated ON a2a_tasks(updated_at DESC, seq DESC);
CREATE INDEX idx_a2a_tasks_context ON a2a_tasks(context_id, updated_at DESC, seq DESC);
CREATE TABLE a2a_push_configs (
    task_id    TEXT NOT NULL REFERENCES a2a_tasks(id),
    id         TEXT NOT NULL CHECK (length(id) > 0),
    body       TEXT NOT NULL,
    created_at INTEGER NOT NULL,
    PRIMARY KEY (task_id, id)
);
"#;

// V5: each counted call carries its number among the agent's calls (`seq`)
// and among the agent's calls of that tool (`tool_seq`), so that the calls
// of a window are counted by two index lookups (the last number minus the
// first in the window), not by walking every call of the last hour. The
// numbers of one agent are gap-free from its oldest kept call on (only the
// oldest are ever deleted). The calls counted before it start over.
const V5: &str = r#"
DELETE FROM gateway_calls;
ALTER TABLE gateway_calls ADD COLUMN seq INTEGER NOT NULL DEFAULT 0;
ALTER TABLE gateway_calls ADD COLUMN tool_seq INTEGER NOT NULL DEFAULT 0;
DROP INDEX idx_gateway_calls;
DROP INDEX idx_gateway_calls_tool;
CREATE INDEX idx_gateway_calls ON gateway_calls(agent, at, seq);
CREATE INDEX idx_gateway_calls_tool ON gateway_calls(agent, tool, at, tool_seq);
"#;

// V6_USAGE: the usage ledger, one row per model turn (`troupe_store::usage`).
// The engine's message id is unique per agent, so a turn seen twice (Claude
// prints a message once per content block; a resumed log is read again) is
// booked once. Costs are REAL dollars; tokens INTEGER.
const V6_USAGE: &str = r#"
CREATE TABLE usage (
    id                 INTEGER PRIMARY KEY,
    at                 INTEGER NOT NULL,
    run                TEXT NOT NULL,
    feature            TEXT,
    phase              TEXT,
    task               TEXT,
    agent              TEXT NOT NULL,
    role               TEXT NOT NULL,
    engine             TEXT NOT NULL,
    model              TEXT,
    message_id         TEXT NOT NULL,
    input_tokens       INTEGER NOT NULL DEFAULT 0 CHECK (input_tokens >= 0),
    output_tokens      INTEGER NOT NULL DEFAULT 0 CHECK (output_tokens >= 0),
    cache_read_tokens  INTEGER NOT NULL DEFAULT 0 CHECK (cache_read_tokens >= 0),
    cache_write_tokens INTEGER NOT NULL DEFAULT 0 CHECK (cache_write_tokens >= 0),
    reasoning_tokens   INTEGER NOT NULL DEFAULT 0 CHECK (reasoning_tokens >= 0),
    cost_usd           REAL NOT NULL DEFAULT 0 CHECK (cost_usd >= 0),
    cost_source        TEXT NOT NULL CHECK (cost_source IN ('reported', 'calculated')),
    UNIQUE (agent, message_id)
);
CREATE INDEX idx_usage_at ON usage(at);
CREATE INDEX idx_usage_run ON usage(run, at);
CREATE INDEX idx_usage_feature ON usage(feature, at);
CREATE TRIGGER usage_no_update BEFORE UPDATE ON usage BEGIN SELECT RAISE(ABORT, 'the usage ledger is append-only'); END;
CREATE TRIGGER usage_no_delete BEFORE DELETE ON usage BEGIN SELECT RAISE(ABORT, 'the usage ledger is append-only'); END;
"#;

// V7_LOCKS: file locks and the history of writes (seed 003 file safety).
// `file_locks` holds at most one lock per project-relative path: the primary
// key is what makes two agents racing for a file end with one winner. `pid`
// and `host` let any reader release the lock of a process that is gone;
// `expires_at` is the lease that ends it on any host. `file_changes` is every
// write troupe saw, newest looked up by path.
const V7_LOCKS: &str = r#"
CREATE TABLE file_locks (
    path        TEXT PRIMARY KEY CHECK (length(path) > 0),
    agent       TEXT NOT NULL CHECK (length(agent) > 0),
    pid         INTEGER,
    host        TEXT NOT NULL,
    task        TEXT,
    acquired_at INTEGER NOT NULL,
    expires_at  INTEGER NOT NULL
);
CREATE INDEX idx_file_locks_agent ON file_locks(agent);
CREATE TABLE file_changes (
    id     INTEGER PRIMARY KEY,
    path   TEXT NOT NULL,
    agent  TEXT NOT NULL,
    task   TEXT,
    source TEXT NOT NULL CHECK (source IN ('hook', 'post_run')),
    at     INTEGER NOT NULL
);
CREATE INDEX idx_file_changes_path ON file_changes(path, at);
"#;

// V8_SESSIONS: saved chat sessions (`troupe_store::session`). The messages
// are one JSON array: a session is read and written whole, never queried by
// message. `parent` is the session a fork or a compressed summary came from
// (kept: compressing never changes the original).
const V8_SESSIONS: &str = r#"
CREATE TABLE chat_sessions (
    id             INTEGER PRIMARY KEY,
    name           TEXT,
    role           TEXT NOT NULL,
    engine         TEXT NOT NULL,
    model          TEXT,
    engine_session TEXT,
    parent         INTEGER REFERENCES chat_sessions(id),
    summary        INTEGER NOT NULL DEFAULT 0 CHECK (summary IN (0, 1)),
    messages       TEXT NOT NULL,
    created_at     INTEGER NOT NULL,
    updated_at     INTEGER NOT NULL
);
CREATE INDEX idx_chat_sessions_updated ON chat_sessions(updated_at);
"#;

// V9_USAGE_UNKNOWN_COST: a turn whose model is priced nowhere is booked at $0
// with cost_source 'unknown' (never passed off as 'calculated'). SQLite cannot
// change a CHECK in place: the table is rebuilt with every row, its indexes
// and its append-only triggers (DROP TABLE fires no trigger).
const V9_USAGE_UNKNOWN_COST: &str = r#"
CREATE TABLE usage_v9 (
    id                 INTEGER PRIMARY KEY,
    at                 INTEGER NOT NULL,
    run                TEXT NOT NULL,
    feature            TEXT,
    phase              TEXT,
    task               TEXT,
    agent              TEXT NOT NULL,
    role               TEXT NOT NULL,
    engine             TEXT NOT NULL,
    model              TEXT,
    message_id         TEXT NOT NULL,
    input_tokens       INTEGER NOT NULL DEFAULT 0 CHECK (input_tokens >= 0),
    output_tokens      INTEGER NOT NULL DEFAULT 0 CHECK (output_tokens >= 0),
    cache_read_tokens  INTEGER NOT NULL DEFAULT 0 CHECK (cache_read_tokens >= 0),
    cache_write_tokens INTEGER NOT NULL DEFAULT 0 CHECK (cache_write_tokens >= 0),
    reasoning_tokens   INTEGER NOT NULL DEFAULT 0 CHECK (reasoning_tokens >= 0),
    cost_usd           REAL NOT NULL DEFAULT 0 CHECK (cost_usd >= 0),
    cost_source        TEXT NOT NULL CHECK (cost_source IN ('reported', 'calculated', 'unknown')),
    UNIQUE (agent, message_id)
);
INSERT INTO usage_v9 SELECT * FROM usage;
DROP TABLE usage;
ALTER TABLE usage_v9 RENAME TO usage;
CREATE INDEX idx_usage_at ON usage(at);
CREATE INDEX idx_usage_run ON usage(run, at);
CREATE INDEX idx_usage_feature ON usage(feature, at);
CREATE TRIGGER usage_no_update BEFORE UPDATE ON usage BEGIN SELECT RAISE(ABORT, 'the usage ledger is append-only'); END;
CREATE TRIGGER usage_no_delete BEFORE DELETE ON usage BEGIN SELECT RAISE(ABORT, 'the usage ledger is append-only'); END;
"#;

// V10_PLANS: plan mode (seed 003 B3). A row marks a message sent in plan mode:
// its recipient's writes wait until a `plan` it sends afterwards is approved.
// Plans and decisions stay mailbox messages; the indexes let the plans waiting
// for a decision and an agent's plan gate be read without scanning the mailbox.
const V10_PLANS: &str = r#"
CREATE TABLE plan_modes (
    message    INTEGER PRIMARY KEY REFERENCES messages(id),
    agent      TEXT NOT NULL CHECK (length(agent) > 0),
    created_at INTEGER NOT NULL
);
CREATE INDEX idx_plan_modes_agent ON plan_modes(agent, message);
CREATE INDEX idx_messages_kind ON messages(kind, sender, id);
CREATE INDEX idx_messages_reply ON messages(in_reply_to) WHERE in_reply_to IS NOT NULL;
"#;

// V11_LEASES: leases, not pids (see `crate::lease`). An agent records the
// host it was registered from (its pid means something only there), when
// its lease ends, and when a sweep released what it held after the lease
// passed (so each passed lease is swept once, and the holder still shows as
// stale); the partial index keeps the sweep a range scan over unswept leases.
const V11_LEASES: &str = r#"
ALTER TABLE agents ADD COLUMN host TEXT;
ALTER TABLE agents ADD COLUMN lease_until INTEGER;
ALTER TABLE agents ADD COLUMN lease_swept_at INTEGER;
CREATE INDEX idx_agents_lease ON agents(lease_until) WHERE lease_until IS NOT NULL AND lease_swept_at IS NULL;
"#;

// V12_GATEWAY_CALL_COUNTS: each agent's calls through the gateway over its
// whole life, for `[budgets] max_gateway_calls` (`gateway_calls` keeps only
// the last hour, for the rate limits). One row per agent, bumped in the
// transaction that counts the call.
const V12_GATEWAY_CALL_COUNTS: &str = r#"
CREATE TABLE gateway_call_totals (
    agent TEXT PRIMARY KEY,
    calls INTEGER NOT NULL CHECK (calls >= 0)
);
"#;

// V13_WORKERS: workers on other hosts (see `crate::worker`). A host row per
// `troupe worker` (lists as JSON text, the load average in thousandths:
// every column is an integer or text, so `troupe store migrate` copies them
// as it copies the rest); a job row per teammate launch the Lead queued.
// `swept_at` marks a lost host swept once; a job's `lease_until` is its
// holder's, renewed by its heartbeat. The partial indexes keep a claim a
// scan of the queue and a sweep a scan of held jobs.
const V13_WORKERS: &str = r#"
CREATE TABLE worker_hosts (
    name          TEXT PRIMARY KEY CHECK (length(trim(name)) > 0),
    engines       TEXT NOT NULL DEFAULT '[]',
    labels        TEXT NOT NULL DEFAULT '[]',
    max           INTEGER NOT NULL CHECK (max > 0),
    load_milli    INTEGER,
    draining      INTEGER NOT NULL DEFAULT 0 CHECK (draining IN (0, 1)),
    lease_until   INTEGER,
    swept_at      INTEGER,
    registered_at INTEGER NOT NULL,
    seen_at       INTEGER NOT NULL
);
CREATE TABLE worker_jobs (
    seq         INTEGER PRIMARY KEY,
    id          TEXT NOT NULL UNIQUE CHECK (length(id) > 0),
    feature     TEXT NOT NULL,
    agent       TEXT NOT NULL,
    role        TEXT NOT NULL,
    engine      TEXT NOT NULL,
    labels      TEXT NOT NULL DEFAULT '[]',
    branch      TEXT NOT NULL,
    base        TEXT NOT NULL,
    payload     TEXT NOT NULL,
    state       TEXT NOT NULL DEFAULT 'queued'
                CHECK (state IN ('queued', 'claimed', 'running', 'done', 'failed')),
    host        TEXT,
    lease_until INTEGER,
    stop        INTEGER NOT NULL DEFAULT 0 CHECK (stop IN (0, 1)),
    result      TEXT,
    created_at  INTEGER NOT NULL,
    updated_at  INTEGER NOT NULL,
    CHECK (state = 'queued' OR state = 'failed' OR host IS NOT NULL)
);
CREATE INDEX idx_worker_jobs_queue ON worker_jobs(seq) WHERE state = 'queued';
CREATE INDEX idx_worker_jobs_held ON worker_jobs(host, lease_until) WHERE state IN ('claimed', 'running');
CREATE INDEX idx_worker_jobs_feature ON worker_jobs(feature, seq);
"#;

// V14_CLAIM_FUNCTIONS: nothing here. PostgreSQL's twin creates server-side
// functions that claim or complete a task and append its events in one
// round trip, and partial indexes for the claim queues that its planner
// needs while its statistics lag; SQLite runs in the caller's process,
// where a statement costs no round trip. The migration exists so both
// backends keep one version number.
const V14_CLAIM_FUNCTIONS: &str = "-- PostgreSQL only: the claim path as server-side functions.";

// V15_PLAN_DIGESTS: a plan is remembered by its tasks' ids and a digest of
// each field (`crate::plan::items`, a few dozen bytes a task) instead of its
// whole text as JSON in `tasks` (20 MB at 100,000 tasks, a third of what an
// import wrote). New rows leave `tasks` empty; a row from before keeps its
// JSON there and no `items`, and is read as before.
const V15_PLAN_DIGESTS: &str = "ALTER TABLE plans ADD COLUMN items BLOB;";

// V16_LEANER_CLAIMS: nothing here. PostgreSQL's twin rewrites V14's claim
// functions with fewer statements per call; SQLite has no such functions.
const V16_LEANER_CLAIMS: &str = "-- PostgreSQL only: leaner claim functions.";

// V17_INTEGER_TASK_DEPENDENCIES: a dependency is a pair of task numbers
// (`tasks.seq`, the rowid) instead of a pair of text ids. A plan of 100,000
// tasks has hundreds of thousands of dependencies: as integers their rows and
// the blocker index are a fraction of the bytes the text ids took (each id
// was stored twice more, once per index), compared without `memcmp`, and a
// plan's rows arrive in key order (tasks are numbered in plan order). The
// text ids stay in `tasks`; readers join on `seq`. Rows are carried over by
// looking both ids up.
const V17_INTEGER_TASK_DEPENDENCIES: &str = r#"
CREATE TABLE task_deps_v17 (
    task_seq    INTEGER NOT NULL REFERENCES tasks(seq) ON DELETE CASCADE,
    blocker_seq INTEGER NOT NULL REFERENCES tasks(seq),
    PRIMARY KEY (task_seq, blocker_seq),
    CHECK (task_seq <> blocker_seq)
) WITHOUT ROWID;
INSERT INTO task_deps_v17 (task_seq, blocker_seq)
    SELECT t.seq, b.seq FROM task_deps d JOIN tasks t ON t.id = d.task_id JOIN tasks b ON b.id = d.blocker_id
    ORDER BY 1, 2;
DROP TABLE task_deps;
ALTER TABLE task_deps_v17 RENAME TO task_deps;
CREATE INDEX idx_task_deps_blocker ON task_deps(blocker_seq, task_seq);
"#;

// V18_EVENTS_WITHOUT_GLOBAL_ORDER: nothing here. PostgreSQL's twin takes the
// events lock and the per-row NOTIFY off its claim functions (its readers
// wait out ids still in flight instead); SQLite's single writer commits ids
// in order already.
const V18_EVENTS_WITHOUT_GLOBAL_ORDER: &str = "-- PostgreSQL only: events without a global commit order.";
