//! Features: every spec with its phase; a feature's page shows the phase
//! machine, the changelog, design.md and research.md rendered, tasks.yaml as
//! waves, the verdict history (each round's verified findings by severity,
//! read by the review record's own parser), the feature's commits with their diffs, and its
//! per-phase engine override (written by `PUT /specs/{feature}/engine_override`).

use std::fmt::Write;
use std::path::Path as FsPath;

use axum::Router;
use axum::extract::{Path, State};
use axum::response::Html;
use axum::routing::get;
use troupe_core::config::ENGINE_PHASES;
use troupe_core::phase::Phase;
use troupe_core::plan::TaskPlan;
use troupe_core::spec::Spec;
use troupe_machine::review::record::{Round, Severities, rounds};
use troupe_project::Project;
use troupe_project::specs::Specs;

use super::engines::engine_options;
use super::html::{esc, markdown, page, select};
use super::{Page, blocking, last_event};
use crate::error::ApiError;
use crate::rest::ids::feature;
use crate::state::AppState;

pub(super) fn routes() -> Router<AppState> {
    Router::new().route("/ui/features", get(features_page)).route("/ui/features/{name}", get(feature_page))
}

async fn features_page(State(state): State<AppState>) -> Page {
    let last = last_event(&state).await?;
    let root = state.layout().root().to_path_buf();
    let list = blocking(move || {
        let project = Project::at(&root);
        let specs = Specs::new(&project);
        let names = specs.names().unwrap_or_default();
        names
            .into_iter()
            .map(|n| {
                let phase = specs.load(&n).map(|s| s.phase.to_string()).unwrap_or_else(|_| "unreadable".into());
                (n, phase)
            })
            .collect::<Vec<_>>()
    })
    .await?;
    let mut body = String::from(
        r#"<table data-testid="features-table"><thead><tr><th scope="col">Feature</th><th scope="col">Phase</th></tr></thead><tbody>"#,
    );
    for (name, phase) in &list {
        let n = esc(name);
        let _ = write!(
            body,
            r#"<tr><td><a href="/ui/features/{n}" data-testid="feature-link-{n}">{n}</a></td><td data-testid="phase-{n}">{}</td></tr>"#,
            esc(phase)
        );
    }
    body.push_str("</tbody></table>");
    if list.is_empty() {
        body.push_str("<p>No specs yet: <code>troupe spec new NAME</code> starts one.</p>");
    }
    Ok(Html(page("Features", "/ui/features", last, &format!(r#"<div data-page="features">{body}</div>"#))))
}

/// The phases in pipeline order, the current one marked.
fn phase_machine(current: &Phase) -> String {
    let mut out = String::from(r#"<ol class="phases" data-testid="phase-machine">"#);
    for p in Phase::KNOWN.iter() {
        let here = if p == current { r#" class="here" aria-current="step""# } else { "" };
        let _ = write!(out, "<li{here}>{}</li>", esc(p.as_str()));
    }
    if let Phase::Unknown(s) = current {
        let _ = write!(out, r#"<li class="here" aria-current="step">{} (unknown)</li>"#, esc(s));
    }
    out.push_str("</ol>");
    out
}

fn changelog(spec: &Spec) -> String {
    let mut out = String::from(r#"<ol class="changelog" data-testid="changelog">"#);
    for c in &spec.changelog {
        let moved = match (&c.from, &c.to) {
            (Some(f), Some(t)) => format!(" ({} → {})", esc(f.as_str()), esc(t.as_str())),
            _ => String::new(),
        };
        let _ = write!(
            out,
            "<li><time>{}</time> v{} <strong>{}</strong>{moved}: {}</li>",
            c.at,
            esc(&c.version),
            esc(&c.action),
            esc(&c.summary)
        );
    }
    out.push_str("</ol>");
    out
}

/// tasks.yaml as its execution waves (groups with their files), then its tasks.
fn waves(text: &str) -> String {
    let plan = match TaskPlan::from_yaml(text) {
        Ok(p) => p,
        Err(e) => return format!(r#"<p class="error">tasks.yaml cannot be read: {}</p>"#, esc(&e.message)),
    };
    let mut out = String::from(r#"<div data-testid="plan-waves">"#);
    for (n, wave) in plan.execution.iter().flat_map(|e| e.waves.iter()).enumerate() {
        let _ = write!(out, "<h3>Wave {}</h3><ul>", wave.wave.unwrap_or(n as u32 + 1));
        for g in &wave.groups {
            let files: Vec<String> = g.files.iter().map(|f| format!("<code>{}</code>", esc(f))).collect();
            let _ = write!(
                out,
                "<li><strong>{}</strong>: {} — {}</li>",
                esc(&g.id),
                esc(&g.tasks.join(", ")),
                files.join(" ")
            );
        }
        out.push_str("</ul>");
    }
    out.push_str("<h3>Tasks</h3><ul>");
    for t in &plan.tasks {
        let _ = write!(out, "<li><code>{}</code> {} <em>{}</em><ul>", esc(&t.id), esc(&t.summary), esc(&t.status));
        for s in &t.subtasks {
            let _ = write!(out, "<li><code>{}</code> {} <em>{}</em></li>", esc(&s.id), esc(&s.summary), esc(&s.status));
        }
        out.push_str("</ul></li>");
    }
    out.push_str("</ul></div>");
    out
}

/// verdicts.md as a history: each round with its verdict and verified
/// findings by severity, then the tally per severity of each verdict; the
/// file itself, rendered, below. Read by the review record's one parser
/// (the reader of what the Lead writes), as `troupe status` reads it.
fn verdict_history(text: &str) -> String {
    let all = rounds(text);
    if all.is_empty() {
        return "<p>No review round yet.</p>".into();
    }
    let head =
        r#"<th scope="col">Critical</th><th scope="col">High</th><th scope="col">Medium</th><th scope="col">Low</th>"#;
    let cells = |f: &Severities| {
        format!(
            r#"<td data-sev="critical">{}</td><td data-sev="high">{}</td><td data-sev="medium">{}</td><td data-sev="low">{}</td>"#,
            f.critical, f.high, f.medium, f.low
        )
    };
    let mut out = format!(
        r#"<table data-testid="verdict-rounds"><caption>Rounds</caption><thead><tr><th scope="col">Round</th><th scope="col">Review</th><th scope="col">Verdict</th>{head}</tr></thead><tbody>"#
    );
    let mut tally: Vec<(String, usize, Severities)> = Vec::new();
    for Round { seq, kind, verdict, findings: f } in &all {
        let _ = write!(
            out,
            r#"<tr data-testid="verdict-B{seq}"><td>B{seq}</td><td>{}</td><td>{}</td>{}</tr>"#,
            esc(kind),
            esc(verdict),
            cells(f)
        );
        let at = match tally.iter().position(|(v, ..)| v == verdict) {
            Some(i) => i,
            None => {
                tally.push((verdict.clone(), 0, Severities::default()));
                tally.len() - 1
            }
        };
        let (_, n, sum) = &mut tally[at];
        *n += 1;
        sum.critical += f.critical;
        sum.high += f.high;
        sum.medium += f.medium;
        sum.low += f.low;
    }
    let _ = write!(
        out,
        r#"</tbody></table><table data-testid="verdict-tally"><caption>Findings by severity per verdict</caption><thead><tr><th scope="col">Verdict</th><th scope="col">Rounds</th>{head}</tr></thead><tbody>"#
    );
    for (verdict, n, sum) in &tally {
        let _ = write!(
            out,
            r#"<tr data-verdict="{v}"><th scope="row">{v}</th><td>{n}</td>{}</tr>"#,
            cells(sum),
            v = esc(verdict)
        );
    }
    out.push_str("</tbody></table>");
    out
}

/// The feature's commits (by the Lead's message conventions), newest first, each with its diff.
fn commits(root: &FsPath, name: &str) -> String {
    let pattern = format!("^({f}: |Wave [0-9]+: {f} )", f = name.replace('.', "\\."));
    let git = |args: &[&str]| {
        std::process::Command::new("git")
            .current_dir(root)
            .args(args)
            .output()
            .ok()
            .filter(|o| o.status.success())
            .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
    };
    let grep = format!("--grep={pattern}");
    let Some(log) = git(&["log", "-n", "30", "-E", &grep, "--format=%H%x1f%h%x1f%s%x1f%aI"]) else {
        return "<p>No git history.</p>".into();
    };
    let mut out = String::from(r#"<div data-testid="commits">"#);
    for line in log.lines() {
        let parts: Vec<&str> = line.split('\x1f').collect();
        let [full, short, subject, at] = parts[..] else { continue };
        let mut diff = git(&["show", "--format=", "--stat", "--patch", full]).unwrap_or_default();
        if diff.len() > 100_000 {
            let cut = (0..=100_000).rev().find(|i| diff.is_char_boundary(*i)).unwrap_or(0);
            diff.truncate(cut);
            diff.push_str("\n… (cut; `git show` has the rest)");
        }
        let _ = write!(
            out,
            r#"<details data-testid="commit-{short}"><summary data-testid="commit-toggle-{short}"><code>{short}</code> {} <time>{}</time></summary><pre class="diff">{}</pre></details>"#,
            esc(subject),
            esc(at),
            esc(&diff)
        );
    }
    if log.trim().is_empty() {
        out.push_str("<p>No commits of this feature yet.</p>");
    }
    out.push_str("</div>");
    out
}

/// The per-phase override form: each phase with an engine or "no override".
fn override_form(name: &str, spec: &Spec, options: &[(String, String, bool)]) -> String {
    let mut out = format!(
        r#"<form class="override" data-feature="{}" data-testid="override-form"><p>An override wins over config.toml for this feature only.</p>"#,
        esc(name)
    );
    let mut opts = vec![(String::new(), "no override".to_string(), false)];
    opts.extend(options.iter().cloned());
    for phase in ENGINE_PHASES {
        let current = spec.engine_override.get(phase).map(String::as_str).unwrap_or("");
        out.push_str(r#"<div class="field">"#);
        out.push_str(&select(&format!("override-{phase}"), phase, &format!("override-{phase}"), &opts, current));
        out.push_str("</div>");
    }
    out.push_str(r#"<button type="submit" data-testid="override-save">Save overrides</button> <span role="status" aria-live="polite" data-testid="override-status"></span></form>"#);
    out
}

async fn feature_page(State(state): State<AppState>, Path(name): Path<String>) -> Page {
    feature(&name)?;
    let last = last_event(&state).await?;
    let options = engine_options(&state).await?;
    let root = state.layout().root().to_path_buf();
    let dir = state.layout().spec_dir(&name);
    let n = name.clone();
    let body = blocking(move || -> Result<String, ApiError> {
        let project = Project::at(&root);
        let spec = Specs::new(&project).load(&n).map_err(|_| ApiError::not_found(format!("no feature `{n}`")))?;
        let doc = |file: &str| std::fs::read_to_string(dir.join(file)).ok();
        let rendered = |file: &str, id: &str| match doc(file) {
            Some(t) => format!(r#"<article class="doc" data-testid="{id}">{}</article>"#, markdown(&t)),
            None => format!("<p>No {file} yet.</p>"),
        };
        Ok(format!(
            r#"<div data-page="feature"><p>{desc}</p><h2>Phase</h2>{machine}<h2>Engine override</h2>{form}
<h2>Changelog</h2>{log}<h2>Design</h2>{design}<h2>Research</h2>{research}<h2>Plan</h2>{plan}
<h2>Verdicts</h2>{history}<details><summary data-testid="verdicts-file">verdicts.md</summary>{verdicts}</details><h2>Commits</h2>{commits}</div>"#,
            desc = esc(&spec.description),
            machine = phase_machine(&spec.phase),
            form = override_form(&n, &spec, &options),
            log = changelog(&spec),
            design = rendered("design.md", "design"),
            research = rendered("research.md", "research"),
            plan = doc("tasks.yaml").map(|t| waves(&t)).unwrap_or_else(|| "<p>No tasks.yaml yet.</p>".into()),
            history = doc("verdicts.md").map(|t| verdict_history(&t)).unwrap_or_else(|| "<p>No review round yet.</p>".into()),
            verdicts = rendered("verdicts.md", "verdicts"),
            commits = commits(&root, &n),
        ))
    })
    .await??;
    Ok(Html(page(&format!("Feature {name}"), "/ui/features", last, &body)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_verdict_history_tallies_findings_by_severity_per_verdict() {
        let md = "# Verdicts: login\n\n## [B1] design | t | v1.0 | runs:1 | threshold:1/1\n- verdict: CONDITIONAL\n- verified: C:0 H:2 M:1 L:0 (removed: 0)\n\n\
                  ## [B2] impl | t | v1.1 | runs:1 | threshold:1/1\n- verdict: GO\n- verified: C:0 H:0 M:0 L:3 (removed: 1)\n\n\
                  ## [B3] impl | t | v1.2 | runs:1 | threshold:1/1\n- verdict: GO\n- verified: C:0 H:0 M:1 L:1 (removed: 0)\n";
        let html = verdict_history(md);
        assert!(html.contains(r#"<tr data-testid="verdict-B1"><td>B1</td><td>design</td><td>CONDITIONAL</td><td data-sev="critical">0</td><td data-sev="high">2</td>"#), "{html}");
        assert!(
            html.contains(r#"<tr data-verdict="GO"><th scope="row">GO</th><td>2</td><td data-sev="critical">0</td><td data-sev="high">0</td><td data-sev="medium">1</td><td data-sev="low">4</td></tr>"#),
            "two GO rounds summed: {html}"
        );
        assert!(
            html.contains(r#"<tr data-verdict="CONDITIONAL"><th scope="row">CONDITIONAL</th><td>1</td>"#),
            "{html}"
        );
        assert_eq!(verdict_history("no rounds here"), "<p>No review round yet.</p>");
    }
}
