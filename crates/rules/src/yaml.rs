//! A YAML document as a tree of nodes that know their line and column,
//! read the way Go's `gopkg.in/yaml.v3` reads it for Prometheus: the first
//! document only, plain scalars resolved to YAML 1.2's core tags (`!!null`,
//! `!!bool`, `!!int`, `!!float`, else `!!str`), aliases expanded, and
//! syntax errors worded as libyaml words them (`yaml: line N: …`).
//!
//! `saphyr-parser` gives the events and their positions; the tree is built
//! here so that the decoding in `file.rs` can reproduce yaml.v3's type
//! errors and positions, which promtool prints.

use saphyr_parser::{Event, Parser, ScalarStyle, ScanError};

/// The most nodes a document may expand to (aliases included): a small
/// file of nested aliases could otherwise expand to billions ("billion
/// laughs"); yaml.v3 bounds it too.
const MAX_NODES: usize = 1_000_000;

/// How deeply collections may nest.
const MAX_DEPTH: usize = 1_000;

/// A node of the document.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Node {
    /// 1-based, as yaml.v3's `Node.Line`.
    pub(crate) line: usize,
    /// 1-based, in characters, as yaml.v3's `Node.Column`.
    pub(crate) column: usize,
    pub(crate) kind: Kind,
}

/// What a node is.
#[derive(Debug, Clone, PartialEq)]
pub(crate) enum Kind {
    /// A scalar: its text and its tag (explicit, or resolved: `!!str`,
    /// `!!int`, …).
    Scalar {
        text: String,
        tag: String,
    },
    Seq(Vec<Node>),
    Map(Vec<(Node, Node)>),
}

impl Node {
    /// The scalar's text; `""` for a collection (yaml.v3's `Node.Value`).
    pub(crate) fn value(&self) -> &str {
        match &self.kind {
            Kind::Scalar { text, .. } => text,
            _ => "",
        }
    }

    /// yaml.v3's short tag of the node.
    pub(crate) fn tag(&self) -> &str {
        match &self.kind {
            Kind::Scalar { tag, .. } => tag,
            Kind::Seq(_) => "!!seq",
            Kind::Map(_) => "!!map",
        }
    }

    pub(crate) fn is_null(&self) -> bool {
        self.tag() == "!!null"
    }

    /// How yaml.v3 names the node in a type error: the tag, and a
    /// scalar's text (cut to 7 bytes and `...` past 10).
    pub(crate) fn describe(&self) -> String {
        match &self.kind {
            Kind::Scalar { text, tag } => {
                let shown = if text.len() > 10 {
                    let mut cut = 7;
                    while !text.is_char_boundary(cut) {
                        cut -= 1;
                    }
                    format!("{}...", &text[..cut])
                } else {
                    text.clone()
                };
                format!("{tag} `{shown}`")
            }
            _ => self.tag().to_owned(),
        }
    }
}

/// A syntax error: `yaml: line N: reason`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct SyntaxError {
    pub(crate) line: usize,
    pub(crate) message: String,
}

impl std::fmt::Display for SyntaxError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.line == 0 {
            write!(f, "yaml: {}", self.message)
        } else {
            write!(f, "yaml: line {}: {}", self.line, self.message)
        }
    }
}

/// The first document of `text`, `None` when there is none (an empty
/// file, or only comments).
pub(crate) fn parse(text: &str) -> Result<Option<Node>, SyntaxError> {
    let chars: Vec<char> = text.chars().collect();
    let mut builder = Builder {
        parser: Parser::new_from_str(text),
        chars: &chars,
        last_end: (0, 1, 0),
        scalar_lines: Vec::new(),
        anchors: Vec::new(),
        nodes: 0,
    };
    loop {
        match builder.next()? {
            None | Some((Event::StreamEnd, _)) => return Ok(None),
            Some((Event::DocumentStart(_), _)) => break,
            Some(_) => {}
        }
    }
    let doc = match builder.next()? {
        Some((Event::DocumentEnd, _)) | None => None,
        Some((event, mark)) => Some(builder.node(event, mark, 0)?),
    };
    if let Some(line) = blank_line_with_tab(text, &builder.scalar_lines) {
        return Err(SyntaxError {
            line,
            message: "found a tab character that violates indentation".into(),
        });
    }
    Ok(doc)
}

