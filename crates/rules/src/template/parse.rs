//! A template's tree, parsed as Go's `text/template/parse` parses it:
//! text, actions with pipelines, `if`/`range`/`with` with `else` (and
//! `else if`), `define`/`template`/`block`, `break`/`continue`; functions
//! and variables checked as they are met, every error worded as Go words
//! it (`template: NAME:LINE: …`).

use super::lex::{lex, Item, Tok};
use super::literal::{number, unquote, Number};

/// A sequence of nodes.
pub(crate) type List = Vec<Node>;

/// A node of the tree.
#[derive(Debug, Clone)]
pub(crate) enum Node {
    Text(String),
    Action(Pipe),
    If(Control),
    Range(Control),
    With(Control),
    Template {
        pos: usize,
        name: String,
        pipe: Option<Pipe>,
    },
    Break,
    Continue,
}

/// `if`, `range`, `with`: the pipeline, the list, the `else` list.
#[derive(Debug, Clone)]
pub(crate) struct Control {
    pub(crate) pipe: Pipe,
    pub(crate) list: List,
    pub(crate) else_list: Option<List>,
}

/// A pipeline: optional declarations, then commands joined by `|`.
#[derive(Debug, Clone)]
pub(crate) struct Pipe {
    pub(crate) pos: usize,
    /// `=` rather than `:=`.
    pub(crate) is_assign: bool,
    pub(crate) decl: Vec<String>,
    pub(crate) cmds: Vec<Command>,
}

/// A command: a function or operand and its arguments.
#[derive(Debug, Clone)]
pub(crate) struct Command {
    pub(crate) args: Vec<Arg>,
}

/// An operand.
#[derive(Debug, Clone)]
pub(crate) enum Arg {
    Identifier(usize, String),
    Dot(usize),
    Nil(usize),
    /// `$x.a.b`: the variable, then fields.
    Variable(usize, Vec<String>),
    /// `.a.b`.
    Field(usize, Vec<String>),
    /// `(pipeline).a.b` and the like.
    Chain(usize, Box<Arg>, Vec<String>),
    Bool(usize, bool),
    Number(usize, Number),
    /// Its text as written, and its value.
    String(usize, String, String),
    Pipe(usize, Box<Pipe>),
}

impl Arg {
    pub(crate) fn pos(&self) -> usize {
        match self {
            Arg::Identifier(p, _)
            | Arg::Dot(p)
            | Arg::Nil(p)
            | Arg::Variable(p, _)
            | Arg::Field(p, _)
            | Arg::Chain(p, _, _)
            | Arg::Bool(p, _)
            | Arg::Number(p, _)
            | Arg::String(p, _, _)
            | Arg::Pipe(p, _) => *p,
        }
    }
}

impl std::fmt::Display for Arg {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Arg::Identifier(_, name) => f.write_str(name),
            Arg::Dot(_) => f.write_str("."),
            Arg::Nil(_) => f.write_str("nil"),
            Arg::Variable(_, ident) => f.write_str(&ident.join(".")),
            Arg::Field(_, ident) => write!(f, ".{}", ident.join(".")),
            Arg::Chain(_, node, fields) => {
                match **node {
                    Arg::Pipe(..) => write!(f, "({node})")?,
                    _ => write!(f, "{node}")?,
                }
                for field in fields {
                    write!(f, ".{field}")?;
                }
                Ok(())
            }
            Arg::Bool(_, b) => write!(f, "{b}"),
            Arg::Number(_, n) => f.write_str(&n.text),
            Arg::String(_, quoted, _) => f.write_str(quoted),
            Arg::Pipe(_, pipe) => write!(f, "{pipe}"),
        }
    }
}

impl std::fmt::Display for Pipe {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if !self.decl.is_empty() {
            let op = if self.is_assign { "=" } else { ":=" };
            write!(f, "{} {op} ", self.decl.join(", "))?;
        }
        let cmds: Vec<String> = self.cmds.iter().map(|c| c.to_string()).collect();
        f.write_str(&cmds.join(" | "))
    }
}

