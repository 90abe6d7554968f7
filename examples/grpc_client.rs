//! A gRPC client of a running chingest (`make run` starts one): writes typed
//! points with `Write`, then an Arrow table with `WriteArrow`, and prints
//! the curl command that reads the rows back through `/sql`.
//!
//! ```sh
//! cargo run -p chingest-examples --example grpc_client
//! CHINGEST_GRPC_URL=http://host:8087 CHINGEST_TOKEN=secret cargo run -p chingest-examples --example grpc_client
//! ```

use std::sync::Arc;

use arrow::array::{ArrayRef, Float64Array, RecordBatch, StringArray, TimestampNanosecondArray};
use arrow::ipc::writer::StreamWriter;
use chingest_proto::v1::ingest_client::IngestClient;
use chingest_proto::v1::{
    field_value, write_request, ArrowTarget, Point, Points, WriteArrowRequest, WriteRequest,
};
use tonic::Request;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let url = std::env::var("CHINGEST_GRPC_URL").unwrap_or_else(|_| "http://127.0.0.1:8087".into());
    let token = std::env::var("CHINGEST_TOKEN").ok();
    let authorized = |request: &mut tonic::metadata::MetadataMap| -> anyhow::Result<()> {
        if let Some(token) = &token {
            request.insert("authorization", format!("Token {token}").parse()?);
        }
        Ok(())
    };
    let mut client = IngestClient::connect(url.clone()).await?;

    // Typed points: what one line of line protocol says, without the text.
    let point = |host: &str, usage: f64| {
        Point::new("cpu", None) // no timestamp: the server's clock
            .tag("host", host)
            .field("usage", field_value::Value::Float(usage))
    };
    let mut request = Request::new(WriteRequest {
        database: "grpc_example".into(),
        data: Some(write_request::Data::Points(Points {
            points: vec![point("a", 0.5), point("b", 0.25)],
        })),
        ..Default::default()
    });
    authorized(request.metadata_mut())?;
    let reply = client.write(request).await?.into_inner();
    println!(
        "Write: {} points stored, {} rejected",
        reply.accepted, reply.rejected
    );

    // An Arrow table, sent as an IPC stream: it reaches the engine without
    // ever becoming rows.
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)?
        .as_nanos() as i64;
    let columns: Vec<(&str, ArrayRef)> = vec![
        (
            "time",
            Arc::new(TimestampNanosecondArray::from(vec![now, now + 1, now + 2])),
        ),
        ("host", Arc::new(StringArray::from(vec!["a", "b", "c"]))),
        (
            "usage",
            Arc::new(Float64Array::from(vec![0.75, 0.5, 0.125])),
        ),
    ];
    let batch = RecordBatch::try_from_iter(columns)?;
    let mut ipc = Vec::new();
    let mut writer = StreamWriter::try_new(&mut ipc, &batch.schema())?;
    writer.write(&batch)?;
    writer.finish()?;
    drop(writer);
    let first = WriteArrowRequest {
        target: Some(ArrowTarget {
            database: "grpc_example".into(),
            measurement: "cpu".into(),
            tag_columns: vec!["host".into()],
            ..Default::default()
        }),
        ipc: ipc.into(),
    };
    let mut request = Request::new(tokio_stream::iter(vec![first]));
    authorized(request.metadata_mut())?;
    let reply = client.write_arrow(request).await?.into_inner();
    println!(
        "WriteArrow: {} rows in {} batches stored",
        reply.rows, reply.batches
    );
    println!(
        "Read them back: curl --get http://127.0.0.1:8086/sql --data-urlencode \
         'query=SELECT time, host, usage FROM grpc_example.cpu ORDER BY time'"
    );
    Ok(())
}
