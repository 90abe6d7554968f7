//! Series and samples out of the engine: label matchers pushed down to SQL
//! over a database's series table and fact tables (read-only connections,
//! the query limits), checked again in memory, the answer bounded by
//! [`Limits`]. What PromQL, the series and label lookups and remote read
//! all read.

use std::collections::HashMap;
use std::time::Duration;

use arrow::array::{Array, AsArray as _};
use arrow::datatypes::{DataType, Float64Type, Int64Type, UInt64Type};
use arrow::record_batch::RecordBatch;
use chingest::layout::names::{quote_ident, quote_literal, TableNames};
use chingest::layout::rollup::{time_in_sql, Aggregate as Kept, Rollup};
use chingest::layout::schema::FieldType;
use chingest::{Access, Ingestor, Keeps, RollupView, TagMatcher, TagTest};
use chingest_codecs::{otlp, prometheus as remote_write};
use promql_parser::label::{MatchOp, Matcher};

use std::sync::atomic::{AtomicUsize, Ordering};

use crate::cache::ResultCache;
use crate::error::Error;
use crate::eval::Thinned;
use crate::naming::{self, Shape};
use crate::selected::{Samples, Selected};
use crate::value::{Labels, Series, METRIC_NAME};

/// How much one query may read.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Limits {
    /// Series selected, over all of the query's selectors.
    pub max_series: usize,
    /// Samples read, over all of the query's selectors.
    pub max_samples: usize,
}

impl Default for Limits {
    /// VictoriaMetrics' bound on series (its `-search.maxUniqueTimeseries`):
    /// a fifth of a million-series fleet summed at once; Prometheus's on
    /// samples (its `query.max-samples`).
    fn default() -> Self {
        Limits {
            max_series: 300_000,
            max_samples: 50_000_000,
        }
    }
}

/// Where a request reads: the database and retention policy, with what
/// the caller may do checked.
pub struct Source<'a> {
    /// What is read.
    pub ingestor: &'a Ingestor,
    /// The database.
    pub database: String,
    /// Its retention policy read.
    pub retention_policy: String,
    /// The bounds of one query.
    pub limits: Limits,
    /// Where range queries' settled steps are kept between requests.
    pub cache: Option<&'a ResultCache>,
    /// Engine statements this source has run: a result read wholly from
    /// memory ran none.
    statements: AtomicUsize,
}

impl<'a> Source<'a> {
    /// The source of `database` (its `retention_policy`), if the caller
    /// may read it.
    pub fn new(
        ingestor: &'a Ingestor,
        access: &Access,
        database: &str,
        retention_policy: &str,
        limits: Limits,
    ) -> Result<Source<'a>, Error> {
        access.require_read_of(database)?;
        Ok(Source {
            ingestor,
            database: database.to_owned(),
            retention_policy: retention_policy.to_owned(),
            limits,
            cache: None,
            statements: AtomicUsize::new(0),
        })
    }

    /// The same source, keeping range queries' settled steps in `cache`.
    pub fn with_cache(self, cache: &'a ResultCache) -> Source<'a> {
        Source {
            cache: Some(cache),
            ..self
        }
    }

    /// Engine statements run so far.
    pub(crate) fn statements(&self) -> usize {
        self.statements.load(Ordering::Relaxed)
    }

    /// Runs one engine statement (read-only connections, the query
    /// limits), counted.
    async fn statement(&self, sql: &str) -> Result<Vec<RecordBatch>, Error> {
        self.statements.fetch_add(1, Ordering::Relaxed);
        Ok(self.ingestor.query_translated(sql).await?)
    }
}

/// A label matcher, from a query's selector or a remote-read request.
#[derive(Debug, Clone)]
pub struct LabelMatcher {
    /// The label.
    pub name: String,
    /// How the value is compared.
    pub kind: MatchKind,
    /// The value or the pattern, as given.
    pub value: String,
    regex: Option<regex::Regex>,
}

/// The four matchers of PromQL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum MatchKind {
    /// `=`
    Equal,
    /// `!=`
    NotEqual,
    /// `=~` (anchored at both ends)
    Regex,
    /// `!~`
    NotRegex,
}

impl LabelMatcher {
    /// A matcher; patterns are compiled anchored, as Prometheus's.
    pub fn new(name: &str, kind: MatchKind, value: &str) -> Result<LabelMatcher, Error> {
        let regex = match kind {
            MatchKind::Regex | MatchKind::NotRegex => Some(
                regex::RegexBuilder::new(&format!("^(?:{value})$"))
                    .size_limit(1 << 20)
                    .build()
                    .map_err(|err| {
                        Error::BadData(format!("invalid regular expression {value:?}: {err}"))
                    })?,
            ),
            _ => None,
        };
        Ok(LabelMatcher {
            name: name.to_owned(),
            kind,
            value: value.to_owned(),
            regex,
        })
    }

    /// The matchers of a parsed selector, its metric name included.
    pub fn of_selector(
        name: Option<&str>,
        matchers: &[Matcher],
    ) -> Result<Vec<LabelMatcher>, Error> {
        let mut out: Vec<LabelMatcher> = name
            .map(|n| LabelMatcher::new(METRIC_NAME, MatchKind::Equal, n))
            .into_iter()
            .collect::<Result<_, _>>()?;
        for m in matchers {
            let kind = match m.op {
                MatchOp::Equal => MatchKind::Equal,
                MatchOp::NotEqual => MatchKind::NotEqual,
                MatchOp::Re(_) => MatchKind::Regex,
                MatchOp::NotRe(_) => MatchKind::NotRegex,
            };
            out.push(LabelMatcher::new(&m.name, kind, &m.value)?);
        }
        Ok(out)
    }

    /// Whether a label's value (`""` when absent) matches.
    pub fn matches(&self, value: &str) -> bool {
        match (self.kind, &self.regex) {
            (MatchKind::Equal, _) => value == self.value,
            (MatchKind::NotEqual, _) => value != self.value,
            (MatchKind::Regex, Some(re)) => re.is_match(value),
            (MatchKind::NotRegex, Some(re)) => !re.is_match(value),
            _ => false,
        }
    }

