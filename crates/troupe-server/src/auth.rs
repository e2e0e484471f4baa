//! Who may make requests. Without a token (allowed only on a loopback
//! address) every request is served; with one, every request must carry it
//! as `Authorization: Bearer <token>`, loopback included, or it is answered
//! 401 with the same body whatever it asked for.

use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use axum::extract::{Request, State};
use axum::http::header;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use troupe_core::config::ServerConfig;
use troupe_core::layout::Layout;

use crate::caller::Caller;
use crate::error::ApiError;
use crate::state::AppState;

/// The environment variable that holds the server's token.
pub const TOKEN_ENV: &str = "TROUPE_TOKEN";

/// The file a generated token is kept in, under `.troupe/state/`.
pub const TOKEN_FILE: &str = "server.token";

/// The request rule of a server.
#[derive(Clone)]
pub struct Auth {
    /// The hash of the token (troupe-store's token hash), or `None` for an open
    /// loopback server. Only the hash is kept, compared in constant time.
    token_hash: Option<String>,
}

impl std::fmt::Debug for Auth {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Auth").field("token", &self.token_hash.as_ref().map(|_| "<set>")).finish()
    }
}

impl Auth {
    /// Every request is served (loopback only; see [`resolve`]).
    pub fn open() -> Self {
        Auth { token_hash: None }
    }

    /// Every request needs `token`.
    pub fn bearer(token: &str) -> Self {
        Auth { token_hash: Some(troupe_store::token::hash(token)) }
    }

    /// True when requests need a token.
    pub fn required(&self) -> bool {
        self.token_hash.is_some()
    }

    /// True when `authorization` (the header's value, if any) is acceptable
    /// as a person's: the server's token, or anything on an open server.
    pub fn admits(&self, authorization: Option<&str>) -> bool {
        let Some(expected) = &self.token_hash else { return true };
        bearer(authorization).is_some_and(|token| troupe_store::token::matches(token, expected))
    }

    /// True when `token` itself (from the dashboard's login or its cookie) is acceptable.
    pub fn admits_token(&self, token: &str) -> bool {
        match &self.token_hash {
            None => true,
            Some(expected) => !token.trim().is_empty() && troupe_store::token::matches(token, expected),
        }
    }
}

/// The token of an `Authorization: Bearer <token>` header's value.
fn bearer(authorization: Option<&str>) -> Option<&str> {
    let value = authorization?;
    let token = value.strip_prefix("Bearer ").or_else(|| value.strip_prefix("bearer "))?.trim();
    (!token.is_empty()).then_some(token)
}

/// The middleware in front of every route (the fallback included, so an
/// unknown path answers 401 as a known one does). It also decides who the
/// request comes from ([`Caller`]): the server's token is a person's (in the
/// header, or in the cookie of a browser logged in to the dashboard); a
/// teammate's gateway token is that agent's, found by its hash in the store.
/// The dashboard's login page checks the token it is given itself.
pub async fn require_token(State(state): State<AppState>, mut request: Request, next: Next) -> Response {
    use crate::dashboard;
    let header = request.headers().get(header::AUTHORIZATION).and_then(|v| v.to_str().ok());
    let token = bearer(header).map(str::to_string);
    let by_cookie = dashboard::cookie_token(request.headers()).is_some_and(|t| state.auth().admits_token(t));
    let caller = if state.auth().required() && (state.auth().admits(header) || by_cookie) {
        Some(Caller::Person)
    } else {
        match token {
            Some(token) => match agent_of(&state, &token).await {
                Some(agent) => Some(Caller::Agent(agent)),
                None => (!state.auth().required()).then_some(Caller::Person),
            },
            None => (!state.auth().required()).then_some(Caller::Person),
        }
    };
    match caller {
        Some(caller) => {
            request.extensions_mut().insert(caller);
            next.run(request).await
        }
        None if dashboard::public(request.uri().path()) => next.run(request).await,
        None => ApiError::unauthorized().into_response(),
    }
}

/// The agent whose gateway token `token` is (its hash bound in the store).
async fn agent_of(state: &AppState, token: &str) -> Option<String> {
    let hash = troupe_store::token::hash(token);
    let store = state.store().clone();
    match tokio::task::spawn_blocking(move || store.gateway_agent(&hash)).await {
        Ok(Ok(agent)) => agent,
        Ok(Err(e)) => {
            tracing::error!(error = %e, "cannot look up a gateway token");
            None
        }
        Err(_) => None,
    }
}

/// Where the token came from, for the start-up message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum TokenSource {
    /// No token: an open loopback server.
    None,
    /// `$TROUPE_TOKEN`.
    Env,
    /// `[server] token_file` (the path as configured).
    File(PathBuf),
    /// `[server] token` in config.toml.
    Config,
    /// `.troupe/state/server.token`, made earlier.
    Generated,
    /// `.troupe/state/server.token`, made now: the token is printed once.
    NewlyGenerated(String),
}

/// The token rule of a server, decided before it binds.
#[derive(Debug)]
pub struct Resolved {
    /// The rule.
    pub auth: Auth,
    /// Where its token came from.
    pub source: TokenSource,
}