/// The first line outside multi-line scalars that holds only blanks (or a
/// comment) after a tab: libyaml refuses a tab where indentation is read,
/// YAML 1.2 and saphyr take it as white space. yaml.v3 names the line
/// before it (the line its scanner's context started on).
fn blank_line_with_tab(text: &str, scalar_lines: &[(usize, usize)]) -> Option<usize> {
    text.lines().enumerate().find_map(|(i, line)| {
        let number = i + 1;
        let lead = &line[..line.len() - line.trim_start_matches([' ', '\t']).len()];
        let rest = &line[lead.len()..];
        let blank = rest.is_empty() || rest.starts_with('#');
        let inside = scalar_lines
            .iter()
            .any(|(a, b)| (*a..=*b).contains(&number));
        (lead.contains('\t') && blank && !inside).then_some(i.max(1))
    })
}

/// A position: 1-based line and column.
type Mark = (usize, usize);

struct Builder<'a> {
    parser: Parser<'a, saphyr_parser::StrInput<'a>>,
    /// The text, by character (saphyr's markers count characters).
    chars: &'a [char],
    /// Where the previous event ended: character index, line, column
    /// (0-based).
    last_end: (usize, usize, usize),
    /// The lines multi-line scalars span (first, last).
    scalar_lines: Vec<(usize, usize)>,
    /// Anchored nodes by saphyr's anchor id.
    anchors: Vec<(usize, Node)>,
    nodes: usize,
}

impl<'a> Builder<'a> {
    fn next(&mut self) -> Result<Option<(Event<'a>, Mark)>, SyntaxError> {
        match self.parser.next() {
            None => Ok(None),
            Some(Ok((event, span))) => {
                let mut start = (span.start.line(), span.start.col() + 1);
                if let Event::Scalar(..) = event {
                    if span.end.line() > span.start.line() {
                        self.scalar_lines.push((span.start.line(), span.end.line()));
                    }
                }
                if let Event::Scalar(_, ScalarStyle::Literal | ScalarStyle::Folded, ..) = event {
                    start = self.indicator(span.start.index()).unwrap_or(start);
                }
                self.last_end = (span.end.index(), span.end.line(), span.end.col());
                Ok(Some((event, start)))
            }
            Some(Err(err)) => Err(syntax_error(&err, self.chars)),
        }
    }

    /// Where a block scalar's indicator (`|`, `>`) is: yaml.v3 places the
    /// node there, saphyr at its content. It is the first `|` or `>` after
    /// the previous event, comments apart.
    fn indicator(&self, content: usize) -> Option<Mark> {
        let (mut index, mut line, mut col) = self.last_end;
        let mut in_comment = false;
        while index < content.min(self.chars.len()) {
            match self.chars[index] {
                '\n' => {
                    in_comment = false;
                    line += 1;
                    col = 0;
                    index += 1;
                    continue;
                }
                '#' => in_comment = true,
                '|' | '>' if !in_comment => return Some((line, col + 1)),
                _ => {}
            }
            index += 1;
            col += 1;
        }
        None
    }

    fn count(&mut self, nodes: usize) -> Result<(), SyntaxError> {
        self.nodes += nodes;
        if self.nodes > MAX_NODES {
            return Err(SyntaxError {
                line: 0,
                message: "document contains excessive aliasing".into(),
            });
        }
        Ok(())
    }

    fn node(&mut self, event: Event<'a>, mark: Mark, depth: usize) -> Result<Node, SyntaxError> {
        if depth > MAX_DEPTH {
            return Err(SyntaxError {
                line: mark.0,
                message: "exceeded max depth of 1000".into(),
            });
        }
        self.count(1)?;
        let (line, column) = mark;
        let (node, anchor) = match event {
            Event::Scalar(text, style, anchor, tag) => {
                let tag = match tag {
                    Some(tag) if tag.handle == "tag:yaml.org,2002:" || tag.handle == "!!" => {
                        format!("!!{}", tag.suffix)
                    }
                    Some(tag) => format!("{}{}", tag.handle, tag.suffix),
                    None if style == ScalarStyle::Plain => resolve(&text).to_owned(),
                    None => "!!str".to_owned(),
                };
                let kind = Kind::Scalar {
                    text: text.into_owned(),
                    tag,
                };
                (Node { line, column, kind }, anchor)
            }
            Event::SequenceStart(anchor, _) => {
                let mut items = Vec::new();
                loop {
                    match self.next()? {
                        Some((Event::SequenceEnd, _)) => break,
                        Some((event, mark)) => items.push(self.node(event, mark, depth + 1)?),
                        None => return Err(eof()),
                    }
                }
                let kind = Kind::Seq(items);
                (Node { line, column, kind }, anchor)
            }
            Event::MappingStart(anchor, _) => {
                let mut entries = Vec::new();
                loop {
                    let key = match self.next()? {
                        Some((Event::MappingEnd, _)) => break,
                        Some((event, mark)) => self.node(event, mark, depth + 1)?,
                        None => return Err(eof()),
                    };
                    let value = match self.next()? {
                        Some((event, mark)) => self.node(event, mark, depth + 1)?,
                        None => return Err(eof()),
                    };
                    entries.push((key, value));
                }
                let kind = Kind::Map(entries);
                (Node { line, column, kind }, anchor)
            }
            Event::Alias(id) => {
                let Some((_, target)) = self.anchors.iter().rev().find(|(a, _)| *a == id) else {
                    return Err(SyntaxError {
                        line,
                        message: "unknown anchor referenced".into(),
                    });
                };
                let target = target.clone();
                self.count(size(&target))?;
                return Ok(target);
            }
            other => {
                return Err(SyntaxError {
                    line,
                    message: format!("unexpected event {other:?}"),
                })
            }
        };
        if anchor != 0 {
            self.anchors.push((anchor, node.clone()));
        }
        Ok(node)
    }
}

