//! The PostgreSQL schema: migration `i` here is SQLite's migration `i`
//! ([`crate::sqlite::schema::MIGRATIONS`]) in PostgreSQL's dialect, so both
//! backends always hold the same tables, columns and checks at the same
//! version number. Adding a table is one edit in each file: append the
//! SQLite migration there and its twin here; the assertion below refuses to
//! build while the two lists differ in length.
//!
//! Types mirror SQLite's: INTEGER is `bigint`, TEXT is `text` (JSON stays
//! text, as it is written), times are microseconds since the epoch. The
//! version lives in `troupe_schema`, one row, which also marks the database
//! as troupe's (SQLite's `application_id`).

use crate::sqlite::schema as sqlite;

/// Migrations, in order, each the twin of SQLite's migration at the same index.
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

/// The schema version this build writes (the same number as SQLite's).
pub const LATEST: i64 = MIGRATIONS.len() as i64;

const _: () = assert!(
    MIGRATIONS.len() == sqlite::MIGRATIONS.len(),
    "a SQLite migration was added without its PostgreSQL twin in crates/troupe-store/src/postgres/schema.rs"
);

/// The table holding the schema version; created before the first migration.
pub const VERSION_TABLE: &str = "CREATE TABLE IF NOT EXISTS troupe_schema (
    app     text   NOT NULL CHECK (app = 'troupe'),
    version bigint NOT NULL
)";

// The SQLite V1 tables, plus what PostgreSQL needs besides: append-only
// triggers as a function, and NOTIFY on the channels that wake waiters
// (`troupe_events` with the new event id: every change appends an event).
const V1: &str = r#"
CREATE TABLE tasks (
    seq           bigserial PRIMARY KEY,
    id            text NOT NULL UNIQUE,
    subject       text NOT NULL CHECK (length(trim(subject)) > 0),
    description   text NOT NULL DEFAULT '',
    status        text NOT NULL DEFAULT 'pending'
                  CHECK (status IN ('pending', 'in_progress', 'completed')),
    assignee      text,
    created_by    text NOT NULL,
    blocked_by    text NOT NULL DEFAULT '[]',
    open_blockers bigint NOT NULL DEFAULT 0 CHECK (open_blockers >= 0),
    feature       text,
    wave          bigint,
    grp           text,
    files         text NOT NULL DEFAULT '[]',
    created_at    bigint NOT NULL,
    updated_at    bigint NOT NULL,
    completed_at  bigint,
    CHECK ((status = 'completed') = (completed_at IS NOT NULL)),
    CHECK (status = 'pending' OR assignee IS NOT NULL),
    CHECK (status = 'pending' OR open_blockers = 0)
);
CREATE INDEX idx_tasks_status ON tasks(status);
CREATE INDEX idx_tasks_assignee ON tasks(assignee);
CREATE INDEX idx_tasks_feature ON tasks(feature, wave);
CREATE INDEX idx_tasks_ready ON tasks(seq, feature, wave, grp, assignee)
    WHERE status = 'pending' AND open_blockers = 0;
