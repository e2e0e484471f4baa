//! The walk over brush-parser's syntax tree: every redirection, every nested
//! command (subshells, pipelines, lists, compound commands, functions,
//! command and process substitutions, `sh -c`, `eval`), the working folder as
//! `cd` changes it and variables assigned in the command. What each command
//! writes is [`argv`](super::argv)'s business.

use std::collections::HashMap;
use std::io::BufReader;

use brush_parser::ast::{self, Command, CompoundCommand, IoFileRedirectKind, IoFileRedirectTarget, IoRedirect};
use brush_parser::word::{Parameter, ParameterExpr, WordPiece, WordPieceWithSource};
use brush_parser::{Parser, ParserOptions, SourceInfo};

use super::pattern::{WILD, normalize};
use super::{argv, lex};

/// Nested programs (`sh -c`, `eval`, `$(…)`) read at most this deep.
const MAX_DEPTH: usize = 8;
/// Programs longer than this are not handed to the parser (about 1 ms per KiB,
/// BENCHMARKS.md): the linear fallback reads them.
const MAX_PARSE: usize = 256 * 1024;
/// Brackets nested deeper than this are not handed to the (recursive) parser.
const MAX_NESTING: usize = 64;
/// A working folder longer than this is taken as unknown: joining it to every
/// later path would make the reading quadratic in the number of `cd`s.
pub(super) const MAX_BASE: usize = 1024;
/// Alternatives of one word (`for f in a b c`, `{a,b}`) kept before it becomes a wildcard.
const MAX_ALTS: usize = 16;

/// Where a command runs and what its variables hold, as far as the text says.
#[derive(Debug, Clone, Default)]
pub(super) struct Scope {
    /// The working folder relative to the hook's cwd (`None`: the cwd itself).
    pub base: Option<String>,
    /// Variables assigned in the command, each with its possible values.
    pub vars: HashMap<String, Vec<String>>,
}

impl Scope {
    /// `path` as seen from the hook's cwd.
    pub fn join(&self, path: &str) -> String {
        if path.starts_with('/') || path.starts_with(WILD) {
            return normalize(path);
        }
        match &self.base {
            None => normalize(path),
            Some(base) => normalize(&format!("{base}/{path}")),
        }
    }
}

/// One word's possible values.
pub(super) type Arg = Vec<String>;

/// The walk's state: what was found, and how much work it took.
pub(super) struct Walker {
    pub out: Vec<String>,
    pub complete: bool,
    pub work: usize,
    budget: usize,
    depth: usize,
    opts: ParserOptions,
}

impl Walker {
    pub fn new(budget: usize) -> Walker {
        Walker { out: Vec::new(), complete: true, work: 0, budget, depth: 0, opts: ParserOptions::default() }
    }

    /// Count `n` units of work; false once the budget is spent (the caller
    /// stops, and the whole command falls back to the lexer).
    fn spend(&mut self, n: usize) -> bool {
        self.work += n;
        if self.work > self.budget {
            self.complete = false;
        }
        self.work <= self.budget
    }

    /// Record a possible write of each value of `arg`, from `scope`'s folder.
    pub fn write(&mut self, scope: &Scope, arg: &[String]) {
        for value in arg {
            if is_harmless(value) {
                continue;
            }
            let path = scope.join(value);
            if self.spend(path.len() + 1) {
                self.out.push(path);
            }
        }
    }

    /// The command could not be read fully: every path-like word of `text` counts as written.
    pub fn give_up(&mut self, scope: &Scope, text: &str) {
        self.complete = false;
        fallback(self, scope, text);
    }

    /// Read `text` as a shell program in `scope`.
    pub fn program(&mut self, text: &str, scope: &mut Scope) {
        if !self.spend(text.len()) {
            return;
        }
        if self.depth >= MAX_DEPTH || text.len() > MAX_PARSE || nesting(text) > MAX_NESTING {
            return self.give_up(scope, text);
        }
        let mut parser = Parser::new(BufReader::new(text.as_bytes()), &self.opts, &SourceInfo::default());
        let program = match parser.parse_program() {
            Ok(p) => p,
            Err(_) => return self.give_up(scope, text),
        };
        self.depth += 1;
        for complete in &program.complete_commands {
            self.list(complete, scope);
        }
        self.depth -= 1;
    }

    fn list(&mut self, list: &ast::CompoundList, scope: &mut Scope) {
        for ast::CompoundListItem(and_or, sep) in &list.0 {
            if matches!(sep, ast::SeparatorOperator::Async) {
                self.and_or(and_or, &mut scope.clone());
            } else {
                self.and_or(and_or, scope);
            }
        }
    }

