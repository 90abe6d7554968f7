//! Prometheus remote read: `POST /api/v1/read` (and under `/db/<name>`),
//! a snappy-compressed `prometheus.ReadRequest`, answered with a
//! snappy-compressed `ReadResponse` of samples — what Prometheus's
//! `remote_read` asks for, so a Prometheus server can use chingest as its
//! long-term store. The series are selected as PromQL selects them
//! ([`chingest_promql::Source`]), stale markers included (the reader's
//! engine handles them), under the `[promql]` limits for the whole request.

use axum::body::Body;
use axum::extract::{Query, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use bytes::Bytes;
use chingest_promql::{LabelMatcher, MatchKind};
use chingest_proto::prometheus::read::{
    MatchType, QueryResult, ReadRequest, ReadResponse, ResponseType,
};
use chingest_proto::prometheus::{Label, Sample, TimeSeries};
use prost::Message;
use std::collections::HashMap;

use super::AppState;
use crate::error::{ApiError, Flavor};

/// `POST /api/v1/read`.
pub(super) async fn read(
    State(state): State<AppState>,
    Query(params): Query<HashMap<String, String>>,
    uri: Uri,
    headers: HeaderMap,
    body: Body,
) -> Result<Response, ApiError> {
    let grant = state.authorize(&headers, None, Flavor::V1)?;
    let source = super::promql::source(
        &state,
        grant.access(),
        &uri,
        params.get("db").map(String::as_str),
    )
    .map_err(|e| e.flavor(Flavor::V1))?;
    // Decompressed from snappy (its Content-Encoding), within the limit.
    let limit = state.config.limits.max_body_bytes;
    let raw = super::extract::read_body(&state, &headers, body, limit, Flavor::V1).await?;
    let request = ReadRequest::decode(Bytes::clone(&raw))
        .map_err(|err| ApiError::bad_request(format!("not a remote read ReadRequest: {err}")))?;
    let samples = ResponseType::Samples as i32;
    if !request.accepted_response_types.is_empty()
        && !request.accepted_response_types.contains(&samples)
    {
        return Err(ApiError::bad_request(
            "this server answers remote read with samples (SAMPLES) only",
        ));
    }
    let mut series_budget = source.limits.max_series;
    let mut sample_budget = source.limits.max_samples;
    let mut results = Vec::with_capacity(request.queries.len());
    for query in &request.queries {
        let matchers = query
            .matchers
            .iter()
            .map(|m| {
                let kind = match MatchType::try_from(m.r#type) {
                    Ok(MatchType::Eq) => MatchKind::Equal,
                    Ok(MatchType::Neq) => MatchKind::NotEqual,
                    Ok(MatchType::Re) => MatchKind::Regex,
                    Ok(MatchType::Nre) => MatchKind::NotRegex,
                    Err(_) => {
                        return Err(ApiError::bad_request(format!(
                            "unknown matcher type {}",
                            m.r#type
                        )))
                    }
                };
                LabelMatcher::new(&m.name, kind, &m.value)
                    .map_err(|e| ApiError::from(e).flavor(Flavor::V1))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let series = source
            .select(
                &matchers,
                query.start_timestamp_ms,
                query.end_timestamp_ms,
                &mut series_budget,
                &mut sample_budget,
            )
            .await
            .map_err(|e| ApiError::from(e).flavor(Flavor::V1))?;
        let timeseries = series
            .into_iter()
            .map(|s| TimeSeries {
                labels: s
                    .labels
                    .pairs()
                    .iter()
                    .map(|(n, v)| Label {
                        name: Bytes::from(n.clone()),
                        value: Bytes::from(v.clone()),
                    })
                    .collect(),
                samples: s
                    .points
                    .into_iter()
                    .map(|(timestamp, value)| Sample { value, timestamp })
                    .collect(),
            })
            .collect();
        results.push(QueryResult { timeseries });
    }
    let encoded = ReadResponse { results }.encode_to_vec();
    let body = snap::raw::Encoder::new()
        .compress_vec(&encoded)
        .map_err(|err| ApiError::new(StatusCode::INTERNAL_SERVER_ERROR, err.to_string()))?;
    let mut response = body.into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/x-protobuf"),
    );
    headers.insert(header::CONTENT_ENCODING, HeaderValue::from_static("snappy"));
    Ok(response)
}