impl std::fmt::Display for Command {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let args: Vec<String> = self
            .args
            .iter()
            .map(|a| match a {
                Arg::Pipe(..) => format!("({a})"),
                _ => a.to_string(),
            })
            .collect();
        f.write_str(&args.join(" "))
    }
}

/// A parsed template: its main tree and the templates it defines.
#[derive(Debug, Clone)]
pub(crate) struct Tree {
    pub(crate) root: List,
    pub(crate) defined: Vec<(String, List)>,
}

/// Parses `text`, named `name` in errors; `defined` says which function
/// names exist.
pub(crate) fn parse(
    name: &str,
    text: &str,
    defined: &dyn Fn(&str) -> bool,
) -> Result<Tree, String> {
    let mut parser = Parser {
        name,
        items: lex(text),
        at: 0,
        vars: vec!["$".into()],
        range_depth: 0,
        action_line: 0,
        defined,
        templates: Vec::new(),
    };
    let root = parser.top()?;
    Ok(Tree {
        root,
        defined: parser.templates,
    })
}

/// How deeply actions may nest in the tree.
const MAX_NESTING: usize = 200;

struct Parser<'a> {
    name: &'a str,
    items: Vec<Item>,
    at: usize,
    vars: Vec<String>,
    range_depth: usize,
    action_line: usize,
    defined: &'a dyn Fn(&str) -> bool,
    templates: Vec<(String, List)>,
}

type Parsed<T> = Result<T, String>;