    fn and_or(&mut self, list: &ast::AndOrList, scope: &mut Scope) {
        self.pipeline(&list.first, scope);
        for next in &list.additional {
            match next {
                ast::AndOr::And(p) | ast::AndOr::Or(p) => self.pipeline(p, scope),
            }
        }
    }

    fn pipeline(&mut self, pipeline: &ast::Pipeline, scope: &mut Scope) {
        // Each part of a real pipeline runs in a subshell: its `cd` stays there.
        let alone = pipeline.seq.len() == 1;
        for command in &pipeline.seq {
            if alone {
                self.command(command, scope);
            } else {
                self.command(command, &mut scope.clone());
            }
        }
    }

    fn command(&mut self, command: &Command, scope: &mut Scope) {
        if !self.spend(1) {
            return;
        }
        match command {
            Command::Simple(simple) => self.simple(simple, scope),
            Command::Compound(compound, redirects) => {
                if let Some(list) = redirects {
                    for r in &list.0 {
                        self.redirect(r, scope, &mut Vec::new());
                    }
                }
                self.compound(compound, scope);
            }
            Command::Function(def) => {
                // Read the body where it is defined: it may run later in this command.
                self.compound(&def.body.0, &mut scope.clone());
                if let Some(list) = &def.body.1 {
                    for r in &list.0 {
                        self.redirect(r, scope, &mut Vec::new());
                    }
                }
            }
            Command::ExtendedTest(test) => self.test(&test.expr, scope),
        }
    }

    fn test(&mut self, expr: &ast::ExtendedTestExpr, scope: &mut Scope) {
        use ast::ExtendedTestExpr as E;
        match expr {
            E::And(a, b) | E::Or(a, b) => {
                self.test(a, scope);
                self.test(b, scope);
            }
            E::Not(a) | E::Parenthesized(a) => self.test(a, scope),
            E::UnaryTest(_, w) => {
                self.expand(&w.value, scope);
            }
            E::BinaryTest(_, a, b) => {
                self.expand(&a.value, scope);
                self.expand(&b.value, scope);
            }
        }
    }

    fn compound(&mut self, compound: &CompoundCommand, scope: &mut Scope) {
        match compound {
            CompoundCommand::Arithmetic(a) => self.arithmetic(&a.expr.value, scope),
            CompoundCommand::ArithmeticForClause(f) => self.list(&f.body.list, scope),
            CompoundCommand::BraceGroup(g) => self.list(&g.list, scope),
            CompoundCommand::Subshell(s) => self.list(&s.list, &mut scope.clone()),
            CompoundCommand::ForClause(f) => {
                let mut values = Vec::new();
                match &f.values {
                    Some(words) => {
                        for w in words {
                            values.extend(self.expand(&w.value, scope));
                        }
                    }
                    None => values.push(WILD.to_string()),
                }
                scope.vars.insert(f.variable_name.clone(), cap(values));
                self.list(&f.body.list, scope);
            }
            CompoundCommand::CaseClause(c) => {
                self.expand(&c.value.value, scope);
                for item in &c.cases {
                    if let Some(list) = &item.cmd {
                        self.list(list, &mut scope.clone());
                    }
                }
            }
            CompoundCommand::IfClause(i) => {
                self.list(&i.condition, scope);
                self.list(&i.then, scope);
                for e in i.elses.iter().flatten() {
                    if let Some(c) = &e.condition {
                        self.list(c, scope);
                    }
                    self.list(&e.body, scope);
                }
            }
            CompoundCommand::WhileClause(w) | CompoundCommand::UntilClause(w) => {
                self.list(&w.0, scope);
                self.list(&w.1.list, scope);
            }
        }
    }

    /// `$((…))` and `((…))` compute numbers; only a substitution inside them can write.
    fn arithmetic(&mut self, text: &str, scope: &mut Scope) {
        if text.contains("$(") || text.contains('`') {
            self.give_up(scope, text);
        }
    }

    fn simple(&mut self, simple: &ast::SimpleCommand, scope: &mut Scope) {
        use ast::CommandPrefixOrSuffixItem as Item;
        let mut args: Vec<Arg> = Vec::new();
        let mut stdin_scripts: Vec<String> = Vec::new();
        let prefix = simple.prefix.iter().flat_map(|p| p.0.iter());
        for item in prefix {
            match item {
                Item::AssignmentWord(a, _) => self.assign(a, scope),
                Item::IoRedirect(r) => self.redirect(r, scope, &mut stdin_scripts),
                Item::ProcessSubstitution(_, sub) => self.list(&sub.list, &mut scope.clone()),
                Item::Word(w) => args.push(self.expand(&w.value, scope)),
            }
        }
        if let Some(name) = &simple.word_or_name {
            args.push(self.expand(&name.value, scope));
        }
        for item in simple.suffix.iter().flat_map(|s| s.0.iter()) {
            match item {
                Item::IoRedirect(r) => self.redirect(r, scope, &mut stdin_scripts),
                Item::ProcessSubstitution(_, sub) => self.list(&sub.list, &mut scope.clone()),
                Item::Word(w) | Item::AssignmentWord(_, w) => args.push(self.expand(&w.value, scope)),
            }
        }
        if !args.is_empty() {
            argv::run(self, scope, &args, &stdin_scripts);
        }
    }

