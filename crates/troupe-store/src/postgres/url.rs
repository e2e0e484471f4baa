//! Database URLs in messages: the password never appears.

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

#[cfg(test)]
mod tests {
    use super::mask_password;

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
}