-- ids are compared by byte (a plan's ids are a range `<feature>/`..`<feature>0`).
CREATE INDEX idx_tasks_id_bytes ON tasks(id COLLATE "C");

CREATE TABLE task_deps (
    task_id    text NOT NULL REFERENCES tasks(id) ON DELETE CASCADE,
    blocker_id text NOT NULL REFERENCES tasks(id),
    PRIMARY KEY (task_id, blocker_id),
    CHECK (task_id <> blocker_id)
);
CREATE INDEX idx_task_deps_blocker ON task_deps(blocker_id, task_id);

CREATE TABLE plans (
    feature     text PRIMARY KEY,
    digest      text NOT NULL,
    tasks       text NOT NULL,
    imported_at bigint NOT NULL
);

CREATE TABLE messages (
    id           bigserial PRIMARY KEY,
    sender       text NOT NULL,
    recipient    text NOT NULL,
    broadcast    bigint NOT NULL DEFAULT 0 CHECK (broadcast IN (0, 1)),
    priority     bigint NOT NULL CHECK (priority BETWEEN 1 AND 5),
    kind         text NOT NULL CHECK (kind IN ('text', 'shutdown_request', 'shutdown_response', 'plan',
                     'plan_decision', 'recovery_notice', 'nudge', 'findings')),
    body         text NOT NULL,
    in_reply_to  bigint REFERENCES messages(id),
    thread       bigint NOT NULL,
    created_at   bigint NOT NULL,
    delivered_at bigint,
    read_at      bigint
);
CREATE INDEX idx_messages_inbox ON messages(recipient, read_at, priority DESC, id);
CREATE INDEX idx_messages_thread ON messages(thread, id);

CREATE TABLE agents (
    id            text PRIMARY KEY,
    name          text NOT NULL,
    role          text NOT NULL,
    engine        text NOT NULL,
    model         text,
    feature       text,
    task          text,
    pid           bigint,
    status        text NOT NULL CONSTRAINT agents_status_check CHECK (status IN ('READY', 'PROCESSING', 'WAITING',
                      'DONE', 'SHUTTING_DOWN', 'FAILED')),
    session_id    text,
    started_at    bigint NOT NULL,
    last_event_at bigint NOT NULL
);

CREATE TABLE events (
    id      bigserial PRIMARY KEY,
    at      bigint NOT NULL,
    kind    text NOT NULL,
    actor   text,
    subject text,
    data    text NOT NULL DEFAULT '{}'
);

CREATE TABLE audit (
    id                 bigserial PRIMARY KEY,
    at                 bigint NOT NULL,
    agent              text NOT NULL,
    role               text NOT NULL,
    tool               text NOT NULL,
    decision           text NOT NULL CHECK (decision IN ('allowed', 'denied', 'rate_limited')),
    reason             text,
    duration_ms        bigint CHECK (duration_ms IS NULL OR duration_ms >= 0),
    argument_shape     text NOT NULL DEFAULT '{}',
    thinking_signature text
);
CREATE INDEX idx_audit_agent ON audit(agent, id);
CREATE INDEX idx_audit_tool ON audit(tool, id);

CREATE FUNCTION troupe_append_only() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN RAISE EXCEPTION 'the % log is append-only', TG_ARGV[0]; END $$;
CREATE TRIGGER events_append_only BEFORE UPDATE OR DELETE ON events
    FOR EACH ROW EXECUTE FUNCTION troupe_append_only('event');
CREATE TRIGGER audit_append_only BEFORE UPDATE OR DELETE ON audit
    FOR EACH ROW EXECUTE FUNCTION troupe_append_only('audit');

CREATE FUNCTION troupe_notify_event() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN PERFORM pg_notify('troupe_events', NEW.id::text); RETURN NULL; END $$;
CREATE TRIGGER events_notify AFTER INSERT ON events
    FOR EACH ROW EXECUTE FUNCTION troupe_notify_event();
"#;

// SQLite V2 rebuilt `agents` to allow INTERRUPTED; PostgreSQL changes the check in place.
const V2: &str = r#"
ALTER TABLE agents DROP CONSTRAINT agents_status_check;
ALTER TABLE agents ADD CONSTRAINT agents_status_check CHECK (status IN ('READY', 'PROCESSING', 'WAITING', 'DONE',
    'SHUTTING_DOWN', 'FAILED', 'INTERRUPTED'));
"#;

const V3: &str = r#"
CREATE TABLE gateway_tokens (
    agent      text PRIMARY KEY,
    hash       text NOT NULL,
    created_at bigint NOT NULL
);
CREATE TABLE gateway_calls (
    id    bigserial PRIMARY KEY,
    agent text NOT NULL,
    tool  text NOT NULL,
    at    bigint NOT NULL
);
CREATE INDEX idx_gateway_calls ON gateway_calls(agent, at);
CREATE INDEX idx_gateway_calls_tool ON gateway_calls(agent, tool, at);
"#;

const V4: &str = r#"
CREATE TABLE a2a_tasks (
    seq        bigserial PRIMARY KEY,
    id         text NOT NULL UNIQUE CHECK (length(id) > 0),
    context_id text NOT NULL CHECK (length(context_id) > 0),
    state      text NOT NULL,
    body       text NOT NULL,
    created_at bigint NOT NULL,
    updated_at bigint NOT NULL,
    last_event bigint NOT NULL
);
CREATE INDEX idx_a2a_tasks_updated ON a2a_tasks(updated_at DESC, seq DESC);
CREATE INDEX idx_a2a_tasks_context ON a2a_tasks(context_id, updated_at DESC, seq DESC);
CREATE TABLE a2a_push_configs (
    task_id    text NOT NULL REFERENCES a2a_tasks(id),
    id         text NOT NULL CHECK (length(id) > 0),
    body       text NOT NULL,
    created_at bigint NOT NULL,
    PRIMARY KEY (task_id, id)
);
"#;

const V5: &str = r#"
DELETE FROM gateway_calls;
ALTER TABLE gateway_calls ADD COLUMN seq bigint NOT NULL DEFAULT 0;
ALTER TABLE gateway_calls ADD COLUMN tool_seq bigint NOT NULL DEFAULT 0;
DROP INDEX idx_gateway_calls;
DROP INDEX idx_gateway_calls_tool;
CREATE INDEX idx_gateway_calls ON gateway_calls(agent, at, seq);
CREATE INDEX idx_gateway_calls_tool ON gateway_calls(agent, tool, at, tool_seq);
"#;

// The twin of SQLite's V6_USAGE: the usage ledger, inserted only.
const V6_USAGE: &str = r#"
CREATE TABLE usage (
    id                 bigserial PRIMARY KEY,
    at                 bigint NOT NULL,
    run                text NOT NULL,
    feature            text,
    phase              text,
    task               text,
    agent              text NOT NULL,
    role               text NOT NULL,
    engine             text NOT NULL,
    model              text,
    message_id         text NOT NULL,
    input_tokens       bigint NOT NULL DEFAULT 0 CHECK (input_tokens >= 0),
    output_tokens      bigint NOT NULL DEFAULT 0 CHECK (output_tokens >= 0),
    cache_read_tokens  bigint NOT NULL DEFAULT 0 CHECK (cache_read_tokens >= 0),
    cache_write_tokens bigint NOT NULL DEFAULT 0 CHECK (cache_write_tokens >= 0),
    reasoning_tokens   bigint NOT NULL DEFAULT 0 CHECK (reasoning_tokens >= 0),
    cost_usd           double precision NOT NULL DEFAULT 0 CHECK (cost_usd >= 0),
    cost_source        text NOT NULL CHECK (cost_source IN ('reported', 'calculated')),
    UNIQUE (agent, message_id)
);
CREATE INDEX idx_usage_at ON usage(at);
CREATE INDEX idx_usage_run ON usage(run, at);
CREATE INDEX idx_usage_feature ON usage(feature, at);
CREATE TRIGGER usage_append_only BEFORE UPDATE OR DELETE ON usage
    FOR EACH ROW EXECUTE FUNCTION troupe_append_only('usage');
"#;

// The twin of SQLite's V7_LOCKS: file locks and the history of writes.
const V7_LOCKS: &str = r#"
CREATE TABLE file_locks (
    path        text PRIMARY KEY CHECK (length(path) > 0),
    agent       text NOT NULL CHECK (length(agent) > 0),
    pid         bigint,
    host        text NOT NULL,
    task        text,
    acquired_at bigint NOT NULL,
    expires_at  bigint NOT NULL
);
CREATE INDEX idx_file_locks_agent ON file_locks(agent);
CREATE TABLE file_changes (
    id     bigserial PRIMARY KEY,
    path   text NOT NULL,
    agent  text NOT NULL,
    task   text,
    source text NOT NULL CHECK (source IN ('hook', 'post_run')),
    at     bigint NOT NULL
);
CREATE INDEX idx_file_changes_path ON file_changes(path, at);
"#;

// The twin of SQLite's V8_SESSIONS: saved chat sessions (`summary` an
// integer as there, so `troupe store migrate` copies it as it is).
const V8_SESSIONS: &str = r#"
CREATE TABLE chat_sessions (
    id             bigserial PRIMARY KEY,
    name           text,
    role           text NOT NULL,
    engine         text NOT NULL,
    model          text,
    engine_session text,
    parent         bigint REFERENCES chat_sessions(id),
    summary        bigint NOT NULL DEFAULT 0 CHECK (summary IN (0, 1)),
    messages       text NOT NULL,
    created_at     bigint NOT NULL,
    updated_at     bigint NOT NULL
);
CREATE INDEX idx_chat_sessions_updated ON chat_sessions(updated_at);
"#;

// The twin of SQLite's V9_USAGE_UNKNOWN_COST: cost_source may be 'unknown'
// (PostgreSQL names V6's column check usage_cost_source_check).
const V9_USAGE_UNKNOWN_COST: &str = r#"
ALTER TABLE usage DROP CONSTRAINT usage_cost_source_check;
ALTER TABLE usage ADD CONSTRAINT usage_cost_source_check
    CHECK (cost_source IN ('reported', 'calculated', 'unknown'));
"#;

// The twin of SQLite's V10_PLANS: which messages were sent in plan mode.
const V10_PLANS: &str = r#"
CREATE TABLE plan_modes (
    message    bigint PRIMARY KEY REFERENCES messages(id),
    agent      text NOT NULL CHECK (length(agent) > 0),
    created_at bigint NOT NULL
);
CREATE INDEX idx_plan_modes_agent ON plan_modes(agent, message);
CREATE INDEX idx_messages_kind ON messages(kind, sender, id);
CREATE INDEX idx_messages_reply ON messages(in_reply_to) WHERE in_reply_to IS NOT NULL;
"#;

// The twin of SQLite's V11_LEASES: an agent's host, the end of its lease and its sweep.
const V11_LEASES: &str = r#"
ALTER TABLE agents ADD COLUMN host text;
ALTER TABLE agents ADD COLUMN lease_until bigint;
ALTER TABLE agents ADD COLUMN lease_swept_at bigint;
CREATE INDEX idx_agents_lease ON agents(lease_until) WHERE lease_until IS NOT NULL AND lease_swept_at IS NULL;
"#;

// The twin of SQLite's V12_GATEWAY_CALL_COUNTS: each agent's lifetime gateway calls.
const V12_GATEWAY_CALL_COUNTS: &str = r#"
CREATE TABLE gateway_call_totals (
    agent text   PRIMARY KEY,
    calls bigint NOT NULL CHECK (calls >= 0)
);
"#;

// The twin of SQLite's V13_WORKERS: worker hosts and their spawn jobs.
const V13_WORKERS: &str = r#"
CREATE TABLE worker_hosts (
    name          text PRIMARY KEY CHECK (length(trim(name)) > 0),
    engines       text NOT NULL DEFAULT '[]',
    labels        text NOT NULL DEFAULT '[]',
    max           bigint NOT NULL CHECK (max > 0),
    load_milli    bigint,
    draining      bigint NOT NULL DEFAULT 0 CHECK (draining IN (0, 1)),
    lease_until   bigint,
    swept_at      bigint,
    registered_at bigint NOT NULL,
    seen_at       bigint NOT NULL
);
CREATE TABLE worker_jobs (
    seq         bigserial PRIMARY KEY,
    id          text NOT NULL UNIQUE CHECK (length(id) > 0),
    feature     text NOT NULL,
    agent       text NOT NULL,
    role        text NOT NULL,
    engine      text NOT NULL,
    labels      text NOT NULL DEFAULT '[]',
    branch      text NOT NULL,
    base        text NOT NULL,
    payload     text NOT NULL,
    state       text NOT NULL DEFAULT 'queued'
                CHECK (state IN ('queued', 'claimed', 'running', 'done', 'failed')),
    host        text,
    lease_until bigint,
    stop        bigint NOT NULL DEFAULT 0 CHECK (stop IN (0, 1)),
    result      text,
    created_at  bigint NOT NULL,
    updated_at  bigint NOT NULL,
    CHECK (state = 'queued' OR state = 'failed' OR host IS NOT NULL)
);
CREATE INDEX idx_worker_jobs_queue ON worker_jobs(seq) WHERE state = 'queued';
CREATE INDEX idx_worker_jobs_held ON worker_jobs(host, lease_until) WHERE state IN ('claimed', 'running');
CREATE INDEX idx_worker_jobs_feature ON worker_jobs(feature, seq);
"#;

// V14_CLAIM_FUNCTIONS (SQLite's twin is empty): the claim queues' own
// indexes, and the claim path as functions, one round trip per call. Each function is its caller's whole transaction (the
// statement runs outside BEGIN, so it commits as it returns), and it takes
// the events lock (`p_events_lock`, the caller's `EVENTS_LOCK`) only before
// its first event: the lock that orders event ids is held for an insert and
// the commit, never across the network. The event kinds and the claim's
// data come from the caller, which names them once for both backends. A
// complete's data is written as serde_json writes it (no spaces; strings
// escaped by `to_json`, which escapes as serde_json does).
//
// `troupe_claim` and `troupe_complete` return the task's row as it is when
// they change nothing, so the caller says why from the same statement, as
// its transaction did before.
const V14_CLAIM_FUNCTIONS: &str = r#"
-- The two queues a claim reads, each in claim order. A task leaves them
-- when it is claimed; a claim skips the entries left behind (dead rows,
-- marked so by the scan that finds them) instead of reading past every
-- task the board ever completed, as a scan of `seq` does while the
-- statistics still say every task is pending (a plan imported moments ago).
CREATE INDEX idx_tasks_free ON tasks(seq) WHERE status = 'pending' AND open_blockers = 0 AND assignee IS NULL;
CREATE INDEX idx_tasks_reserved ON tasks(assignee, seq)
    WHERE status = 'pending' AND open_blockers = 0 AND assignee IS NOT NULL;

CREATE FUNCTION troupe_event(p_events_lock bigint, p_at bigint, p_kind text, p_actor text, p_subject text,
                             p_data text) RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_advisory_xact_lock(p_events_lock);
    INSERT INTO events (at, kind, actor, subject, data) VALUES (p_at, p_kind, p_actor, p_subject, p_data);
END $$;

CREATE FUNCTION troupe_claim_next(p_agent text, p_now bigint, p_feature text, p_wave bigint, p_grp text,
                                  p_events_lock bigint, p_kind text, p_data text)
RETURNS SETOF tasks LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    taken tasks;
BEGIN
    -- Tasks reserved for this agent come first: the Lead assigned them on
    -- purpose. SKIP LOCKED: a task another claimer is taking right now is
    -- passed over, not waited for; the outer condition re-checks the row as
    -- locked. PostgreSQL reuses one plan per connection here once it finds
    -- it no costlier than planning each call (which costs more than the
    -- claim), so the plans must be good for any agent: reserved tasks are ordered by `seq + 0`, which no index
    -- provides, so the plan reads the agent's few reserved tasks by
    -- `idx_tasks_reserved` and sorts them, instead of walking every task by
    -- `seq` for the agent's; and without a filter the statements name none
    -- (a reused plan cannot know which filters are absent).
    IF p_feature IS NULL AND p_wave IS NULL AND p_grp IS NULL THEN
        UPDATE tasks SET status = 'in_progress', assignee = p_agent, updated_at = p_now WHERE seq =
            (SELECT seq FROM tasks WHERE status = 'pending' AND open_blockers = 0 AND assignee = p_agent
             ORDER BY seq + 0 LIMIT 1 FOR UPDATE SKIP LOCKED)
          AND status = 'pending' AND open_blockers = 0
        RETURNING * INTO taken;
        IF NOT FOUND THEN
            UPDATE tasks SET status = 'in_progress', assignee = p_agent, updated_at = p_now WHERE seq =
                (SELECT seq FROM tasks WHERE status = 'pending' AND open_blockers = 0 AND assignee IS NULL
                 ORDER BY seq LIMIT 1 FOR UPDATE SKIP LOCKED)
              AND status = 'pending' AND open_blockers = 0
            RETURNING * INTO taken;
        END IF;
    ELSE
        UPDATE tasks SET status = 'in_progress', assignee = p_agent, updated_at = p_now WHERE seq =
            (SELECT seq FROM tasks WHERE status = 'pending' AND open_blockers = 0 AND assignee = p_agent
               AND (p_feature IS NULL OR feature = p_feature) AND (p_wave IS NULL OR wave = p_wave)
               AND (p_grp IS NULL OR grp = p_grp)
             ORDER BY seq + 0 LIMIT 1 FOR UPDATE SKIP LOCKED)
          AND status = 'pending' AND open_blockers = 0
        RETURNING * INTO taken;
        IF NOT FOUND THEN
            UPDATE tasks SET status = 'in_progress', assignee = p_agent, updated_at = p_now WHERE seq =
                (SELECT seq FROM tasks WHERE status = 'pending' AND open_blockers = 0 AND assignee IS NULL
                   AND (p_feature IS NULL OR feature = p_feature) AND (p_wave IS NULL OR wave = p_wave)
                   AND (p_grp IS NULL OR grp = p_grp)
                 ORDER BY seq LIMIT 1 FOR UPDATE SKIP LOCKED)
              AND status = 'pending' AND open_blockers = 0
            RETURNING * INTO taken;
        END IF;
    END IF;
    IF FOUND THEN
        PERFORM troupe_event(p_events_lock, p_now, p_kind, p_agent, taken.id, p_data);
        RETURN NEXT taken;
    END IF;
END $$;

CREATE FUNCTION troupe_claim(p_id text, p_agent text, p_now bigint, p_events_lock bigint, p_kind text,
                             p_data text)
RETURNS TABLE (task tasks, taken boolean) LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    cur tasks;
BEGIN
    -- The blocker count is checked in the statement that takes the task.
    UPDATE tasks SET status = 'in_progress', assignee = p_agent, updated_at = p_now
     WHERE id = p_id AND status = 'pending' AND open_blockers = 0 AND (assignee IS NULL OR assignee = p_agent)
    RETURNING * INTO cur;
    taken := FOUND;
    IF taken THEN
        PERFORM troupe_event(p_events_lock, p_now, p_kind, p_agent, p_id, p_data);
    ELSE
        SELECT * INTO cur FROM tasks WHERE id = p_id;
        IF NOT FOUND THEN
            RETURN;
        END IF;
    END IF;
    task := cur;
    RETURN NEXT;
END $$;

CREATE FUNCTION troupe_complete(p_id text, p_agent text, p_now bigint, p_events_lock bigint,
                                p_completed_kind text, p_unblocked_kind text)
RETURNS TABLE (task tasks, done boolean, unblocked text[]) LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    cur tasks;
    freed text[];
    freed_id text;
BEGIN
    -- Found by id alone: a condition on `assignee` would let a planner
    -- with stale statistics walk the agent's past tasks instead.
    SELECT * INTO cur FROM tasks WHERE id = p_id FOR UPDATE;
    IF NOT FOUND THEN
        RETURN;
    END IF;
    done := coalesce(cur.status = 'in_progress' AND cur.assignee = p_agent, false);
    IF NOT done THEN
        task := cur;
        RETURN NEXT;
        RETURN;
    END IF;
    UPDATE tasks SET status = 'completed', completed_at = p_now, updated_at = p_now WHERE seq = cur.seq
    RETURNING * INTO cur;
    -- Dependents that no longer wait for anything, in creation order.
    WITH changed AS (
        UPDATE tasks SET open_blockers = open_blockers - 1, updated_at = p_now
         WHERE id IN (SELECT task_id FROM task_deps WHERE blocker_id = p_id)
        RETURNING seq, id, open_blockers, status)
    SELECT coalesce(array_agg(id ORDER BY seq) FILTER (WHERE open_blockers = 0 AND status = 'pending'), '{}')
      INTO freed FROM changed;
    PERFORM troupe_event(p_events_lock, p_now, p_completed_kind, p_agent, p_id,
        '{"unblocked":[' || array_to_string(ARRAY(SELECT to_json(f)::text FROM unnest(freed) WITH ORDINALITY AS x(f, n)
                                                  ORDER BY n), ',') || ']}');
    FOREACH freed_id IN ARRAY freed LOOP
        PERFORM troupe_event(p_events_lock, p_now, p_unblocked_kind, p_agent, freed_id,
                             '{"by":' || to_json(p_id)::text || '}');
    END LOOP;
    task := cur;
    unblocked := freed;
    RETURN NEXT;
END $$;
"#;

// V15_PLAN_DIGESTS: a plan is remembered by its tasks' ids and a digest of
// each field (`crate::plan::items`, a few dozen bytes a task) instead of its
// whole text as JSON in `tasks` (20 MB at 100,000 tasks, a third of what an
// import wrote). New rows leave `tasks` empty; a row from before keeps its
// JSON there and no `items`, and is read as before.
const V15_PLAN_DIGESTS: &str = "ALTER TABLE plans ADD COLUMN items bytea;";

// V16_LEANER_CLAIMS (SQLite's twin is empty): the claim path with fewer
// statements per call, measured with `--bench claimers` and pgbench on
// the same functions (BENCHMARKS.md, "many claimers"). Every statement a
// function runs costs an executor start, its relations' locks and memory
// contexts, which is most of a claim's server CPU: the event is one
// `INSERT … SELECT … FROM pg_advisory_xact_lock(…)` in the function itself
// instead of a call to `troupe_event` running two statements (dropped;
// `troupe_claim_next` takes the lock first, see there), and
// `troupe_complete` completes with one conditional UPDATE instead of a
// SELECT … FOR UPDATE and an UPDATE (its condition is not indexable, so a
// planner with stale statistics still finds the task by its id alone, as
// V14 requires). Signatures, results, event ids in commit order and the
// order of a completion's events are V14's.
const V16_LEANER_CLAIMS: &str = r#"
CREATE OR REPLACE FUNCTION troupe_claim_next(p_agent text, p_now bigint, p_feature text, p_wave bigint, p_grp text,
                                  p_events_lock bigint, p_kind text, p_data text)
RETURNS SETOF tasks LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    taken tasks;
BEGIN
    -- The events lock first, unlike any other writer: claimers then take
    -- their rows one at a time, and none walks past the rows the others
    -- have locked while they wait for the lock to write their event (with
    -- 64 claimers that walk doubled the pages a claim reads). Holding it
    -- waits for no row: SKIP LOCKED passes over locked rows.
    PERFORM pg_advisory_xact_lock(p_events_lock);
    -- Then as V14's: reserved tasks first, then free ones (why each
    -- statement reads as it does is told there); the event is written here.
    IF p_feature IS NULL AND p_wave IS NULL AND p_grp IS NULL THEN
        UPDATE tasks SET status = 'in_progress', assignee = p_agent, updated_at = p_now WHERE seq =
            (SELECT seq FROM tasks WHERE status = 'pending' AND open_blockers = 0 AND assignee = p_agent
             ORDER BY seq + 0 LIMIT 1 FOR UPDATE SKIP LOCKED)
          AND status = 'pending' AND open_blockers = 0
        RETURNING * INTO taken;
        IF NOT FOUND THEN
            UPDATE tasks SET status = 'in_progress', assignee = p_agent, updated_at = p_now WHERE seq =
                (SELECT seq FROM tasks WHERE status = 'pending' AND open_blockers = 0 AND assignee IS NULL
                 ORDER BY seq LIMIT 1 FOR UPDATE SKIP LOCKED)
              AND status = 'pending' AND open_blockers = 0
            RETURNING * INTO taken;
        END IF;
    ELSE
        UPDATE tasks SET status = 'in_progress', assignee = p_agent, updated_at = p_now WHERE seq =
            (SELECT seq FROM tasks WHERE status = 'pending' AND open_blockers = 0 AND assignee = p_agent
               AND (p_feature IS NULL OR feature = p_feature) AND (p_wave IS NULL OR wave = p_wave)
               AND (p_grp IS NULL OR grp = p_grp)
             ORDER BY seq + 0 LIMIT 1 FOR UPDATE SKIP LOCKED)
          AND status = 'pending' AND open_blockers = 0
        RETURNING * INTO taken;
        IF NOT FOUND THEN
            UPDATE tasks SET status = 'in_progress', assignee = p_agent, updated_at = p_now WHERE seq =
                (SELECT seq FROM tasks WHERE status = 'pending' AND open_blockers = 0 AND assignee IS NULL
                   AND (p_feature IS NULL OR feature = p_feature) AND (p_wave IS NULL OR wave = p_wave)
                   AND (p_grp IS NULL OR grp = p_grp)
                 ORDER BY seq LIMIT 1 FOR UPDATE SKIP LOCKED)
              AND status = 'pending' AND open_blockers = 0
            RETURNING * INTO taken;
        END IF;
    END IF;
    IF FOUND THEN
        INSERT INTO events (at, kind, actor, subject, data) VALUES (p_now, p_kind, p_agent, taken.id, p_data);
        RETURN NEXT taken;
    END IF;
