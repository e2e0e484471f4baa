//! Budgets: checked before every spawn, after every booked turn and at the
//! minute limits' deadlines; a breach pauses (or stops) the run.

use troupe_core::config::{Limits, OnExceed};

use super::*;

fn budgeted(f: impl FnOnce(&mut Budgets)) -> LeadConfig {
    let mut budgets = Budgets::default();
    f(&mut budgets);
    LeadConfig { budgets, ..LeadConfig::default() }
}

fn spent(id: &str, cost_usd: f64, tokens: u64) -> Event {
    Event::TurnSpent { id: id.into(), cost_usd, tokens }
}

fn decisions(cmds: &[Command], kind: DecisionKind) -> Vec<String> {
    cmds.iter()
        .filter_map(|c| match c {
            Command::RecordDecision { kind: k, summary } if *k == kind => Some(summary.clone()),
            _ => None,
        })
        .collect()
}

fn next_action(cmds: &[Command]) -> Option<String> {
    cmds.iter().rev().find_map(|c| match c {
        Command::WriteHandover { next_action, .. } => Some(next_action.clone()),
        _ => None,
    })
}

#[test]
fn a_turn_over_the_run_budget_pauses_spawns_and_ends_once_teammates_stopped() {
    let config = budgeted(|b| b.limits.run.max_cost_usd = Some(1.0));
    let (mut h, builders) = impl_until_builders(two_wave_plan(), config);
    let (b1, b2) = (builders[0].id.clone(), builders[1].id.clone());
    // Under the limit: nothing happens.
    assert!(h.ev(spent(&b1, 0.4, 100)).is_empty());
    // The turn that reaches it: both live Builders are asked to stop, gracefully.
    let out = h.ev(spent(&b2, 0.6, 100));
    let budget = decisions(&out, DecisionKind::Budget);
    assert_eq!(budget.len(), 1, "{out:#?}");
    assert!(budget[0].contains("run spent $1.0000 of its max_cost_usd $1.0000"), "{budget:?}");
    let stops: Vec<_> = out.iter().filter(|c| matches!(c, Command::ShutDown { force: false, .. })).collect();
    assert_eq!(stops.len(), 2, "{out:#?}");
    assert!(finish_of(&out).is_none(), "running teammates finish their turn first");
    // B1 finishes its turn with a report: no gate, no spawn of wave 2.
    let out = h.finish(&b1, &builder_ok("1.1", "src/a.rs"));
    assert!(gate_run(&out).is_none() && spawns(&out).is_empty(), "{out:#?}");
    assert!(finish_of(&out).is_none());
    let out = h.ev(Event::TeammateExited { id: b2.clone(), error: "stopped".into(), stats: RunStats::default() });
    match finish_of(&out) {
        Some(Outcome::OverBudget { reason, stopped: false }) => assert!(reason.starts_with("run spent"), "{reason}"),
        other => panic!("expected a pause, got {other:?}"),
    }
    let next = next_action(&out).unwrap();
    assert!(next.starts_with(PAUSED_BUDGET) && next.contains("troupe resume login --budget +5"), "{next}");
}

#[test]
fn the_feature_budget_counts_earlier_runs_and_refuses_the_first_spawn() {
    let config = budgeted(|b| {
        b.limits.feature.max_cost_usd = Some(2.0);
        b.feature_before.cost_usd = 2.5;
    });
    let (_, out) = H::new(design_generated("login"), Job::Impl, config);
    assert!(spawns(&out).is_empty(), "{out:#?}");
    assert!(matches!(finish_of(&out), Some(Outcome::OverBudget { .. })));
    // `--budget +5` continues: the feature may spend 5 more than it has.
    let config = budgeted(|b| {
        b.limits.feature.max_cost_usd = Some(2.0);
        b.feature_before.cost_usd = 2.5;
        b.raise(Raise::Add(5.0));
    });
    let (_, out) = H::new(design_generated("login"), Job::Impl, config);
    assert_eq!(spawns(&out).len(), 1);
}

