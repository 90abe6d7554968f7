//! Arithmetic and math functions in `SELECT`'s columns: a column is a
//! [`Formula`] over cells — raw fields, aggregates, transformations —
//! evaluated row by row once the cells are known (after `fill()` and the
//! transformations, as InfluxDB evaluates them), with InfluxDB's typing:
//! an integer divided is a float, a division by zero is 0, bitwise
//! operators take integers, a result that is not a number is null.

use crate::answer::Value;
use crate::parse::BinaryOp;

/// A math function of InfluxQL.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum MathFn {
    Abs,
    Acos,
    Asin,
    Atan,
    Atan2,
    Ceil,
    Cos,
    Exp,
    Floor,
    Ln,
    Log,
    Log2,
    Log10,
    Pow,
    Round,
    Sin,
    Sqrt,
    Tan,
}

impl MathFn {
    pub(super) fn named(name: &str) -> Option<MathFn> {
        Some(match name {
            "abs" => MathFn::Abs,
            "acos" => MathFn::Acos,
            "asin" => MathFn::Asin,
            "atan" => MathFn::Atan,
            "atan2" => MathFn::Atan2,
            "ceil" => MathFn::Ceil,
            "cos" => MathFn::Cos,
            "exp" => MathFn::Exp,
            "floor" => MathFn::Floor,
            "ln" => MathFn::Ln,
            "log" => MathFn::Log,
            "log2" => MathFn::Log2,
            "log10" => MathFn::Log10,
            "pow" => MathFn::Pow,
            "round" => MathFn::Round,
            "sin" => MathFn::Sin,
            "sqrt" => MathFn::Sqrt,
            "tan" => MathFn::Tan,
            _ => return None,
        })
    }

    /// How many arguments it takes.
    pub(super) fn arity(self) -> usize {
        match self {
            MathFn::Atan2 | MathFn::Log | MathFn::Pow => 2,
            _ => 1,
        }
    }

    /// Its value at `args` (as many as [`MathFn::arity`]): null for a
    /// null or non-numeric argument; `abs`, `ceil`, `floor` and `round`
    /// keep an integer an integer.
    fn apply(self, args: &[Value]) -> Value {
        let integer = match args {
            [Value::Integer(n)] => Some(*n),
            _ => None,
        };
        if let Some(n) = integer {
            match self {
                MathFn::Abs => return Value::Integer(n.wrapping_abs()),
                MathFn::Ceil | MathFn::Floor | MathFn::Round => return Value::Integer(n),
                _ => {}
            }
        }
        let Some(x) = args.first().and_then(number) else {
            return Value::Null;
        };
        let y = || args.get(1).and_then(number);
        let result = match self {
            MathFn::Abs => x.abs(),
            MathFn::Acos => x.acos(),
            MathFn::Asin => x.asin(),
            MathFn::Atan => x.atan(),
            MathFn::Ceil => x.ceil(),
            MathFn::Cos => x.cos(),
            MathFn::Exp => x.exp(),
            MathFn::Floor => x.floor(),
            MathFn::Ln => x.ln(),
            MathFn::Log2 => x.log2(),
            MathFn::Log10 => x.log10(),
            // Half away from zero, as Go's math.Round.
            MathFn::Round => x.round(),
            MathFn::Sin => x.sin(),
            MathFn::Sqrt => x.sqrt(),
            MathFn::Tan => x.tan(),
            MathFn::Atan2 | MathFn::Log | MathFn::Pow => {
                let Some(y) = y() else { return Value::Null };
                match self {
                    MathFn::Atan2 => x.atan2(y),
                    // Go's: ln(x) / ln(b).
                    MathFn::Log => x.ln() / y.ln(),
                    _ => x.powf(y),
                }
            }
        };
        float(result)
    }
}

/// A column: cells (`L`: what a cell is, before and after it is resolved
/// against a measurement), literals, operators and math functions.
#[derive(Debug, Clone, PartialEq)]
pub(super) enum Formula<L> {
    Cell(L),
    Literal(Value),
    Binary(BinaryOp, Box<Formula<L>>, Box<Formula<L>>),
    Call(MathFn, Vec<Formula<L>>),
}

impl<L> Formula<L> {
    /// Its cells, left to right.
    pub(super) fn cells(&self) -> Vec<&L> {
        let mut cells = Vec::new();
        self.visit(&mut |cell| cells.push(cell));
        cells
    }

