//! Engine settings (seed 002 §6): the default engine and three sections —
//! generation, inspection, implementation — each an engine or "use default".
//! A change writes every phase of its section through `PUT /engines` (the one
//! config.toml writer, comments and order kept) and takes effect at the next
//! spawn. Only installed engines can be chosen; the others are listed
//! disabled with the reason.

use std::fmt::Write;

use axum::Router;
use axum::extract::State;
use axum::response::Html;
use axum::routing::get;
use troupe_core::config::Config;
use troupe_engine::registry::{EngineKind, Registry};

use super::html::{esc, page, select};
use super::{Page, blocking, last_event};
use crate::error::ApiResult;
use crate::state::AppState;

/// Seed 002 §6's sections and the phases each one sets.
pub const SECTIONS: [(&str, &[&str]); 3] = [
    ("generation", &["plan", "requirements", "design", "tasks"]),
    ("inspection", &["document-review", "document-review-reply", "inspection"]),
    ("implementation", &["impl"]),
];

pub(super) fn routes() -> Router<AppState> {
    Router::new().route("/ui/engines", get(engines_page))
}

/// Every engine as (id, label, disabled): not installed ones are disabled,
/// their label says why.
fn options(config: &Config) -> Vec<(String, String, bool)> {
    Registry::from_config(&config.engines)
        .list()
        .into_iter()
        .map(|e| {
            // The scripted engine is this troupe binary itself.
            let missing = if e.kind == EngineKind::Scripted { None } else { e.installed().err() };
            match missing {
                None => (e.id.clone(), e.id.clone(), false),
                Some(why) => (e.id.clone(), format!("{} — {why}", e.id), true),
            }
        })
        .collect()
}

/// The engine choices of the project's config.toml as it is now.
pub(super) async fn engine_options(state: &AppState) -> ApiResult<Vec<(String, String, bool)>> {
    let state = state.clone();
    blocking(move || crate::rest::engines::read(&state).map(|(_, c)| options(&c))).await?
}

/// A section's engine: the one all its phases share, "" when none has its
/// own (use default), or `None` when they differ.
pub fn section_engine(config: &Config, phases: &[&str]) -> Option<String> {
    let mut set = phases.iter().map(|p| config.engines.phases.get(*p).cloned());
    let first = set.next().flatten();
    set.all(|e| e == first).then(|| first.unwrap_or_default())
}

async fn engines_page(State(state): State<AppState>) -> Page {
    let last = last_event(&state).await?;
    let s = state.clone();
    let config = blocking(move || crate::rest::engines::read(&s).map(|(_, c)| c)).await??;
    let opts = options(&config);
    let mut default_opts = vec![(String::new(), "not set (claude)".to_string(), false)];
    default_opts.extend(opts.iter().cloned());
    let mut body = String::from(r#"<form class="engines" data-page="engines" data-testid="engines-form">"#);
    body.push_str(r#"<div class="field">"#);
    body.push_str(&select(
        "engine-default",
        "Default engine",
        "engine-default",
        &default_opts,
        config.engines.default.as_deref().unwrap_or(""),
    ));
    body.push_str("</div>");
    for (section, phases) in SECTIONS {
        let current = section_engine(&config, phases);
        let mut section_opts = vec![(String::new(), "use default".to_string(), false)];
        if current.is_none() {
            section_opts.insert(0, ("mixed".into(), "mixed (phases differ)".into(), true));
        }
        section_opts.extend(opts.iter().cloned());
        let _ = write!(
            body,
            r#"<fieldset data-section="{section}" data-phases="{}"><legend>{}</legend><p class="phases">{}</p>"#,
            phases.join(","),
            esc(&format!("{}{}", section[..1].to_uppercase(), &section[1..])),
            esc(&phases.join(", "))
        );
        body.push_str(&select(
            &format!("engine-{section}"),
            &format!("Engine for {section}"),
            &format!("engine-{section}"),
            &section_opts,
            current.as_deref().unwrap_or("mixed"),
        ));
        body.push_str("</fieldset>");
    }
    body.push_str(r#"<p role="status" aria-live="polite" data-testid="engines-status"></p><p>A change applies to the next teammate spawned. Not installed engines cannot be chosen; install them or set their path in <code>[engines.commands]</code>.</p></form>"#);
    Ok(Html(page("Engine settings", "/ui/engines", last, &body)))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_section_is_its_shared_engine_default_or_mixed() {
        let config = Config::from_toml(
            "[engines.phases]\ndocument-review = \"gemini\"\ndocument-review-reply = \"gemini\"\ninspection = \"gemini\"\nplan = \"codex\"\n",
        )
        .unwrap();
        assert_eq!(section_engine(&config, SECTIONS[1].1).as_deref(), Some("gemini"));
        assert_eq!(section_engine(&config, SECTIONS[0].1), None, "plan differs from design");
        assert_eq!(section_engine(&config, SECTIONS[2].1).as_deref(), Some(""), "use default");
    }
}
