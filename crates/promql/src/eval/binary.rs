//! Binary operators: arithmetic, comparisons (filters or `bool`), and the
//! set operators, between scalars and vectors, with Prometheus's vector
//! matching (`on`, `ignoring`, `group_left`, `group_right`).

use rustc_hash::{FxHashMap as HashMap, FxHashSet as HashSet};

use promql_parser::parser::token::TokenType;
use promql_parser::parser::{BinModifier, BinaryExpr, LabelModifier, VectorMatchCardinality};

use super::evaluator::{unique, Evaluator, Val};
use crate::error::Error;
use crate::value::{Labels, Sample, METRIC_NAME};

pub(super) fn run<'d>(ev: &'d Evaluator, b: &BinaryExpr, ts: i64) -> Result<Val<'d>, Error> {
    let op = operator(b.op);
    let return_bool = b.modifier.as_ref().is_some_and(|m| m.return_bool);
    let lhs = ev.eval(&b.lhs, ts)?;
    let rhs = ev.eval(&b.rhs, ts)?;
    Ok(match (lhs, rhs) {
        (Val::Scalar(l), Val::Scalar(r)) => {
            let (value, keep) = apply(op, l, r)?;
            Val::Scalar(if is_comparison(op) {
                f64::from(u8::from(keep))
            } else {
                value
            })
        }
        (Val::Vector(v), Val::Scalar(s)) => {
            Val::Vector(with_scalar(op, v, s, false, return_bool, ts)?)
        }
        (Val::Scalar(s), Val::Vector(v)) => {
            Val::Vector(with_scalar(op, v, s, true, return_bool, ts)?)
        }
        (Val::Vector(l), Val::Vector(r)) => {
            let default = BinModifier::default();
            let matching = Matching {
                ev,
                node: b as *const BinaryExpr as usize,
                modifier: b.modifier.as_ref().unwrap_or(&default),
            };
            Val::Vector(match op {
                "and" | "or" | "unless" => set_operation(&matching, op, l, r, ts),
                _ => vector_match(&matching, op, l, r, return_bool, ts)?,
            })
        }
        (l, r) => {
            return Err(Error::BadData(format!(
                "binary operator {op} between a {} and a {}",
                l.kind(),
                r.kind()
            )))
        }
    })
}

/// The operator as PromQL spells it. (The parser's `Display` writes it
/// into a new string: at every step of a range query, 3 % of a one-host
/// panel's CPU.)
fn operator(op: TokenType) -> &'static str {
    use promql_parser::parser::token::*;
    match op.id() {
        T_ADD => "+",
        T_SUB => "-",
        T_MUL => "*",
        T_DIV => "/",
        T_MOD => "%",
        T_POW => "^",
        T_ATAN2 => "atan2",
        T_EQLC => "==",
        T_NEQ => "!=",
        T_GTR => ">",
        T_LSS => "<",
        T_GTE => ">=",
        T_LTE => "<=",
        T_LAND => "and",
        T_LOR => "or",
        T_LUNLESS => "unless",
        // Any other the parser may let through is refused by `apply`.
        _ => "unknown",
    }
}

fn is_comparison(op: &str) -> bool {
    matches!(op, "==" | "!=" | ">" | "<" | ">=" | "<=")
}

/// The value of `l op r`, and for comparisons whether it holds (the value
/// is then `l`).
fn apply(op: &str, l: f64, r: f64) -> Result<(f64, bool), Error> {
    Ok(match op {
        "+" => (l + r, true),
        "-" => (l - r, true),
        "*" => (l * r, true),
        "/" => (l / r, true),
        "%" => (go_mod(l, r), true),
        "^" => (l.powf(r), true),
        "atan2" => (l.atan2(r), true),
        "==" => (l, l == r),
        "!=" => (l, l != r),
        ">" => (l, l > r),
        "<" => (l, l < r),
        ">=" => (l, l >= r),
        "<=" => (l, l <= r),
        other => {
            return Err(Error::BadData(format!(
                "operator {other:?} is not supported"
            )))
        }
    })
}

/// Go's `math.Mod`: the sign of the dividend, NaN for a zero divisor.
fn go_mod(l: f64, r: f64) -> f64 {
    if r == 0.0 || l.is_infinite() || l.is_nan() || r.is_nan() {
        return f64::NAN;
    }
    l % r
}

fn with_scalar(
    op: &str,
    v: Vec<Sample>,
    scalar: f64,
    scalar_first: bool,
    return_bool: bool,
    ts: i64,
) -> Result<Vec<Sample>, Error> {
    let mut out = Vec::with_capacity(v.len());
    let drop_name = !is_comparison(op) || return_bool;
    for s in v {
        let (l, r) = if scalar_first {
            (scalar, s.value)
        } else {
            (s.value, scalar)
        };
        let (mut value, mut keep) = apply(op, l, r)?;
        if is_comparison(op) && scalar_first {
            // The vector's value is kept, whichever side it is on.
            value = r;
        }
        if return_bool {
            value = f64::from(u8::from(keep));
            keep = true;
        }
        if keep {
            let labels = if drop_name {
                s.labels.without_name()
            } else {
                s.labels
            };
            out.push(Sample {
                labels,
                time: ts,
                value,
            });
        }
    }
    unique(&out)?;
    Ok(out)
}