    /// The condition over the series table's `tags` that selects what this
    /// matcher selects, or `None` when it cannot say it there.
    fn sql(&self, tag: &str) -> String {
        let value = format!("tags[{}]", quote_literal(tag));
        let literal = quote_literal(&self.value);
        match self.kind {
            MatchKind::Equal => format!("{value} = {literal}"),
            MatchKind::NotEqual => format!("{value} != {literal}"),
            // Go's RE2, as the engine's: `.` does not match a newline there
            // unless asked (`(?s)`), and patterns are anchored.
            MatchKind::Regex | MatchKind::NotRegex => {
                let pattern = quote_literal(&format!("^(?-s:{})$", self.value));
                let negate = if self.kind == MatchKind::NotRegex {
                    "NOT "
                } else {
                    ""
                };
                format!("{negate}match({value}, {pattern})")
            }
        }
    }
}

/// How a measurement's series are named in PromQL.
enum Naming {
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
struct Candidate {
    names: TableNames,
    measurement: String,
    field: String,
    naming: Naming,
    tag_keys: Vec<String>,
    /// Whether some of its rows leave the field empty (a measurement of
    /// several fields): a series is the metric's only where it has a value.
    sparse: bool,
}

/// An exemplar: its own labels (`trace_id`, …), value and time (ms).
#[derive(Debug, Clone, PartialEq)]
pub struct Exemplar {
    /// The exemplar's labels.
    pub labels: Labels,
    /// Its value.
    pub value: f64,
    /// Its time, ms since the epoch.
    pub time: i64,
}

/// A metric family's metadata, as remote write sent it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Metadata {
    /// The family's name.
    pub metric: String,
    /// `counter`, `gauge`, …
    pub kind: String,
    /// Its help text.
    pub help: String,
    /// Its unit.
    pub unit: String,
}

/// Samples (ms, value) by series id, one per ms: the engine may hold
/// several (retried writes under the `append` policy, ns times), of which
/// the last read wins ([`dedup_last`]).
type SamplesById = HashMap<u64, Vec<(i64, f64)>>;

/// Most series ids a statement lists (about 21 bytes each, well inside
/// the engine's statement size); more are selected by a subquery.
const MAX_LISTED_IDS: usize = 5_000;

