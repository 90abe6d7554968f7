//! Errors in ClickHouse's shape: `Code: N. DB::Exception: message. (NAME)`
//! as the body, the code in `X-ClickHouse-Exception-Code`, and the HTTP
//! status ClickHouse gives that code, so ClickHouse clients surface them
//! as they would the real server's.

use axum::http::{header, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Response};

use crate::error::ApiError;

/// ClickHouse error codes this interface answers with (the engine's own
/// are passed through as they come).
pub(super) mod code {
    pub(crate) const BAD_ARGUMENTS: u32 = 36;
    pub(crate) const NOT_IMPLEMENTED: u32 = 48;
    pub(crate) const UNKNOWN_FORMAT: u32 = 73;
    pub(crate) const UNKNOWN_SETTING: u32 = 115;
    pub(crate) const READONLY: u32 = 164;
    pub(crate) const TOO_MANY_SIMULTANEOUS_QUERIES: u32 = 202;
    pub(crate) const QUERY_IS_TOO_LARGE: u32 = 393;
    pub(crate) const ACCESS_DENIED: u32 = 497;
    pub(crate) const AUTHENTICATION_FAILED: u32 = 516;
    pub(crate) const STD_EXCEPTION: u32 = 1001;
}

/// The name ClickHouse gives a code of [`code`].
fn code_name(code: u32) -> &'static str {
    match code {
        code::BAD_ARGUMENTS => "BAD_ARGUMENTS",
        code::NOT_IMPLEMENTED => "NOT_IMPLEMENTED",
        code::UNKNOWN_FORMAT => "UNKNOWN_FORMAT",
        code::UNKNOWN_SETTING => "UNKNOWN_SETTING",
        code::READONLY => "READONLY",
        code::TOO_MANY_SIMULTANEOUS_QUERIES => "TOO_MANY_SIMULTANEOUS_QUERIES",
        code::QUERY_IS_TOO_LARGE => "QUERY_IS_TOO_LARGE",
        code::ACCESS_DENIED => "ACCESS_DENIED",
        code::AUTHENTICATION_FAILED => "AUTHENTICATION_FAILED",
        _ => "STD_EXCEPTION",
    }
}

/// An error answered in ClickHouse's shape.
#[derive(Debug)]
pub(crate) struct ClickHouseError {
    /// ClickHouse's error code.
    pub(crate) code: u32,
    /// The whole text: `Code: N. DB::Exception: …`.
    pub(crate) text: String,
    status: StatusCode,
    retry_after: Option<u64>,
}

impl ClickHouseError {
    /// `Code: {code}. DB::Exception: {message}. ({NAME})`.
    pub(crate) fn new(code: u32, message: impl std::fmt::Display) -> ClickHouseError {
        let message = message.to_string();
        let message = message.trim_end_matches('.');
        ClickHouseError {
            code,
            text: format!(
                "Code: {code}. DB::Exception: {message}. ({})",
                code_name(code)
            ),
            status: status_of(code),
            retry_after: None,
        }
    }

    /// Wrong or missing credentials, as ClickHouse words it.
    pub(crate) fn authentication_failed(user: &str) -> ClickHouseError {
        ClickHouseError::new(
            code::AUTHENTICATION_FAILED,
            format!(
                "{user}: Authentication failed: password is incorrect, or there is no user with such name"
            ),
        )
    }

    /// `err`'s message under `code`, with `err`'s status and Retry-After
    /// (503 while the engine starts, 429 over budget) rather than the
    /// code's.
    fn keeping_status(code: u32, err: ApiError) -> ClickHouseError {
        let mut converted = ClickHouseError::new(code, &err.message);
        converted.status = err.status;
        converted.retry_after = err.retry_after;
        converted
    }

