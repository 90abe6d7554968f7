//! The template's tokens, as Go's `text/template/parse` lexer makes them:
//! text between `{{ }}` actions, trim markers (`{{- ` and ` -}}`),
//! comments, and inside actions identifiers, fields, variables, numbers,
//! strings and punctuation; its errors worded as Go words them.

/// What a token is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Tok {
    Error,
    Bool,
    Char,
    CharConstant,
    Assign,
    Declare,
    Eof,
    Field,
    Identifier,
    LeftDelim,
    LeftParen,
    Number,
    Pipe,
    RawString,
    RightDelim,
    RightParen,
    Space,
    String,
    Text,
    Variable,
    // Keywords.
    Block,
    Break,
    Continue,
    Dot,
    Define,
    Else,
    End,
    If,
    Nil,
    Range,
    Template,
    With,
}

/// A token: its kind, where it starts (a byte offset), its text (for an
/// error, the message) and its line.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct Item {
    pub(crate) tok: Tok,
    pub(crate) pos: usize,
    pub(crate) val: String,
    pub(crate) line: usize,
}

impl std::fmt::Display for Item {
    /// As Go's `item.String`: how the parser names a token in an error.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self.tok {
            Tok::Eof => f.write_str("EOF"),
            Tok::Error => f.write_str(&self.val),
            Tok::Block
            | Tok::Break
            | Tok::Continue
            | Tok::Dot
            | Tok::Define
            | Tok::Else
            | Tok::End
            | Tok::If
            | Tok::Nil
            | Tok::Range
            | Tok::Template
            | Tok::With => write!(f, "<{}>", self.val),
            _ if self.val.chars().count() > 10 => {
                let short: String = self.val.chars().take(10).collect();
                write!(f, "{}...", crate::gofmt::quote(&short))
            }
            _ => f.write_str(&crate::gofmt::quote(&self.val)),
        }
    }
}

fn keyword(word: &str) -> Option<Tok> {
    Some(match word {
        "." => Tok::Dot,
        "block" => Tok::Block,
        "break" => Tok::Break,
        "continue" => Tok::Continue,
        "define" => Tok::Define,
        "else" => Tok::Else,
        "end" => Tok::End,
        "if" => Tok::If,
        "range" => Tok::Range,
        "nil" => Tok::Nil,
        "template" => Tok::Template,
        "with" => Tok::With,
        _ => return None,
    })
}

fn is_space(c: char) -> bool {
    matches!(c, ' ' | '\t' | '\r' | '\n')
}

fn is_alphanumeric(c: char) -> bool {
    c == '_' || c.is_alphabetic() || c.is_numeric()
}

/// Every token of `input`, ending with `Eof` or an `Error`.
pub(crate) fn lex(input: &str) -> Vec<Item> {
    let mut lexer = Lexer {
        input,
        pos: 0,
        start: 0,
        line: 1,
        start_line: 1,
        paren_depth: 0,
        items: Vec::new(),
    };
    lexer.run();
    lexer.items
}

struct Lexer<'a> {
    input: &'a str,
    pos: usize,
    start: usize,
    line: usize,
    start_line: usize,
    paren_depth: usize,
    items: Vec<Item>,
}

/// What to scan next (Go's state functions).
enum State {
    Text,
    InsideAction,
    Done,
}

