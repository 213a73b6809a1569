//! Database URLs: checked without connecting, and shown without their
//! password.
//!
//! A PostgreSQL URL normally carries the role's password
//! (`postgres://ct:secret@db:5432/ct`, or `?password=secret`). Nothing that
//! ct-store writes into an error, and nothing a program should log, shows
//! it: [`redact_url`] replaces it with `***`, and [`DatabaseUrl`] (whose
//! `Display` and `Debug` redact) keeps the full URL only for connecting.

use std::fmt;
use std::str::FromStr;

use sqlx::postgres::PgConnectOptions;
use sqlx::sqlite::SqliteConnectOptions;

use crate::error::StoreError;

/// What replaces a password.
const REDACTED: &str = "***";

/// `url` with any password replaced by `***`: the userinfo password
/// (`user:password@`, up to the last `@`, so a password containing `@`, `/`
/// or `?` is covered too) and the value of every query parameter whose name
/// contains `password`, `secret` or `token`. Works on malformed URLs too
/// (`postgres//ct:secret@db`, a missing colon): whatever could be a
/// password is hidden; the scheme, user, host, port and database stay
/// readable.
///
/// ```
/// assert_eq!(
///     ct_store::redact_url("postgres://ct:s3cret@db.internal:5432/ct?sslmode=require"),
///     "postgres://ct:***@db.internal:5432/ct?sslmode=require"
/// );
/// assert_eq!(ct_store::redact_url("postgres//ct:s3cret@db/ct"), "postgres//ct:***@db/ct");
/// assert_eq!(ct_store::redact_url("sqlite://ct.db?mode=rwc"), "sqlite://ct.db?mode=rwc");
/// ```
pub fn redact_url(url: &str) -> String {
    // The scheme and the slashes after it: "postgres://", or in a malformed
    // URL "postgres//", "postgres:", "postgres:/"...
    let scheme_len = url
        .find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.')))
        .unwrap_or(url.len());
    let sep_len = url[scheme_len..]
        .find(|c: char| c != ':' && c != '/')
        .unwrap_or(url.len() - scheme_len);
    // Without a slash, "x:" may as well be a user name ("ct:secret@db").
    let head_len = if url[scheme_len..scheme_len + sep_len].contains('/') {
        scheme_len + sep_len
    } else {
        0
    };
    let (head, rest) = url.split_at(head_len);
    let mut out = String::with_capacity(url.len());
    out.push_str(head);
    // Userinfo: everything before the last '@'.
    let after_userinfo = match rest.rfind('@') {
        Some(at) => {
            let userinfo = &rest[..at];
            match userinfo.split_once(':') {
                Some((user, _password)) => {
                    out.push_str(user);
                    out.push(':');
                    out.push_str(REDACTED);
                }
                None => out.push_str(userinfo),
            }
            out.push('@');
            &rest[at + 1..]
        }
        None => rest,
    };
    // Query parameters.
    match after_userinfo.split_once('?') {
        Some((path, query)) => {
            out.push_str(path);
            out.push('?');
            for (i, pair) in query.split('&').enumerate() {
                if i > 0 {
                    out.push('&');
                }
                match pair.split_once('=') {
                    Some((key, _)) if is_secret_key(key) => {
                        out.push_str(key);
                        out.push('=');
                        out.push_str(REDACTED);
                    }
                    _ => out.push_str(pair),
                }
            }
        }
        None => out.push_str(after_userinfo),
    }
    out
}

/// `text` with every secret of `url` replaced by `***`: the userinfo
/// password and the values of secret query parameters, found the way
/// [`redact_url`] finds them (malformed URLs included), as written and
/// percent-decoded. For messages that may quote a URL's parts, such as a
/// driver's error; [`redact_url`] is for the URL itself.
///
/// ```
/// let url = "postgres//ct:s3cret@db/ct";
/// assert_eq!(ct_store::redact_secrets("auth as ct:s3cret failed", url), "auth as ct:*** failed");
/// ```
pub fn redact_secrets(text: &str, url: &str) -> String {
    let mut out = text.to_owned();
    let mut secrets = url_secrets(url);
    // Longest first, so that a secret containing another is replaced whole.
    secrets.sort_by_key(|s| std::cmp::Reverse(s.len()));
    for secret in secrets {
        for form in [secret.to_owned(), percent_decode(secret)] {
            if form.len() >= 2 {
                out = out.replace(&form, REDACTED);
            }
        }
    }
    out
}

