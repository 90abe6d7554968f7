//! Prometheus recording and alerting rules over chingest: rule files read
//! and checked as Prometheus reads and checks them, the alert template
//! language, the alert state machine, and their evaluation on a schedule
//! over the library's PromQL, recorded series and alerts written back
//! through the ingestor. The server configures it, serves its state
//! (`/api/v1/rules`, `/api/v1/alerts`, `/metrics`) and reloads it
//! (docs/rules.md says what exists and what comes next).
//!
//! The modules, each importing only those listed before it: `gofmt` (Go's
//! quoting and float formatting), `duration` (Prometheus's durations),
//! `yaml` (documents with positions, as yaml.v3 reads them), `template`
//! (the template language), `file` (rule files read and validated),
//! `check` (`promtool check rules`), `alert` (the alert state machine),
//! `settings` (how rules are evaluated), `load` (a server's rule files),
//! `backfill` (recording rules over a past range, through a server's API),
//! `group` (one group's evaluation), `notify` (alerts to Alertmanager),
//! `manager` (groups on their schedule, reloads), `unittest` (`promtool
//! test rules`, over series in memory).

pub mod alert;
pub mod backfill;
pub mod check;
mod decode;
pub mod duration;
mod file;
pub mod gofmt;
pub mod group;
pub mod load;
pub mod manager;
pub mod notify;
mod settings;
pub mod template;
pub mod unittest;
mod yaml;

pub use settings::Settings;

pub use file::{
    is_valid_label_name, is_valid_metric_name, parse, Alerting, Group, Pairs, Problem, Rule,
    RuleFile, RuleKind,
};