    fn assign(&mut self, a: &ast::Assignment, scope: &mut Scope) {
        let values = match &a.value {
            ast::AssignmentValue::Scalar(w) => self.expand(&w.value, scope),
            ast::AssignmentValue::Array(items) => {
                let mut all = Vec::new();
                for (_, w) in items {
                    all.extend(self.expand(&w.value, scope));
                }
                all
            }
        };
        if let ast::AssignmentName::VariableName(name) = &a.name {
            let values = if a.append { vec![WILD.to_string()] } else { values };
            scope.vars.insert(name.clone(), cap(values));
        }
    }

    /// Record what a redirection writes; here-document bodies go to `stdin_scripts`
    /// (a shell reading its script from stdin runs them).
    fn redirect(&mut self, r: &IoRedirect, scope: &mut Scope, stdin_scripts: &mut Vec<String>) {
        match r {
            IoRedirect::File(_, kind, target) => {
                let writes = matches!(
                    kind,
                    IoFileRedirectKind::Write
                        | IoFileRedirectKind::Append
                        | IoFileRedirectKind::Clobber
                        | IoFileRedirectKind::ReadAndWrite
                        | IoFileRedirectKind::DuplicateOutput
                );
                match target {
                    IoFileRedirectTarget::Filename(w) | IoFileRedirectTarget::Duplicate(w) => {
                        let values = self.expand(&w.value, scope);
                        // `>&2`, `>&-`, `2>&1-` duplicate descriptors; `>&file` writes the file.
                        let files: Vec<String> = values.into_iter().filter(|v| !is_descriptor(v)).collect();
                        if writes {
                            self.write(scope, &files);
                        }
                    }
                    IoFileRedirectTarget::ProcessSubstitution(_, sub) => self.list(&sub.list, &mut scope.clone()),
                    IoFileRedirectTarget::Fd(_) => {}
                }
            }
            IoRedirect::OutputAndError(w, _) => {
                let values = self.expand(&w.value, scope);
                self.write(scope, &values);
            }
            IoRedirect::HereDocument(_, doc) => {
                if doc.requires_expansion && (doc.doc.value.contains("$(") || doc.doc.value.contains('`')) {
                    self.give_up(scope, &doc.doc.value);
                }
                stdin_scripts.push(doc.doc.value.clone());
            }
            IoRedirect::HereString(_, w) => {
                let values = self.expand(&w.value, scope);
                stdin_scripts.extend(values);
            }
        }
    }

    /// The possible values of a shell word: quotes removed, variables from
    /// `scope`, every other expansion and every glob a [`WILD`]. Command
    /// substitutions inside are read as programs.
    pub fn expand(&mut self, word: &str, scope: &mut Scope) -> Arg {
        if !self.spend(word.len()) {
            return vec![WILD.to_string()];
        }
        match brush_parser::word::parse(word, &self.opts) {
            Ok(pieces) => self.pieces(&pieces, false, scope),
            Err(_) => {
                self.give_up(scope, word);
                vec![WILD.to_string()]
            }
        }
    }

    fn pieces(&mut self, pieces: &[WordPieceWithSource], quoted: bool, scope: &mut Scope) -> Arg {
        let mut alts = vec![String::new()];
        for p in pieces {
            let next = self.piece(&p.piece, quoted, scope);
            alts = cap(alts.iter().flat_map(|a| next.iter().map(move |n| format!("{a}{n}"))).collect());
        }
        alts
    }