impl Source<'_> {
    /// A measurement of remote write's shape (labels as tags, `__name__`
    /// among them), if the database has it.
    fn prometheus_shaped(
        &self,
        measurement: &str,
        field: &str,
    ) -> Option<(Candidate, chingest::MeasurementSchema)> {
        let schema =
            self.ingestor
                .measurement(&self.database, &self.retention_policy, measurement)?;
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

    /// The exemplars of the series the matchers select, in `[start, end]`
    /// (ms), by series; each series' in time order.
    pub async fn exemplars(
        &self,
        matchers: &[LabelMatcher],
        start: i64,
        end: i64,
        series_budget: &mut usize,
    ) -> Result<Vec<(Labels, Vec<Exemplar>)>, Error> {
        let Some((candidate, schema)) =
            self.prometheus_shaped(remote_write::EXEMPLARS, remote_write::VALUE)
        else {
            return Ok(Vec::new());
        };
        let found = self
            .candidate_series(&candidate, matchers, None, series_budget, Overflow::Refuse)
            .await?;
        if found.is_empty() {
            return Ok(Vec::new());
        }
        let label_fields: Vec<&String> = schema
            .fields
            .iter()
            .filter(|(_, kind)| *kind == FieldType::String)
            .map(|(name, _)| name)
            .collect();
        let columns: String = label_fields
            .iter()
            .map(|f| format!(", toString(ifNull({}, ''))", quote_ident(f)))
            .collect();
        let sql = format!(
            "SELECT series_id, toUnixTimestamp64Milli(time), toFloat64({value}){columns} FROM {facts} \
             WHERE series_id IN (SELECT series_id FROM {series} FINAL WHERE {condition}) AND {time} \
             ORDER BY series_id, time LIMIT {limit}",
            value = quote_ident(&candidate.field),
            facts = candidate.names.storage_table,
            series = candidate.names.series_table,
            condition = self.series_condition(&candidate, matchers),
            time = time_condition(start, end),
            limit = self.limits.max_samples,
        );
        let batches = self.statement(&sql).await?;
        let mut by_series: HashMap<u64, Vec<Exemplar>> = HashMap::new();
        for batch in &batches {
            let ids = batch.column(0).as_primitive::<UInt64Type>();
            let times = batch.column(1).as_primitive::<Int64Type>();
            let values = batch.column(2).as_primitive::<Float64Type>();
            let texts: Vec<Vec<String>> = (3..batch.num_columns())
                .map(|c| strings(batch.column(c).as_ref()))
                .collect();
            for row in 0..batch.num_rows() {
                let id = ids.value(row);
                if !found.contains_key(&id) {
                    continue;
                }
                let labels = label_fields
                    .iter()
                    .zip(&texts)
                    .map(|(name, column)| ((*name).clone(), column[row].clone()))
                    .collect();
                by_series.entry(id).or_default().push(Exemplar {
                    labels: Labels::new(labels),
                    value: values.value(row),
                    time: times.value(row),
                });
            }
        }
        let mut out: Vec<(Labels, Vec<Exemplar>)> = by_series
            .into_iter()
            .map(|(id, exemplars)| (found[&id].clone(), exemplars))
            .collect();
        out.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(out)
    }

    /// The metadata of each metric family (the newest of each), sorted by
    /// name; of `metric` only when given.
    pub async fn metadata(&self, metric: Option<&str>) -> Result<Vec<Metadata>, Error> {
        let [kind, help, unit] = remote_write::METADATA_FIELDS;
        let Some((candidate, schema)) = self.prometheus_shaped(remote_write::METADATA, kind) else {
            return Ok(Vec::new());
        };
        let column = |name: &str| {
            if schema.fields.iter().any(|(f, _)| f == name) {
                format!(
                    "toString(argMax(ifNull({}, ''), f.time))",
                    quote_ident(name)
                )
            } else {
                "''".to_owned()
            }
        };
        let tag = quote_literal(remote_write::METADATA_METRIC);
        let filter = metric.map_or(String::new(), |m| {
            format!(" AND tags[{tag}] = {}", quote_literal(m))
        });
        let sql = format!(
            "SELECT s.tags[{tag}] AS metric, {kind}, {help}, {unit} FROM {facts} AS f \
             INNER JOIN (SELECT series_id, tags FROM {series} FINAL WHERE measurement = {measurement}{filter}) AS s \
             USING series_id GROUP BY metric ORDER BY metric",
            kind = column(kind),
            help = column(help),
            unit = column(unit),
            facts = candidate.names.storage_table,
            series = candidate.names.series_table,
            measurement = quote_literal(remote_write::METADATA),
        );
        let batches = self.statement(&sql).await?;
        let mut out = Vec::new();
        for batch in &batches {
            let [metric, kind, help, unit] =
                [0, 1, 2, 3].map(|c| strings(batch.column(c).as_ref()));
            for (((metric, kind), help), unit) in metric.into_iter().zip(kind).zip(help).zip(unit) {
                out.push(Metadata {
                    metric,
                    kind,
                    help,
                    unit,
                });
            }
        }
        Ok(out)
    }

    /// The first and last sample times (ms) of remote write's samples, if
    /// there are any.
    pub async fn time_bounds(&self) -> Result<Option<(i64, i64)>, Error> {
        let Some((candidate, _)) =
            self.prometheus_shaped(remote_write::SAMPLES, remote_write::VALUE)
        else {
            return Ok(None);
        };
        let sql = format!(
            "SELECT toUnixTimestamp64Milli(min(time)), toUnixTimestamp64Milli(max(time)), count() FROM {}",
            candidate.names.storage_table
        );
        let batches = self.statement(&sql).await?;
        let Some(batch) = batches.iter().find(|b| b.num_rows() > 0) else {
            return Ok(None);
        };
        let count = batch.column(2).as_primitive::<UInt64Type>().value(0);
        let min = batch.column(0).as_primitive::<Int64Type>().value(0);
        let max = batch.column(1).as_primitive::<Int64Type>().value(0);
        Ok((count > 0).then_some((min, max)))
    }

    /// The metric sources whose name the matchers may select.
    fn candidates(&self, matchers: &[LabelMatcher]) -> Vec<Candidate> {
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
    fn series_condition(&self, candidate: &Candidate, matchers: &[LabelMatcher]) -> String {
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

    /// The series of `candidate` the matchers select, by id; bounded by
    /// `budget` (series left for the query), past which `overflow` says
    /// what happens.
    async fn candidate_series(
        &self,
        candidate: &Candidate,
        matchers: &[LabelMatcher],
        range: Option<(i64, i64)>,
        budget: &mut usize,
        overflow: Overflow,
    ) -> Result<HashMap<u64, Labels>, Error> {
        if let Some(found) = self.indexed_series(candidate, matchers, range, budget, overflow)? {
            return Ok(found);
        }
        let mut sql = format!(
            "SELECT series_id, mapKeys(tags), mapValues(tags) FROM {} FINAL WHERE {}",
            candidate.names.series_table,
            self.series_condition(candidate, matchers)
        );
        let mut facts = Vec::new();
        if let Some((start, end)) = range {
            facts.push(time_condition(start, end));
        }
        if candidate.sparse {
            facts.push(format!("{} IS NOT NULL", quote_ident(&candidate.field)));
        }
        if !facts.is_empty() {
            sql.push_str(&format!(
                " AND series_id IN (SELECT series_id FROM {} WHERE {})",
                self.facts(candidate, range),
                facts.join(" AND ")
            ));
        }
        sql.push_str(&format!(" LIMIT {}", budget.saturating_add(1)));
        let batches = self.statement(&sql).await?;
        let otlp = match candidate.naming {
            Naming::Otlp { gauge } => Some((gauge, self.otlp_names(candidate, gauge).await?)),
            _ => None,
        };
        let mut out = HashMap::new();
        'batches: for batch in &batches {
            let ids = batch.column(0).as_primitive::<UInt64Type>();
            let keys = batch.column(1).as_list::<i32>();
            let values = batch.column(2).as_list::<i32>();
            for row in 0..batch.num_rows() {
                let id = ids.value(row);
                let keys = strings(&keys.value(row));
                let values = strings(&values.value(row));
                let labels = match (&candidate.naming, &otlp) {
                    (Naming::Otlp { .. }, Some((gauge, names))) => {
                        otlp_labels(keys, values, *gauge, names, id)
                    }
                    (naming, _) => plain_labels(naming, keys.into_iter().zip(values)),
                };
                if matchers.iter().all(|m| m.matches(labels.get(&m.name))) {
                    if !overflow.take(budget, self.limits.max_series)? {
                        break 'batches;
                    }
                    out.insert(id, labels);
                }
            }
        }
        Ok(out)
    }

    /// The series of `candidate` the matchers select, from the ingestor's
    /// in-memory index (no engine statement), with a value of the field in
    /// `range` (ms) if given, judged by each series' first and newest value
    /// (as Prometheus judges by its chunks' bounds). `None`: the
    /// measurement is not indexed now (or its names need the engine, as
    /// OTLP's do): ask the engine.
    fn indexed_series(
        &self,
        candidate: &Candidate,
        matchers: &[LabelMatcher],
        range: Option<(i64, i64)>,
        budget: &mut usize,
        overflow: Overflow,
    ) -> Result<Option<HashMap<u64, Labels>>, Error> {
        let range = range.map(|(start, end)| ms_to_ns(start, end));
        // What the index can say; everything is checked again on the
        // labels below (a renamed tag, the metric name of a field).
        let Some(indexed) =
            self.with_index_matchers(candidate, matchers, false, |table, pushed| {
                self.ingestor
                    .indexed_series(table, pushed, &candidate.field, range)
            })
        else {
            return Ok(None);
        };
        let mut out = HashMap::with_capacity(indexed.len());
        for series in indexed {
            let labels = plain_labels(&candidate.naming, series.tags.into_iter());
            if !matchers.iter().all(|m| m.matches(labels.get(&m.name))) {
                continue;
            }
            if !overflow.take(budget, self.limits.max_series)? {
                break;
            }
            out.insert(series.series_id, labels);
        }
        Ok(Some(out))
    }

    /// The candidate's table, as the ingestor's memory reads name it.
    fn table_of<'c>(&'c self, candidate: &'c Candidate) -> (&'c str, &'c str, &'c str) {
        (
            &self.database,
            &self.retention_policy,
            &candidate.measurement,
        )
    }

    /// Whether the matcher is said on the candidate's tags (in SQL or to
    /// the index): its label is a tag key as written, or no tag's label.
    fn pushed_down(&self, candidate: &Candidate, m: &LabelMatcher) -> bool {
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

    /// The samples of `found`'s series of `candidate` in `[start, end]`
    /// (ms), by id: from the ingestor's memory (recent samples and, unless
    /// rollups answer, the chunk cache, as far back as it answers), and
    /// from the engine for the part before (a statement only then).
    async fn samples(
        &self,
        candidate: &Candidate,
        matchers: &[LabelMatcher],
        found: &HashMap<u64, Labels>,
        (start, end): (i64, i64),
        thin: Option<Thinning>,
        budget: &mut usize,
    ) -> Result<HashMap<u64, Samples>, Error> {
        let table = self.table_of(candidate);
        let ids: Vec<u64> = found.keys().copied().collect();
        let range = ms_to_ns(start, end);
        let level = thin.and_then(|thin| self.thin_level(candidate, thin));
        // Where rollups answer, they are the cheaper read of what memory
        // does not hold (as InfluxQL reads them).
        let in_memory = match level {
            Some(_) => {
                let field = &candidate.field;
                self.ingestor
                    .recent_compressed(table, field, &ids, range, 1_000_000)
            }
            None => {
                self.ingestor
                    .samples_compressed(
                        table,
                        &candidate.field,
                        &ids,
                        range,
                        (1_000_000, self.limits.max_samples),
                    )
                    .await?
            }
        };
        let Some(in_memory) = in_memory else {
            let read = self
                .engine_samples(
                    candidate,
                    matchers,
                    found,
                    (start, end),
                    level.as_ref(),
                    budget,
                )
                .await?;
            return Ok(of_decoded(read));
        };
        // Memory from its first whole ms on; the engine before it. Read
        // from a rollup, the engine's part ends on a bucket's edge, so no
        // row before memory's start is read.
        let mut from = in_memory.from_ns.div_euclid(1_000_000)
            + i64::from(in_memory.from_ns.rem_euclid(1_000_000) > 0);
        let thinned = level
            .as_ref()
            .map(|level| (level.thinned, level.width().as_millis() as i64));
        if let Some((_, width)) = thinned {
            from = from.saturating_add(width - 1).div_euclid(width) * width;
        }
        let mut out = match from > start {
            true => {
                let range = (start, (from - 1).min(end));
                let read = self
                    .engine_samples(candidate, matchers, found, range, level.as_ref(), budget)
                    .await?;
                of_decoded(read)
            }
            false => HashMap::new(),
        };
        // Kept compressed where memory's samples are taken whole.
        let whole = thinned.is_none() && from.checked_mul(1_000_000) == Some(in_memory.from_ns);
        for (id, compressed) in ids.into_iter().zip(in_memory.samples) {
            if compressed.is_empty() {
                continue;
            }
            if whole {
                take(budget, compressed.len(), self.limits.max_samples)?;
                out.entry(id).or_default().push_compressed(compressed);
                continue;
            }
            let mut samples = Vec::new();
            compressed.decode_into(&mut samples);
            samples.drain(..samples.partition_point(|(ms, _)| *ms < from));
            let samples = match thinned {
                Some((kind, width)) => thin_samples(samples, kind, width),
                None => samples,
            };
            take_samples(&mut out, id, samples, budget, self.limits.max_samples)?;
        }
        Ok(out)
    }

    /// The series ids a samples statement reads: `found`'s, listed, when
    /// few enough for a statement (a key lookup each); else the series
    /// table's statement that selects them (and a few the matchers refuse
    /// in memory, whose samples are dropped as they are read).
    fn id_set(
        &self,
        candidate: &Candidate,
        matchers: &[LabelMatcher],
        found: &HashMap<u64, Labels>,
    ) -> String {
        if found.len() <= MAX_LISTED_IDS {
            let ids: Vec<String> = found.keys().map(u64::to_string).collect();
            return ids.join(", ");
        }
        format!(
            "SELECT series_id FROM {} FINAL WHERE {}",
            candidate.names.series_table,
            self.series_condition(candidate, matchers)
        )
    }

    /// What OTLP's names need beside a series' tags: each metric's unit
    /// (its newest metadata), and for sums the series that are monotonic
    /// (their newest point says).
    async fn otlp_names(&self, candidate: &Candidate, gauge: bool) -> Result<OtlpNames, Error> {
        let mut names = OtlpNames::default();
        let [_, _, unit] = otlp::METADATA_FIELDS;
        if let Some(schema) = self
            .ingestor
            .measurement(&self.database, &self.retention_policy, otlp::METADATA)
            .filter(|s| s.fields.iter().any(|(f, _)| f == unit))
        {
            let metadata = TableNames::new(&self.database, &self.retention_policy, &schema.name);
            let sql = format!(
                "SELECT s.tags[{tag}], toString(argMax(ifNull(f.{unit}, ''), f.time)) FROM {facts} AS f \
                 INNER JOIN (SELECT series_id, tags FROM {series} FINAL WHERE measurement = {measurement}) AS s \
                 USING series_id GROUP BY s.tags[{tag}]",
                tag = quote_literal(otlp::METRIC_NAME),
                unit = quote_ident(unit),
                facts = metadata.storage_table,
                series = metadata.series_table,
                measurement = quote_literal(otlp::METADATA),
            );
            for batch in &self.statement(&sql).await? {
                let [metric, unit] = [0, 1].map(|c| strings(batch.column(c).as_ref()));
                names.units.extend(metric.into_iter().zip(unit));
            }
        }
        if !gauge {
            let sql = format!(
                "SELECT series_id FROM {} GROUP BY series_id HAVING argMax({}, time)",
                candidate.names.storage_table,
                quote_ident(otlp::IS_MONOTONIC)
            );
            for batch in &self.statement(&sql).await? {
                let ids = batch.column(0).as_primitive::<UInt64Type>();
                names.monotonic.extend(ids.values().iter().copied());
            }
        }
        Ok(names)
    }

    /// Calls `ask` with the candidate's table and the matchers the index
    /// can say of it. `None` for OTLP's names (made by the engine), and,
    /// when the selection must be `exact` (not checked again on labels),
    /// for a matcher on a renamed tag key.
    fn with_index_matchers<T>(
        &self,
        candidate: &Candidate,
        matchers: &[LabelMatcher],
        exact: bool,
        ask: impl FnOnce((&str, &str, &str), &[TagMatcher<'_>]) -> Option<T>,
    ) -> Option<T> {
        if matches!(candidate.naming, Naming::Otlp { .. }) {
            return None;
        }
        let tests: Vec<_> = matchers
            .iter()
            .map(|m| move |value: &str| m.matches(value))
            .collect();
        let mut pushed = Vec::with_capacity(matchers.len());
        for (m, test) in matchers.iter().zip(&tests) {
            if self.pushed_down(candidate, m) {
                pushed.push(TagMatcher {
                    key: &m.name,
                    test: match m.kind {
                        MatchKind::Equal => TagTest::Equal(&m.value),
                        _ => TagTest::Matches(test),
                    },
                });
            } else if exact
                && !(m.name == METRIC_NAME && matches!(candidate.naming, Naming::Fixed(_)))
            {
                // (A fixed name's matchers chose the candidate already.)
                return None;
            }
        }
        ask(self.table_of(candidate), &pushed)
    }

    /// The values of label `name` among the series any of `selectors`
    /// selects (every series when there are none), with a sample in
    /// `range` (ms) if given, from the index's postings (no label set is
    /// built); sorted. `None` when some table's series cannot be answered
    /// so (not indexed now, named by OTLP's rules, the label a renamed tag
    /// key or a fixed metric name): ask [`series`](Self::series).
    pub(crate) fn indexed_label_values(
        &self,
        name: &str,
        selectors: &[Vec<LabelMatcher>],
        range: Option<(i64, i64)>,
    ) -> Option<Vec<String>> {
        let range = range.map(|(start, end)| ms_to_ns(start, end));
        let mut values = std::collections::BTreeSet::new();
        for matchers in every_series_or(selectors) {
            for candidate in self.candidates(matchers) {
                if name == METRIC_NAME && !matches!(candidate.naming, Naming::Tag) {
                    return None;
                }
                let named = |k: &String| naming::label_name(k) == name;
                match candidate.tag_keys.iter().filter(|k| named(k)).count() {
                    0 => continue,
                    1 if candidate.tag_keys.iter().any(|k| k == name) => {}
                    _ => return None,
                }
                let field = Some(candidate.field.as_str());
                values.extend(self.with_index_matchers(
                    &candidate,
                    matchers,
                    true,
                    |table, pushed| self.ingestor.tag_values(table, name, pushed, field, range),
                )?);
            }
        }
        values.remove("");
        Some(values.into_iter().collect())
    }

    /// The label names of the series any of `selectors` selects, as
    /// [`indexed_label_values`](Self::indexed_label_values) finds them;
    /// `None` when it would say `None`.
    pub(crate) fn indexed_label_names(
        &self,
        selectors: &[Vec<LabelMatcher>],
        range: Option<(i64, i64)>,
    ) -> Option<Vec<String>> {
        let range = range.map(|(start, end)| ms_to_ns(start, end));
        let mut names = std::collections::BTreeSet::new();
        for matchers in every_series_or(selectors) {
            for candidate in self.candidates(matchers) {
                let field = Some(candidate.field.as_str());
                let keys =
                    self.with_index_matchers(&candidate, matchers, true, |table, pushed| {
                        self.ingestor.tag_keys(table, pushed, field, range)
                    })?;
                if let Naming::Fixed(_) = candidate.naming {
                    // Named by its table, not a tag: a series without
                    // tags would not show whether any is selected.
                    if keys.is_empty() {
                        return None;
                    }
                    names.insert(METRIC_NAME.to_owned());
                }
                names.extend(keys.iter().map(|k| naming::label_name(k)));
            }
        }
        Some(names.into_iter().collect())
    }

    /// The label sets of the series any of `selectors` selects (all series
    /// when there are none), with a sample in `range` if given; sorted,
    /// each once. With a `limit`, the first that many found (a listing);
    /// without, every one, refused past `query.max_series`.
    pub async fn series(
        &self,
        selectors: &[Vec<LabelMatcher>],
        range: Option<(i64, i64)>,
        limit: Option<usize>,
    ) -> Result<Vec<Labels>, Error> {
        let (mut budget, overflow) = match limit {
            Some(limit) => (limit, Overflow::Truncate),
            None => (self.limits.max_series, Overflow::Refuse),
        };
        let mut out = Vec::new();
        for matchers in every_series_or(selectors) {
            for candidate in self.candidates(matchers) {
                let found = self
                    .candidate_series(&candidate, matchers, range, &mut budget, overflow)
                    .await?;
                out.extend(found.into_values());
            }
        }
        out.sort();
        out.dedup();
        Ok(out)
    }

    /// The series the matchers select with their samples in `[start, end]`
    /// (ms, both ends included), stale markers included; sorted by labels.
    /// `series_budget` and `sample_budget` are what the query has left.
    pub async fn select(
        &self,
        matchers: &[LabelMatcher],
        start: i64,
        end: i64,
        series_budget: &mut usize,
        sample_budget: &mut usize,
    ) -> Result<Vec<Series>, Error> {
        self.select_thinned(matchers, (start, end), None, series_budget, sample_budget)
            .await
    }

    /// As [`select`](Self::select), where `thin` allows one sample per
    /// rollup bucket in place of the bucket's samples (docs/downsampling.md).
    pub(crate) async fn select_thinned(
        &self,
        matchers: &[LabelMatcher],
        range: (i64, i64),
        thin: Option<Thinning>,
        series_budget: &mut usize,
        sample_budget: &mut usize,
    ) -> Result<Vec<Series>, Error> {
        let selected = self
            .select_compressed(matchers, range, thin, series_budget, sample_budget)
            .await?;
        Ok(Selected::decode_all(selected))
    }

    /// As [`select_thinned`](Self::select_thinned), memory's samples left
    /// compressed until they are used.
    pub(crate) async fn select_compressed(
        &self,
        matchers: &[LabelMatcher],
        (start, end): (i64, i64),
        thin: Option<Thinning>,
        series_budget: &mut usize,
        sample_budget: &mut usize,
    ) -> Result<Vec<Selected>, Error> {
        let mut out = Vec::new();
        for candidate in self.candidates(matchers) {
            let found = self
                .candidate_series(&candidate, matchers, None, series_budget, Overflow::Refuse)
                .await?;
            if found.is_empty() {
                continue;
            }
            let samples = self
                .samples(
                    &candidate,
                    matchers,
                    &found,
                    (start, end),
                    thin,
                    sample_budget,
                )
                .await?;
            out.extend(samples.into_iter().map(|(id, samples)| Selected {
                labels: found[&id].clone(),
                samples,
            }));
        }
        crate::value::sort_by_labels(&mut out, |s| &s.labels);
        Ok(out)
    }

    /// The samples of `found`'s series of `candidate` in `[start, end]`
    /// (ms) from the engine, by id.
    async fn engine_samples(
        &self,
        candidate: &Candidate,
        matchers: &[LabelMatcher],
        found: &HashMap<u64, Labels>,
        (start, end): (i64, i64),
        level: Option<&ThinLevel>,
        sample_budget: &mut usize,
    ) -> Result<SamplesById, Error> {
        let ids = self.id_set(candidate, matchers, found);
        let limit = *sample_budget + 1;
        let batches = match level
            .and_then(|level| thinned_sql(candidate, &ids, (start, end), level))
        {
            Some(samples) => {
                // Unordered: the engine's sort of every sample cost more
                // than sorting each series' few runs here (below).
                let sql = format!("{samples} LIMIT {limit}");
                self.statements.fetch_add(1, Ordering::Relaxed);
                self.ingestor.query_rollups(&sql).await?
            }
            None => {
                let sql = format!(
                    "SELECT series_id, toUnixTimestamp64Milli(time), toFloat64({field}) FROM {facts} \
                     WHERE series_id IN ({ids}) \
                     AND {time} AND {field} IS NOT NULL ORDER BY series_id, time LIMIT {limit}",
                    field = quote_ident(&candidate.field),
                    facts = self.facts(candidate, Some((start, end))),
                    time = time_condition(start, end),
                );
                self.statement(&sql).await?
            }
        };
        let mut points = SamplesById::new();
        for batch in &batches {
            read_samples(
                batch,
                found,
                &mut points,
                sample_budget,
                self.limits.max_samples,
            )?;
        }
        for samples in points.values_mut() {
            // Sorted runs (a stable sort keeps the order of equal times).
            samples.sort_by_key(|sample| sample.0);
            dedup_last(samples);
        }
        Ok(points)
    }
}

/// What a selection may read from rollups: the sample that stands for a
/// bucket's samples, and the widest bucket (ms) that keeps its answer
/// close (docs/downsampling.md).
#[derive(Debug, Clone, Copy)]
pub(crate) struct Thinning {
    pub(crate) thinned: Thinned,
    pub(crate) widest_ms: i64,
}

/// The rollup level a thinned selection reads ([`Source::thin_level`]).
struct ThinLevel {
    thinned: Thinned,
    view: RollupView,
    /// An index into the view's levels.
    level: usize,
}

impl ThinLevel {
    /// The width of its buckets.
    fn width(&self) -> Duration {
        self.view.levels[self.level].0.interval
    }
}

impl Thinned {
    /// The rollup column whose value stands for a bucket.
    fn kept(self) -> Kept {
        match self {
            Thinned::Last => Kept::Last,
            Thinned::Max => Kept::Max,
            Thinned::Min => Kept::Min,
        }
    }

    /// What a level must keep to give it ([`thinned_sql`]'s columns).
    fn reads(self) -> Keeps {
        Kept::needs([self.kept(), Kept::Count, Kept::LastTime])
    }
}

impl Source<'_> {
    /// The rollup level `thin` reads for `candidate` (its view and level),
    /// if its field is rolled up and a level fits.
    fn thin_level(&self, candidate: &Candidate, thin: Thinning) -> Option<ThinLevel> {
        let (database, rp, measurement) = self.table_of(candidate);
        let view = self.ingestor.rollups(database, rp, measurement)?;
        let rolled = view
            .fields
            .iter()
            .any(|(f, ty)| *f == candidate.field && Kept::Sum.applies_to(*ty));
        let level = view.level(thin.thinned.reads(), |width| {
            width.as_millis() as i64 <= thin.widest_ms
        })?;
        rolled.then_some(ThinLevel {
            thinned: thin.thinned,
            view,
            level,
        })
    }

    /// `candidate`'s facts for reading its field over `range` (ms): its
    /// table, or where a downsampled database's rows are gone, its
    /// rollups' buckets as rows too (docs/downsampling.md).
    fn facts(&self, candidate: &Candidate, range: Option<(i64, i64)>) -> String {
        let (database, rp, measurement) = self.table_of(candidate);
        let table = &candidate.names.storage_table;
        let (start, end) = range.map_or((i64::MIN, i64::MAX), |(start, end)| {
            let (start, end) = ms_to_ns(start, end);
            (start, end.saturating_add(1))
        });
        self.ingestor
            .rollups(database, rp, measurement)
            .and_then(|view| {
                let field = view.fields.iter().find(|(f, _)| *f == candidate.field)?;
                view.rows_sql(table, std::slice::from_ref(field), start, end)
            })
            .unwrap_or_else(|| table.clone())
    }
}

/// The samples of `ids` in `[start, end]` (ms) of `candidate` as
/// `(series_id, t, v)` rows, with one sample per bucket where a rollup
/// holds the bucket whole (`level`); `None` when no whole bucket is left to it.
fn thinned_sql(
    candidate: &Candidate,
    ids: &str,
    (start, end): (i64, i64),
    level: &ThinLevel,
) -> Option<String> {
    let (start_ns, end_ns) = ms_to_ns(start, end);
    // The first bucket whole: one sample stands for a bucket anyway,
    // and it spares reading the rows before its edge.
    let width = level.width();
    let step = width.as_nanos() as i64;
    let split = level.view.split(
        level.level,
        start_ns.div_euclid(step) * step,
        end_ns.saturating_add(1),
        level.thinned.reads(),
    )?;
    let field = &candidate.field;
    let value = Rollup::column(field, level.thinned.kept());
    let (count, last_time) = (
        Rollup::column(field, Kept::Count),
        Rollup::column(field, Kept::LastTime),
    );
    // Each level's buckets; coarser ones where the finer are gone.
    let mut sides: Vec<String> = split
        .rollups
        .iter()
        .map(|(table, spans)| {
            format!(
                "SELECT series_id, {last_time} AS t, toFloat64({value}) AS v FROM {table} FINAL \
                 WHERE series_id IN ({ids}) AND {} AND {count} > 0",
                time_in_sql("time", spans),
            )
        })
        .collect();
    if !split.rows.is_empty() {
        // The rows thinned alike, a sample per bucket: a window whose
        // samples were half a bucket's and half each sample's would
        // be extrapolated by neither's spacing.
        let field = quote_ident(field);
        let v = match level.thinned {
            Thinned::Last => format!("argMax({field}, time)"),
            Thinned::Max => format!("max({field})"),
            Thinned::Min => format!("min({field})"),
        };
        sides.push(format!(
            "SELECT series_id, max(time) AS t, toFloat64({v}) AS v FROM {} \
             WHERE series_id IN ({ids}) AND {} AND {field} IS NOT NULL \
             GROUP BY series_id, toStartOfInterval(time, INTERVAL {} SECOND)",
            candidate.names.storage_table,
            time_in_sql("time", &split.rows),
            width.as_secs(),
        ));
    }
    Some(format!(
        "SELECT series_id, toUnixTimestamp64Milli(t), v FROM ({})",
        sides.join(" UNION ALL ")
    ))
}

/// One sample per bucket of `width` ms, at the time of its last: the last
/// value, or the greatest or least (what a rollup gives for `kind`).
fn thin_samples(samples: Vec<(i64, f64)>, kind: Thinned, width: i64) -> Vec<(i64, f64)> {
    let mut out: Vec<(i64, f64)> = Vec::new();
    let mut bucket = None;
    for (t, v) in samples {
        let this = t.div_euclid(width);
        match out.last_mut() {
            Some(last) if bucket == Some(this) => {
                last.1 = match kind {
                    Thinned::Last => v,
                    Thinned::Max => last.1.max(v),
                    Thinned::Min => last.1.min(v),
                };
                last.0 = t;
            }
            _ => out.push((t, v)),
        }
        bucket = Some(this);
    }
    out
}

/// The labels of a series named by its tags or by its measurement and
/// field: its tags with valid label names, and the metric name.
fn plain_labels(naming: &Naming, tags: impl Iterator<Item = (String, String)>) -> Labels {
    let mut pairs: Vec<(String, String)> =
        tags.map(|(k, v)| (naming::into_label_name(k), v)).collect();
    if let Naming::Fixed(metric) = naming {
        pairs.push((METRIC_NAME.to_owned(), metric.clone()));
    }
    Labels::new(pairs)
}

/// What OTLP's Prometheus names need beside a series' tags.
#[derive(Default)]
struct OtlpNames {
    /// Each metric's unit.
    units: HashMap<String, String>,
    /// The monotonic sums' series.
    monotonic: std::collections::HashSet<u64>,
}

/// An OTLP series' labels: its metric's Prometheus name, its tags as
/// labels, and `job` and `instance` from the service (as OpenTelemetry's
/// Prometheus exporters set them).
fn otlp_labels(
    keys: Vec<String>,
    values: Vec<String>,
    gauge: bool,
    names: &OtlpNames,
    id: u64,
) -> Labels {
    let tags: HashMap<String, String> = keys.into_iter().zip(values).collect();
    let tag = |key: &str| tags.get(key).map_or("", String::as_str);
    // The service's attributes (OpenTelemetry's semantic conventions), by
    // the tags the codec stores resource attributes under.
    let resource = |attribute: &str| {
        tags.iter()
            .find(|(k, _)| otlp::resource_attribute(k) == Some(attribute))
            .map_or("", |(_, v)| v.as_str())
    };
    let metric = tag(otlp::METRIC_NAME);
    let unit = names.units.get(metric).map_or("", String::as_str);
    let name = naming::otlp_metric_name(metric, unit, gauge, names.monotonic.contains(&id));
    let mut pairs: Vec<(String, String)> = tags
        .iter()
        .filter(|(k, _)| *k != otlp::METRIC_NAME)
        .map(|(k, v)| (naming::label_name(k), v.clone()))
        .collect();
    let service = resource("service.name");
    let job = match resource("service.namespace") {
        "" => service.to_owned(),
        namespace => format!("{namespace}/{service}"),
    };
    // An attribute of the point named so is overridden only by a service.
    if !service.is_empty() {
        pairs.push(("job".to_owned(), job));
    }
    let instance = resource("service.instance.id");
    if !instance.is_empty() {
        pairs.push(("instance".to_owned(), instance.to_owned()));
    }
    pairs.push((METRIC_NAME.to_owned(), name));
    Labels::new(pairs)
}

fn read_samples(
    batch: &RecordBatch,
    wanted: &HashMap<u64, Labels>,
    points: &mut HashMap<u64, Vec<(i64, f64)>>,
    budget: &mut usize,
    limit: usize,
) -> Result<(), Error> {
    let ids = batch.column(0).as_primitive::<UInt64Type>();
    let times = batch.column(1).as_primitive::<Int64Type>();
    let values = batch.column(2).as_primitive::<Float64Type>();
    // A series' samples come in runs: looked up once a run.
    let mut run: Option<u64> = None;
    let mut list: Option<&mut Vec<(i64, f64)>> = None;
    for row in 0..batch.num_rows() {
        let id = ids.value(row);
        if run != Some(id) {
            run = Some(id);
            list = wanted
                .contains_key(&id)
                .then(|| points.entry(id).or_default());
        }
        let Some(list) = &mut list else {
            continue;
        };
        if *budget == 0 {
            return Err(too_many_samples(limit));
        }
        *budget -= 1;
        list.push((times.value(row), values.value(row)));
    }
    Ok(())
}

/// Adds `samples` to series `id`'s in `out`, counting them against the
/// `budget` of a query whose limit is `limit`.
fn take_samples(
    out: &mut HashMap<u64, Samples>,
    id: u64,
    samples: Vec<(i64, f64)>,
    budget: &mut usize,
    limit: usize,
) -> Result<(), Error> {
    take(budget, samples.len(), limit)?;
    if !samples.is_empty() {
        out.entry(id).or_default().push_decoded(samples);
    }
    Ok(())
}

/// Each series' decoded samples, as selection gives them.
fn of_decoded(samples: SamplesById) -> HashMap<u64, Samples> {
    samples
        .into_iter()
        .map(|(id, decoded)| (id, Samples::decoded(decoded)))
        .collect()
}

/// Counts `samples` against the `budget` of a query whose limit is
/// `limit`.
fn take(budget: &mut usize, samples: usize, limit: usize) -> Result<(), Error> {
    if samples > *budget {
        return Err(too_many_samples(limit));
    }
    *budget -= samples;
    Ok(())
}

/// One sample per time, sorted, the last of equal times kept: what a
/// selection keeps ([`Source::select`]).
fn dedup_last(samples: &mut Vec<(i64, f64)>) {
    // Most lists hold one sample per time: a look, not a rewrite.
    if samples.windows(2).all(|pair| pair[0].0 != pair[1].0) {
        return;
    }
    samples.dedup_by(|later, earlier| {
        let same = later.0 == earlier.0;
        if same {
            *earlier = *later;
        }
        same
    });
}

fn too_many_samples(limit: usize) -> Error {
    Error::Execution(format!(
        "query processing would load too many samples into memory in query execution \
         (more than query.max_samples = {limit})"
    ))
}

/// `[start, end]` ms as the ns that count as those ms.
fn ms_to_ns(start: i64, end: i64) -> (i64, i64) {
    (
        start.saturating_mul(1_000_000),
        end.saturating_mul(1_000_000).saturating_add(999_999),
    )
}

/// `selectors`, or one selector of every series when there are none.
fn every_series_or(selectors: &[Vec<LabelMatcher>]) -> &[Vec<LabelMatcher>] {
    const EVERYTHING: &[Vec<LabelMatcher>] = &[Vec::new()];
    match selectors.is_empty() {
        true => EVERYTHING,
        false => selectors,
    }
}

/// What a read does once it has selected as many series as it may.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Overflow {
    /// Fails: a query's answer would be wrong without every series.
    Refuse,
    /// Stops selecting: a listing bounded by its `limit`.
    Truncate,
}

impl Overflow {
    /// Takes one series from `budget`: `Ok(false)` when none is left and
    /// the read stops there, an error when it must fail (`limit` is the
    /// configured bound the message names).
    fn take(self, budget: &mut usize, limit: usize) -> Result<bool, Error> {
        if *budget == 0 {
            return match self {
                Overflow::Refuse => Err(too_many_series(limit)),
                Overflow::Truncate => Ok(false),
            };
        }
        *budget -= 1;
        Ok(true)
    }
}

fn too_many_series(limit: usize) -> Error {
    Error::Execution(format!(
        "the query selects more than query.max_series = {limit} series"
    ))
}

/// `time` in `[start, end]` ms: a time with digits past the ms counts as
/// its ms, as it is read.
fn time_condition(start: i64, end: i64) -> String {
    // The span of the `time` column (DateTime64(9): 1900 to 2262).
    const FIRST: i64 = -2_208_988_800_000;
    const LAST: i64 = 9_214_646_400_000;
    let (start, end) = (start.clamp(FIRST, LAST), end.clamp(FIRST - 1, LAST));
    format!(
        "time >= fromUnixTimestamp64Milli(toInt64({start})) AND time < fromUnixTimestamp64Milli(toInt64({}))",
        end.saturating_add(1)
    )
}

/// The strings of an engine list element (`String` columns arrive as
/// binary or UTF-8, depending on the engine's settings).
fn strings(array: &dyn Array) -> Vec<String> {
    let n = array.len();
    match array.data_type() {
        DataType::Utf8 => {
            let a = array.as_string::<i32>();
            (0..n).map(|i| a.value(i).to_owned()).collect()
        }
        DataType::LargeUtf8 => {
            let a = array.as_string::<i64>();
            (0..n).map(|i| a.value(i).to_owned()).collect()
        }
        DataType::Binary => {
            let a = array.as_binary::<i32>();
            (0..n)
                .map(|i| String::from_utf8_lossy(a.value(i)).into_owned())
                .collect()
        }
        DataType::LargeBinary => {
            let a = array.as_binary::<i64>();
            (0..n)
                .map(|i| String::from_utf8_lossy(a.value(i)).into_owned())
                .collect()
        }
        _ => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn samples_read_in_runs_go_to_their_series_and_count_against_the_budget() {
        use arrow::array::{Float64Array, Int64Array, UInt64Array};
        use std::sync::Arc;
        let batch = RecordBatch::try_from_iter([
            (
                "id",
                Arc::new(UInt64Array::from(vec![1, 1, 9, 2, 1, 2])) as _,
            ),
            (
                "t",
                Arc::new(Int64Array::from(vec![10, 20, 5, 7, 30, 3])) as _,
            ),
            (
                "v",
                Arc::new(Float64Array::from(vec![1.0, 2.0, 9.0, 7.0, 3.0, 4.0])) as _,
            ),
        ])
        .unwrap();
        // Series 9 is not wanted: its sample neither lands nor counts.
        let wanted: HashMap<u64, Labels> = [(1, Labels::default()), (2, Labels::default())].into();
        let (mut points, mut budget) = (SamplesById::new(), 5);
        read_samples(&batch, &wanted, &mut points, &mut budget, 5).unwrap();
        assert_eq!(budget, 0);
        assert_eq!(points[&1], vec![(10, 1.0), (20, 2.0), (30, 3.0)]);
        assert_eq!(points[&2], vec![(7, 7.0), (3, 4.0)]);
        assert!(!points.contains_key(&9));
        let (mut points, mut budget) = (SamplesById::new(), 4);
        let err = read_samples(&batch, &wanted, &mut points, &mut budget, 4).unwrap_err();
        assert!(err.to_string().contains("max_samples = 4"), "{err}");
    }

    #[test]
    fn thinning_keeps_a_sample_per_bucket_at_its_last_time() {
        let samples = vec![
            (1, 5.0),
            (4, 9.0),
            (9, 2.0),
            (10, 7.0),
            (25, 1.0),
            (29, 3.0),
        ];
        let thin = |kind| thin_samples(samples.clone(), kind, 10);
        assert_eq!(thin(Thinned::Last), vec![(9, 2.0), (10, 7.0), (29, 3.0)]);
        assert_eq!(thin(Thinned::Max), vec![(9, 9.0), (10, 7.0), (29, 3.0)]);
        assert_eq!(thin(Thinned::Min), vec![(9, 2.0), (10, 7.0), (29, 1.0)]);
        assert_eq!(thin_samples(Vec::new(), Thinned::Last, 10), Vec::new());
    }
}
