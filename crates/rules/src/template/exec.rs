//! A parsed template executed as Go's `text/template` executes it (with
//! `missingkey=zero`, as Prometheus sets it): pipelines, fields of the
//! alert's data and of label maps, variables and their scopes, `if`,
//! `range`, `with`, `template`; arguments checked against each function's
//! parameter types, errors worded as Go's
//! (`template: NAME:LINE:COL: executing "NAME" at <NODE>: …`). Bounded:
//! every node and iteration counts against a step budget, the output
//! against a size.

use std::sync::Arc;

use super::funcs::{self, CallContext, Ty};
use super::parse::{Arg, Command, Control, List, Node, Pipe};
use super::value::Limits;
use super::value::Value;

type Run<T> = Result<T, String>;

/// What a list's execution ended on.
#[derive(PartialEq)]
enum Flow {
    Normal,
    Break,
    Continue,
}

/// How deeply `{{template}}` calls may nest.
const MAX_TEMPLATE_DEPTH: usize = 100;

pub(crate) struct Exec<'a> {
    pub(crate) name: &'a str,
    pub(crate) text: &'a str,
    pub(crate) defined: &'a [(String, List)],
    pub(crate) ctx: CallContext<'a>,
    pub(crate) limits: Limits,
    pub(crate) vars: Vec<(String, Value)>,
    pub(crate) out: String,
    pub(crate) steps: usize,
    pub(crate) depth: usize,
}