END $$;

CREATE OR REPLACE FUNCTION troupe_claim(p_id text, p_agent text, p_now bigint, p_events_lock bigint, p_kind text,
                             p_data text)
RETURNS TABLE (task tasks, taken boolean) LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    cur tasks;
BEGIN
    UPDATE tasks SET status = 'in_progress', assignee = p_agent, updated_at = p_now
     WHERE id = p_id AND status = 'pending' AND open_blockers = 0 AND (assignee IS NULL OR assignee = p_agent)
    RETURNING * INTO cur;
    taken := FOUND;
    IF taken THEN
        INSERT INTO events (at, kind, actor, subject, data)
        SELECT p_now, p_kind, p_agent, p_id, p_data FROM pg_advisory_xact_lock(p_events_lock);
    ELSE
        SELECT * INTO cur FROM tasks WHERE id = p_id;
        IF NOT FOUND THEN
            RETURN;
        END IF;
    END IF;
    task := cur;
    RETURN NEXT;
END $$;

CREATE OR REPLACE FUNCTION troupe_complete(p_id text, p_agent text, p_now bigint, p_events_lock bigint,
                                p_completed_kind text, p_unblocked_kind text)
RETURNS TABLE (task tasks, done boolean, unblocked text[]) LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    cur tasks;
    freed text[];