    fn visit<'a>(&'a self, f: &mut impl FnMut(&'a L)) {
        match self {
            Formula::Cell(cell) => f(cell),
            Formula::Literal(_) => {}
            Formula::Binary(_, left, right) => {
                left.visit(f);
                right.visit(f);
            }
            Formula::Call(_, args) => args.iter().for_each(|arg| arg.visit(f)),
        }
    }

    /// The same formula over other cells.
    pub(super) fn map<M, E>(
        &self,
        f: &mut impl FnMut(&L) -> Result<M, E>,
    ) -> Result<Formula<M>, E> {
        Ok(match self {
            Formula::Cell(cell) => Formula::Cell(f(cell)?),
            Formula::Literal(value) => Formula::Literal(value.clone()),
            Formula::Binary(op, left, right) => {
                Formula::Binary(*op, Box::new(left.map(f)?), Box::new(right.map(f)?))
            }
            Formula::Call(func, args) => Formula::Call(
                *func,
                args.iter()
                    .map(|arg| arg.map(f))
                    .collect::<Result<_, _>>()?,
            ),
        })
    }
}

impl Formula<usize> {
    /// Its value in a row whose cells are `cells`.
    pub(super) fn evaluate(&self, cells: &[Value]) -> Value {
        match self {
            Formula::Cell(i) => cells.get(*i).cloned().unwrap_or(Value::Null),
            Formula::Literal(value) => value.clone(),
            Formula::Binary(op, left, right) => {
                binary(*op, &left.evaluate(cells), &right.evaluate(cells))
            }
            Formula::Call(func, args) => {
                let args: Vec<Value> = args.iter().map(|arg| arg.evaluate(cells)).collect();
                func.apply(&args)
            }
        }
    }
}

/// What a formula's value is, as far as the statement's types tell.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Kind {
    Float,
    Integer,
    Unsigned,
    String,
    Boolean,
    /// A tag, a field the measurement lacks: null or a string.
    Unknown,
}

impl Kind {
    fn name(self) -> &'static str {
        match self {
            Kind::Float => "float",
            Kind::Integer => "integer",
            Kind::Unsigned => "unsigned",
            Kind::String => "string",
            Kind::Boolean => "boolean",
            Kind::Unknown => "unknown",
        }
    }
}

impl<L> Formula<L> {
    /// Its kind, given its cells' (`kind`); an operator over a string or
    /// a boolean, or a bitwise one over a float, is InfluxDB's type error.
    pub(super) fn kind(&self, kind: &impl Fn(&L) -> Kind) -> Result<Kind, String> {
        Ok(match self {
            Formula::Cell(cell) => kind(cell),
            Formula::Literal(Value::Integer(_)) => Kind::Integer,
            Formula::Literal(_) => Kind::Float,
            Formula::Binary(op, left, right) => {
                let (l, r) = (left.kind(kind)?, right.kind(kind)?);
                let text = |k: Kind| matches!(k, Kind::String | Kind::Boolean);
                let bitwise = matches!(op, BinaryOp::BitAnd | BinaryOp::BitOr | BinaryOp::BitXor);
                if text(l) || text(r) || bitwise && (l == Kind::Float || r == Kind::Float) {
                    return Err(format!(
                        "type error: {} {} {}: incompatible types: {} and {}",
                        l.name(),
                        op.symbol(),
                        r.name(),
                        l.name(),
                        r.name()
                    ));
                }
                match (op, l, r) {
                    (BinaryOp::Div, _, _) => Kind::Float,
                    (_, Kind::Float, _) | (_, _, Kind::Float) => Kind::Float,
                    (_, Kind::Unknown, _) | (_, _, Kind::Unknown) => Kind::Unknown,
                    (_, Kind::Unsigned, _) | (_, _, Kind::Unsigned) => Kind::Unsigned,
                    _ => Kind::Integer,
                }
            }
            Formula::Call(func, args) => {
                for arg in args {
                    arg.kind(kind)?;
                }
                match (func, args.first().map(|a| a.kind(kind)).transpose()?) {
                    (MathFn::Abs | MathFn::Ceil | MathFn::Floor | MathFn::Round, Some(k)) => k,
                    _ => Kind::Float,
                }
            }
        })
    }
}

/// A number as a float; `None` for null, text and booleans.
fn number(value: &Value) -> Option<f64> {
    value.as_f64()
}

/// A float result; null if it is not a number (InfluxDB writes none).
fn float(x: f64) -> Value {
    match x.is_finite() {
        true => Value::Float(x),
        false => Value::Null,
    }
}