    /// An engine message, already `Code: N. DB::Exception: …`, with its code
    /// read from it (the engine repeats the prefix; once is enough).
    fn from_engine(message: String) -> ClickHouseError {
        let Some(code) = engine_code(&message) else {
            return ClickHouseError::new(code::BAD_ARGUMENTS, message);
        };
        let prefix = format!("Code: {code}. DB::Exception: ");
        let text = match message.strip_prefix(&prefix) {
            Some(rest) if rest.starts_with(&prefix) => rest.to_owned(),
            _ => message,
        };
        ClickHouseError {
            code,
            text,
            // The engine refused the statement: the client's mistake,
            // unless ClickHouse says otherwise for the code.
            status: match status_of(code) {
                StatusCode::INTERNAL_SERVER_ERROR => StatusCode::BAD_REQUEST,
                status => status,
            },
            retry_after: None,
        }
    }
}

/// The code of an engine message `Code: N. …`.
fn engine_code(message: &str) -> Option<u32> {
    let rest = message.strip_prefix("Code: ")?;
    rest[..rest.find('.')?].parse().ok()
}

/// The HTTP status ClickHouse answers a code with (`exceptionCodeToHTTPStatus`).
fn status_of(code: u32) -> StatusCode {
    match code {
        // UNKNOWN_USER, WRONG_PASSWORD, READONLY, ACCESS_DENIED,
        // AUTHENTICATION_FAILED
        192 | 193 | code::READONLY | code::ACCESS_DENIED | code::AUTHENTICATION_FAILED => {
            StatusCode::FORBIDDEN
        }
        // SYNTAX_ERROR, BAD_ARGUMENTS, CANNOT_PARSE_*, UNKNOWN_FORMAT,
        // UNKNOWN_SETTING, ILLEGAL_TYPE_OF_ARGUMENT,
        // NUMBER_OF_ARGUMENTS_DOESNT_MATCH
        62
        | code::BAD_ARGUMENTS
        | 6
        | 26..=33
        | 38
        | 41
        | code::UNKNOWN_FORMAT
        | code::UNKNOWN_SETTING
        | 42
        | 43 => StatusCode::BAD_REQUEST,
        // UNKNOWN_IDENTIFIER, UNKNOWN_FUNCTION, UNKNOWN_TYPE, UNKNOWN_TABLE,
        // UNKNOWN_DATABASE
        47 | 46 | 50 | 60 | 81 => StatusCode::NOT_FOUND,
        code::QUERY_IS_TOO_LARGE => StatusCode::PAYLOAD_TOO_LARGE,
        code::NOT_IMPLEMENTED => StatusCode::NOT_IMPLEMENTED,
        // TIMEOUT_EXCEEDED
        159 => StatusCode::REQUEST_TIMEOUT,
        code::TOO_MANY_SIMULTANEOUS_QUERIES => StatusCode::TOO_MANY_REQUESTS,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

impl From<chingest::Error> for ClickHouseError {
    fn from(err: chingest::Error) -> ClickHouseError {
        use chingest::Error as E;
        match err {
            E::Engine(message) | E::QueryLimit { message, .. } => {
                ClickHouseError::from_engine(message)
            }
            E::NotReadOnly(message) => ClickHouseError::new(code::READONLY, message),
            E::UnknownFormat(format) => {
                ClickHouseError::new(code::UNKNOWN_FORMAT, format!("Unknown format {format}"))
            }
            // ClickHouse's code for both (its own queue wait,
            // `queue_max_wait_ms`, ends in it too); `/sql`'s status and
            // Retry-After.
            refused @ (E::TooManyQueries { .. } | E::QueryQueueTimeout { .. }) => {
                ClickHouseError::keeping_status(
                    code::TOO_MANY_SIMULTANEOUS_QUERIES,
                    ApiError::from(refused),
                )
            }
            other => ClickHouseError::from(ApiError::from(other)),
        }
    }
}

/// The errors the shared parts of the HTTP API give (body reading, the
/// engine starting, the memory budget), by their status.
impl From<ApiError> for ClickHouseError {
    fn from(err: ApiError) -> ClickHouseError {
        let code = match err.status {
            StatusCode::PAYLOAD_TOO_LARGE => code::QUERY_IS_TOO_LARGE,
            StatusCode::FORBIDDEN => code::ACCESS_DENIED,
            StatusCode::UNAUTHORIZED => code::AUTHENTICATION_FAILED,
            StatusCode::TOO_MANY_REQUESTS => code::TOO_MANY_SIMULTANEOUS_QUERIES,
            status if status.is_client_error() => code::BAD_ARGUMENTS,
            _ => code::STD_EXCEPTION,
        };
        ClickHouseError::keeping_status(code, err)
    }
}

impl IntoResponse for ClickHouseError {
    fn into_response(self) -> Response {
        if self.status.is_server_error() {
            tracing::error!(code = self.code, text = %self.text, "clickhouse request failed");
        } else {
            tracing::debug!(code = self.code, text = %self.text, "clickhouse request refused");
        }
        let mut response = (self.status, format!("{}\n", self.text)).into_response();
        let headers = response.headers_mut();
        headers.insert(
            header::CONTENT_TYPE,
            HeaderValue::from_static("text/plain; charset=UTF-8"),
        );
        headers.insert("x-clickhouse-exception-code", HeaderValue::from(self.code));
        if let Some(seconds) = self.retry_after {
            headers.insert(header::RETRY_AFTER, HeaderValue::from(seconds));
        }
        response
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn engine_messages_keep_their_code_once() {
        let err = ClickHouseError::from(chingest::Error::Engine(
            "Code: 164. DB::Exception: Code: 164. DB::Exception: Cannot modify 'x' setting in readonly mode. (READONLY)".to_owned(),
        ));
        assert_eq!(err.code, 164);
        assert_eq!(err.status, StatusCode::FORBIDDEN);
        assert_eq!(
            err.text,
            "Code: 164. DB::Exception: Cannot modify 'x' setting in readonly mode. (READONLY)"
        );
        let err = ClickHouseError::from(chingest::Error::Engine(
            "Code: 81. DB::Exception: Database nope does not exist. (UNKNOWN_DATABASE)".to_owned(),
        ));
        assert_eq!((err.code, err.status), (81, StatusCode::NOT_FOUND));
    }

    #[test]
    fn our_errors_take_clickhouse_s_shape() {
        let err = ClickHouseError::authentication_failed("default");
        assert_eq!(err.status, StatusCode::FORBIDDEN);
        assert_eq!(
            err.text,
            "Code: 516. DB::Exception: default: Authentication failed: password is incorrect, \
             or there is no user with such name. (AUTHENTICATION_FAILED)"
        );
        let err = ClickHouseError::from(chingest::Error::NotReadOnly("a insert statement".into()));
        assert_eq!((err.code, err.status), (164, StatusCode::FORBIDDEN));
        assert!(err.text.ends_with("(READONLY)"), "{}", err.text);
    }

    #[test]
    fn refused_queries_keep_their_status_and_retry_after() {
        let second = std::time::Duration::from_secs(1);
        for (refused, status) in [
            (
                chingest::Error::TooManyQueries {
                    running: 4,
                    queued: 64,
                    retry_after: second,
                },
                StatusCode::TOO_MANY_REQUESTS,
            ),
            (
                chingest::Error::QueryQueueTimeout {
                    running: 4,
                    waited: 10 * second,
                    retry_after: second,
                },
                StatusCode::SERVICE_UNAVAILABLE,
            ),
        ] {
            let err = ClickHouseError::from(refused);
            assert_eq!(
                (err.code, err.status, err.retry_after),
                (202, status, Some(1))
            );
            assert!(
                err.text.ends_with("(TOO_MANY_SIMULTANEOUS_QUERIES)"),
                "{}",
                err.text
            );
        }
    }
}