BEGIN
    -- The condition inside coalesce(): no index can serve it, so the task
    -- is found by its id alone. An UPDATE that finds the row changed by a
    -- concurrent transaction re-checks the condition on the committed row.
    UPDATE tasks SET status = 'completed', completed_at = p_now, updated_at = p_now
     WHERE id = p_id AND coalesce(status = 'in_progress' AND assignee = p_agent, false)
    RETURNING * INTO cur;
    done := FOUND;
    IF NOT done THEN
        SELECT * INTO cur FROM tasks WHERE id = p_id;
        IF NOT FOUND THEN
            RETURN;
        END IF;
        task := cur;
        RETURN NEXT;
        RETURN;
    END IF;
    -- Dependents that no longer wait for anything, in creation order.
    WITH changed AS (
        UPDATE tasks SET open_blockers = open_blockers - 1, updated_at = p_now
         WHERE id IN (SELECT task_id FROM task_deps WHERE blocker_id = p_id)
        RETURNING seq, id, open_blockers, status)
    SELECT coalesce(array_agg(id ORDER BY seq) FILTER (WHERE open_blockers = 0 AND status = 'pending'), '{}')
      INTO freed FROM changed;
    -- The completion first, then each freed task in order: ids are drawn as
    -- the sorted rows are inserted, after the lock is held.
    INSERT INTO events (at, kind, actor, subject, data)
    SELECT p_now, e.kind, p_agent, e.subject, e.data FROM pg_advisory_xact_lock(p_events_lock),
        (SELECT p_completed_kind AS kind, p_id AS subject, 0::bigint AS n,
                '{"unblocked":[' || array_to_string(ARRAY(SELECT to_json(f)::text
                    FROM unnest(freed) WITH ORDINALITY AS x(f, n) ORDER BY n), ',') || ']}' AS data
         UNION ALL
         SELECT p_unblocked_kind, f, n, '{"by":' || to_json(p_id)::text || '}'
           FROM unnest(freed) WITH ORDINALITY AS x(f, n)) e
    ORDER BY e.n;
    task := cur;
    unblocked := freed;
    RETURN NEXT;