/// An integer of either kind, widened so that one computation serves
/// both; `None` for anything else.
fn wide(value: &Value) -> Option<i128> {
    match value {
        Value::Integer(n) => Some(i128::from(*n)),
        Value::Unsigned(n) => Some(i128::from(*n)),
        _ => None,
    }
}

/// `left op right` on two values.
pub(super) fn binary(op: BinaryOp, left: &Value, right: &Value) -> Value {
    use BinaryOp::*;
    if let (Some(a), Some(b)) = (wide(left), wide(right)) {
        // Wrapping on 64 bits, as Go's integers: the low bits of the wide
        // result. Unsigned only when both are.
        let unsigned = matches!((left, right), (Value::Unsigned(_), Value::Unsigned(_)));
        let narrow = |n: i128| match unsigned {
            true => Value::Unsigned(n as u64),
            false => Value::Integer(n as i64),
        };
        return match op {
            Add => narrow(a.wrapping_add(b)),
            Sub => narrow(a.wrapping_sub(b)),
            Mul => narrow(a.wrapping_mul(b)),
            Div if b == 0 => Value::Float(0.0),
            Div => Value::Float(a as f64 / b as f64),
            Mod if b == 0 => narrow(0),
            Mod => narrow(a % b),
            BitAnd => narrow(a & b),
            BitOr => narrow(a | b),
            BitXor => narrow(a ^ b),
        };
    }
    let (Some(a), Some(b)) = (number(left), number(right)) else {
        return Value::Null;
    };
    match op {
        Add => float(a + b),
        Sub => float(a - b),
        Mul => float(a * b),
        Div if b == 0.0 => Value::Float(0.0),
        Div => float(a / b),
        Mod => float(a % b),
        BitAnd | BitOr | BitXor => Value::Null,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arithmetic_types_as_influxdb_does() {
        let (i, f) = (Value::Integer, Value::Float);
        assert_eq!(binary(BinaryOp::Div, &i(1000), &i(3)), f(1000.0 / 3.0));
        assert_eq!(binary(BinaryOp::Div, &i(7), &i(0)), f(0.0));
        assert_eq!(binary(BinaryOp::Div, &f(1.5), &f(0.0)), f(0.0));
        assert_eq!(binary(BinaryOp::Mod, &i(1000), &i(7)), i(6));
        assert_eq!(binary(BinaryOp::Mod, &i(1000), &i(0)), i(0));
        assert_eq!(binary(BinaryOp::Mod, &f(50.0), &f(0.0)), Value::Null);
        assert_eq!(binary(BinaryOp::Mod, &f(50.75), &i(3)), f(2.75));
        assert_eq!(binary(BinaryOp::Mul, &i(1000), &i(i64::MAX)), i(-1000));
        assert_eq!(binary(BinaryOp::BitXor, &i(1000), &i(5)), i(1005));
        assert_eq!(binary(BinaryOp::Add, &i(1), &Value::Null), Value::Null);
        assert_eq!(binary(BinaryOp::Add, &i(1000), &f(50.0)), f(1050.0));
        let count = Value::Unsigned(80);
        assert_eq!(binary(BinaryOp::Div, &count, &i(2)), f(40.0));
        assert_eq!(binary(BinaryOp::Sub, &i(2), &count), i(-78));
        assert_eq!(binary(BinaryOp::Mod, &i(i64::MIN), &i(-1)), i(0));
        let u = Value::Unsigned;
        assert_eq!(binary(BinaryOp::Sub, &u(1), &u(2)), u(u64::MAX));
        assert_eq!(binary(BinaryOp::Mul, &u(u64::MAX), &u(u64::MAX)), u(1));
    }

    #[test]
    fn math_functions_keep_integers_and_drop_what_is_not_a_number() {
        assert_eq!(
            MathFn::Round.apply(&[Value::Float(-51.5)]),
            Value::Float(-52.0)
        );
        assert_eq!(MathFn::Abs.apply(&[Value::Integer(-3)]), Value::Integer(3));
        assert_eq!(MathFn::Ln.apply(&[Value::Float(-1.0)]), Value::Null);
        assert_eq!(MathFn::Exp.apply(&[Value::Float(1000.0)]), Value::Null);
        assert_eq!(MathFn::Abs.apply(&[Value::String("x".into())]), Value::Null);
        assert_eq!(
            MathFn::Log.apply(&[Value::Integer(1000), Value::Integer(10)]),
            Value::Float(1000f64.ln() / 10f64.ln())
        );
    }
}