/// The secrets [`redact_url`] hides in `url`.
fn url_secrets(url: &str) -> Vec<&str> {
    let scheme_len = url
        .find(|c: char| !(c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.')))
        .unwrap_or(url.len());
    let sep_len = url[scheme_len..]
        .find(|c: char| c != ':' && c != '/')
        .unwrap_or(url.len() - scheme_len);
    let head_len = if url[scheme_len..scheme_len + sep_len].contains('/') {
        scheme_len + sep_len
    } else {
        0
    };
    let rest = &url[head_len..];
    let mut found = Vec::new();
    let after_userinfo = match rest.rfind('@') {
        Some(at) => {
            if let Some((_, pw)) = rest[..at].split_once(':') {
                found.push(pw);
            }
            &rest[at + 1..]
        }
        None => rest,
    };
    if let Some((_, query)) = after_userinfo.split_once('?') {
        for pair in query.split('&') {
            if let Some((key, value)) = pair.split_once('=') {
                if is_secret_key(key) {
                    found.push(value);
                }
            }
        }
    }
    found.retain(|s| !s.is_empty());
    found
}

/// `%XX` sequences decoded (invalid ones kept as written).
fn percent_decode(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        let hex = |c: u8| (c as char).to_digit(16);
        if b[i] == b'%' && i + 2 < b.len() {
            if let (Some(h), Some(l)) = (hex(b[i + 1]), hex(b[i + 2])) {
                out.push((h * 16 + l) as u8);
                i += 3;
                continue;
            }
        }
        out.push(b[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

fn is_secret_key(key: &str) -> bool {
    let key = key.to_ascii_lowercase();
    ["password", "secret", "token"]
        .iter()
        .any(|s| key.contains(s))
}

/// The backend a URL names.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Scheme {
    Sqlite,
    Postgres,
}

/// A database URL that parses as a `sqlite:` or `postgres://` URL, checked
/// without connecting ([`DatabaseUrl::parse`]). `Display` and `Debug` show
/// it redacted ([`redact_url`]); [`DatabaseUrl::expose`] is the full URL,
/// for connecting.
///
/// ```
/// let url: ct_store::DatabaseUrl = "postgres://ct:s3cret@db:5432/ct".parse()?;
/// assert_eq!(url.to_string(), "postgres://ct:***@db:5432/ct");
/// assert_eq!(format!("{url:?}"), "DatabaseUrl(\"postgres://ct:***@db:5432/ct\")");
/// assert_eq!(url.backend_name(), "postgres");
/// assert!("postgres//ct:s3cret@db/ct".parse::<ct_store::DatabaseUrl>().is_err());
/// # Ok::<(), ct_store::StoreError>(())
/// ```
#[derive(Clone, PartialEq, Eq)]
pub struct DatabaseUrl {
    url: String,
    scheme: Scheme,
}

impl DatabaseUrl {
    /// Checks `url` as [`Store::connect`](crate::Store::connect) would,
    /// short of connecting: the scheme (`sqlite:`, `postgres://`,
    /// `postgresql://`) and the driver's parse of the rest (port, query
    /// parameters, ...). Errors are [`StoreError::InvalidUrl`], with the URL
    /// redacted.
    pub fn parse(url: &str) -> Result<DatabaseUrl, StoreError> {
        let url = url.trim();
        let invalid = |reason: String| StoreError::InvalidUrl {
            url: redact_url(url),
            reason,
        };
        let scheme = if url.starts_with("sqlite:") {
            SqliteConnectOptions::from_str(url).map_err(|e| invalid(driver_reason(e)))?;
            Scheme::Sqlite
        } else if url.starts_with("postgres://") || url.starts_with("postgresql://") {
            PgConnectOptions::from_str(url).map_err(|e| invalid(driver_reason(e)))?;
            Scheme::Postgres
        } else {
            return Err(invalid(
                "expected sqlite:… or postgres://… (or postgresql://…)".into(),
            ));
        };
        Ok(DatabaseUrl {
            url: url.to_owned(),
            scheme,
        })
    }

    /// The full URL, password included: for connecting only, never for
    /// messages.
    pub fn expose(&self) -> &str {
        &self.url
    }

    /// The URL with its password replaced by `***` (as `Display`).
    pub fn redacted(&self) -> String {
        redact_url(&self.url)
    }

    /// `"sqlite"` or `"postgres"`.
    pub fn backend_name(&self) -> &'static str {
        match self.scheme {
            Scheme::Sqlite => "sqlite",
            Scheme::Postgres => "postgres",
        }
    }

    pub(crate) fn scheme(&self) -> Scheme {
        self.scheme
    }
}

/// The driver's message for a URL it refused. sqlx's configuration errors
/// are "error with configuration: <reason>"; only the reason is kept. The
/// drivers do not put the URL into these messages, but the reason is
/// redacted anyway in case a future version does.
fn driver_reason(e: sqlx::Error) -> String {
    match e {
        sqlx::Error::Configuration(inner) => inner.to_string(),
        other => other.to_string(),
    }
}

impl FromStr for DatabaseUrl {
    type Err = StoreError;
    fn from_str(s: &str) -> Result<DatabaseUrl, StoreError> {
        DatabaseUrl::parse(s)
    }
}

impl fmt::Display for DatabaseUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.redacted())
    }
}