END $$;

DROP FUNCTION troupe_event(bigint, bigint, text, text, text, text);
"#;

// V17_INTEGER_TASK_DEPENDENCIES (SQLite's twin says why): dependencies as
// pairs of task numbers (`tasks.seq`), carried over by looking both ids up,
// and `troupe_complete` (V16's, with only its dependents' lookup changed)
// finding the tasks that wait for the completed one by its number.
const V17_INTEGER_TASK_DEPENDENCIES: &str = r#"
CREATE TABLE task_deps_v17 (
    task_seq    bigint NOT NULL REFERENCES tasks(seq) ON DELETE CASCADE,
    blocker_seq bigint NOT NULL REFERENCES tasks(seq),
    PRIMARY KEY (task_seq, blocker_seq),
    CHECK (task_seq <> blocker_seq)
);
INSERT INTO task_deps_v17 (task_seq, blocker_seq)
    SELECT t.seq, b.seq FROM task_deps d JOIN tasks t ON t.id = d.task_id JOIN tasks b ON b.id = d.blocker_id;
DROP TABLE task_deps;
ALTER TABLE task_deps_v17 RENAME TO task_deps;
ALTER TABLE task_deps RENAME CONSTRAINT task_deps_v17_pkey TO task_deps_pkey;
CREATE INDEX idx_task_deps_blocker ON task_deps(blocker_seq, task_seq);

