//! The dashboard at `/`: server-rendered pages (board, agents, features,
//! approvals, engine settings, audit, runs) that work as refreshable views
//! without JavaScript, kept live by a small plain script (`assets/dashboard.js`)
//! that follows `/ui/events` (`GET /events`, each task event with its card as
//! rendered now) and acts through the REST API, so every action
//! of a page is the same handler, store call and writer as the CLI's.
//!
//! No build step and no third-party script: the two assets are embedded in
//! the binary. With a token, a browser logs in once at
//! `/ui/login?token=…` (the link `troupe serve` prints); the token then lives
//! in an HttpOnly, SameSite=Strict cookie, never in a URL.

use axum::Router;
use axum::extract::{Query, State};
use axum::http::{HeaderMap, StatusCode, header};
use axum::response::{Html, IntoResponse, Redirect, Response};
use axum::routing::get;
use serde::Deserialize;

use crate::error::{ApiError, ApiResult};
use crate::state::AppState;

mod agents;
mod board;
mod engines;
mod features;
pub mod html;
mod reports;

/// The login page: the only dashboard path served without a token (it
/// checks the token it is given itself).
pub const LOGIN: &str = "/ui/login";

/// Where the embedded stylesheet and script are served.
const ASSETS: &str = "/ui/assets/";

/// Paths served without a token: the login page (it checks the token it is
/// given itself) and the embedded assets, so the login page is styled (dark
/// or light, readable) before anyone has logged in. Neither holds data.
pub fn public(path: &str) -> bool {
    path == LOGIN || path.strip_prefix(ASSETS).is_some_and(|a| a == "dashboard.css" || a == "dashboard.js")
}

/// The cookie that carries the token after login.
pub const COOKIE: &str = "troupe_token";

const CSS: &str = include_str!("../../assets/dashboard.css");
const JS: &str = include_str!("../../assets/dashboard.js");

/// Every dashboard route (pages, their live fragments, assets, login).
pub(crate) fn routes() -> Router<AppState> {
    Router::new()
        .route(LOGIN, get(login_page).post(login_form))
        .route(&format!("{ASSETS}dashboard.css"), get(|| async { asset("text/css; charset=utf-8", CSS) }))
        .route(&format!("{ASSETS}dashboard.js"), get(|| async { asset("text/javascript; charset=utf-8", JS) }))
        .merge(board::routes())
        .merge(agents::routes())
        .merge(features::routes())
        .merge(engines::routes())
        .merge(reports::routes())
}

fn asset(content_type: &'static str, body: &'static str) -> Response {
    ([(header::CONTENT_TYPE, content_type), (header::CACHE_CONTROL, "no-cache")], body).into_response()
}

/// The token found in the request's cookie, if any.
pub fn cookie_token(headers: &HeaderMap) -> Option<&str> {
    headers
        .get_all(header::COOKIE)
        .iter()
        .filter_map(|v| v.to_str().ok())
        .flat_map(|v| v.split(';'))
        .find_map(|pair| pair.trim().strip_prefix(COOKIE)?.strip_prefix('='))
}

/// The login link's query, or the login form's body.
#[derive(Debug, Default, Deserialize)]
struct LoginInput {
    token: Option<String>,
}

async fn login_page(State(state): State<AppState>, Query(q): Query<LoginInput>) -> Response {
    login(&state, q.token.as_deref())
}

async fn login_form(State(state): State<AppState>, axum::Form(f): axum::Form<LoginInput>) -> Response {
    login(&state, f.token.as_deref())
}

/// A right token sets the cookie and sends the browser to the board, so the
/// token leaves the address bar at once; anything else shows the form.
fn login(state: &AppState, token: Option<&str>) -> Response {
    let auth = state.auth();
    match token.filter(|t| !t.is_empty()) {
        Some(t) if auth.admits_token(t) => {
            let cookie = format!("{COOKIE}={t}; Path=/; HttpOnly; SameSite=Strict");
            ([(header::SET_COOKIE, cookie)], Redirect::to("/")).into_response()
        }
        None if !auth.required() => Redirect::to("/").into_response(),
        given => {
            let status = if given.is_some() { StatusCode::UNAUTHORIZED } else { StatusCode::OK };
            let wrong =
                if given.is_some() { r#"<p class="error" role="alert">That token is not right.</p>"# } else { "" };
            let body = format!(
                r#"{wrong}<form method="post" action="{LOGIN}"><label for="token">Server token</label>
<input id="token" name="token" type="password" autocomplete="current-password" required data-testid="login-token">
<button type="submit" data-testid="login-submit">Log in</button></form>
<p>The token is the one <code>troupe serve</code> printed, <code>$TROUPE_TOKEN</code>, or the file of <code>[server] token_file</code>.</p>"#
            );
            (status, Html(html::page("Log in", "", 0, &body))).into_response()
        }
    }
}

/// The newest event id now: read before a page's data, so the live script
/// resumes from here and applies everything that happened after the read.
pub(crate) async fn last_event(state: &AppState) -> ApiResult<i64> {
    let from = *state.events().subscribe().borrow();
    state.with_store(move |s| Ok(crate::feed::newest_id(s, from)?)).await
}

/// A page's answer.
pub(crate) type Page = ApiResult<Html<String>>;

/// An HTML fragment for the live script, or the error as JSON.
pub(crate) fn fragment(html: String) -> Response {
    ([(header::CONTENT_TYPE, "text/html; charset=utf-8"), (header::CACHE_CONTROL, "no-store")], html).into_response()
}

/// A blocking read off the runtime (files, git), as an API error on failure.
pub(crate) async fn blocking<T: Send + 'static>(f: impl FnOnce() -> T + Send + 'static) -> ApiResult<T> {
    tokio::task::spawn_blocking(f).await.map_err(ApiError::internal)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_token_is_read_from_its_own_cookie_only() {
        let mut h = HeaderMap::new();
        h.append(header::COOKIE, "a=1; troupe_token=s3cret; b=2".parse().unwrap());
        assert_eq!(cookie_token(&h), Some("s3cret"));
        let mut other = HeaderMap::new();
        other.append(header::COOKIE, "troupe_token_x=1; xtroupe_token=2".parse().unwrap());
        assert_eq!(cookie_token(&other), None);
    }

    #[test]
    fn only_the_login_page_and_the_two_assets_are_public() {
        assert!(public(LOGIN) && public("/ui/assets/dashboard.css") && public("/ui/assets/dashboard.js"));
        for path in ["/", "/ui/agents", "/ui/assets/", "/ui/assets/other.js", "/ui/login/x", "/tasks/board"] {
            assert!(!public(path), "{path}");
        }
    }
}