/// How many nodes `node` holds.
fn size(node: &Node) -> usize {
    1 + match &node.kind {
        Kind::Scalar { .. } => 0,
        Kind::Seq(items) => items.iter().map(size).sum(),
        Kind::Map(entries) => entries.iter().map(|(k, v)| size(k) + size(v)).sum(),
    }
}

fn eof() -> SyntaxError {
    SyntaxError {
        line: 0,
        message: "unexpected end of stream".into(),
    }
}

/// saphyr's error in libyaml's words (the problem, without the context
/// libyaml keeps apart and yaml.v3 does not print).
fn syntax_error(err: &ScanError, chars: &[char]) -> SyntaxError {
    let info = err.info();
    let mut line = err.marker().line();
    if info == "simple key expect ':'" {
        // libyaml names the line the key started on: the last one with
        // text before the point the scanner gave up.
        let end = err.marker().index().min(chars.len());
        let text: String = chars[..end].iter().collect();
        let mut lines = text.lines().collect::<Vec<_>>();
        if text.ends_with('\n') {
            lines.push("");
        }
        while let Some(last) = lines.last() {
            let content = last.split('#').next().unwrap_or("").trim();
            if !content.is_empty() || lines.len() == 1 {
                break;
            }
            lines.pop();
        }
        line = lines.len().max(1);
    }
    let message = match info {
        "simple key expect ':'" => "could not find expected ':'".to_owned(),
        "tabs disallowed within this context (block indentation)"
        | "tab cannot be used as indentation"
        | "tabs disallowed in this context" => {
            "found a tab character that violates indentation".to_owned()
        }
        "while parsing a flow sequence, expected ',' or ']'" => {
            "did not find expected ',' or ']'".to_owned()
        }
        _ => match info.split_once(", ") {
            Some((context, problem)) if context.starts_with("while ") => problem.to_owned(),
            _ => info.to_owned(),
        },
    };
    SyntaxError { line, message }
}

/// YAML 1.2's core schema, as yaml.v3 resolves a plain scalar's tag.
pub(crate) fn resolve(text: &str) -> &'static str {
    match text {
        "" | "~" | "null" | "Null" | "NULL" => "!!null",
        "true" | "True" | "TRUE" | "false" | "False" | "FALSE" => "!!bool",
        ".nan" | ".NaN" | ".NAN" | ".inf" | ".Inf" | ".INF" | "+.inf" | "+.Inf" | "+.INF"
        | "-.inf" | "-.Inf" | "-.INF" => "!!float",
        "<<" => "!!merge",
        _ if parse_int(text).is_some() => "!!int",
        _ if is_float(text) => "!!float",
        _ => "!!str",
    }
}

/// An integer as yaml.v3 reads one: decimal, `0x`, `0o`, `0b`, a sign,
/// underscores between digits.
pub(crate) fn parse_int(text: &str) -> Option<i128> {
    let plain = text.replace('_', "");
    let (negative, digits) = match plain.as_bytes().first()? {
        b'-' => (true, &plain[1..]),
        b'+' => (false, &plain[1..]),
        _ => (false, plain.as_str()),
    };
    let (radix, digits) = if let Some(rest) = digits.strip_prefix("0x") {
        (16, rest)
    } else if let Some(rest) = digits.strip_prefix("0o") {
        (8, rest)
    } else if let Some(rest) = digits.strip_prefix("0b") {
        (2, rest)
    } else if digits.len() > 1 && digits.starts_with('0') {
        (8, &digits[1..])
    } else {
        (10, digits)
    };
    if digits.is_empty() || !digits.chars().all(|c| c.is_digit(radix)) {
        return None;
    }
    let value = i128::from_str_radix(digits, radix).ok()?;
    let value = if negative { -value } else { value };
    (i128::from(i64::MIN)..=i128::from(u64::MAX))
        .contains(&value)
        .then_some(value)
}