CREATE OR REPLACE FUNCTION troupe_complete(p_id text, p_agent text, p_now bigint, p_events_lock bigint,
                                p_completed_kind text, p_unblocked_kind text)
RETURNS TABLE (task tasks, done boolean, unblocked text[]) LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    cur tasks;
    freed text[];
BEGIN
    -- The condition inside coalesce(): no index can serve it, so the task
    -- is found by its id alone. An UPDATE that finds the row changed by a
    -- concurrent transaction re-checks the condition on the committed row.
    UPDATE tasks SET status = 'completed', completed_at = p_now, updated_at = p_now
     WHERE id = p_id AND coalesce(status = 'in_progress' AND assignee = p_agent, false)
    RETURNING * INTO cur;
    done := FOUND;
    IF NOT done THEN
        SELECT * INTO cur FROM tasks WHERE id = p_id;
        IF NOT FOUND THEN
            RETURN;
        END IF;
        task := cur;
        RETURN NEXT;
        RETURN;
    END IF;
    -- Dependents that no longer wait for anything, in creation order.
    WITH changed AS (
        UPDATE tasks SET open_blockers = open_blockers - 1, updated_at = p_now
         WHERE seq IN (SELECT task_seq FROM task_deps WHERE blocker_seq = cur.seq)
        RETURNING seq, id, open_blockers, status)
    SELECT coalesce(array_agg(id ORDER BY seq) FILTER (WHERE open_blockers = 0 AND status = 'pending'), '{}')
      INTO freed FROM changed;
    -- The completion first, then each freed task in order: ids are drawn as
    -- the sorted rows are inserted, after the lock is held.
    INSERT INTO events (at, kind, actor, subject, data)
    SELECT p_now, e.kind, p_agent, e.subject, e.data FROM pg_advisory_xact_lock(p_events_lock),
        (SELECT p_completed_kind AS kind, p_id AS subject, 0::bigint AS n,
                '{"unblocked":[' || array_to_string(ARRAY(SELECT to_json(f)::text
                    FROM unnest(freed) WITH ORDINALITY AS x(f, n) ORDER BY n), ',') || ']}' AS data
         UNION ALL
         SELECT p_unblocked_kind, f, n, '{"by":' || to_json(p_id)::text || '}'
           FROM unnest(freed) WITH ORDINALITY AS x(f, n)) e
    ORDER BY e.n;
    task := cur;
    unblocked := freed;
    RETURN NEXT;
