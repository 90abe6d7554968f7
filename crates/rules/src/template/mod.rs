//! Prometheus's alert templates: the Go `text/template` language as
//! Prometheus 2.42 gives it to alerting rules' labels and annotations —
//! `{{ $value }}`, `{{ $labels.x }}`, `{{ $externalLabels.x }}`, `{{ .Value }}`,
//! pipelines, `if`/`else`/`range`/`with`, comparisons, `and`/`or`/`not`,
//! `printf` and Prometheus's functions (`humanize*`, `reReplaceAll`,
//! `match`, `title`, `toUpper`, …). `query` calls a [`Query`] the caller
//! gives (none yet: it fails, saying so).
//!
//! Pure and bounded: no I/O of its own, at most [`Limits::max_steps`]
//! nodes and iterations and [`Limits::max_output`] bytes per expansion.
//!
//! The modules, each importing only those listed before it: `lex`,
//! `literal`, `value`, `printf`, `funcs`, `parse`, `exec`.

mod exec;
mod funcs;
mod lex;
mod literal;
mod parse;
mod printf;
mod value;

pub(crate) use funcs::query_escape;
pub use funcs::{humanize, humanize1024, humanize_duration};
pub use value::{AlertData, Limits, Query, Sample};

use std::sync::Arc;

/// What alerting rules put before each template, as Prometheus does: the
/// variables every template may use.
pub const ALERT_DEFINITIONS: &str = "{{$labels := .Labels}}{{$externalLabels := .ExternalLabels}}{{$externalURL := .ExternalURL}}{{$value := .Value}}";

/// A template that parsed.
#[derive(Debug, Clone)]
pub struct Template {
    name: String,
    text: String,
    tree: parse::Tree,
}

impl Template {
    /// Parses `text`; `name` names it in errors. The error is Go's
    /// (`template: NAME:LINE: reason`).
    pub fn parse(name: &str, text: &str) -> Result<Template, String> {
        let tree = parse::parse(name, text, &funcs::is_defined)?;
        Ok(Template {
            name: name.to_owned(),
            text: text.to_owned(),
            tree,
        })
    }

    /// Runs the template over `data`; the error is Go's (`template:
    /// NAME:LINE:COL: executing "NAME" at <NODE>: reason`).
    pub fn execute(
        &self,
        data: &AlertData,
        query: Option<&dyn Query>,
        limits: Limits,
    ) -> Result<String, String> {
        let mut exec = exec::Exec {
            name: &self.name,
            text: &self.text,
            defined: &self.tree.defined,
            ctx: funcs::CallContext {
                external_url: &data.external_url,
                query,
            },
            limits,
            vars: Vec::new(),
            out: String::new(),
            steps: 0,
            depth: 0,
        };
        exec.run(&self.tree.root, &value::Value::Data(Arc::new(data.clone())))?;
        Ok(exec.out)
    }
}

/// The name Prometheus gives an alerting rule's templates.
pub fn alert_template_name(alert: &str) -> String {
    format!("__alert_{alert}")
}

/// Parses an alerting rule's label or annotation as Prometheus's rule
/// check does (the definitions before it): Go's error when it does not.
pub fn parse_alert_template(name: &str, text: &str) -> Result<Template, String> {
    Template::parse(name, &format!("{ALERT_DEFINITIONS}{text}"))
}

/// Expands an alerting rule's label or annotation as Prometheus does: the
/// text, or the error as Prometheus's `Expand` words it.
pub fn expand_alert_template(
    alert: &str,
    text: &str,
    data: &AlertData,
    query: Option<&dyn Query>,
    limits: Limits,
) -> Result<String, String> {
    let name = alert_template_name(alert);
    let template = parse_alert_template(&name, text)
        .map_err(|err| format!("error parsing template {name}: {err}"))?;
    template
        .execute(data, query, limits)
        .map_err(|err| format!("error executing template {name}: {err}"))
}

/// What Prometheus puts in a label or annotation whose template failed.
pub fn expansion_failure(error: &str) -> String {
    format!("<error expanding template: {error}>")
}