/// yaml.v3's float pattern: `[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?`.
fn is_float(text: &str) -> bool {
    let s = text.replace('_', "");
    let s = s.strip_prefix(['-', '+']).unwrap_or(&s);
    let (mantissa, exponent) = match s.find(['e', 'E']) {
        Some(at) => (&s[..at], Some(&s[at + 1..])),
        None => (s, None),
    };
    let digits = |t: &str| !t.is_empty() && t.bytes().all(|b| b.is_ascii_digit());
    let mantissa_ok = match mantissa.split_once('.') {
        Some(("", frac)) => digits(frac),
        Some((int, frac)) => digits(int) && (frac.is_empty() || digits(frac)),
        None => digits(mantissa),
    };
    let exponent_ok = match exponent {
        None => true,
        Some(e) => digits(e.strip_prefix(['-', '+']).unwrap_or(e)),
    };
    mantissa_ok && exponent_ok
}

#[cfg(test)]
mod tests {
    use super::*;

    fn at(node: &Node) -> (usize, usize) {
        (node.line, node.column)
    }

    #[test]
    fn nodes_know_where_they_start_as_yaml_v3_says() {
        let doc = parse("groups:\n  - name: a\n    rules:\n      - expr: |\n          up\n        record:   \"x\"\n")
            .unwrap()
            .unwrap();
        let Kind::Map(top) = &doc.kind else { panic!() };
        let Kind::Seq(groups) = &top[0].1.kind else {
            panic!()
        };
        assert_eq!(at(&groups[0]), (2, 5));
        let Kind::Map(group) = &groups[0].kind else {
            panic!()
        };
        let Kind::Seq(rules) = &group[1].1.kind else {
            panic!()
        };
        let Kind::Map(rule) = &rules[0].kind else {
            panic!()
        };
        assert_eq!(
            at(&rule[0].1),
            (4, 15),
            "a block scalar starts at its indicator"
        );
        assert_eq!(rule[0].1.value(), "up\n");
        assert_eq!(at(&rule[1].1), (6, 19), "a quoted scalar at its quote");
        assert_eq!(rule[1].1.tag(), "!!str");
    }

    #[test]
    fn plain_scalars_resolve_to_core_tags() {
        for (text, tag) in [
            ("", "!!null"),
            ("~", "!!null"),
            ("true", "!!bool"),
            ("yes", "!!str"),
            ("12", "!!int"),
            ("-0x1F", "!!int"),
            ("1_000", "!!int"),
            ("1.5", "!!float"),
            (".5e3", "!!float"),
            ("-.inf", "!!float"),
            ("5m", "!!str"),
            ("1.2.3", "!!str"),
        ] {
            assert_eq!(resolve(text), tag, "{text}");
        }
    }

    #[test]
    fn only_the_first_document_is_read_and_aliases_are_expanded() {
        assert_eq!(parse("").unwrap(), None);
        assert_eq!(parse("# nothing\n").unwrap(), None);
        let doc = parse("a: &x [1, 2]\nb: *x\n---\nc: [").unwrap().unwrap();
        let Kind::Map(entries) = &doc.kind else {
            panic!()
        };
        assert_eq!(entries[0].1.kind, entries[1].1.kind);
    }

    #[test]
    fn aliases_that_expand_past_the_bound_are_refused() {
        let mut text = String::from("a0: &a0 [x, x, x, x, x, x, x, x, x, x]\n");
        for i in 1..10 {
            let prev = format!("*a{}", i - 1);
            let items = [prev.as_str(); 10].join(", ");
            text.push_str(&format!("a{i}: &a{i} [{items}]\n"));
        }
        let err = parse(&text).unwrap_err();
        assert!(err.message.contains("excessive aliasing"), "{err}");
    }

    #[test]
    fn syntax_errors_read_as_libyaml_words_them() {
        let err =
            parse("groups:\n  - name: a\n    rules:\n      - record: x\n    expr: up\n  bad\n")
                .unwrap_err();
        assert_eq!(err.to_string(), "yaml: line 6: could not find expected ':'");
    }
}