impl Exec<'_> {
    /// Runs `list` with `dot`.
    pub(crate) fn run(&mut self, list: &List, dot: &Value) -> Run<()> {
        self.vars = vec![("$".into(), dot.clone())];
        self.list(list, dot).map(|_| ())
    }

    fn error_at<T>(&self, pos: usize, context: &str, message: impl std::fmt::Display) -> Run<T> {
        let before = &self.text[..pos.min(self.text.len())];
        let line = 1 + before.matches('\n').count();
        let col = match before.rfind('\n') {
            Some(at) => pos - at - 1,
            None => pos,
        };
        let context = if context.len() > 20 {
            let mut cut = 20;
            while !context.is_char_boundary(cut) {
                cut -= 1;
            }
            format!("{}...", &context[..cut])
        } else {
            context.to_owned()
        };
        Err(format!(
            "template: {}:{line}:{col}: executing {} at <{context}>: {message}",
            self.name,
            crate::gofmt::quote(self.name)
        ))
    }

    fn step(&mut self, pos: usize) -> Run<()> {
        self.steps += 1;
        if self.steps > self.limits.max_steps {
            return self.error_at(
                pos,
                "",
                format!("the template ran more than {} steps", self.limits.max_steps),
            );
        }
        Ok(())
    }

    fn write(&mut self, text: &str, pos: usize) -> Run<()> {
        if self.out.len() + text.len() > self.limits.max_output {
            return self.error_at(
                pos,
                "",
                format!(
                    "the template's output is longer than {} bytes",
                    self.limits.max_output
                ),
            );
        }
        self.out.push_str(text);
        Ok(())
    }

    fn list(&mut self, list: &List, dot: &Value) -> Run<Flow> {
        for node in list {
            let flow = self.node(node, dot)?;
            if flow != Flow::Normal {
                return Ok(flow);
            }
        }
        Ok(Flow::Normal)
    }

    fn node(&mut self, node: &Node, dot: &Value) -> Run<Flow> {
        match node {
            Node::Text(text) => {
                self.step(0)?;
                self.write(text, 0)?;
            }
            Node::Action(pipe) => {
                self.step(pipe.pos)?;
                let value = self.pipe(dot, pipe)?;
                if pipe.decl.is_empty() {
                    let text = value.print();
                    self.write(&text, pipe.pos)?;
                }
            }
            Node::If(control) => return self.control(control, dot, "if"),
            Node::With(control) => return self.control(control, dot, "with"),
            Node::Range(control) => return self.range(control, dot),
            Node::Break => return Ok(Flow::Break),
            Node::Continue => return Ok(Flow::Continue),
            Node::Template { pos, name, pipe } => {
                self.step(*pos)?;
                let Some((_, list)) = self.defined.iter().rev().find(|(n, _)| n == name) else {
                    return self.error_at(
                        *pos,
                        &format!("{{{{template {}}}}}", crate::gofmt::quote(name)),
                        format!("no such template {}", crate::gofmt::quote(name)),
                    );
                };
                let new_dot = match pipe {
                    Some(pipe) => self.pipe(dot, pipe)?,
                    None => Value::Nil,
                };
                if self.depth >= MAX_TEMPLATE_DEPTH {
                    return self.error_at(
                        *pos,
                        name,
                        format!("exceeded maximum template depth ({MAX_TEMPLATE_DEPTH})"),
                    );
                }
                let saved = std::mem::replace(&mut self.vars, vec![("$".into(), new_dot.clone())]);
                self.depth += 1;
                let result = self.list(list, &new_dot);
                self.depth -= 1;
                self.vars = saved;
                result?;
            }
        }
        Ok(Flow::Normal)
    }

    fn control(&mut self, control: &Control, dot: &Value, what: &str) -> Run<Flow> {
        self.step(control.pipe.pos)?;
        let mark = self.vars.len();
        let value = self.pipe(dot, &control.pipe)?;
        let flow = if value.truth() {
            let dot = if what == "with" { value } else { dot.clone() };
            self.list(&control.list, &dot)?
        } else if let Some(else_list) = &control.else_list {
            self.list(else_list, dot)?
        } else {
            Flow::Normal
        };
        self.vars.truncate(mark);
        Ok(flow)
    }

    fn range(&mut self, control: &Control, dot: &Value) -> Run<Flow> {
        self.step(control.pipe.pos)?;
        let mark = self.vars.len();
        let value = self.pipe(dot, &control.pipe)?;
        let items: Vec<(Value, Value)> = match &value {
            Value::Labels(m) => m
                .iter()
                .map(|(k, v)| (Value::Str(k.clone()), Value::Str(v.clone())))
                .collect(),
            Value::Args(m) => m
                .iter()
                .map(|(k, v)| (Value::Str(k.clone()), v.clone()))
                .collect(),
            Value::Samples(v) => v
                .iter()
                .enumerate()
                .map(|(i, s)| (Value::Int(i as i64), Value::Sample(Arc::new(s.clone()))))
                .collect(),
            Value::Nil => Vec::new(),
            other => {
                return self.error_at(
                    control.pipe.pos,
                    &control.pipe.to_string(),
                    format!("range can't iterate over {}", other.sprint()),
                )
            }
        };
        if items.is_empty() {
            if let Some(else_list) = &control.else_list {
                self.list(else_list, dot)?;
            }
            self.vars.truncate(mark);
            return Ok(Flow::Normal);
        }
        for (key, elem) in items {
            self.step(control.pipe.pos)?;
            // The pipeline's declarations name the element (one) or the
            // key and the element (two).
            match control.pipe.decl.len() {
                1 => self.set_last(0, elem.clone()),
                2 => {
                    self.set_last(1, key);
                    self.set_last(0, elem.clone());
                }
                _ => {}
            }
            let inner = self.vars.len();
            let flow = self.list(&control.list, &elem)?;
            self.vars.truncate(inner);
            if flow == Flow::Break {
                break;
            }
        }
        self.vars.truncate(mark);
        Ok(Flow::Normal)
    }

    /// Sets the variable `back` places from the top.
    fn set_last(&mut self, back: usize, value: Value) {
        let at = self.vars.len() - 1 - back;
        self.vars[at].1 = value;
    }

    fn pipe(&mut self, dot: &Value, pipe: &Pipe) -> Run<Value> {
        let mut value: Option<Value> = None;
        for cmd in &pipe.cmds {
            value = Some(self.command(dot, cmd, value)?);
        }
        let value = value.unwrap_or(Value::Nil);
        for name in &pipe.decl {
            if pipe.is_assign {
                match self.vars.iter_mut().rev().find(|(n, _)| n == name) {
                    Some(var) => var.1 = value.clone(),
                    None => {
                        return self.error_at(pipe.pos, name, format!("undefined variable: {name}"))
                    }
                }
            } else {
                self.vars.push((name.clone(), value.clone()));
            }
        }
        Ok(value)
    }

    fn command(&mut self, dot: &Value, cmd: &Command, last: Option<Value>) -> Run<Value> {
        let first = &cmd.args[0];
        if let Arg::Identifier(pos, name) = first {
            return self.function(dot, (*pos, &cmd.to_string()), name, &cmd.args[1..], last);
        }
        if cmd.args.len() > 1 || last.is_some() {
            return self.error_at(
                first.pos(),
                &first.to_string(),
                format!("can't give argument to non-function {first}"),
            );
        }
        match first {
            Arg::Nil(pos) => self.error_at(*pos, "nil", "nil is not a command"),
            Arg::Number(pos, n) => self.ideal(*pos, n),
            other => self.operand(dot, other),
        }
    }

    /// A number literal with no type to convert to: an int, unless written
    /// as a float.
    fn ideal(&self, pos: usize, n: &super::literal::Number) -> Run<Value> {
        if n.float_syntax {
            if let Some(f) = n.float {
                return Ok(Value::Float(f));
            }
        }
        match n.int {
            Some(i) => Ok(Value::Int(i)),
            None => self.error_at(pos, &n.text, format!("{} overflows int", n.text)),
        }
    }

    /// An operand's value (not a function call with arguments).
    fn operand(&mut self, dot: &Value, arg: &Arg) -> Run<Value> {
        match arg {
            Arg::Dot(_) => Ok(dot.clone()),
            Arg::Nil(_) => Ok(Value::Nil),
            Arg::Bool(_, b) => Ok(Value::Bool(*b)),
            Arg::String(_, _, s) => Ok(Value::Str(s.clone())),
            Arg::Number(pos, n) => self.ideal(*pos, n),
            Arg::Identifier(pos, name) => self.function(dot, (*pos, name), name, &[], None),
            Arg::Pipe(_, pipe) => {
                let mark = self.vars.len();
                let value = self.pipe(dot, pipe);
                self.vars.truncate(mark);
                value
            }
            Arg::Variable(pos, ident) => {
                let name = &ident[0];
                let Some((_, value)) = self.vars.iter().rev().find(|(n, _)| n == name) else {
                    return self.error_at(*pos, name, format!("undefined variable: {name}"));
                };
                let value = value.clone();
                self.fields(value, &ident[1..], *pos, arg)
            }
            Arg::Field(pos, ident) => self.fields(dot.clone(), ident, *pos, arg),
            Arg::Chain(pos, node, fields) => {
                let value = self.operand(dot, node)?;
                self.fields(value, fields, *pos, arg)
            }
        }
    }

    fn fields(&self, mut value: Value, fields: &[String], pos: usize, arg: &Arg) -> Run<Value> {
        for field in fields {
            value = self.field(&value, field, pos, arg)?;
        }
        Ok(value)
    }

    fn field(&self, receiver: &Value, name: &str, pos: usize, arg: &Arg) -> Run<Value> {
        let shown = arg.to_string();
        Ok(match (receiver, name) {
            (Value::Data(d), "Labels") => Value::Labels(Arc::new(d.labels.clone())),
            (Value::Data(d), "ExternalLabels") => {
                Value::Labels(Arc::new(d.external_labels.clone()))
            }
            (Value::Data(d), "ExternalURL") => Value::Str(d.external_url.clone()),
            (Value::Data(d), "Value") => Value::Float(d.value),
            (Value::Sample(s), "Labels") => Value::Labels(Arc::new(s.labels.clone())),
            (Value::Sample(s), "Value") => Value::Float(s.value),
            (Value::Labels(m), key) => Value::Str(m.get(key).cloned().unwrap_or_default()),
            (Value::Args(m), key) => m.get(key).cloned().unwrap_or(Value::Nil),
            (Value::Time(ms), "Unix") => Value::Int(ms.div_euclid(1000)),
            (Value::Time(ms), "UnixMilli") => Value::Int(*ms),
            (Value::Time(ms), "UTC") => Value::Time(*ms),
            (Value::Time(ms), "String") => Value::Str(super::value::format_time(*ms)),
            (Value::Nil, _) => {
                return self.error_at(
                    pos,
                    &shown,
                    format!("nil pointer evaluating interface {{}}.{name}"),
                )
            }
            (other, _) => {
                return self.error_at(
                    pos,
                    &shown,
                    format!("can't evaluate field {name} in type {}", other.type_name()),
                )
            }
        })
    }

    /// Calls `name`; `at` is the command's position and text, which
    /// errors name.
    fn function(
        &mut self,
        dot: &Value,
        at: (usize, &str),
        name: &str,
        args: &[Arg],
        last: Option<Value>,
    ) -> Run<Value> {
        let (pos, shown) = at;
        self.step(pos)?;
        let Some(sig) = funcs::signature(name) else {
            return self.error_at(
                pos,
                name,
                format!("{} is not a defined function", crate::gofmt::quote(name)),
            );
        };
        let given = args.len() + usize::from(last.is_some());
        let want = sig.params.len();
        if sig.variadic.is_some() && given < want {
            return self.error_at(
                pos,
                shown,
                format!("wrong number of args for {name}: want at least {want} got {given}"),
            );
        }
        if sig.variadic.is_none() && given != want {
            return self.error_at(
                pos,
                shown,
                format!("wrong number of args for {name}: want {want} got {given}"),
            );
        }
        let ty = |i: usize| {
            sig.params
                .get(i)
                .copied()
                .or(sig.variadic)
                .unwrap_or(Ty::Any)
        };
        if name == "and" || name == "or" {
            // Evaluated in order, stopping at the first false (and) or
            // true (or), which is the answer; else the last.
            let mut value = Value::Nil;
            for (i, arg) in args.iter().enumerate() {
                value = self.arg(dot, arg, ty(i), name)?;
                if value.truth() == (name == "or") {
                    return Ok(value);
                }
            }
            if let Some(last) = last {
                value = last;
            }
            return Ok(value);
        }
        let mut values = Vec::with_capacity(given);
        for (i, arg) in args.iter().enumerate() {
            values.push(self.arg(dot, arg, ty(i), name)?);
        }
        if let Some(last) = last {
            let t = ty(values.len());
            values.push(self.check_type(last, t, pos, name)?);
        }
        funcs::call(name, values, &self.ctx)
            .or_else(|err| self.error_at(pos, shown, format!("error calling {name}: {err}")))
    }

    /// An argument converted to its parameter's type, as Go's `evalArg`.
    fn arg(&mut self, dot: &Value, arg: &Arg, ty: Ty, func: &str) -> Run<Value> {
        let pos = arg.pos();
        match (arg, ty) {
            (Arg::Nil(_), Ty::Any | Ty::Samples | Ty::Sample) => Ok(Value::Nil),
            (Arg::Nil(_), _) => {
                self.error_at(pos, "nil", format!("cannot assign nil to {}", ty.name()))
            }
            (Arg::Bool(_, b), Ty::Any) => Ok(Value::Bool(*b)),
            (Arg::String(_, _, s), Ty::Any | Ty::Str) => Ok(Value::Str(s.clone())),
            (Arg::Number(_, n), Ty::Any) => self.ideal(pos, n),
            (Arg::Bool(..) | Arg::String(..) | Arg::Number(..), _) => {
                let expected = ty.name();
                self.error_at(
                    pos,
                    &arg.to_string(),
                    format!("expected {expected}; found {arg}"),
                )
            }
            _ => {
                let value = self.operand(dot, arg)?;
                self.check_type(value, ty, pos, func)
            }
        }
    }

    fn check_type(&self, value: Value, ty: Ty, pos: usize, func: &str) -> Run<Value> {
        if ty.accepts(&value) {
            return Ok(value);
        }
        if matches!(value, Value::Nil) {
            if matches!(ty, Ty::Samples | Ty::Sample) {
                return Ok(Value::Nil);
            }
            return self.error_at(pos, func, format!("invalid value; expected {}", ty.name()));
        }
        self.error_at(
            pos,
            func,
            format!(
                "wrong type for value; expected {}; got {}",
                ty.name(),
                value.type_name()
            ),
        )
    }
}
