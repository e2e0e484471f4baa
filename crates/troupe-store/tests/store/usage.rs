//! The usage ledger: a turn booked once per agent and message id, read back
//! whole, filtered, and only the known cost sources accepted.

use troupe_store::{NewUsage, UsageContext, UsageFilter};

use crate::conformance;

fn turn(agent: &str, id: &str, cost: f64) -> NewUsage {
    NewUsage {
        context: UsageContext {
            run: "run-1".into(),
            feature: Some("login".into()),
            agent: agent.into(),
            role: "builder".into(),
            engine: "claude".into(),
            ..UsageContext::default()
        },
        message_id: id.into(),
        model: Some("claude-opus-4-8".into()),
        input_tokens: 10,
        output_tokens: 5,
        cache_read_tokens: 2,
        cache_write_tokens: 1,
        reasoning_tokens: 0,
        cost_usd: cost,
        cost_source: "reported".into(),
    }
}

conformance! {
    fn a_turn_is_booked_once_per_agent_and_read_back_whole(s) {
        assert!(s.record_usage(turn("b1", "msg_1", 0.5)).unwrap());
        assert!(!s.record_usage(turn("b1", "msg_1", 0.5)).unwrap(), "the same message again is ignored");
        assert!(s.record_usage(turn("b2", "msg_1", 0.25)).unwrap(), "another agent's message of that id counts");
        let all = s.usage(&UsageFilter::default()).unwrap();
        assert_eq!(all.len(), 2);
        assert_eq!(all[0].usage, turn("b1", "msg_1", 0.5));
        let b2 = s.usage(&UsageFilter { agent: Some("b2".into()), ..UsageFilter::default() }).unwrap();
        assert_eq!(b2.len(), 1);
        let later = UsageFilter {
            since: Some(jiff::Timestamp::now() + jiff::SignedDuration::from_secs(60)),
            ..UsageFilter::default()
        };
        assert!(s.usage(&later).unwrap().is_empty());
        let mut bad = turn("b3", "m", 1.0);
        bad.cost_source = "guessed".into();
        assert!(s.record_usage(bad).is_err(), "the schema refuses an unknown cost source");
        // A model priced nowhere is booked as such.
        let mut unpriced = turn("b3", "m", 0.0);
        unpriced.cost_source = "unknown".into();
        assert!(s.record_usage(unpriced).unwrap());
    }
}