    fn piece(&mut self, piece: &WordPiece, quoted: bool, scope: &mut Scope) -> Arg {
        let wild = || vec![WILD.to_string()];
        match piece {
            WordPiece::Text(s) if quoted => vec![s.clone()],
            WordPiece::Text(s) => vec![globs_to_wild(s)],
            WordPiece::SingleQuotedText(s) => vec![s.clone()],
            WordPiece::AnsiCQuotedText(s) if !s.contains('\\') => vec![s.clone()],
            WordPiece::DoubleQuotedSequence(ps) | WordPiece::GettextDoubleQuotedSequence(ps) => {
                self.pieces(ps, true, scope)
            }
            WordPiece::ParameterExpansion(ParameterExpr::Parameter {
                parameter: Parameter::Named(n),
                indirect: false,
            }) => scope.vars.get(n).cloned().unwrap_or_else(wild),
            WordPiece::CommandSubstitution(s) | WordPiece::BackquotedCommandSubstitution(s) => {
                self.program(s, &mut scope.clone());
                wild()
            }
            WordPiece::EscapeSequence(s) => vec![s.strip_prefix('\\').unwrap_or(s).replace('\n', "")],
            WordPiece::ArithmeticExpression(e) => {
                self.arithmetic(&e.value, scope);
                wild()
            }
            WordPiece::AnsiCQuotedText(_) | WordPiece::TildePrefix(_) | WordPiece::ParameterExpansion(_) => wild(),
        }
    }
}

/// Targets that are not files of the project.
fn is_harmless(value: &str) -> bool {
    matches!(value, "/dev/null" | "/dev/stdout" | "/dev/stderr" | "/dev/tty" | "-")
        || value.strip_prefix("/dev/fd/").is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()))
}

/// `2`, `-`, `1-`: a descriptor in `>&word`, not a file.
fn is_descriptor(value: &str) -> bool {
    let digits = value.strip_suffix('-').unwrap_or(value);
    digits.bytes().all(|b| b.is_ascii_digit())
}

/// Unquoted `*`, `?`, `[…]` and `{…}` expand to names only known at run time.
/// A `[` with no `]` after it is no bracket expression: the shell keeps it as
/// it is (the `[` of `[ -e f ]` is the test command, not a pattern).
fn globs_to_wild(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    let mut brace = 0usize;
    // Found once, so a word of many `[` stays linear.
    let last_close = text.rfind(']');
    for (i, c) in text.char_indices() {
        match c {
            '[' if brace == 0 && last_close.is_none_or(|close| close < i) => out.push(c),
            '{' => {
                brace += 1;
                out.push(WILD);
            }
            '}' if brace > 0 => brace -= 1,
            _ if brace > 0 => {}
            '*' | '?' | '[' => out.push(WILD),
            c => out.push(c),
        }
    }
    out
}

fn cap(mut values: Vec<String>) -> Vec<String> {
    values.dedup();
    if values.len() > MAX_ALTS || values.is_empty() { vec![WILD.to_string()] } else { values }
}

/// The deepest nesting in `text`: brackets, and compound commands opened by a
/// keyword (`if`, `while`, `until`, `for`, `select`, `case`) and closed by one
/// (`fi`, `done`, `esac`). An over-estimate (quotes are not skipped); the parser
/// recurses per level, and a stack overflow would end the hook without an answer.
fn nesting(text: &str) -> usize {
    let (mut depth, mut max) = (0usize, 0usize);
    let mut word = String::new();
    let end_word = |word: &mut String, depth: &mut usize, max: &mut usize| {
        match word.as_str() {
            "if" | "while" | "until" | "for" | "select" | "case" => {
                *depth += 1;
                *max = (*max).max(*depth);
            }
            "fi" | "done" | "esac" => *depth = depth.saturating_sub(1),
            _ => {}
        }
        word.clear();
    };
    for c in text.chars() {
        if c.is_ascii_alphabetic() {
            // Keywords are short: a longer word, kept at 8 letters, never equals one.
            if word.len() < 8 {
                word.push(c);
            }
            continue;
        }
        end_word(&mut word, &mut depth, &mut max);
        match c {
            '(' | '{' => {
                depth += 1;
                max = max.max(depth);
            }
            ')' | '}' => depth = depth.saturating_sub(1),
            _ => {}
        }
    }
    end_word(&mut word, &mut depth, &mut max);
    max
}

/// Every path-like word of `text` (read by the shallow lexer) as a possible write.
fn fallback(walker: &mut Walker, scope: &Scope, text: &str) {
    for words in lex::simple_commands(text) {
        for word in words {
            let value = word.rsplit_once('=').filter(|_| word.starts_with('-')).map_or(word.as_str(), |(_, v)| v);
            if is_path_like(value) && !is_harmless(value) {
                let value: String = value
                    .chars()
                    .map(|c| if matches!(c, '*' | '?' | '[' | '$' | '`' | '~') { WILD } else { c })
                    .collect();
                walker.work += value.len();
                walker.out.push(scope.join(&value));
            }
        }
    }
}

fn is_path_like(word: &str) -> bool {
    !word.is_empty()
        && !word.starts_with('>')
        && !word.starts_with('<')
        && word.contains(['/', '.', '~', '*', '?', '[', '$'])
}
