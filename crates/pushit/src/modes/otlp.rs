//! `pushit otlp`: OTLP gauges as an OpenTelemetry Collector sends them. A
//! host-metrics load — `--resources` hosts (a resource each, with
//! `service.name` and `host.name`) × `--points-per-resource` gauge points
//! (metrics of 10 points, one per `cpu`) — collected `--scrapes` times 10 s
//! apart, is cut into `ExportMetricsServiceRequest`s of whole resources
//! holding about `--points-per-request` points (the Collector's batch
//! processor sends 8,192), built before the clock starts, and exported
//! over `--connections` OTLP/gRPC channels (or `--transport http`:
//! protobuf posts to `/v1/metrics`). Reports points/s until the last
//! request is answered and until every point is queryable, and (with the
//! in-process server) bytes per point on disk once merged.

use anyhow::{bail, Context as _};
use opentelemetry_proto::tonic::collector::metrics::v1::metrics_service_client::MetricsServiceClient;
use opentelemetry_proto::tonic::collector::metrics::v1::ExportMetricsServiceRequest;
use prost::Message;
use pushit::otlp_load::host_metrics;
use pushit::report::{column, Format};
use serde_json::json;

use super::client::{bytes_per_value, count, drive, wait_visible};
use super::server::{authorized, http_client, with_server, ServerArgs};
use super::{check_stored, millis_at, per_second};
use crate::Context;

/// How the requests travel.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
enum Transport {
    /// OTLP/gRPC, `MetricsService/Export`.
    Grpc,
    /// OTLP/HTTP, protobuf posts to `/v1/metrics`.
    Http,
}

/// Flags of `pushit otlp`.
#[derive(Debug, clap::Args)]
pub(crate) struct Args {
    /// Hosts, a resource each.
    #[arg(long, default_value_t = 1_000)]
    resources: usize,
    /// Gauge points per resource and collection, in metrics of 10 points.
    #[arg(long, default_value_t = 100)]
    points_per_resource: usize,
    /// Collections of every resource, 10 s apart.
    #[arg(long, default_value_t = 10)]
    scrapes: usize,
    /// Points per request (whole resources; the Collector's batch size).
    #[arg(long, default_value_t = 8_192)]
    points_per_request: usize,
    /// Concurrent channels or keep-alive connections.
    #[arg(long, default_value_t = 4)]
    connections: usize,
    /// OTLP/gRPC or OTLP/HTTP.
    #[arg(long, value_enum, default_value_t = Transport::Grpc)]
    transport: Transport,
    /// Instead of the end-to-end run: the same points inserted straight
    /// into the engine in the OpenTelemetry Collector ClickHouse
    /// exporter's shape and in chingest's series_id layout.
    #[arg(long)]
    shapes: bool,
    #[command(flatten)]
    server: ServerArgs,
}

const DATABASE: &str = "pushit_otlp";
const MEASUREMENT: &str = "otel_metrics_gauge";

