//! The HTTP API: the router, and one module per protocol. Handlers only
//! translate requests into `chingest::Ingestor` calls and results into
//! responses ([`extract`] reads what every request carries); every error
//! goes through [`ApiError`](crate::error::ApiError).

mod admin;
pub mod clickhouse;
mod edit;
mod extract;
mod health;
mod influx;
mod influxql;
pub(crate) mod metrics;
mod otlp;
mod prometheus;
mod promql;
mod remote_read;
mod rules;
mod sql;
mod ui;

use axum::routing::{delete, get, post};
use axum::Router;

pub use crate::state::AppState;

/// Prometheus's query API under `prefix`.
fn prometheus_api(prefix: &str) -> Router<AppState> {
    Router::new()
        .route(
            &format!("{prefix}/query"),
            get(promql::query).post(promql::query),
        )
        .route(
            &format!("{prefix}/query_range"),
            get(promql::query_range).post(promql::query_range),
        )
        .route(
            &format!("{prefix}/series"),
            get(promql::series).post(promql::series),
        )
        .route(
            &format!("{prefix}/labels"),
            get(promql::labels).post(promql::labels),
        )
        .route(
            &format!("{prefix}/label/{{name}}/values"),
            get(promql::label_values),
        )
        .route(
            &format!("{prefix}/format_query"),
            get(promql::format_query).post(promql::format_query),
        )
        .route(
            &format!("{prefix}/status/buildinfo"),
            get(promql::buildinfo),
        )
        .route(&format!("{prefix}/metadata"), get(promql::metadata))
        .route(
            &format!("{prefix}/query_exemplars"),
            get(promql::query_exemplars).post(promql::query_exemplars),
        )
        .route(&format!("{prefix}/status/tsdb"), get(promql::tsdb_status))
        .route(&format!("{prefix}/read"), post(remote_read::read))
}

/// The web UI: its pages, its files, and `/` leading to it.
fn ui_routes() -> Router<AppState> {
    Router::new()
        .route("/", get(ui::home))
        .route("/ui", get(ui::home))
        .route("/ui/", get(ui::page))
        .route("/ui/{page}", get(ui::page))
        .route("/ui/assets/{*path}", get(ui::file))
}

/// The router for `state`.
pub fn router(state: AppState) -> Router {
    Router::new()
        .route("/write", post(influx::write_v1))
        .route("/api/v2/write", post(influx::write_v2))
        .route("/api/v1/write", post(prometheus::write))
        .route("/api/v1/prom/write", post(prometheus::write))
        .route("/v1/metrics", post(otlp::metrics))
        .route("/api/v2/delete", post(edit::delete))
        .route("/api/v2/update", post(edit::update))
        .route("/ping", get(influx::ping).head(influx::ping))
        .route("/query", get(influxql::query).post(influxql::query))
        .route("/health", get(health::health))
        .route("/ready", get(health::ready))
        .route("/sql", get(sql::sql_get).post(sql::sql_post))
        .route("/metrics", get(metrics::render))
        .route("/api/v1/admin/backup", post(admin::backup))
        .route(
            "/api/v1/admin/snapshots",
            get(admin::snapshots).post(admin::create_snapshot),
        )
        .route(
            "/api/v1/admin/snapshots/{name}",
            delete(admin::delete_snapshot),
        )
        .route("/api/v1/access", get(ui::access))
        .route("/api/v1/rules", get(rules::rules).post(rules::rules))
        .route("/api/v1/alerts", get(rules::alerts).post(rules::alerts))
        .route("/-/reload", post(rules::reload).put(rules::reload))
        .merge(prometheus_api("/api/v1"))
        .merge(prometheus_api("/db/{db}/api/v1"))
        .merge(match state.config.ui {
            true => ui_routes(),
            false => Router::new(),
        })
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            metrics::track,
        ))
        // Bodies are read with the configured limit by the handlers.
        .layer(axum::extract::DefaultBodyLimit::disable())
        .with_state(state)
}