#[test]
fn role_and_agent_limits_name_their_scope_and_stop_forces() {
    let config = budgeted(|b| {
        b.limits.on_exceed = OnExceed::Stop;
        b.limits.role.insert("builder".into(), Limits { max_tokens: Some(500), ..Limits::default() });
    });
    let (mut h, builders) = impl_until_builders(two_wave_plan(), config);
    let out = h.ev(spent(&builders[0].id, 0.0, 300));
    assert!(out.is_empty());
    let out = h.ev(spent(&builders[1].id, 0.0, 200));
    assert!(decisions(&out, DecisionKind::Budget)[0].contains("role builder spent 500 tokens of its max_tokens"));
    let forced = out.iter().filter(|c| matches!(c, Command::ShutDown { force: true, .. })).count();
    assert_eq!(forced, 2, "on_exceed = stop stops at once: {out:#?}");
    h.ev(Event::TeammateExited { id: builders[0].id.clone(), error: "killed".into(), stats: RunStats::default() });
    let out =
        h.ev(Event::TeammateExited { id: builders[1].id.clone(), error: "killed".into(), stats: RunStats::default() });
    assert_eq!(
        finish_of(&out),
        Some(Outcome::OverBudget {
            reason: "role builder spent 500 tokens of its max_tokens 500 tokens".into(),
            stopped: true
        })
    );
    assert!(next_action(&out).unwrap().starts_with(STOPPED_BUDGET));

    let config = budgeted(|b| b.limits.agent.max_cost_usd = Some(0.5));
    let (mut h, builders) = impl_until_builders(two_wave_plan(), config);
    let out = h.ev(spent(&builders[1].id, 0.5, 1));
    let d = decisions(&out, DecisionKind::Budget);
    assert!(d[0].contains(&format!("agent {} spent $0.5000", builders[1].id)), "{d:?}");
}

#[test]
fn minute_limits_are_deadlines_in_virtual_time() {
    let config = budgeted(|b| b.limits.run.max_minutes = Some(2.0));
    let (mut h, builders) = impl_until_builders(two_wave_plan(), config);
    let deadline = h.lead.poll_timeout().unwrap();
    assert_eq!(deadline, t0() + SignedDuration::from_secs(120), "the run's two minutes count from its start");
    let out = h.advance(119);
    assert!(decisions(&out, DecisionKind::Budget).is_empty(), "{out:#?}");
    let out = h.advance(1);
    assert!(
        decisions(&out, DecisionKind::Budget)[0].contains("run spent 2.00 min of its max_minutes 2 min"),
        "{out:#?}"
    );
    // Paused: the deadline is gone; only the shutdown deadlines remain.
    assert_eq!(h.lead.poll_timeout(), Some(h.now + SignedDuration::from_secs(30)));
    // Nobody answers: the stops are forced at the shutdown deadline, and the run ends after the exits.
    let out = h.advance(30);
    assert_eq!(out.iter().filter(|c| matches!(c, Command::ShutDown { force: true, .. })).count(), 2);
    for b in &builders {
        h.ev(Event::TeammateExited { id: b.id.clone(), error: "killed".into(), stats: RunStats::default() });
    }
    assert!(h.lead.is_finished());

    // An agent's minutes count from its spawn.
    let config = budgeted(|b| b.limits.agent.max_minutes = Some(0.5));
    let (mut h, _) = impl_until_builders(two_wave_plan(), config);
    let out = h.advance(30);
    assert_eq!(decisions(&out, DecisionKind::Budget).len(), 1, "{out:#?}");
}

#[test]
fn without_budgets_turns_change_nothing() {
    let (mut h, builders) = impl_until_builders(two_wave_plan(), LeadConfig::default());
    assert!(h.ev(spent(&builders[0].id, 1e6, 1 << 40)).is_empty());
    let out = h.advance(299);
    assert!(!h.lead.is_finished() && decisions(&out, DecisionKind::Budget).is_empty());
}

