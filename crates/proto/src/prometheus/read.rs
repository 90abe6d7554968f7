//! Prometheus remote read's messages (`prometheus.ReadRequest`,
//! `prometheus.ReadResponse`), written from `prompb/remote.proto`'s field
//! numbers: a reader asks for series by label matchers and a time range,
//! and gets their samples back. Series reuse remote write's
//! [`TimeSeries`](super::TimeSeries).

use super::TimeSeries;

/// One or more queries.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ReadRequest {
    /// The queries, answered in order.
    #[prost(message, repeated, tag = "1")]
    pub queries: Vec<Query>,
    /// The answers the reader takes, preferred first ([`ResponseType`]);
    /// none means samples.
    #[prost(enumeration = "ResponseType", repeated, tag = "2")]
    pub accepted_response_types: Vec<i32>,
}

/// How a reader takes its answer.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
#[repr(i32)]
pub enum ResponseType {
    /// One snappy-compressed `ReadResponse` of samples.
    Samples = 0,
    /// A stream of XOR-encoded chunks.
    StreamedXorChunks = 1,
}

/// Series selected by label matchers, over a time range.
#[derive(Clone, PartialEq, prost::Message)]
pub struct Query {
    /// First ms of the range (included).
    #[prost(int64, tag = "1")]
    pub start_timestamp_ms: i64,
    /// Last ms of the range (included).
    #[prost(int64, tag = "2")]
    pub end_timestamp_ms: i64,
    /// The matchers, all of which a series matches.
    #[prost(message, repeated, tag = "3")]
    pub matchers: Vec<LabelMatcher>,
}

/// A label matcher.
#[derive(Clone, PartialEq, prost::Message)]
pub struct LabelMatcher {
    /// How ([`MatchType`]).
    #[prost(enumeration = "MatchType", tag = "1")]
    pub r#type: i32,
    /// The label.
    #[prost(string, tag = "2")]
    pub name: String,
    /// The value or the pattern.
    #[prost(string, tag = "3")]
    pub value: String,
}

/// The four matchers.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, prost::Enumeration)]
#[repr(i32)]
pub enum MatchType {
    /// `=`
    Eq = 0,
    /// `!=`
    Neq = 1,
    /// `=~`
    Re = 2,
    /// `!~`
    Nre = 3,
}

/// The answers to a [`ReadRequest`], one per query, in order.
#[derive(Clone, PartialEq, prost::Message)]
pub struct ReadResponse {
    /// The answers.
    #[prost(message, repeated, tag = "1")]
    pub results: Vec<QueryResult>,
}

/// One query's series.
#[derive(Clone, PartialEq, prost::Message)]
pub struct QueryResult {
    /// The series with their samples in the range.
    #[prost(message, repeated, tag = "1")]
    pub timeseries: Vec<TimeSeries>,
}