impl Parser<'_> {
    fn next(&mut self) -> Item {
        let item = self.items[self.at.min(self.items.len() - 1)].clone();
        self.at += 1;
        item
    }

    fn backup(&mut self) {
        self.at -= 1;
    }

    fn peek(&self) -> &Item {
        &self.items[self.at.min(self.items.len() - 1)]
    }

    fn next_non_space(&mut self) -> Item {
        loop {
            let item = self.next();
            if item.tok != Tok::Space {
                return item;
            }
        }
    }

    fn peek_non_space(&mut self) -> Item {
        let item = self.next_non_space();
        self.backup();
        item
    }

    fn error_at<T>(&self, line: usize, message: impl std::fmt::Display) -> Parsed<T> {
        Err(format!("template: {}:{line}: {message}", self.name))
    }

    fn error<T>(&self, message: impl std::fmt::Display) -> Parsed<T> {
        let line = self.items[self.at.saturating_sub(1).min(self.items.len() - 1)].line;
        self.error_at(line, message)
    }

    fn unexpected<T>(&self, item: &Item, context: &str) -> Parsed<T> {
        if item.tok == Tok::Error {
            let mut extra = String::new();
            if self.action_line != 0 && self.action_line != item.line {
                extra = format!(" in action started at {}:{}", self.name, self.action_line);
                if item.val.ends_with(" action") {
                    extra = extra[" in action".len()..].to_owned();
                }
            }
            return self.error_at(item.line, format!("{item}{extra}"));
        }
        self.error_at(item.line, format!("unexpected {item} in {context}"))
    }

    fn expect(&mut self, tok: Tok, context: &str) -> Parsed<Item> {
        let item = self.next_non_space();
        if item.tok != tok {
            return self.unexpected(&item, context);
        }
        Ok(item)
    }

    fn top(&mut self) -> Parsed<List> {
        let mut root = List::new();
        while self.peek().tok != Tok::Eof {
            if self.peek().tok == Tok::LeftDelim {
                let delim = self.at;
                self.next();
                if self.next_non_space().tok == Tok::Define {
                    self.definition()?;
                    continue;
                }
                self.at = delim;
            }
            match self.text_or_action(0)? {
                Parsed2::End => return self.error("unexpected {{end}}"),
                Parsed2::Else(_) => return self.error("unexpected {{else}}"),
                Parsed2::Node(node) => root.push(node),
            }
        }
        Ok(root)
    }

    fn definition(&mut self) -> Parsed<()> {
        const CONTEXT: &str = "define clause";
        let item = self.next_non_space();
        let name = self.template_name(&item, CONTEXT)?;
        self.expect(Tok::RightDelim, CONTEXT)?;
        let saved = std::mem::replace(&mut self.vars, vec!["$".into()]);
        let (list, end) = self.item_list(0)?;
        self.vars = saved;
        if !matches!(end, End::End) {
            return self.error(format!("unexpected {end} in {CONTEXT}"));
        }
        self.templates.push((name, list));
        Ok(())
    }

    fn template_name(&self, item: &Item, context: &str) -> Parsed<String> {
        match item.tok {
            Tok::String | Tok::RawString => {
                unquote(&item.val).or_else(|_| self.error("invalid syntax"))
            }
            _ => self.unexpected(item, context),
        }
    }

    /// Nodes up to `{{end}}` or `{{else}}`.
    fn item_list(&mut self, depth: usize) -> Parsed<(List, End)> {
        let mut list = List::new();
        while self.peek_non_space().tok != Tok::Eof {
            match self.text_or_action(depth)? {
                Parsed2::End => return Ok((list, End::End)),
                Parsed2::Else(kind) => return Ok((list, End::Else(kind))),
                Parsed2::Node(node) => list.push(node),
            }
        }
        self.error("unexpected EOF")
    }

    fn text_or_action(&mut self, depth: usize) -> Parsed<Parsed2> {
        if depth > MAX_NESTING {
            return self.error(format!("actions nest more than {MAX_NESTING} deep"));
        }
        let item = self.next_non_space();
        match item.tok {
            Tok::Text => Ok(Parsed2::Node(Node::Text(item.val))),
            Tok::LeftDelim => {
                self.action_line = item.line;
                let result = self.action(depth);
                self.action_line = 0;
                result
            }
            _ => self.unexpected(&item, "input"),
        }
    }

    fn action(&mut self, depth: usize) -> Parsed<Parsed2> {
        let item = self.next_non_space();
        let node = match item.tok {
            Tok::Block => self.block(depth)?,
            Tok::Break | Tok::Continue => {
                let what = if item.tok == Tok::Break {
                    "break"
                } else {
                    "continue"
                };
                let next = self.next_non_space();
                if next.tok != Tok::RightDelim {
                    return self.unexpected(&next, &format!("{{{{{what}}}}}"));
                }
                if self.range_depth == 0 {
                    return self.error(format!("{{{{{what}}}}} outside {{{{range}}}}"));
                }
                if item.tok == Tok::Break {
                    Node::Break
                } else {
                    Node::Continue
                }
            }
            Tok::Else => {
                if self.peek_non_space().tok == Tok::If {
                    return Ok(Parsed2::Else(ElseKind::If));
                }
                self.expect(Tok::RightDelim, "else")?;
                return Ok(Parsed2::Else(ElseKind::Plain));
            }
            Tok::End => {
                self.expect(Tok::RightDelim, "end")?;
                return Ok(Parsed2::End);
            }
            Tok::If => Node::If(self.control(true, "if", depth)?),
            Tok::Range => Node::Range(self.control(false, "range", depth)?),
            Tok::With => Node::With(self.control(false, "with", depth)?),
            Tok::Template => {
                const CONTEXT: &str = "template clause";
                let token = self.next_non_space();
                let name = self.template_name(&token, CONTEXT)?;
                let pipe = if self.next_non_space().tok != Tok::RightDelim {
                    self.backup();
                    Some(self.pipeline(CONTEXT, Tok::RightDelim)?)
                } else {
                    None
                };
                Node::Template {
                    pos: token.pos,
                    name,
                    pipe,
                }
            }
            _ => {
                self.backup();
                Node::Action(self.pipeline("command", Tok::RightDelim)?)
            }
        };
        Ok(Parsed2::Node(node))
    }

    fn block(&mut self, depth: usize) -> Parsed<Node> {
        const CONTEXT: &str = "block clause";
        let token = self.next_non_space();
        let name = self.template_name(&token, CONTEXT)?;
        let pipe = self.pipeline(CONTEXT, Tok::RightDelim)?;
        let saved = std::mem::replace(&mut self.vars, vec!["$".into()]);
        let (list, end) = self.item_list(depth + 1)?;
        self.vars = saved;
        if !matches!(end, End::End) {
            return self.error(format!("unexpected {end} in {CONTEXT}"));
        }
        self.templates.push((name.clone(), list));
        Ok(Node::Template {
            pos: token.pos,
            name,
            pipe: Some(pipe),
        })
    }

    fn control(&mut self, allow_else_if: bool, context: &str, depth: usize) -> Parsed<Control> {
        let vars = self.vars.len();
        let pipe = self.pipeline(context, Tok::RightDelim)?;
        if context == "range" {
            self.range_depth += 1;
        }
        let (list, next) = self.item_list(depth + 1)?;
        if context == "range" {
            self.range_depth -= 1;
        }
        let else_list = match next {
            End::End => None,
            End::Else(ElseKind::If) if allow_else_if => {
                self.next_non_space(); // the `if`
                Some(vec![Node::If(self.control(true, "if", depth + 1)?)])
            }
            End::Else(_) => {
                let (list, next) = self.item_list(depth + 1)?;
                if !matches!(next, End::End) {
                    return self.error(format!("expected end; found {next}"));
                }
                Some(list)
            }
        };
        self.vars.truncate(vars);
        Ok(Control {
            pipe,
            list,
            else_list,
        })
    }

    fn pipeline(&mut self, context: &str, end: Tok) -> Parsed<Pipe> {
        let pos = self.peek_non_space().pos;
        let mut pipe = Pipe {
            pos,
            is_assign: false,
            decl: Vec::new(),
            cmds: Vec::new(),
        };
        loop {
            let v = self.peek_non_space();
            if v.tok != Tok::Variable {
                break;
            }
            let before = self.at;
            self.next_non_space();
            let after_variable = self.peek().tok;
            let next = self.peek_non_space();
            match next.tok {
                Tok::Assign | Tok::Declare => {
                    pipe.is_assign = next.tok == Tok::Assign;
                    self.next_non_space();
                    pipe.decl.push(v.val.clone());
                    self.vars.push(v.val);
                    break;
                }
                Tok::Char if next.val == "," => {
                    self.next_non_space();
                    pipe.decl.push(v.val.clone());
                    self.vars.push(v.val);
                    if context == "range" && pipe.decl.len() < 2 {
                        match self.peek_non_space().tok {
                            Tok::Variable | Tok::RightDelim | Tok::RightParen => continue,
                            _ => return self.error("range can only initialize variables"),
                        }
                    }
                    return self.error(format!("too many declarations in {context}"));
                }
                _ => {
                    let _ = after_variable;
                    self.at = before;
                    break;
                }
            }
        }
        loop {
            let item = self.next_non_space();
            match item.tok {
                t if t == end => {
                    if pipe.cmds.is_empty() {
                        return self.error(format!("missing value for {context}"));
                    }
                    for (i, cmd) in pipe.cmds.iter().enumerate().skip(1) {
                        if matches!(
                            cmd.args[0],
                            Arg::Bool(..)
                                | Arg::Dot(_)
                                | Arg::Nil(_)
                                | Arg::Number(..)
                                | Arg::String(..)
                        ) {
                            return self.error(format!(
                                "non executable command in pipeline stage {}",
                                i + 1
                            ));
                        }
                    }
                    return Ok(pipe);
                }
                Tok::Bool
                | Tok::CharConstant
                | Tok::Dot
                | Tok::Field
                | Tok::Identifier
                | Tok::Number
                | Tok::Nil
                | Tok::RawString
                | Tok::String
                | Tok::Variable
                | Tok::LeftParen => {
                    self.backup();
                    let cmd = self.command()?;
                    pipe.cmds.push(cmd);
                }
                _ => return self.unexpected(&item, context),
            }
        }
    }

    fn command(&mut self) -> Parsed<Command> {
        let mut args = Vec::new();
        loop {
            self.peek_non_space();
            if let Some(operand) = self.operand()? {
                args.push(operand);
            }
            let item = self.next();
            match item.tok {
                Tok::Space => continue,
                Tok::RightDelim | Tok::RightParen => self.backup(),
                Tok::Pipe => {}
                _ => return self.unexpected(&item, "operand"),
            }
            break;
        }
        if args.is_empty() {
            return self.error("empty command");
        }
        Ok(Command { args })
    }

    fn operand(&mut self) -> Parsed<Option<Arg>> {
        let Some(node) = self.term()? else {
            return Ok(None);
        };
        if self.peek().tok != Tok::Field {
            return Ok(Some(node));
        }
        // The node is then placed where its fields start, as Go places it.
        let fields_at = self.peek().pos;
        let mut fields = Vec::new();
        while self.peek().tok == Tok::Field {
            fields.push(self.next().val[1..].to_owned());
        }
        Ok(Some(match node {
            Arg::Field(_, mut ident) => {
                ident.extend(fields);
                Arg::Field(fields_at, ident)
            }
            Arg::Variable(_, mut ident) => {
                ident.extend(fields);
                Arg::Variable(fields_at, ident)
            }
            Arg::Bool(..) | Arg::String(..) | Arg::Number(..) | Arg::Nil(_) | Arg::Dot(_) => {
                return self.error(format!(
                    "unexpected . after term {}",
                    crate::gofmt::quote(&node.to_string())
                ));
            }
            other => Arg::Chain(fields_at, Box::new(other), fields),
        }))
    }

    fn term(&mut self) -> Parsed<Option<Arg>> {
        let item = self.next_non_space();
        Ok(Some(match item.tok {
            Tok::Identifier => {
                if !(self.defined)(&item.val) {
                    return self.error(format!(
                        "function {} not defined",
                        crate::gofmt::quote(&item.val)
                    ));
                }
                Arg::Identifier(item.pos, item.val)
            }
            Tok::Dot => Arg::Dot(item.pos),
            Tok::Nil => Arg::Nil(item.pos),
            Tok::Variable => {
                if !self.vars.contains(&item.val) {
                    return self.error(format!(
                        "undefined variable {}",
                        crate::gofmt::quote(&item.val)
                    ));
                }
                Arg::Variable(item.pos, vec![item.val])
            }
            Tok::Field => Arg::Field(item.pos, vec![item.val[1..].to_owned()]),
            Tok::Bool => Arg::Bool(item.pos, item.val == "true"),
            Tok::CharConstant | Tok::Number => match number(&item) {
                Some(n) => Arg::Number(item.pos, n),
                None => {
                    return self.error(format!(
                        "illegal number syntax: {}",
                        crate::gofmt::quote(&item.val)
                    ))
                }
            },
            Tok::LeftParen => Arg::Pipe(
                item.pos,
                Box::new(self.pipeline("parenthesized pipeline", Tok::RightParen)?),
            ),
            Tok::String | Tok::RawString => match unquote(&item.val) {
                Ok(text) => Arg::String(item.pos, item.val, text),
                Err(()) => return self.error("invalid syntax"),
            },
            _ => {
                self.backup();
                return Ok(None);
            }
        }))
    }
}

/// What ended a list.
enum End {
    End,
    Else(ElseKind),
}

enum ElseKind {
    Plain,
    If,
}

impl std::fmt::Display for End {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            End::End => "{{end}}",
            End::Else(_) => "{{else}}",
        })
    }
}

/// What `text_or_action` found.
enum Parsed2 {
    Node(Node),
    End,
    Else(ElseKind),
}
