//! Database URLs: in messages the password never appears; the parameters
//! troupe reads itself (TLS, the pool) are taken out before the driver
//! parses the rest.

/// `url` with its password replaced by `***`, in both forms PostgreSQL
/// accepts: `postgres://user:secret@host/db` (and a `password=` query
/// parameter) and `host=h password=secret dbname=d`.
pub fn mask_password(url: &str) -> String {
    if let Some((scheme, rest)) = url.split_once("://") {
        // The authority ends at the first `/`, `?` or `#`; its user info at the last `@`.
        let end = rest.find(['/', '?', '#']).unwrap_or(rest.len());
        let (authority, tail) = rest.split_at(end);
        let authority = match authority.rsplit_once('@') {
            Some((user_info, host)) => match user_info.split_once(':') {
                Some((user, _)) => format!("{user}:***@{host}"),
                None => authority.to_string(),
            },
            None => authority.to_string(),
        };
        format!("{scheme}://{authority}{}", mask_pairs(tail, '&'))
    } else {
        mask_pairs(url, ' ')
    }
}

/// Mask the value of every `password=` among `sep`-separated pairs.
fn mask_pairs(text: &str, sep: char) -> String {
    let mut out = String::with_capacity(text.len());
    let mut rest = text;
    while let Some(at) = find_key(rest) {
        let value = at + "password=".len();
        out.push_str(&rest[..value]);
        out.push_str("***");
        let after = &rest[value..];
        let end = if let Some(quoted) = after.strip_prefix('\'') {
            quoted.find('\'').map_or(after.len(), |i| i + 2)
        } else {
            after.find([sep, '#']).unwrap_or(after.len())
        };
        rest = &after[end..];
    }
    out.push_str(rest);
    out
}

/// Where a `password=` key starts (at the start or after a separator).
fn find_key(text: &str) -> Option<usize> {
    let mut from = 0;
    while let Some(i) = text[from..].find("password=") {
        let at = from + i;
        if at == 0 || matches!(text.as_bytes()[at - 1], b' ' | b'&' | b'?') {
            return Some(at);
        }
        from = at + 1;
    }
    None
}

/// How many connections one store keeps open at most unless the URL says
/// otherwise (`pool_max_conns`). A process's threads share its store and
/// this pool: a call waits for a free connection rather than the server
/// running more backends than it has cores for. Backends beyond a few per
/// process add contention, not throughput: 64 claimers in 4 processes made
/// about twice the claim+complete per second on 4 connections each as on 16
/// (BENCHMARKS.md, measured while every write still took the events lock).
pub const DEFAULT_POOL_SIZE: u32 = 4;

/// A database URL split into its parameters, in either form: a
/// `postgres://` URL's query (`?a=1&b=2`) or libpq's `key=value` pairs.
pub(crate) struct Pairs {
    /// Everything before the parameters (with its `?` when it had a query).
    pub(crate) head: String,
    /// Each `key=value` as written.
    pub(crate) pairs: Vec<String>,
    /// What joins them: `&` or a space.
    pub(crate) sep: &'static str,
}

impl Pairs {
    /// The parameters of `url`.
    pub(crate) fn of(url: &str) -> Pairs {
        let (head, pairs, sep) = match url.split_once("://") {
            Some(_) => match url.split_once('?') {
                Some((head, query)) => (format!("{head}?"), query.split('&').map(str::to_string).collect(), "&"),
                None => (url.to_string(), Vec::new(), "&"),
            },
            None => (String::new(), url.split_whitespace().map(str::to_string).collect(), " "),
        };
        Pairs { head, pairs, sep }
    }

    /// The URL again, from the pairs left (no `?` when none is).
    pub(crate) fn url(&self) -> String {
        match self.head.strip_suffix('?') {
            Some(base) if self.pairs.is_empty() => base.to_string(),
            _ => format!("{}{}", self.head, self.pairs.join(self.sep)),
        }
    }
}

/// A parameter's value as meant: `%xx` escapes decoded, quotes removed.
pub(crate) fn value(raw: &str) -> String {
    decode(raw).trim_matches('\'').to_string()
}

/// Take `pool_max_conns` (pgx's name for it) out of `url`: the URL left for
/// the driver, which refuses keys it does not know, and the pool size asked
/// for, [`DEFAULT_POOL_SIZE`] when none is. Anything but a whole number of 1
/// or more is an error naming the value.
pub fn pool_size(url: &str) -> Result<(String, u32), String> {
    let mut pairs = Pairs::of(url);
    let mut size = DEFAULT_POOL_SIZE;
    let mut kept = Vec::new();
    for pair in std::mem::take(&mut pairs.pairs) {
        match pair.split_once('=') {
            Some(("pool_max_conns", raw)) => {
                let text = value(raw);
                size = text.parse().ok().filter(|n| *n > 0).ok_or_else(|| {
                    format!("pool_max_conns `{text}` is not a number of connections (a whole number, 1 or more)")
                })?;
            }
            _ => kept.push(pair),
        }
    }
    pairs.pairs = kept;
    Ok((pairs.url(), size))
}

/// `%xx` escapes of a URL's query value decoded (a path may hold `/` as `%2F`).
fn decode(value: &str) -> String {
    let bytes = value.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match (bytes[i], bytes.get(i + 1).copied().and_then(hex), bytes.get(i + 2).copied().and_then(hex)) {
            (b'%', Some(h), Some(l)) => {
                out.push((h * 16 + l) as u8);
                i += 3;
            }
            (b, _, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

#[cfg(test)]
mod tests {
    use super::{DEFAULT_POOL_SIZE, mask_password, pool_size};

    #[test]
    fn passwords_are_masked_in_every_form() {
        let cases = [
            ("postgres://ann:s3cr%40t@db.example:5433/troupe", "postgres://ann:***@db.example:5433/troupe"),
            ("postgresql://ann@db/troupe?sslmode=prefer", "postgresql://ann@db/troupe?sslmode=prefer"),
            (
                "postgres://db/troupe?user=ann&password=x&sslmode=disable",
                "postgres://db/troupe?user=ann&password=***&sslmode=disable",
            ),
            ("host=/tmp port=5 password='a b' dbname=t", "host=/tmp port=5 password=*** dbname=t"),
            ("host=h password=plain user=u", "host=h password=*** user=u"),
            ("host=h", "host=h"),
        ];
        for (url, masked) in cases {
            assert_eq!(mask_password(url), masked, "{url}");
        }
    }

    #[test]
    fn the_pool_size_is_taken_out_of_either_form() {
        let cases = [
            ("postgres://u@h/db", "postgres://u@h/db", DEFAULT_POOL_SIZE),
            ("postgres://u@h/db?pool_max_conns=4", "postgres://u@h/db", 4),
            ("postgres://u@h/db?sslmode=require&pool_max_conns=8&x=1", "postgres://u@h/db?sslmode=require&x=1", 8),
            ("host=h pool_max_conns='2' dbname=d", "host=h dbname=d", 2),
        ];
        for (url, want_url, want) in cases {
            assert_eq!(pool_size(url).unwrap(), (want_url.to_string(), want), "{url}");
        }
        for bad in ["0", "-1", "many", ""] {
            let err = pool_size(&format!("postgres://h/db?pool_max_conns={bad}")).unwrap_err();
            assert!(err.contains(&format!("pool_max_conns `{bad}`")) && err.contains("1 or more"), "{err}");
        }
    }
}