impl Lexer<'_> {
    fn rest(&self) -> &str {
        &self.input[self.pos..]
    }

    fn next(&mut self) -> Option<char> {
        let c = self.rest().chars().next()?;
        self.pos += c.len_utf8();
        if c == '\n' {
            self.line += 1;
        }
        Some(c)
    }

    fn peek(&self) -> Option<char> {
        self.rest().chars().next()
    }

    fn backup(&mut self, c: Option<char>) {
        if let Some(c) = c {
            self.pos -= c.len_utf8();
            if c == '\n' {
                self.line -= 1;
            }
        }
    }

    fn emit(&mut self, tok: Tok) {
        self.items.push(Item {
            tok,
            pos: self.start,
            val: self.input[self.start..self.pos].to_owned(),
            line: self.start_line,
        });
        self.ignore();
    }

    fn ignore(&mut self) {
        self.start = self.pos;
        self.start_line = self.line;
    }

    fn error(&mut self, message: String) -> State {
        self.items.push(Item {
            tok: Tok::Error,
            pos: self.start,
            val: message,
            line: self.start_line,
        });
        State::Done
    }

    /// Moves to `pos` (forward), counting lines.
    fn skip_to(&mut self, pos: usize) {
        self.line += self.input[self.pos..pos].matches('\n').count();
        self.pos = pos;
    }

    fn run(&mut self) {
        let mut state = State::Text;
        loop {
            state = match state {
                State::Text => self.text(),
                State::InsideAction => self.inside_action(),
                State::Done => return,
            };
        }
    }

    fn text(&mut self) -> State {
        if let Some(x) = self.rest().find("{{") {
            let delim = self.pos + x;
            let mut end = delim;
            let trim = has_left_trim_marker(&self.input[delim + 2..]);
            if trim {
                end = self.input[..delim]
                    .trim_end_matches(is_space)
                    .len()
                    .max(self.start);
            }
            self.skip_to(end);
            if self.pos > self.start {
                self.emit(Tok::Text);
            }
            self.skip_to(delim);
            self.ignore();
            return self.left_delim(trim);
        }
        self.skip_to(self.input.len());
        if self.pos > self.start {
            self.emit(Tok::Text);
        }
        self.emit(Tok::Eof);
        State::Done
    }

    fn left_delim(&mut self, trim: bool) -> State {
        self.skip_to(self.pos + 2);
        let after_marker = if trim { 2 } else { 0 };
        if self.input[self.pos + after_marker..].starts_with("/*") {
            self.skip_to(self.pos + after_marker);
            self.ignore();
            return self.comment();
        }
        self.emit(Tok::LeftDelim);
        self.skip_to(self.pos + after_marker);
        self.ignore();
        self.paren_depth = 0;
        State::InsideAction
    }

    fn comment(&mut self) -> State {
        self.skip_to(self.pos + 2);
        let Some(x) = self.rest().find("*/") else {
            return self.error("unclosed comment".into());
        };
        self.skip_to(self.pos + x + 2);
        let (delim, trim) = self.at_right_delim();
        if !delim {
            return self.error("comment ends before closing delimiter".into());
        }
        if trim {
            self.skip_to(self.pos + 2);
        }
        self.skip_to(self.pos + 2);
        if trim {
            let spaces = self.rest().len() - self.rest().trim_start_matches(is_space).len();
            self.skip_to(self.pos + spaces);
        }
        self.ignore();
        State::Text
    }

    fn at_right_delim(&self) -> (bool, bool) {
        if has_right_trim_marker(self.rest()) && self.rest()[2..].starts_with("}}") {
            return (true, true);
        }
        (self.rest().starts_with("}}"), false)
    }

    fn right_delim(&mut self, trim: bool) -> State {
        if trim {
            self.skip_to(self.pos + 2);
            self.ignore();
        }
        self.skip_to(self.pos + 2);
        self.emit(Tok::RightDelim);
        if trim {
            let spaces = self.rest().len() - self.rest().trim_start_matches(is_space).len();
            self.skip_to(self.pos + spaces);
            self.ignore();
        }
        State::Text
    }

    fn inside_action(&mut self) -> State {
        let (delim, trim) = self.at_right_delim();
        if delim {
            if self.paren_depth == 0 {
                return self.right_delim(trim);
            }
            return self.error("unclosed left paren".into());
        }
        let c = self.next();
        match c {
            None => self.error("unclosed action".into()),
            Some(c) if is_space(c) => {
                self.backup(Some(c));
                self.space()
            }
            Some('=') => {
                self.emit(Tok::Assign);
                State::InsideAction
            }
            Some(':') => {
                if self.next() != Some('=') {
                    return self.error("expected :=".into());
                }
                self.emit(Tok::Declare);
                State::InsideAction
            }
            Some('|') => {
                self.emit(Tok::Pipe);
                State::InsideAction
            }
            Some('"') => self.quote(),
            Some('`') => self.raw_quote(),
            Some('$') => self.variable(),
            Some('\'') => self.char_constant(),
            Some('.') if !self.peek().is_some_and(|c| c.is_ascii_digit()) => {
                self.field_or_variable(Tok::Field)
            }
            Some(c) if c == '.' || c == '+' || c == '-' || c.is_ascii_digit() => {
                self.backup(Some(c));
                self.number()
            }
            Some(c) if is_alphanumeric(c) => {
                self.backup(Some(c));
                self.identifier()
            }
            Some('(') => {
                self.emit(Tok::LeftParen);
                self.paren_depth += 1;
                State::InsideAction
            }
            Some(')') => {
                self.emit(Tok::RightParen);
                if self.paren_depth == 0 {
                    return self.error("unexpected right paren".into());
                }
                self.paren_depth -= 1;
                State::InsideAction
            }
            Some(c) if c.is_ascii() && !c.is_ascii_control() => {
                self.emit(Tok::Char);
                State::InsideAction
            }
            Some(c) => self.error(format!("unrecognized character in action: {}", go_rune(c))),
        }
    }

    fn space(&mut self) -> State {
        let mut spaces = 0;
        while self.peek().is_some_and(is_space) {
            self.next();
            spaces += 1;
        }
        // A space before ` -}}` belongs to the trim marker.
        if has_right_trim_marker(&self.input[self.pos - 1..])
            && self.input[self.pos - 1 + 2..].starts_with("}}")
        {
            let c = self.input[..self.pos].chars().next_back();
            self.backup(c);
            if spaces == 1 {
                return State::InsideAction;
            }
        }
        self.emit(Tok::Space);
        State::InsideAction
    }

    fn identifier(&mut self) -> State {
        while self.peek().is_some_and(is_alphanumeric) {
            self.next();
        }
        if !self.at_terminator() {
            return self.bad_character();
        }
        let word = &self.input[self.start..self.pos];
        let tok = match keyword(word) {
            Some(tok) => tok,
            None if word == "true" || word == "false" => Tok::Bool,
            None => Tok::Identifier,
        };
        self.emit(tok);
        State::InsideAction
    }

    fn bad_character(&mut self) -> State {
        let c = self.peek().unwrap_or('\u{fffd}');
        self.error(format!("bad character {}", go_rune(c)))
    }

    fn variable(&mut self) -> State {
        if self.at_terminator() {
            self.emit(Tok::Variable);
            return State::InsideAction;
        }
        self.field_or_variable(Tok::Variable)
    }

    fn field_or_variable(&mut self, tok: Tok) -> State {
        if self.at_terminator() {
            self.emit(if tok == Tok::Variable {
                Tok::Variable
            } else {
                Tok::Dot
            });
            return State::InsideAction;
        }
        while self.peek().is_some_and(is_alphanumeric) {
            self.next();
        }
        if !self.at_terminator() {
            return self.bad_character();
        }
        self.emit(tok);
        State::InsideAction
    }

    fn at_terminator(&self) -> bool {
        match self.peek() {
            None => true,
            Some(c) if is_space(c) => true,
            Some('.' | ',' | '|' | ':' | ')' | '(' | '}') => true,
            Some(_) => false,
        }
    }

    fn char_constant(&mut self) -> State {
        loop {
            match self.next() {
                Some('\\') => match self.next() {
                    None | Some('\n') => {
                        return self.error("unterminated character constant".into())
                    }
                    Some(_) => {}
                },
                None | Some('\n') => return self.error("unterminated character constant".into()),
                Some('\'') => break,
                Some(_) => {}
            }
        }
        self.emit(Tok::CharConstant);
        State::InsideAction
    }

    fn number(&mut self) -> State {
        if !self.scan_number() {
            let text = self.input[self.start..self.pos].to_owned();
            return self.error(format!("bad number syntax: {}", crate::gofmt::quote(&text)));
        }
        if matches!(self.peek(), Some('+' | '-')) {
            // A complex constant: not supported by any function here.
            if !self.scan_number() || !self.input[..self.pos].ends_with('i') {
                let text = self.input[self.start..self.pos].to_owned();
                return self.error(format!("bad number syntax: {}", crate::gofmt::quote(&text)));
            }
        }
        self.emit(Tok::Number);
        State::InsideAction
    }

    fn accept(&mut self, valid: &str) -> bool {
        match self.peek() {
            Some(c) if valid.contains(c) => {
                self.next();
                true
            }
            _ => false,
        }
    }

    fn accept_run(&mut self, valid: &str) {
        while self.accept(valid) {}
    }

    fn scan_number(&mut self) -> bool {
        self.accept("+-");
        let mut digits = "0123456789_";
        if self.accept("0") {
            if self.accept("xX") {
                digits = "0123456789abcdefABCDEF_";
            } else if self.accept("oO") {
                digits = "01234567_";
            } else if self.accept("bB") {
                digits = "01_";
            }
        }
        self.accept_run(digits);
        if self.accept(".") {
            self.accept_run(digits);
        }
        if digits.len() == 11 && self.accept("eE") {
            self.accept("+-");
            self.accept_run("0123456789_");
        }
        if digits.len() == 23 && self.accept("pP") {
            self.accept("+-");
            self.accept_run("0123456789_");
        }
        self.accept("i");
        if self.peek().is_some_and(is_alphanumeric) {
            self.next();
            return false;
        }
        true
    }

    fn quote(&mut self) -> State {
        loop {
            match self.next() {
                Some('\\') => match self.next() {
                    None | Some('\n') => return self.error("unterminated quoted string".into()),
                    Some(_) => {}
                },
                None | Some('\n') => return self.error("unterminated quoted string".into()),
                Some('"') => break,
                Some(_) => {}
            }
        }
        self.emit(Tok::String);
        State::InsideAction
    }

    fn raw_quote(&mut self) -> State {
        loop {
            match self.next() {
                None => return self.error("unterminated raw quoted string".into()),
                Some('`') => break,
                Some(_) => {}
            }
        }
        self.emit(Tok::RawString);
        State::InsideAction
    }
}

