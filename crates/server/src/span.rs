//! A span around every request, HTTP or gRPC, with what an operator filters
//! the log by: its `protocol` (`influxdb`, `remote_write`, `otlp`,
//! `influxql`, `promql`, `edit`, `admin`, `sql`, `clickhouse`, `grpc`, …),
//! its `endpoint` (route or gRPC method), the database it reads or writes
//! (`db`, as the protocol found it: [`database`]), and
//! once answered its `status` and `outcome` (`ok`; `refused`, the client's
//! error; `failed`, the server's). Handlers' own spans (a write's retention
//! policy and size, a ClickHouse query id) open inside it. The answer is one
//! `debug` event, `answered`, which carries the fields to the log
//! (`--log chingest_server=debug`); at the default `info` it costs a
//! disabled event. One place makes the span and names the outcome, for the
//! HTTP middleware (`http/metrics.rs`) and the gRPC services alike.

use std::fmt::Display;

use tracing::field::Empty;
use tracing::Span;

/// How a request ended.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Outcome {
    /// Answered as asked (a 2xx or 3xx, gRPC `OK`).
    Ok,
    /// Refused for what the client sent or may do (a 4xx, a gRPC code
    /// such as `INVALID_ARGUMENT`): nothing for the server's operator.
    Refused,
    /// The server could not answer (a 5xx, gRPC `INTERNAL`,
    /// `UNAVAILABLE`, …).
    Failed,
}

impl Outcome {
    /// The outcome an HTTP status says.
    pub(crate) fn of_http(status: axum::http::StatusCode) -> Outcome {
        match status {
            s if s.is_server_error() => Outcome::Failed,
            s if s.is_client_error() => Outcome::Refused,
            _ => Outcome::Ok,
        }
    }

    /// The outcome a gRPC code says, as its HTTP status would
    /// (`From<ApiError> for Status` maps them).
    pub(crate) fn of_grpc(code: tonic::Code) -> Outcome {
        use tonic::Code as C;
        match code {
            C::Ok => Outcome::Ok,
            C::Internal | C::Unknown | C::Unavailable | C::DataLoss | C::DeadlineExceeded => {
                Outcome::Failed
            }
            _ => Outcome::Refused,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Outcome::Ok => "ok",
            Outcome::Refused => "refused",
            Outcome::Failed => "failed",
        }
    }
}

/// A request's span, its database and answer to be recorded.
pub(crate) fn request(protocol: &'static str, endpoint: &str) -> Span {
    tracing::info_span!(
        "request",
        protocol,
        endpoint,
        db = Empty,
        status = Empty,
        outcome = Empty
    )
}

/// Records the database on the current request's span: called where a
/// protocol finds the database a request reads or writes (its defaults
/// applied), before the handler enters a span of its own.
pub(crate) fn database(db: &str) {
    Span::current().record("db", db);
}

/// Records how the request ended on its span, and logs it.
pub(crate) fn answered(span: &Span, status: impl Display, outcome: Outcome) {
    span.record("status", tracing::field::display(status));
    span.record("outcome", outcome.name());
    tracing::debug!(parent: span, "answered");
}
