//! When each recorded launch's pace starts. The Lead starts a batch of
//! teammates (a review's Inspectors and Auditor) one after the other,
//! preparing each engine's launch in turn: hundreds of milliseconds for a
//! model CLI, a few for the scripted engine. Counted from its own spawn, the
//! last of a batch would act early on replay, and a close race (an Inspector
//! done just before its Auditor reports) would end the other way. So a
//! launch's pace counts from the first spawn of its batch: the launches
//! spawned one after the other, each within [`BATCH_GAP_MS`] of the one
//! before, with no teammate ending in between (an end is what makes the Lead
//! start the next batch).

use std::collections::{BTreeMap, HashMap};

use jiff::Timestamp;
use troupe_core::event::AgentEvent;
use troupe_engine::supervisor::{Body, Record};

/// The longest gap between two spawns of one batch.
const BATCH_GAP_MS: i64 = 2_000;

/// For each agent, the pace origin of each of its launches, in order.
pub(super) fn origins(logs: &BTreeMap<String, Vec<Record>>) -> HashMap<String, Vec<Timestamp>> {
    // (when, Some(agent) for a spawn, None for a launch's end)
    let mut moments: Vec<(Timestamp, Option<&str>)> = Vec::new();
    for (agent, records) in logs {
        for r in records {
            match &r.body {
                Body::Spawned { .. } => moments.push((r.ts, Some(agent))),
                Body::Exited { .. } | Body::Event { event: AgentEvent::Result { .. } } => moments.push((r.ts, None)),
                _ => {}
            }
        }
    }
    moments.sort_by_key(|(ts, spawn)| (*ts, spawn.is_some()));
    let mut out: HashMap<String, Vec<Timestamp>> = HashMap::new();
    let mut batch: Option<(Timestamp, Timestamp)> = None; // (first spawn, last spawn)
    for (ts, spawn) in moments {
        let Some(agent) = spawn else {
            batch = None;
            continue;
        };
        let first = match batch {
            Some((first, last)) if ts.duration_since(last).as_millis() <= BATCH_GAP_MS as i128 => first,
            _ => ts,
        };
        batch = Some((first, ts));
        out.entry(agent.to_string()).or_default().push(first);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use troupe_core::event::{ParsedOutput, ResultType};

    fn at(ms: i64, agent: &str, body: Body) -> Record {
        Record { seq: 0, ts: Timestamp::from_millisecond(ms).unwrap(), agent: agent.into(), body }
    }

    fn spawned() -> Body {
        Body::Spawned { engine: "codex".into(), model: None, format: None, pid: 1, command: vec![] }
    }

    fn exited() -> Body {
        Body::Exited { exit_code: Some(0), signal: None, outcome: ParsedOutput::new(ResultType::Success) }
    }

    #[test]
    fn a_batch_counts_from_its_first_spawn_and_an_end_starts_the_next() {
        let mut logs = BTreeMap::new();
        logs.insert(
            "inspector-2".to_string(),
            vec![at(1_000, "inspector-2", spawned()), at(9_000, "inspector-2", exited())],
        );
        logs.insert(
            "inspector-3".to_string(),
            vec![at(1_400, "inspector-3", spawned()), at(9_500, "inspector-3", exited())],
        );
        // Spawned with the Inspectors, after their preparation.
        logs.insert("auditor-4".to_string(), vec![at(1_900, "auditor-4", spawned()), at(9_800, "auditor-4", exited())]);
        // Spawned on an end, soon after it: a batch of its own.
        logs.insert(
            "builder-5".to_string(),
            vec![at(9_100, "builder-5", spawned()), at(12_000, "builder-5", spawned())],
        );
        let o = origins(&logs);
        let ms = |t: &Timestamp| t.as_millisecond();
        assert_eq!(o["auditor-4"].iter().map(ms).collect::<Vec<_>>(), [1_000]);
        assert_eq!(o["inspector-3"].iter().map(ms).collect::<Vec<_>>(), [1_000]);
        // Its resume, 2.5 s after its first launch and after other ends, starts anew.
        assert_eq!(o["builder-5"].iter().map(ms).collect::<Vec<_>>(), [9_100, 12_000]);
    }
}
