//! What a ClickHouse HTTP request asks, read from its URL parameters and
//! headers without I/O: credentials, current database, output format,
//! query id, compression, and the settings it would change.

use axum::http::{header, HeaderMap};
use base64::Engine as _;

use super::error::{code, ClickHouseError};

/// URL parameters that belong to the HTTP interface, not to the engine's
/// settings. Sessions are accepted and ignored: every statement stands
/// alone (`SET`, temporary tables and `USE` are refused anyway).
const TRANSPORT_PARAMS: &[&str] = &[
    "query",
    "database",
    "default_format",
    "user",
    "password",
    "query_id",
    "session_id",
    "session_timeout",
    "session_check",
    "quota_key",
    "buffer_size",
    "wait_end_of_query",
    "client_protocol_version",
    "compress",
    "decompress",
];

/// Settings about the HTTP exchange itself, which this interface takes
/// whatever their value: it compresses as `enable_http_compression` says,
/// always cancels a statement whose client went away, sends no progress
/// headers, and picks its own compression level.
const HTTP_SETTINGS: &[&str] = &[
    "enable_http_compression",
    "http_zlib_compression_level",
    "send_progress_in_http_headers",
    "http_headers_progress_interval_ms",
    "cancel_http_readonly_queries_on_client_close",
    "http_wait_end_of_query",
    "http_response_buffer_size",
];

/// A request's parameters and headers, parsed.
#[derive(Debug, Default, PartialEq, Eq)]
pub(super) struct ClickHouseRequest {
    /// `query=`: the statement, or its first part (the body is the rest).
    pub(super) query: Option<String>,
    /// The user name offered (for messages only).
    pub(super) user: String,
    /// The password offered: a chingest token.
    pub(super) password: Option<String>,
    /// `X-ClickHouse-Database`, else `database=`.
    pub(super) database: Option<String>,
    /// `X-ClickHouse-Format`, else `default_format=`.
    pub(super) format: Option<String>,
    /// `query_id=`.
    pub(super) query_id: Option<String>,
    /// `enable_http_compression=0` turns compression off.
    pub(super) compression: bool,
    /// Settings to check against the engine's: `(name, value)`.
    pub(super) settings: Vec<(String, String)>,
}

impl ClickHouseRequest {
    /// Reads `params` (in order) and `headers`. Credentials may come one
    /// way only, as ClickHouse requires: `X-ClickHouse-User`/`-Key`,
    /// `Authorization` (Basic, or Bearer with the token), or
    /// `user`/`password` parameters.
    pub(super) fn parse(
        params: &[(String, String)],
        headers: &HeaderMap,
    ) -> Result<ClickHouseRequest, ClickHouseError> {
        let mut request = ClickHouseRequest {
            compression: true,
            ..ClickHouseRequest::default()
        };
        let mut param_user = None;
        let mut param_password = None;
        for (name, value) in params {
            match name.as_str() {
                "query" => request.query = Some(value.clone()),
                "database" => request.database = non_empty(value),
                "default_format" => request.format = non_empty(value),
                "query_id" => request.query_id = non_empty(value),
                "user" => param_user = Some(value.clone()),
                "password" => param_password = Some(value.clone()),
                "enable_http_compression" => request.compression = value.trim() != "0",
                "compress" | "decompress" if value.trim() != "0" => {
                    return Err(ClickHouseError::new(
                        code::NOT_IMPLEMENTED,
                        format!(
                            "{name}={value}: ClickHouse's own block compression is not \
                             supported; use HTTP compression (Accept-Encoding, Content-Encoding)"
                        ),
                    ))
                }
                name if name.starts_with("param_") => {
                    return Err(ClickHouseError::new(
                        code::NOT_IMPLEMENTED,
                        format!(
                        "query parameters ({name}) are not supported: bind values in the client"
                    ),
                    ))
                }
                name if is_interface_param(name) => {}
                name => request.settings.push((name.to_owned(), value.clone())),
            }
        }
        // The headers override the parameters, as in ClickHouse.
        let header = |name: &str| headers.get(name).and_then(|v| v.to_str().ok());
        if let Some(database) = header("x-clickhouse-database").and_then(non_empty) {
            request.database = Some(database);
        }
        if let Some(format) = header("x-clickhouse-format").and_then(non_empty) {
            request.format = Some(format);
        }
        let from_headers = (header("x-clickhouse-user"), header("x-clickhouse-key"));
        let authorization = header(header::AUTHORIZATION.as_str());
        let ways = [
            from_headers != (None, None),
            authorization.is_some(),
            param_user.is_some() || param_password.is_some(),
        ];
        if ways.iter().filter(|&&way| way).count() > 1 {
            return Err(ClickHouseError::new(
                code::AUTHENTICATION_FAILED,
                "Invalid authentication: it is not allowed to use more than one of the \
                 X-ClickHouse HTTP headers, the Authorization HTTP header and the \
                 user and password parameters",
            ));
        }
        let (user, password) = match (from_headers, authorization) {
            ((user, key), None) if ways[0] => (user.map(str::to_owned), key.map(str::to_owned)),
            (_, Some(value)) => authorization_credentials(value)?,
            _ => (param_user, param_password),
        };
        request.user = user
            .filter(|u| !u.is_empty())
            .unwrap_or_else(|| "default".to_owned());
        request.password = password;
        Ok(request)
    }
}

