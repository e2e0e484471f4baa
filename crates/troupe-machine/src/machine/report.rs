//! Which report counts when a teammate ends (seed 000 Spec 6.3: "the
//! teammate's `report` tool call if it made one, otherwise its final text").
//!
//! The driver hands in everything the teammate left ([`Ending`]: its final
//! text, its latest `report` call and whether it made that call in its latest
//! launch, and the `reviews/active/<id>.cpf` file an Inspector writes); the
//! machine picks one here, by role, and its stages read the pick with
//! `troupe_core::report`'s one set of rules.

use serde::{Deserialize, Serialize};
use troupe_core::cpf::InspectorReport;
use troupe_core::report::{ReportCall, Submission, marker_of};
use troupe_core::role::Role;

/// What a teammate left when its run ended with a result.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Ending {
    /// The final text of its run.
    pub text: Option<String>,
    /// Its latest `report` tool call during this run of the Lead, if any.
    pub call: Option<ReportCall>,
    /// The call was made during its latest launch (not before a resume).
    pub call_is_current: bool,
    /// The contents of its `reviews/active/<id>.cpf`, if that file exists.
    pub cpf_file: Option<String>,
}

impl Ending {
    /// The report of a teammate of `role` working on `feature`:
    ///
    /// - Roles whose report is a completion report (Architect, TaskGenerator,
    ///   Builder, Coordinator): a call made in the latest launch wins; a call
    ///   from an earlier launch (a resumed teammate that did not report again)
    ///   counts only when the final text is not a report itself.
    /// - Inspector and Auditor end with CPF: a call counts only when its summary
    ///   is CPF (starts with `VERDICT:`). An Inspector whose final text is not
    ///   CPF still counts with the `.cpf` file it wrote, when that parses.
    /// - Other roles: the final text.
    pub fn choose(self, role: Role, feature: &str) -> Option<Submission> {
        let text = self.text.map(Submission::Text);
        let Some(mut call) = self.call else {
            return if role == Role::Inspector { inspector_findings(text, self.cpf_file) } else { text };
        };
        if call.feature.is_none() {
            call.feature = Some(feature.to_string());
        }
        match marker_of(role) {
            Some(marker) => {
                let text_is_report = text.as_ref().is_some_and(|t| match role {
                    Role::Builder => t.builder().is_ok(),
                    _ => t.completion(marker).is_ok(),
                });
                if self.call_is_current || !text_is_report { Some(Submission::Call(call)) } else { text }
            }
            None if matches!(role, Role::Inspector | Role::Auditor) => {
                let cpf = call.summary.trim();
                let chosen = if cpf.starts_with("VERDICT:") { Some(Submission::Text(cpf.to_string())) } else { text };
                if role == Role::Inspector { inspector_findings(chosen, self.cpf_file) } else { chosen }
            }
            None => text,
        }
    }
}