/// How one operator matches the samples of its two sides.
struct Matching<'a> {
    ev: &'a Evaluator,
    /// The operator's node (what its signatures are cached under).
    node: usize,
    modifier: &'a BinModifier,
}

impl Matching<'_> {
    /// The labels two samples are matched by, derived once per label set.
    fn signature(&self, labels: &Labels) -> Labels {
        self.ev
            .derive(self.node, labels, |l| matching_labels(l, self.modifier))
    }
}

fn matching_labels(labels: &Labels, modifier: &BinModifier) -> Labels {
    match &modifier.matching {
        Some(LabelModifier::Include(on)) => labels.filter(|n| on.labels.iter().any(|l| l == n)),
        Some(LabelModifier::Exclude(ignoring)) => {
            labels.filter(|n| n != METRIC_NAME && !ignoring.labels.iter().any(|l| l == n))
        }
        None => labels.without_name(),
    }
}

fn set_operation(
    matching: &Matching<'_>,
    op: &str,
    l: Vec<Sample>,
    r: Vec<Sample>,
    ts: i64,
) -> Vec<Sample> {
    let right: HashSet<Labels> = r.iter().map(|s| matching.signature(&s.labels)).collect();
    let at = |s: Sample| Sample { time: ts, ..s };
    match op {
        "and" => l
            .into_iter()
            .filter(|s| right.contains(&matching.signature(&s.labels)))
            .map(at)
            .collect(),
        "unless" => l
            .into_iter()
            .filter(|s| !right.contains(&matching.signature(&s.labels)))
            .map(at)
            .collect(),
        _ => {
            let left: HashSet<Labels> = l.iter().map(|s| matching.signature(&s.labels)).collect();
            let mut out: Vec<Sample> = l.into_iter().map(at).collect();
            out.extend(
                r.into_iter()
                    .filter(|s| !left.contains(&matching.signature(&s.labels)))
                    .map(at),
            );
            out
        }
    }
}

fn vector_match(
    matching: &Matching<'_>,
    op: &str,
    lhs: Vec<Sample>,
    rhs: Vec<Sample>,
    return_bool: bool,
    ts: i64,
) -> Result<Vec<Sample>, Error> {
    let modifier = matching.modifier;
    let one_to_many = matches!(modifier.card, VectorMatchCardinality::OneToMany(_));
    let include: &[String] = match &modifier.card {
        VectorMatchCardinality::ManyToOne(labels) | VectorMatchCardinality::OneToMany(labels) => {
            &labels.labels
        }
        _ => &[],
    };
    let one_to_one = matches!(modifier.card, VectorMatchCardinality::OneToOne);
    // The "many" side is iterated, the "one" side looked up.
    let (many, one) = if one_to_many { (rhs, lhs) } else { (lhs, rhs) };
    let mut one_side: HashMap<Labels, Sample> = HashMap::default();
    for s in one {
        let sig = matching.signature(&s.labels);
        if let Some(duplicate) = one_side.get(&sig) {
            let side = if one_to_many { "left" } else { "right" };
            return Err(Error::Execution(format!(
                "found duplicate series for the match group {sig} on the {side} hand-side of the operation: \
                 [{}, {}];many-to-many matching not allowed: matching labels must be unique on one side",
                s.labels, duplicate.labels
            )));
        }
        one_side.insert(sig, s);
    }
    let drop_name = !is_comparison(op) || return_bool;
    // One to one: the signatures matched; else each signature's outputs.
    let mut matched_once: HashSet<Labels> = HashSet::default();
    let mut matched: HashMap<Labels, HashSet<Labels>> = HashMap::default();
    let mut out = Vec::new();
    for s in many {
        let sig = matching.signature(&s.labels);
        let Some(other) = one_side.get(&sig) else {
            continue;
        };
        let (l, r) = if one_to_many {
            (other.value, s.value)
        } else {
            (s.value, other.value)
        };
        let (mut value, keep) = apply(op, l, r)?;
        if return_bool {
            value = f64::from(u8::from(keep));
        } else if !keep {
            continue;
        }
        let mut labels = if drop_name {
            s.labels.without_name()
        } else {
            s.labels.clone()
        };
        if one_to_one {
            labels = match &modifier.matching {
                Some(LabelModifier::Include(on)) => {
                    labels.filter(|n| on.labels.iter().any(|l| l == n))
                }
                Some(LabelModifier::Exclude(ignoring)) => {
                    labels.filter(|n| !ignoring.labels.iter().any(|l| l == n))
                }
                None => labels,
            };
        }
        for name in include {
            labels = labels.with(name, other.labels.get(name));
        }
        if one_to_one {
            if !matched_once.insert(sig) {
                return Err(Error::Execution(
                    "multiple matches for labels: many-to-one matching must be explicit (group_left/group_right)".into(),
                ));
            }
        } else if !matched.entry(sig).or_default().insert(labels.clone()) {
            return Err(Error::Execution(
                "multiple matches for labels: grouping labels must ensure unique matches".into(),
            ));
        }
        out.push(Sample {
            labels,
            time: ts,
            value,
        });
    }
    Ok(out)
}
