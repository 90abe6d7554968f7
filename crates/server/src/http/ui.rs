//! The web UI (`ui/`, its own README): its files, embedded in the binary
//! at build time, served under `/ui/`, and `/api/v1/access`, which tells
//! it what the caller's token may do. The UI reads and writes through the
//! same API as any client; nothing here answers a query.

use axum::extract::{Path, State};
use axum::http::{header, HeaderMap, HeaderValue, StatusCode};
use axum::response::{IntoResponse, Redirect, Response};
use axum::Json;
use serde_json::{json, Value};

use crate::error::{ApiError, Flavor};
use crate::state::AppState;

/// One file of `ui/`.
struct Asset {
    /// Its path under `ui/` (and under `/ui/assets/`).
    path: &'static str,
    content_type: &'static str,
    bytes: &'static [u8],
}

macro_rules! asset {
    ($path:literal, $content_type:expr) => {
        Asset {
            path: $path,
            content_type: $content_type,
            bytes: include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/../../ui/", $path)),
        }
    };
}

const JS: &str = "text/javascript; charset=utf-8";

/// Every file of `ui/` but its README (a test checks the list is whole).
const ASSETS: &[Asset] = &[
    asset!("index.html", "text/html; charset=utf-8"),
    asset!("app.css", "text/css; charset=utf-8"),
    asset!("favicon.svg", "image/svg+xml"),
    asset!("js/alerts.js", JS),
    asset!("js/api.js", JS),
    asset!("js/app.js", JS),
    asset!("js/chart.js", JS),
    asset!("js/dom.js", JS),
    asset!("js/explore.js", JS),
    asset!("js/query.js", JS),
    asset!("js/status.js", JS),
    asset!("js/write.js", JS),
];

/// The pages: each is `index.html`, which draws the one its path names.
const PAGES: &[&str] = &["", "query", "explore", "alerts", "status", "write"];

/// Only the server's own scripts, styles and API: a label value or a query
/// result can never run as code, and the page cannot be framed.
const CONTENT_SECURITY_POLICY: &str = "default-src 'none'; script-src 'self'; style-src 'self'; \
     img-src 'self' data:; connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'";

/// `GET /` and `GET /ui`: to the UI.
pub(super) async fn home() -> Redirect {
    Redirect::temporary("/ui/")
}

/// `GET /ui/` and `GET /ui/{page}`: the UI's page.
pub(super) async fn page(page: Option<Path<String>>, headers: HeaderMap) -> Response {
    let name = page.map(|Path(name)| name).unwrap_or_default();
    match PAGES.contains(&name.as_str()) {
        true => serve("index.html", &headers),
        false => (StatusCode::NOT_FOUND, "no such page").into_response(),
    }
}

/// `GET /ui/assets/{*path}`: one of the UI's files.
pub(super) async fn file(Path(path): Path<String>, headers: HeaderMap) -> Response {
    serve(&path, &headers)
}

fn serve(path: &str, headers: &HeaderMap) -> Response {
    let Some(asset) = ASSETS.iter().find(|asset| asset.path == path) else {
        return (StatusCode::NOT_FOUND, "no such file").into_response();
    };
    // Revalidated every time (`no-cache`): a new binary's files are used at
    // once, and an unchanged file costs a 304.
    let etag = format!("\"{:016x}\"", xxhash_rust::xxh3::xxh3_64(asset.bytes));
    let fresh = headers
        .get(header::IF_NONE_MATCH)
        .is_some_and(|value| value.as_bytes() == etag.as_bytes());
    let mut response = match fresh {
        true => StatusCode::NOT_MODIFIED.into_response(),
        false => asset.bytes.into_response(),
    };
    let set = response.headers_mut();
    set.insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static(asset.content_type),
    );
    set.insert(header::CACHE_CONTROL, HeaderValue::from_static("no-cache"));
    set.insert(
        header::ETAG,
        HeaderValue::from_str(&etag).expect("hex in quotes"),
    );
    set.insert(
        header::CONTENT_SECURITY_POLICY,
        HeaderValue::from_static(CONTENT_SECURITY_POLICY),
    );
    set.insert(
        header::X_CONTENT_TYPE_OPTIONS,
        HeaderValue::from_static("nosniff"),
    );
    set.insert(
        header::REFERRER_POLICY,
        HeaderValue::from_static("no-referrer"),
    );
    response
}

/// `GET /api/v1/access`: what the request's token may do — `auth` (whether
/// the server asks for tokens), `read`, `write`, `admin`, and `databases`
/// (`null`: every one). 401 without a token the server accepts.
pub(super) async fn access(
    State(state): State<AppState>,
    headers: HeaderMap,
) -> Result<Json<Value>, ApiError> {
    let grant = state.authorize(&headers, None, Flavor::V1)?;
    let access = grant.access();
    let databases = match &access.scope {
        chingest::ReadScope::All => Value::Null,
        chingest::ReadScope::Databases(list) => json!(list),
    };
    let config = &state.config;
    Ok(Json(json!({
        "auth": !(config.auth_tokens.is_empty() && config.tokens.is_empty()),
        "read": access.read,
        "write": access.write,
        "admin": grant.require_admin().is_ok(),
        "databases": databases,
        // Where PromQL reads when a request names no database: the
        // rules' database, which the Alerts page links queries to.
        "promqlDatabase": config.promql.default_database,
    })))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every file of `ui/` is served, and only once: a file added there
    /// and not here would be missing from the binary.
    #[test]
    fn every_file_of_the_ui_is_embedded() {
        let root = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("../../ui");
        let mut on_disk = Vec::new();
        let mut folders = vec![root.clone()];
        while let Some(folder) = folders.pop() {
            for entry in std::fs::read_dir(&folder).unwrap() {
                let path = entry.unwrap().path();
                if path.is_dir() {
                    folders.push(path);
                } else if path.file_name().unwrap() != "README.md" {
                    let relative = path.strip_prefix(&root).unwrap();
                    on_disk.push(relative.to_str().unwrap().replace('\\', "/"));
                }
            }
        }
        on_disk.sort();
        let mut served: Vec<String> = ASSETS.iter().map(|a| a.path.to_owned()).collect();
        served.sort();
        assert_eq!(served, on_disk);
    }
}
