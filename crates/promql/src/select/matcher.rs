//! Label matchers, from a query's selector or a remote-read request:
//! checked in memory, and said in SQL over the series table's tags.

use chingest::layout::names::quote_literal;
use promql_parser::label::{MatchOp, Matcher};

use crate::error::Error;
use crate::value::METRIC_NAME;

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
    pub(super) fn sql(&self, tag: &str) -> String {
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