pub(crate) fn run(ctx: &Context, args: &Args) -> anyhow::Result<()> {
    let points = args.resources * args.points_per_resource * args.scrapes;
    if points == 0 || args.points_per_request == 0 {
        bail!("--resources, --points-per-resource, --scrapes and --points-per-request must be positive");
    }
    ctx.progress(format!("otlp: building {points} gauge points"));
    let requests = build_requests(args);
    if args.shapes {
        let requests: Vec<_> = requests.into_iter().map(|(request, _)| request).collect();
        return super::otlp_shapes::run(ctx, &requests);
    }
    let mut report = ctx.report(
        "otlp",
        vec![
            column("transport", "transport", Format::Text),
            column("points", "points", Format::Count),
            column("series", "series", Format::Count),
            column("points/s", "points_per_s", Format::Count),
            column("visible/s", "visible_points_per_s", Format::Count),
            column("p50", "p50_ms", Format::Millis),
            column("p99", "p99_ms", Format::Millis),
            column("B/point", "bytes_per_point", Format::Ratio),
            column("run", "run", Format::Text),
        ],
    );
    let runtime = tokio::runtime::Runtime::new()?;
    let in_process = args.server.url.is_none();
    let transport = args.transport;
    runtime.block_on(with_server(ctx, &args.server, |_| {}, async |endpoints| {
        let token = endpoints.token.clone();
        let sent = match transport {
            Transport::Grpc => {
                let url = endpoints
                    .grpc
                    .clone()
                    .context("--grpc-url is needed with --url and --transport grpc")?;
                let mut channels = Vec::new();
                for _ in 0..args.connections.max(1) {
                    channels.push(MetricsServiceClient::connect(url.clone()).await?);
                }
                let send = move |connection: usize, (request, _): (ExportMetricsServiceRequest, usize)| {
                    let mut client = channels[connection % channels.len()].clone();
                    let mut call = tonic::Request::new(request);
                    call.metadata_mut()
                        .insert("x-chingest-database", DATABASE.parse().expect("ASCII"));
                    if let Some(token) = &token {
                        call.metadata_mut()
                            .insert("authorization", format!("Bearer {token}").parse().expect("ASCII"));
                    }
                    async move {
                        let response = client.export(call).await?.into_inner();
                        if let Some(partial) = response.partial_success {
                            bail!("points refused: {}", partial.error_message);
                        }
                        Ok(())
                    }
                };
                let sizes = |(request, points): &(ExportMetricsServiceRequest, usize)| {
                    (*points, request.encoded_len())
                };
                drive(ctx, "otlp", requests, args.connections, sizes, send).await?
            }
            Transport::Http => {
                let url = format!("{}/v1/metrics?db={DATABASE}", endpoints.http);
                let client = http_client()?;
                let bodies: Vec<(Vec<u8>, usize)> = requests
                    .into_iter()
                    .map(|(request, points)| (request.encode_to_vec(), points))
                    .collect();
                let endpoints_for_send = super::server::Endpoints {
                    http: endpoints.http.clone(),
                    grpc: None,
                    clickhouse: None,
                    token,
                };
                let send = move |_: usize, (body, _): (Vec<u8>, usize)| {
                    let request = authorized(
                        &endpoints_for_send,
                        client
                            .post(&url)
                            .header("Content-Type", "application/x-protobuf")
                            .body(body),
                    );
                    async move {
                        let response = request.send().await?;
                        if response.status() != reqwest::StatusCode::OK {
                            let status = response.status();
                            bail!("OTLP/HTTP answered {status}: {}", response.text().await.unwrap_or_default());
                        }
                        Ok(())
                    }
                };
                let sizes = |(body, points): &(Vec<u8>, usize)| (*points, body.len());
                drive(ctx, "otlp", bodies, args.connections, sizes, send).await?
            }
        };
        let visible = wait_visible(endpoints, DATABASE, MEASUREMENT, points as u64)
            .await?
            .duration_since(sent.started);
        let stored = count(endpoints, DATABASE, MEASUREMENT).await?;
        check_stored(&format!("{DATABASE}.{MEASUREMENT}"), points as u64, stored)?;
        let bytes_per_point = match in_process {
            true => Some(bytes_per_value(ctx, DATABASE, MEASUREMENT, points)?),
            false => None,
        };
        report.push(json!({
            "transport": format!("{transport:?}").to_lowercase(),
            "points": sent.rows,
            "series": args.resources * args.points_per_resource,
            "points_per_s": per_second(sent.rows, sent.elapsed),
            "visible_points_per_s": sent.rows as f64 / visible.as_secs_f64().max(1e-9),
            "p50_ms": millis_at(&sent.latencies, 0.5),
            "p99_ms": millis_at(&sent.latencies, 0.99),
            "bytes_per_point": bytes_per_point,
            "run": sent.label,
        }));
        Ok(())
    }))?;
    report.finish();
    Ok(())
}

/// Every request and its point count, in send order: collection by
/// collection, each collection's resources in order, whole resources per
/// request.
fn build_requests(args: &Args) -> Vec<(ExportMetricsServiceRequest, usize)> {
    let mut requests = Vec::new();
    let mut pending = ExportMetricsServiceRequest::default();
    let mut pending_points = 0;
    for scrape in 0..args.scrapes {
        for host in 0..args.resources {
            pending
                .resource_metrics
                .push(host_metrics(host, scrape, args.points_per_resource));
            pending_points += args.points_per_resource;
            if pending_points >= args.points_per_request {
                requests.push((std::mem::take(&mut pending), pending_points));
                pending_points = 0;
            }
        }
    }
    if pending_points > 0 {
        requests.push((pending, pending_points));
    }
    requests
}
