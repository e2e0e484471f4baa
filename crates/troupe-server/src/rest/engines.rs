//! Engines and the per-phase engine settings of seed 002: read `[engines]`
//! and `[engines.phases]` of config.toml, and write them keeping every
//! comment, key order and other section of the file as the user left it
//! (toml_edit edits the document; the result must pass the one config
//! parser before it replaces the file, atomically).

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use troupe_core::config::{Config, ENGINE_PHASES};
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use crate::error::{ApiError, ApiJson, ApiResult, ErrorBody};
use crate::state::AppState;

/// The engine routes.
pub(crate) fn routes() -> OpenApiRouter<AppState> {
    OpenApiRouter::new().routes(routes!(engines, set_engines))
}

/// The engines troupe can run and which one runs each phase.
#[derive(Debug, Serialize, Deserialize, ToSchema)]
pub struct Engines {
    /// Every engine id: the built-in ones, then `[engines.custom]` and `[engines.commands]`.
    pub engines: Vec<String>,
    /// `[engines] default`: the engine of phases without their own.
    pub default: Option<String>,
    /// `[engines.phases]`: phase → engine.
    pub phases: BTreeMap<String, String>,
    /// The phases that can have an engine of their own.
    pub phase_names: Vec<String>,
}

pub(crate) fn view(config: &Config) -> Engines {
    let mut engines: Vec<String> = troupe_engine::registry::BUILTIN.iter().map(|e| e.to_string()).collect();
    for id in config.engines.custom.keys().chain(config.engines.commands.keys()) {
        if !engines.contains(id) {
            engines.push(id.clone());
        }
    }
    Engines {
        engines,
        default: config.engines.default.clone(),
        phases: config.engines.phases.clone(),
        phase_names: ENGINE_PHASES.iter().map(|p| p.to_string()).collect(),
    }
}

fn config_path(state: &AppState) -> std::path::PathBuf {
    state.layout().config_file()
}

pub(crate) fn read(state: &AppState) -> ApiResult<(String, Config)> {
    let path = config_path(state);
    let text = match std::fs::read_to_string(&path) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(e) => return Err(ApiError::internal(format!("{}: {e}", path.display()))),
    };
    let config = Config::from_toml(&text).map_err(|e| {
        ApiError::conflict(format!("config.toml is not valid: {e}"))
            .with_hint("fix it (`troupe doctor` names the problem)")
    })?;
    Ok((text, config))
}

/// The engines and the per-phase settings, as config.toml has them now.
#[utoipa::path(get, path = "/engines", tag = "engines", responses((status = 200, body = Engines), (status = 409, body = ErrorBody)))]
async fn engines(state: axum::extract::State<AppState>) -> ApiResult<ApiJson<Engines>> {
    let (_, config) = read(&state)?;
    Ok(ApiJson(view(&config)))
}

/// A change of the engine settings. Absent fields stay as they are.
#[derive(Debug, Default, Deserialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct EnginesChange {
    /// The new `[engines] default`; an empty string removes it.
    pub default: Option<String>,
    /// Phase → engine; `null` removes the phase's own engine.
    #[serde(default)]
    pub phases: BTreeMap<String, Option<String>>,
}

/// Change `[engines] default` and `[engines.phases]` in config.toml, keeping its comments and order.
#[utoipa::path(put, path = "/engines", tag = "engines", request_body = EnginesChange,
    responses((status = 200, body = Engines), (status = 403, body = ErrorBody), (status = 400, body = ErrorBody), (status = 409, body = ErrorBody)))]