/// Why a server may not start.
#[derive(Debug, thiserror::Error)]
pub enum AuthError {
    /// A non-loopback address without any token.
    #[error("refusing to serve on {bind} without a token: it is not a loopback address")]
    TokenRequired {
        /// The address.
        bind: SocketAddr,
    },
    /// `$TROUPE_TOKEN` or the token file is set but empty.
    #[error("the server token from {0} is empty")]
    EmptyToken(String),
    /// The token file can be read by other users.
    #[error("the token file {} can be read by other users", .0.display())]
    TokenFileShared(PathBuf),
    /// The token file cannot be read or written.
    #[error("cannot use the token file {}", .path.display())]
    TokenFile {
        /// The file.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
}

/// Decide the token rule: `$TROUPE_TOKEN` (`env_token`), else `[server]
/// token_file`, else `[server] token`, else (`generate`, or off loopback when
/// one was generated before) `.troupe/state/server.token`, created with mode
/// 0600 when absent. A loopback bind with none of these is open; any other
/// bind with none is refused.
pub fn resolve(
    bind: SocketAddr,
    env_token: Option<String>,
    config: &ServerConfig,
    layout: &Layout,
    generate: bool,
) -> Result<Resolved, AuthError> {
    if let Some(token) = env_token {
        return explicit(&token, TOKEN_ENV, TokenSource::Env);
    }
    if let Some(file) = &config.token_file {
        let path = layout.root().join(file);
        let token = read_token(&path)?;
        return explicit(&token, &file.display().to_string(), TokenSource::File(file.clone()));
    }
    if let Some(token) = &config.token {
        return explicit(token, "[server] token", TokenSource::Config);
    }
    let generated = layout.state_dir().join(TOKEN_FILE);
    if generate || (!bind.ip().is_loopback() && generated.exists()) {
        return match read_or_create(&generated)? {
            (token, true) => Ok(Resolved { auth: Auth::bearer(&token), source: TokenSource::NewlyGenerated(token) }),
            (token, false) => explicit(&token, TOKEN_FILE, TokenSource::Generated),
        };
    }
    if bind.ip().is_loopback() {
        Ok(Resolved { auth: Auth::open(), source: TokenSource::None })
    } else {
        Err(AuthError::TokenRequired { bind })
    }
}

fn explicit(token: &str, from: &str, source: TokenSource) -> Result<Resolved, AuthError> {
    if token.trim().is_empty() {
        return Err(AuthError::EmptyToken(from.to_string()));
    }
    Ok(Resolved { auth: Auth::bearer(token.trim()), source })
}

fn read_token(path: &Path) -> Result<String, AuthError> {
    use std::os::unix::fs::PermissionsExt;
    let meta = std::fs::metadata(path).map_err(|source| AuthError::TokenFile { path: path.to_path_buf(), source })?;
    if meta.permissions().mode() & 0o077 != 0 {
        return Err(AuthError::TokenFileShared(path.to_path_buf()));
    }
    std::fs::read_to_string(path)
        .map(|t| t.trim().to_string())
        .map_err(|source| AuthError::TokenFile { path: path.to_path_buf(), source })
}

/// The generated token, and whether it was made now. Created with
/// `create_new` and mode 0600, so a token is never readable by others, even
/// for an instant, and two servers starting at once share one.
fn read_or_create(path: &Path) -> Result<(String, bool), AuthError> {
    use std::io::Write;
    use std::os::unix::fs::OpenOptionsExt;
    let err = |source| AuthError::TokenFile { path: path.to_path_buf(), source };
    if let Some(dir) = path.parent() {
        std::fs::create_dir_all(dir).map_err(err)?;
    }
    match std::fs::OpenOptions::new().write(true).create_new(true).mode(0o600).open(path) {
        Ok(mut file) => {
            let token = troupe_store::token::mint().map_err(err)?;
            file.write_all(token.as_bytes()).and_then(|()| file.sync_all()).map_err(err)?;
            Ok((token, true))
        }
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => Ok((read_token(path)?, false)),
        Err(e) => Err(err(e)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn addr(s: &str) -> SocketAddr {
        s.parse().unwrap()
    }

    #[test]
    fn loopback_is_open_and_anything_else_needs_a_token() {
        let dir = tempfile::tempdir().unwrap();
        let layout = Layout::new(dir.path());
        let config = ServerConfig::default();
        let open = resolve(addr("127.0.0.1:0"), None, &config, &layout, false).unwrap();
        assert!(!open.auth.required());
        assert!(open.auth.admits(None));
        let refused = resolve(addr("0.0.0.0:0"), None, &config, &layout, false).unwrap_err();
        assert!(matches!(refused, AuthError::TokenRequired { .. }));
        let env = resolve(addr("0.0.0.0:0"), Some("s3cret".into()), &config, &layout, false).unwrap();
        assert!(env.auth.admits(Some("Bearer s3cret")));
        assert!(!env.auth.admits(Some("Bearer wrong")));
        assert!(!env.auth.admits(Some("s3cret")));
        assert!(!env.auth.admits(None));
        let empty = resolve(addr("127.0.0.1:0"), Some(" ".into()), &config, &layout, false).unwrap_err();
        assert!(matches!(empty, AuthError::EmptyToken(_)));
    }

    #[test]
    fn a_generated_token_is_private_printed_once_and_reused_off_loopback() {
        use std::os::unix::fs::PermissionsExt;
        let dir = tempfile::tempdir().unwrap();
        let layout = Layout::new(dir.path());
        let config = ServerConfig::default();
        let first = resolve(addr("0.0.0.0:0"), None, &config, &layout, true).unwrap();
        let TokenSource::NewlyGenerated(token) = &first.source else { panic!("{:?}", first.source) };
        let file = layout.state_dir().join(TOKEN_FILE);
        assert_eq!(std::fs::metadata(&file).unwrap().permissions().mode() & 0o777, 0o600);
        let again = resolve(addr("0.0.0.0:0"), None, &config, &layout, false).unwrap();
        assert_eq!(again.source, TokenSource::Generated, "printed only when made");
        assert!(again.auth.admits(Some(&format!("Bearer {token}"))));
    }
}