END $$;
"#;

// V18_EVENTS_WITHOUT_GLOBAL_ORDER (SQLite's twin is empty): the claim path
// takes no global lock. Event ids no longer commit in id order: readers wait
// out an id a transaction still in flight may hold (`postgres/gaps.rs`), so
// writers need not queue for one lock to keep that order, which was 97 % of
// a claim's time at 64 claimers (BENCHMARKS.md, "many claimers"). The
// functions lose their `p_events_lock` parameter; before it draws an event
// id each takes the *shared* advisory lock `EVENT_WRITERS` (92712595357701,
// `postgres/mod.rs`), which no writer waits for and which tells readers the
// transactions that may still commit an event, as their argument needs. The
// per-row NOTIFY trigger goes too: a NOTIFY makes its transaction's commit
// take PostgreSQL's cluster-wide notify lock, so the writer now notifies
// after its commit, once per transaction, with its newest event id (`notify`
// in `postgres/mod.rs`). Otherwise the functions are V16's and V17's.
const V18_EVENTS_WITHOUT_GLOBAL_ORDER: &str = r#"
DROP TRIGGER events_notify ON events;
DROP FUNCTION troupe_notify_event();
DROP FUNCTION troupe_claim_next(text, bigint, text, bigint, text, bigint, text, text);
DROP FUNCTION troupe_claim(text, text, bigint, bigint, text, text);
DROP FUNCTION troupe_complete(text, text, bigint, bigint, text, text);

CREATE FUNCTION troupe_claim_next(p_agent text, p_now bigint, p_feature text, p_wave bigint, p_grp text,
                                  p_kind text, p_data text)