impl fmt::Debug for DatabaseUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("DatabaseUrl")
            .field(&self.redacted())
            .finish()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn redacts_userinfo_passwords() {
        for (url, want) in [
            ("postgres://u:secret@h/db", "postgres://u:***@h/db"),
            (
                "postgresql://u:secret@h:5432/db",
                "postgresql://u:***@h:5432/db",
            ),
            // Malformed: a missing colon, a missing slash, no scheme at all.
            ("postgres//u:secret@h/db", "postgres//u:***@h/db"),
            ("postgres:/u:secret@h/db", "postgres:/u:***@h/db"),
            ("postgres:u:secret@h/db", "postgres:***@h/db"),
            ("u:secret@h/db", "u:***@h/db"),
            ("://u:secret@h", "://u:***@h"),
            // Passwords with characters that end other URL parts.
            ("postgres://u:p@ss/w?rd@h/db", "postgres://u:***@h/db"),
            ("postgres://u:a:b@h/db", "postgres://u:***@h/db"),
            ("postgres://u:@h/db", "postgres://u:***@h/db"),
            // No password: unchanged.
            ("postgres://u@h/db", "postgres://u@h/db"),
            ("postgres://h:5432/db", "postgres://h:5432/db"),
            ("sqlite://ct.db?mode=rwc", "sqlite://ct.db?mode=rwc"),
            ("sqlite::memory:", "sqlite::memory:"),
            ("", ""),
            ("@", "@"),
        ] {
            assert_eq!(redact_url(url), want, "{url}");
        }
    }

    #[test]
    fn redacts_secrets_in_text() {
        for (url, text, want) in [
            ("postgres://u:pw1@h/db", "x pw1 y", "x *** y"),
            ("postgres//u:pw1@h/db", "x pw1 y", "x *** y"),
            ("postgres://u:p%23w@h/db", "p#w and p%23w", "*** and ***"),
            ("postgres://u:p#w@h/db", "p#w", "***"),
            ("postgres://u:a/b@h/db", "a/b", "***"),
            ("postgres://h/db?password=pw2&x=1", "pw2", "***"),
            ("postgres://u@h/db", "u@h", "u@h"),
        ] {
            assert_eq!(redact_secrets(text, url), want, "{url}");
        }
    }

    #[test]
    fn redacts_query_secrets() {
        assert_eq!(
            redact_url("postgres://h/db?sslmode=require&password=secret&user=ct"),
            "postgres://h/db?sslmode=require&password=***&user=ct"
        );
        assert_eq!(
            redact_url("postgres://u:pw@h/db?sslPassword=x&auth_token=y&a=b"),
            "postgres://u:***@h/db?sslPassword=***&auth_token=***&a=b"
        );
    }

    /// Whatever the URL, the password never survives redaction.
    #[test]
    fn password_never_survives() {
        let pw = "Zq9-pw";
        for url in [
            format!("postgres://ct:{pw}@h/db"),
            format!("postgres//ct:{pw}@h/db"),
            format!("postgres:ct:{pw}@h"),
            format!("ct:{pw}@h"),
            format!("postgres://ct:{pw}@h/db?x=@y"),
            format!("postgres://h/db?password={pw}"),
            format!("postgres://ct:{pw}/{pw}@h/db"),
            format!("mysql://ct:{pw}@h/db"),
        ] {
            let r = redact_url(&url);
            assert!(!r.contains(pw), "{url} -> {r}");
            if let Err(e) = DatabaseUrl::parse(&url) {
                assert!(!e.to_string().contains(pw), "{url}: {e}");
            }
        }
    }

    #[test]
    fn parse_checks_scheme_and_driver_syntax() {
        let u = DatabaseUrl::parse(" sqlite://x.db?mode=rwc ").unwrap();
        assert_eq!(u.expose(), "sqlite://x.db?mode=rwc");
        assert_eq!(u.backend_name(), "sqlite");
        let u = DatabaseUrl::parse("postgresql://ct:pw@h:5/db").unwrap();
        assert_eq!(u.expose(), "postgresql://ct:pw@h:5/db");
        assert_eq!(u.to_string(), "postgresql://ct:***@h:5/db");
        assert_eq!(
            format!("{u:?}"),
            "DatabaseUrl(\"postgresql://ct:***@h:5/db\")"
        );
        for bad in [
            "postgres//ct:pw@h/db",
            "mysql://ct:pw@h/db",
            "",
            "postgres://ct:pw@h:notaport/db",
            "postgres://ct:pw@h/db?sslmode=sometimes",
            "sqlite://x.db?mode=sideways",
        ] {
            let e = DatabaseUrl::parse(bad).unwrap_err();
            assert!(matches!(e, StoreError::InvalidUrl { .. }), "{bad}: {e:?}");
            let msg = e.to_string();
            assert!(!msg.contains(":pw@"), "{msg}");
            assert!(msg.starts_with("invalid database URL"), "{msg}");
        }
    }
}