#[test]
fn a_spent_budget_of_gateway_calls_pauses_like_any_breach() {
    let (mut h, builders) = impl_until_builders(two_wave_plan(), LeadConfig::default());
    let b1 = builders[0].id.clone();
    let spent = |id: &str| Event::GatewayBudgetSpent {
        id: id.into(),
        made: 40,
        max: 40,
        key: "[budgets.role.builder] max_gateway_calls".into(),
    };
    // Not one of this run's teammates (another feature's): nothing happens.
    assert!(h.ev(spent("builder-other-99")).is_empty());
    let out = h.ev(spent(&b1));
    let budget = decisions(&out, DecisionKind::Budget);
    assert_eq!(budget.len(), 1, "{out:#?}");
    let said =
        format!("agent {b1} spent 40 calls of its max_gateway_calls 40 ([budgets.role.builder] max_gateway_calls)");
    assert!(budget[0].contains(&said), "{budget:?}");
    let stops = out.iter().filter(|c| matches!(c, Command::ShutDown { force: false, .. })).count();
    assert_eq!(stops, 2, "every live teammate is asked to stop, not killed: {out:#?}");
    assert!(h.ev(spent(&b1)).is_empty(), "a second refusal while paused changes nothing");
}

#[test]
fn an_agent_s_minutes_count_its_running_time_not_its_idle_time_before_a_resume() {
    let config = budgeted(|b| b.limits.agent.max_minutes = Some(1.0));
    let plan = BuildPlan { tasks: vec![task("1", &[])], groups: vec![group("A", 1, &["1"], &["a"])] };
    let (mut h, b) = impl_until_builders(plan, config);
    let id = b[0].id.clone();
    h.advance(40);
    // It reports after 40 s; the gate then runs for 50 s, while it is idle, and fails.
    let out = h.finish(&id, &builder_ok("1", "a"));
    let (run, _) = gate_run(&out).unwrap();
    h.now += SignedDuration::from_secs(50);
    let out = h.ev(Event::GateFinished { run, verdict: GateVerdict::Failed, output: "boom".into() });
    assert!(out.iter().any(|c| matches!(c, Command::Resume { .. })), "resumed within its minute: {out:#?}");
    assert!(decisions(&out, DecisionKind::Budget).is_empty(), "90 s since its spawn, 40 s of running: {out:#?}");
    // Its limit falls 20 s into the resumed launch (less the 10 ms the report took to arrive).
    assert_eq!(h.lead.poll_timeout().map(|t| t.duration_since(h.now).as_millis()), Some(19_990));
    let out = h.advance(20);
    assert_eq!(decisions(&out, DecisionKind::Budget).len(), 1, "{out:#?}");
}

#[test]
fn a_report_that_arrives_while_paused_is_kept_in_the_handover() {
    let config = budgeted(|b| b.limits.run.max_cost_usd = Some(1.0));
    let (mut h, builders) = impl_until_builders(two_wave_plan(), config);
    let (b1, b2) = (builders[0].id.clone(), builders[1].id.clone());
    h.ev(spent(&b1, 1.0, 100));
    // B1 was asked to stop and finishes its turn with a report it never completed on the board.
    let out = h.finish(&b1, &builder_ok("1.1", "src/a.rs"));
    assert!(gate_run(&out).is_none() && spawns(&out).is_empty(), "{out:#?}");
    let out = h.ev(Event::TeammateExited { id: b2.clone(), error: "stopped".into(), stats: RunStats::default() });
    assert!(matches!(finish_of(&out), Some(Outcome::OverBudget { .. })), "{out:#?}");
    let buffer = out
        .iter()
        .rev()
        .find_map(|c| match c {
            Command::WriteHandover { buffer, .. } => Some(buffer.clone()),
            _ => None,
        })
        .unwrap();
    let kept = buffer.iter().find(|b| b.contains(&b1)).unwrap_or_else(|| panic!("{buffer:?}"));
    assert!(kept.contains("reported while the run was paused") && kept.contains("BUILDER_COMPLETE"), "{kept}");
}