RETURNS SETOF tasks LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    taken tasks;
BEGIN
    -- Reserved tasks first, then free ones (V14 tells why each statement reads as it does).
    IF p_feature IS NULL AND p_wave IS NULL AND p_grp IS NULL THEN
        UPDATE tasks SET status = 'in_progress', assignee = p_agent, updated_at = p_now WHERE seq =
            (SELECT seq FROM tasks WHERE status = 'pending' AND open_blockers = 0 AND assignee = p_agent
             ORDER BY seq + 0 LIMIT 1 FOR UPDATE SKIP LOCKED)
          AND status = 'pending' AND open_blockers = 0
        RETURNING * INTO taken;
        IF NOT FOUND THEN
            UPDATE tasks SET status = 'in_progress', assignee = p_agent, updated_at = p_now WHERE seq =
                (SELECT seq FROM tasks WHERE status = 'pending' AND open_blockers = 0 AND assignee IS NULL
                 ORDER BY seq LIMIT 1 FOR UPDATE SKIP LOCKED)
              AND status = 'pending' AND open_blockers = 0
            RETURNING * INTO taken;
        END IF;
    ELSE
        UPDATE tasks SET status = 'in_progress', assignee = p_agent, updated_at = p_now WHERE seq =
            (SELECT seq FROM tasks WHERE status = 'pending' AND open_blockers = 0 AND assignee = p_agent
               AND (p_feature IS NULL OR feature = p_feature) AND (p_wave IS NULL OR wave = p_wave)
               AND (p_grp IS NULL OR grp = p_grp)
             ORDER BY seq + 0 LIMIT 1 FOR UPDATE SKIP LOCKED)
          AND status = 'pending' AND open_blockers = 0
        RETURNING * INTO taken;
        IF NOT FOUND THEN
            UPDATE tasks SET status = 'in_progress', assignee = p_agent, updated_at = p_now WHERE seq =
                (SELECT seq FROM tasks WHERE status = 'pending' AND open_blockers = 0 AND assignee IS NULL
                   AND (p_feature IS NULL OR feature = p_feature) AND (p_wave IS NULL OR wave = p_wave)
                   AND (p_grp IS NULL OR grp = p_grp)
                 ORDER BY seq LIMIT 1 FOR UPDATE SKIP LOCKED)
              AND status = 'pending' AND open_blockers = 0
            RETURNING * INTO taken;
        END IF;
    END IF;
    IF FOUND THEN
        PERFORM pg_advisory_xact_lock_shared(92712595357701);
        INSERT INTO events (at, kind, actor, subject, data) VALUES (p_now, p_kind, p_agent, taken.id, p_data);
        RETURN NEXT taken;
    END IF;
END $$;

CREATE FUNCTION troupe_claim(p_id text, p_agent text, p_now bigint, p_kind text, p_data text)
RETURNS TABLE (task tasks, taken boolean) LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    cur tasks;
BEGIN
    UPDATE tasks SET status = 'in_progress', assignee = p_agent, updated_at = p_now
     WHERE id = p_id AND status = 'pending' AND open_blockers = 0 AND (assignee IS NULL OR assignee = p_agent)
    RETURNING * INTO cur;
    taken := FOUND;
    IF taken THEN
        PERFORM pg_advisory_xact_lock_shared(92712595357701);
        INSERT INTO events (at, kind, actor, subject, data) VALUES (p_now, p_kind, p_agent, p_id, p_data);
    ELSE
        SELECT * INTO cur FROM tasks WHERE id = p_id;
        IF NOT FOUND THEN
            RETURN;
        END IF;
    END IF;
    task := cur;
    RETURN NEXT;
END $$;

CREATE FUNCTION troupe_complete(p_id text, p_agent text, p_now bigint, p_completed_kind text,
                                p_unblocked_kind text)
RETURNS TABLE (task tasks, done boolean, unblocked text[]) LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    cur tasks;
    freed text[];
BEGIN
    UPDATE tasks SET status = 'completed', completed_at = p_now, updated_at = p_now
     WHERE id = p_id AND coalesce(status = 'in_progress' AND assignee = p_agent, false)
    RETURNING * INTO cur;
    done := FOUND;
    IF NOT done THEN
        SELECT * INTO cur FROM tasks WHERE id = p_id;
        IF NOT FOUND THEN
            RETURN;
        END IF;
        task := cur;
        RETURN NEXT;
        RETURN;
    END IF;
    WITH changed AS (
        UPDATE tasks SET open_blockers = open_blockers - 1, updated_at = p_now
         WHERE seq IN (SELECT task_seq FROM task_deps WHERE blocker_seq = cur.seq)
        RETURNING seq, id, open_blockers, status)
    SELECT coalesce(array_agg(id ORDER BY seq) FILTER (WHERE open_blockers = 0 AND status = 'pending'), '{}')
      INTO freed FROM changed;
    -- The completion first, then each freed task in order: ids are drawn as the sorted rows are inserted.
    PERFORM pg_advisory_xact_lock_shared(92712595357701);
    INSERT INTO events (at, kind, actor, subject, data)
    SELECT p_now, e.kind, p_agent, e.subject, e.data FROM
        (SELECT p_completed_kind AS kind, p_id AS subject, 0::bigint AS n,
                '{"unblocked":[' || array_to_string(ARRAY(SELECT to_json(f)::text
                    FROM unnest(freed) WITH ORDINALITY AS x(f, n) ORDER BY n), ',') || ']}' AS data
         UNION ALL
         SELECT p_unblocked_kind, f, n, '{"by":' || to_json(p_id)::text || '}'
           FROM unnest(freed) WITH ORDINALITY AS x(f, n)) e
    ORDER BY e.n;
    task := cur;
    unblocked := freed;
    RETURN NEXT;
END $$;
"#;