/// An Inspector's findings: its report when that is CPF, otherwise the `.cpf`
/// file it wrote (`on_disk`) when that parses, otherwise its report (which the
/// review stage refuses, saying why). An Inspector that wrote and sent valid
/// CPF but ended with prose still counts.
fn inspector_findings(report: Option<Submission>, on_disk: Option<String>) -> Option<Submission> {
    let is_cpf = |t: &str| t.parse::<InspectorReport>().is_ok();
    if report.as_ref().is_some_and(|r| is_cpf(r.text())) {
        return report;
    }
    on_disk.filter(|t| is_cpf(t)).map(Submission::Text).or(report)
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn call() -> ReportCall {
        ReportCall::from_args(&json!({
            "status": "complete", "summary": "adder done", "task_id": "login/1.1",
            "files": ["src/add.sh"], "tests": ["1 passed"],
        }))
        .unwrap()
    }

    fn ending(text: Option<&str>, call: Option<ReportCall>, current: bool) -> Ending {
        Ending { text: text.map(str::to_string), call, call_is_current: current, cpf_file: None }
    }

    /// The files of the Builder report `role` ends up with.
    #[track_caller]
    fn files(e: Ending) -> Vec<String> {
        e.choose(Role::Builder, "login").expect("a report").builder().expect("a Builder report").files
    }

    const PROSE: &str = "All done, thanks!";
    const TEXT_REPORT: &str =
        "BUILDER_COMPLETE\nFeature: login\nTasks completed: 1.1\nFiles: other.rs\nTests: 1 passed\nStatus: done\n";

    #[test]
    fn a_call_in_the_latest_launch_wins_over_anything() {
        assert_eq!(files(ending(Some(PROSE), Some(call()), true)), ["src/add.sh"]);
        assert_eq!(files(ending(Some(TEXT_REPORT), Some(call()), true)), ["src/add.sh"]);
        assert_eq!(files(ending(None, Some(call()), true)), ["src/add.sh"]);
    }

    #[test]
    fn an_earlier_launchs_call_only_stands_in_for_a_missing_report() {
        assert_eq!(files(ending(Some(PROSE), Some(call()), false)), ["src/add.sh"]);
        assert_eq!(files(ending(Some(TEXT_REPORT), Some(call()), false)), ["other.rs"]);
    }

    #[test]
    fn the_call_reaches_the_parser_as_data_with_the_runs_feature() {
        let chosen = ending(Some(PROSE), Some(call()), true).choose(Role::Builder, "login").unwrap();
        let Submission::Call(c) = &chosen else { panic!("{chosen:?}") };
        assert_eq!(c.feature.as_deref(), Some("login"));
        assert_eq!(chosen.builder().unwrap().feature, "login");
    }

    #[test]
    fn cpf_roles_take_a_call_only_when_it_is_cpf() {
        let mut cpf = call();
        cpf.summary = "  VERDICT:GO\nSCOPE:login\n".into();
        let got = ending(Some(PROSE), Some(cpf), true).choose(Role::Auditor, "login");
        assert_eq!(got, Some(Submission::Text("VERDICT:GO\nSCOPE:login".into())));
        let got = ending(Some(PROSE), Some(call()), true).choose(Role::Auditor, "login");
        assert_eq!(got, Some(Submission::Text(PROSE.into())));
        let got = ending(Some(PROSE), Some(call()), true).choose(Role::Lead, "login");
        assert_eq!(got, Some(Submission::Text(PROSE.into())));
        assert_eq!(ending(None, None, false).choose(Role::Builder, "login"), None);
    }

    #[test]
    fn an_inspector_cpf_file_counts_when_its_report_is_not_cpf() {
        let cpf = "VERDICT:NO-GO\nSCOPE:login\nISSUES:\nH|security|src/a.rs:3|token logged\nNOTES:\nnone\n";
        let prose = "INSPECTOR_COMPLETE\nFindings: 1";
        let inspector = |text: Option<&str>, file: Option<&str>| {
            let e = Ending { cpf_file: file.map(str::to_string), ..ending(text, None, false) };
            e.choose(Role::Inspector, "login").map(|s| s.text().to_string())
        };
        assert_eq!(inspector(Some(prose), Some(cpf)).as_deref(), Some(cpf));
        assert_eq!(inspector(Some(cpf), Some("VERDICT:GO\n")).as_deref(), Some(cpf));
        assert_eq!(inspector(Some(prose), Some("not cpf")).as_deref(), Some(prose));
        assert_eq!(inspector(Some(prose), None).as_deref(), Some(prose));
        assert_eq!(inspector(None, Some(cpf)).as_deref(), Some(cpf));
        // A call that is not CPF does not hide the file either.
        let e = Ending { cpf_file: Some(cpf.into()), ..ending(Some(prose), Some(call()), true) };
        assert_eq!(e.choose(Role::Inspector, "login").map(|s| s.text().to_string()).as_deref(), Some(cpf));
        // Other roles' files are not theirs to count.
        let e = Ending { cpf_file: Some(cpf.into()), ..ending(Some(prose), None, false) };
        assert_eq!(e.choose(Role::Auditor, "login"), Some(Submission::Text(prose.into())));
    }
}