async fn set_engines(
    state: axum::extract::State<AppState>,
    caller: crate::caller::Caller,
    crate::error::ApiJson(change): crate::error::ApiJson<EnginesChange>,
) -> ApiResult<ApiJson<Engines>> {
    caller.person("change the engine settings")?;
    // One writer at a time in this process; the file is replaced atomically.
    static WRITING: tokio::sync::Mutex<()> = tokio::sync::Mutex::const_new(());
    let _guard = WRITING.lock().await;
    let (text, config) = read(&state)?;
    let known = view(&config).engines;
    let check = |engine: &str| -> ApiResult<()> {
        if known.iter().any(|k| k == engine) {
            Ok(())
        } else {
            Err(ApiError::bad_request(format!("unknown engine `{}`", engine.escape_debug()))
                .with_hint(format!("use one of {}", known.join(", "))))
        }
    };
    if let Some(d) = change.default.as_deref().filter(|d| !d.is_empty()) {
        check(d)?;
    }
    for (phase, engine) in &change.phases {
        if !ENGINE_PHASES.contains(&phase.as_str()) {
            return Err(ApiError::bad_request(format!("unknown phase `{}`", phase.escape_debug()))
                .with_hint(format!("phases are {}", ENGINE_PHASES.join(", "))));
        }
        if let Some(e) = engine {
            check(e)?;
        }
    }
    if change.default.is_none() && change.phases.is_empty() {
        return Ok(ApiJson(view(&config)));
    }
    let edited = edit(&text, &change)?;
    let config = Config::from_toml(&edited)
        .map_err(|e| ApiError::bad_request(format!("the change makes config.toml invalid: {e}")))?;
    let path = config_path(&state);
    troupe_project::fsutil::write_atomic(&path, edited.as_bytes())
        .map_err(|e| ApiError::internal(format!("{}: {e}", path.display())))?;
    Ok(ApiJson(view(&config)))
}

/// The text of config.toml with the change applied, everything else as it was.
fn edit(text: &str, change: &EnginesChange) -> ApiResult<String> {
    use toml_edit::{DocumentMut, Item, Table};
    let mut doc: DocumentMut =
        text.parse().map_err(|e| ApiError::conflict(format!("config.toml is not valid TOML: {e}")))?;
    let engines = doc.entry("engines").or_insert_with(|| Item::Table(Table::new()));
    let Some(engines) = engines.as_table_like_mut() else {
        return Err(ApiError::conflict("`engines` in config.toml is not a table"));
    };
    match change.default.as_deref() {
        Some("") => {
            engines.remove("default");
        }
        Some(d) => set(engines, "default", d),
        None => {}
    }
    if !change.phases.is_empty() {
        let phases = engines.entry("phases").or_insert(Item::Table(Table::new()));
        let Some(phases) = phases.as_table_like_mut() else {
            return Err(ApiError::conflict("`engines.phases` in config.toml is not a table"));
        };
        for (phase, engine) in &change.phases {
            match engine {
                Some(e) => set(phases, phase, e),
                None => {
                    phases.remove(phase);
                }
            }
        }
    }
    Ok(doc.to_string())
}

/// Set `key` to `text`, keeping the comments around the key and its value
/// (`insert` would replace the key and drop the comment on the line above).
fn set(table: &mut dyn toml_edit::TableLike, key: &str, text: &str) {
    match table.get_mut(key).and_then(toml_edit::Item::as_value_mut) {
        Some(v) => {
            let decor = v.decor().clone();
            *v = text.into();
            *v.decor_mut() = decor;
        }
        None => {
            table.insert(key, toml_edit::value(text));
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_edit_keeps_comments_order_and_other_sections() {
        let text = "# my settings\n[team]\nmax_concurrent = 4 # four\n\n[engines]\n# the usual\ndefault = \"claude\" # for now\n\n[engines.phases]\ndesign = \"gemini\" # long context\nimpl = \"codex\"\n\n[server]\nbind = \"127.0.0.1:7878\"\n";
        let change = EnginesChange {
            default: Some("codex".into()),
            phases: BTreeMap::from([("impl".to_string(), None), ("tasks".to_string(), Some("claude".into()))]),
        };
        let out = edit(text, &change).unwrap();
        assert_eq!(
            out,
            "# my settings\n[team]\nmax_concurrent = 4 # four\n\n[engines]\n# the usual\ndefault = \"codex\" # for now\n\n[engines.phases]\ndesign = \"gemini\" # long context\ntasks = \"claude\"\n\n[server]\nbind = \"127.0.0.1:7878\"\n"
        );
        let fresh = edit("", &EnginesChange { default: Some("gemini".into()), phases: BTreeMap::new() }).unwrap();
        assert_eq!(Config::from_toml(&fresh).unwrap().engines.default.as_deref(), Some("gemini"));
    }
}