fn has_left_trim_marker(s: &str) -> bool {
    let mut chars = s.chars();
    chars.next() == Some('-') && chars.next().is_some_and(is_space)
}

fn has_right_trim_marker(s: &str) -> bool {
    let mut chars = s.chars();
    chars.next().is_some_and(is_space) && chars.next() == Some('-')
}

/// A rune as Go's `%#U` prints it: `U+002D '-'`.
pub(crate) fn go_rune(c: char) -> String {
    format!("U+{:04X} '{c}'", c as u32)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toks(input: &str) -> Vec<(Tok, String)> {
        lex(input).into_iter().map(|i| (i.tok, i.val)).collect()
    }

    #[test]
    fn actions_split_into_go_s_tokens() {
        use Tok::*;
        assert_eq!(
            toks("a {{- $labels.x | printf \"%s\" -}} b"),
            vec![
                (Text, "a".into()),
                (LeftDelim, "{{".into()),
                (Variable, "$labels".into()),
                (Field, ".x".into()),
                (Space, " ".into()),
                (Pipe, "|".into()),
                (Space, " ".into()),
                (Identifier, "printf".into()),
                (Space, " ".into()),
                (String, "\"%s\"".into()),
                (RightDelim, "}}".into()),
                (Text, "b".into()),
                (Eof, "".into()),
            ]
        );
        assert_eq!(
            toks("{{/* c */}}x{{ if . }}"),
            vec![
                (Text, "x".into()),
                (LeftDelim, "{{".into()),
                (Space, " ".into()),
                (If, "if".into()),
                (Space, " ".into()),
                (Dot, ".".into()),
                (Space, " ".into()),
                (RightDelim, "}}".into()),
                (Eof, "".into()),
            ]
        );
    }

    #[test]
    fn lexical_errors_read_as_go_s() {
        let last = |input: &str| lex(input).pop().unwrap().val;
        assert_eq!(last("{{ $labels.x "), "unclosed action");
        assert_eq!(last("{{ 1x }}"), "bad number syntax: \"1x\"");
        assert_eq!(last("{{ a-b }}"), "bad character U+002D '-'");
        assert_eq!(last("{{ \"abc }}"), "unterminated quoted string");
        assert_eq!(last("{{/* c }}"), "unclosed comment");
        assert_eq!(last("{{ ( 1 }}"), "unclosed left paren");
    }
}