/// Whether a URL parameter belongs to the HTTP interface rather than to
/// the engine's settings.
pub(super) fn is_interface_param(name: &str) -> bool {
    TRANSPORT_PARAMS.contains(&name) || HTTP_SETTINGS.contains(&name)
}

/// `Basic base64(user:password)`, or `Bearer <token>`.
fn authorization_credentials(
    value: &str,
) -> Result<(Option<String>, Option<String>), ClickHouseError> {
    let invalid = || {
        ClickHouseError::new(
            code::AUTHENTICATION_FAILED,
            "Invalid authentication: the Authorization header is not Basic or Bearer",
        )
    };
    let (scheme, credentials) = value.split_once(' ').ok_or_else(invalid)?;
    match scheme.to_ascii_lowercase().as_str() {
        "basic" => {
            let decoded = base64::engine::general_purpose::STANDARD
                .decode(credentials.trim())
                .ok()
                .and_then(|bytes| String::from_utf8(bytes).ok())
                .ok_or_else(invalid)?;
            let (user, password) = decoded.split_once(':').unwrap_or((&decoded, ""));
            Ok((Some(user.to_owned()), Some(password.to_owned())))
        }
        "bearer" => Ok((None, Some(credentials.trim().to_owned()))),
        _ => Err(invalid()),
    }
}

fn non_empty(value: &str) -> Option<String> {
    let value = value.trim();
    (!value.is_empty()).then(|| value.to_owned())
}

/// The format a statement names in a trailing `FORMAT x` (how clients ask
/// for one), to label the answer; the engine applies it either way.
pub(super) fn trailing_format(sql: &str) -> Option<&str> {
    let sql = sql.trim_end().trim_end_matches(';').trim_end();
    let (head, format) = sql.rsplit_once(char::is_whitespace)?;
    let keyword = head.trim_end().rsplit(char::is_whitespace).next()?;
    let is_name = !format.is_empty()
        && format
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_');
    (keyword.eq_ignore_ascii_case("format") && is_name).then_some(format)
}

#[cfg(test)]
mod tests {
    use super::*;
    use axum::http::HeaderValue;

    fn params(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect()
    }

    fn headers(pairs: &[(&'static str, &str)]) -> HeaderMap {
        let mut map = HeaderMap::new();
        for (name, value) in pairs {
            map.insert(*name, HeaderValue::from_str(value).unwrap());
        }
        map
    }

    fn parse(
        p: &[(&str, &str)],
        h: &[(&'static str, &str)],
    ) -> Result<ClickHouseRequest, ClickHouseError> {
        ClickHouseRequest::parse(&params(p), &headers(h))
    }

    #[test]
    fn credentials_come_one_way() {
        let basic = format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode("alice:tok")
        );
        // URL parameters, headers, then the user and password read.
        type Case<'a> = (
            &'a [(&'a str, &'a str)],
            &'a [(&'static str, &'a str)],
            &'a str,
            Option<&'a str>,
        );
        let cases: &[Case] = &[
            (&[], &[], "default", None),
            (
                &[("user", "bob"), ("password", "tok")],
                &[],
                "bob",
                Some("tok"),
            ),
            (
                &[],
                &[("x-clickhouse-user", "u"), ("x-clickhouse-key", "tok")],
                "u",
                Some("tok"),
            ),
            (&[], &[("x-clickhouse-key", "tok")], "default", Some("tok")),
            (&[], &[("authorization", &basic)], "alice", Some("tok")),
            (
                &[],
                &[("authorization", "Bearer tok")],
                "default",
                Some("tok"),
            ),
        ];
        for (p, h, user, password) in cases {
            let request = parse(p, h).unwrap();
            assert_eq!(
                (request.user.as_str(), request.password.as_deref()),
                (*user, *password),
                "{p:?} {h:?}"
            );
        }
        let both = parse(&[("password", "a")], &[("x-clickhouse-key", "b")]).unwrap_err();
        assert_eq!(both.code, 516);
        let bad = parse(&[], &[("authorization", "Digest x")]).unwrap_err();
        assert_eq!(bad.code, 516);
    }

    #[test]
    fn headers_override_parameters_and_settings_are_kept_for_the_engine() {
        let request = parse(
            &[
                ("database", "db1"),
                ("default_format", "CSV"),
                ("session_id", "s"),
                ("enable_http_compression", "0"),
                ("output_format_json_quote_64bit_integers", "0"),
                ("max_threads", "64"),
            ],
            &[
                ("x-clickhouse-database", "db2"),
                ("x-clickhouse-format", "JSON"),
            ],
        )
        .unwrap();
        assert_eq!(request.database.as_deref(), Some("db2"));
        assert_eq!(request.format.as_deref(), Some("JSON"));
        assert!(!request.compression);
        assert_eq!(
            request.settings,
            params(&[
                ("output_format_json_quote_64bit_integers", "0"),
                ("max_threads", "64")
            ])
        );
        assert_eq!(parse(&[("param_x", "1")], &[]).unwrap_err().code, 48);
        assert_eq!(parse(&[("compress", "1")], &[]).unwrap_err().code, 48);
        assert!(parse(&[("compress", "0")], &[]).is_ok());
    }

    #[test]
    fn a_trailing_format_names_the_answer() {
        assert_eq!(trailing_format("SELECT 1\n FORMAT Native"), Some("Native"));
        assert_eq!(
            trailing_format("select 1 format JSONEachRow ;\n"),
            Some("JSONEachRow")
        );
        assert_eq!(trailing_format("SELECT format"), None);
        assert_eq!(trailing_format("SELECT 1"), None);
    }
}
