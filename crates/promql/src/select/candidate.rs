//! Where a metric's samples may be ([`Candidate`]): a numeric field of a
//! measurement and how its series are named, found from the matchers'
//! metric name; its tables, and which matchers are said on its tags (in
//! SQL or to the index) rather than checked in memory.

use chingest::layout::names::{quote_literal, TableNames};
use chingest::layout::schema::FieldType;
use chingest_codecs::{otlp, prometheus as remote_write};

use super::matcher::LabelMatcher;
use super::source::{ms_to_ns, Source};
use crate::naming::{self, Shape};
use crate::value::METRIC_NAME;

/// How a measurement's series are named in PromQL.
pub(super) enum Naming {
    /// By their `__name__` tag (remote write's shape).
    Tag,
    /// All alike: `<measurement>_<field>`.
    Fixed(String),
    /// OTLP's: by their `metric_name` tag, its unit and (sums) whether it
    /// is monotonic ([`naming::otlp_metric_name`]).
    Otlp {
        /// Gauges (else sums).
        gauge: bool,
    },
}

/// Where one metric's samples are: a numeric field of a measurement, and
/// how its series are named.
pub(super) struct Candidate {
    pub(super) names: TableNames,
    pub(super) measurement: String,
    pub(super) field: String,
    pub(super) naming: Naming,
    pub(super) tag_keys: Vec<String>,
    /// Whether some of its rows leave the field empty (a measurement of
    /// several fields): a series is the metric's only where it has a value.
    pub(super) sparse: bool,
}

impl Source<'_> {
    /// A measurement of remote write's shape (labels as tags, `__name__`
    /// among them), if the database has it.
    pub(super) fn prometheus_shaped(
        &self,
        measurement: &str,
        field: &str,
    ) -> Option<(Candidate, chingest::MeasurementSchema)> {
        let schema =
            self.ingestor
                .measurement((&self.database, &self.retention_policy, measurement))?;
        let candidate = Candidate {
            names: TableNames::new(&self.database, &self.retention_policy, measurement),
            measurement: measurement.to_owned(),
            field: field.to_owned(),
            naming: Naming::Tag,
            tag_keys: schema.tag_keys.clone(),
            sparse: false,
        };
        Some((candidate, schema))
    }

    /// The metric sources whose name the matchers may select.
    pub(super) fn candidates(&self, matchers: &[LabelMatcher]) -> Vec<Candidate> {
        let schemas = self
            .ingestor
            .measurements(&self.database, &self.retention_policy);
        let mut out = Vec::new();
        for schema in schemas {
            let names = || TableNames::new(&self.database, &self.retention_policy, &schema.name);
            let one_field = match naming::shape(&schema.name) {
                Shape::RemoteWrite => Some((remote_write::VALUE, Naming::Tag)),
                Shape::Otlp { gauge } => Some((otlp::VALUE, Naming::Otlp { gauge })),
                Shape::Other => continue,
                Shape::Plain => None,
            };
            if let Some((field, naming)) = one_field {
                out.push(Candidate {
                    names: names(),
                    measurement: schema.name.clone(),
                    field: field.to_owned(),
                    naming,
                    tag_keys: schema.tag_keys.clone(),
                    sparse: false,
                });
                continue;
            }
            for (field, kind) in &schema.fields {
                let numeric = matches!(
                    kind,
                    FieldType::Float
                        | FieldType::Integer
                        | FieldType::UInteger
                        | FieldType::Boolean
                );
                let metric = naming::metric_name(&schema.name, field);
                let named = matchers
                    .iter()
                    .filter(|m| m.name == METRIC_NAME)
                    .all(|m| m.matches(&metric));
                if numeric && named {
                    out.push(Candidate {
                        names: names(),
                        measurement: schema.name.clone(),
                        field: field.clone(),
                        naming: Naming::Fixed(metric),
                        tag_keys: schema.tag_keys.clone(),
                        sparse: schema.fields.len() > 1,
                    });
                }
            }
        }
        out
    }

    /// The series table's condition for a candidate's series: the
    /// matchers it can say in SQL (the rest are checked in memory).
    pub(super) fn series_condition(
        &self,
        candidate: &Candidate,
        matchers: &[LabelMatcher],
    ) -> String {
        let mut conditions = vec![format!(
            "measurement = {}",
            quote_literal(&candidate.measurement)
        )];
        for m in matchers {
            if self.pushed_down(candidate, m) {
                conditions.push(m.sql(&m.name));
            }
        }
        conditions.join(" AND ")
    }

    /// The candidate's table, as the ingestor's memory reads name it.
    pub(super) fn table_of<'c>(&'c self, candidate: &'c Candidate) -> (&'c str, &'c str, &'c str) {
        (
            &self.database,
            &self.retention_policy,
            &candidate.measurement,
        )
    }

    /// Whether the matcher is said on the candidate's tags (in SQL or to
    /// the index): its label is a tag key as written, or no tag's label.
    pub(super) fn pushed_down(&self, candidate: &Candidate, m: &LabelMatcher) -> bool {
        let named_by_tag = match candidate.naming {
            Naming::Tag => true,
            Naming::Fixed(_) => m.name != METRIC_NAME,
            // Its labels are made from its tags: all checked in memory.
            Naming::Otlp { .. } => false,
        };
        // A label no tag key is named after reads as "" in SQL and in
        // memory alike; one that is a renamed key is left to memory.
        let renamed = !candidate.tag_keys.contains(&m.name)
            && candidate
                .tag_keys
                .iter()
                .any(|k| naming::label_name(k) == m.name);
        named_by_tag && !renamed
    }

    /// `candidate`'s facts for reading its field over `range` (ms): its
    /// table, or where a downsampled database's rows are gone, its
    /// rollups' buckets as rows too (docs/downsampling.md).
    pub(super) fn facts(&self, candidate: &Candidate, range: Option<(i64, i64)>) -> String {
        let (database, rp, measurement) = self.table_of(candidate);
        let table = &candidate.names.storage_table;
        let (start, end) = range.map_or((i64::MIN, i64::MAX), |(start, end)| {
            let (start, end) = ms_to_ns(start, end);
            (start, end.saturating_add(1))
        });
        self.ingestor
            .rollups((database, rp, measurement))
            .and_then(|view| {
                let field = view.fields.iter().find(|(f, _)| *f == candidate.field)?;
                view.rows_sql(table, std::slice::from_ref(field), start, end)
            })
            .unwrap_or_else(|| table.clone())
    }
}
