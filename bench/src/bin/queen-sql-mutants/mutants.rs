//! One-point mutants of the SQL functions in `server/sql/*.sql`.
//!
//! The rules of the PostgreSQL engine are written in those files, and `cargo-mutants`
//! only mutates Rust, so this module makes the small changes a careless edit would: a
//! comparison loosened or flipped, `AND` for `OR`, a conjunct dropped, `GREATEST` for
//! `LEAST`, a `COALESCE` without its default, an integer off by one, a row lock or its
//! `SKIP LOCKED` dropped, an advisory lock not taken, a sort reversed. It reads the SQL
//! as tokens (comments and string literals skipped, dollar-quoted bodies read as code),
//! which is enough to place each change; a mutant PostgreSQL refuses to create is
//! reported as unviable by the runner, not counted.

/// What a token is, as far as placing a mutation needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Kind {
    /// A keyword or an identifier (quoted ones included).
    Word,
    /// An unsigned integer literal.
    Int,
    /// A run of operator characters (`<=`, `:=`, `::`, `=>`).
    Op,
    Open,
    Close,
    Comma,
    Semi,
    /// A dollar-quote tag (`$fn$`, `$$`): where a function's body starts or ends.
    Tag,
    /// Anything else: a parameter (`$1`), a string literal, a dot.
    Other,
}

/// One token: its kind and where it is in the text.
#[derive(Clone, Copy, Debug)]
pub struct Tok {
    pub kind: Kind,
    pub start: usize,
    pub end: usize,
}

/// One mutant: replace `text[start..end]` with `replacement`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Mutant {
    pub file: String,
    /// The function the change is in (`-` outside any).
    pub function: String,
    pub line: usize,
    /// Which operator made it (`comparison`, `and-or`, `drop-conjunct`, ...).
    pub operator: &'static str,
    pub start: usize,
    pub end: usize,
    pub replacement: String,
}

impl Mutant {
    /// The file's text with the change made.
    pub fn apply(&self, text: &str) -> String {
        format!(
            "{}{}{}",
            &text[..self.start],
            self.replacement,
            &text[self.end..]
        )
    }

    /// Where the change starts on its line, counted in characters from 1.
    pub fn column(&self, text: &str) -> usize {
        let line_start = text[..self.start].rfind('\n').map_or(0, |i| i + 1);
        text[line_start..self.start].chars().count() + 1
    }

    /// A one-line description: where (line and column, so two changes of one line never
    /// read alike), which operator, what became what. It names the mutant in results.
    pub fn describe(&self, text: &str) -> String {
        let one_line = |s: &str| s.split_whitespace().collect::<Vec<_>>().join(" ");
        format!(
            "{}:{}:{} {} [{}] `{}` -> `{}`",
            self.file,
            self.line,
            self.column(text),
            self.function,
            self.operator,
            one_line(&text[self.start..self.end]),
            one_line(&self.replacement)
        )
    }
}

const OP_CHARS: &str = "<>=!:+-*/|&~^#@%";

/// The tokens of `sql`.
pub fn tokens(sql: &str) -> Vec<Tok> {
    let b = sql.as_bytes();
    let mut out = Vec::new();
    let mut i = 0;
    while i < b.len() {
        let c = b[i] as char;
        let start = i;
        let kind = if c.is_whitespace() {
            i += 1;
            continue;
        } else if sql[i..].starts_with("--") {
            i = sql[i..].find('\n').map_or(b.len(), |n| i + n);
            continue;
        } else if sql[i..].starts_with("/*") {
            i = sql[i..].find("*/").map_or(b.len(), |n| i + n + 2);
            continue;
        } else if c == '\'' {
            i += 1;
            while i < b.len() {
                if b[i] == b'\'' && b.get(i + 1) == Some(&b'\'') {
                    i += 2;
                } else if b[i] == b'\'' {
                    i += 1;
                    break;
                } else {
                    i += 1;
                }
            }
            Kind::Other
        } else if c == '"' {
            i = sql[i + 1..].find('"').map_or(b.len(), |n| i + n + 2);
            Kind::Word
        } else if c == '$' {
            // `$1` a parameter, `$fn$` or `$$` a dollar-quote tag: the body is code.
            i += 1;
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                i += 1;
            }
            if b.get(i) == Some(&b'$') {
                i += 1;
                Kind::Tag
            } else {
                Kind::Other
            }
        } else if c.is_ascii_digit() {
            while i < b.len() && b[i].is_ascii_digit() {
                i += 1;
            }
            if i < b.len() && (b[i] == b'.' || b[i].is_ascii_alphabetic()) {
                while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'.') {
                    i += 1;
                }
                Kind::Other
            } else {
                Kind::Int
            }
        } else if c.is_alphabetic() || c == '_' {
            while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_' || b[i] >= 0x80) {
                i += 1;
            }
            Kind::Word
        } else if OP_CHARS.contains(c) {
            while i < b.len() && OP_CHARS.contains(b[i] as char) && !sql[i..].starts_with("--") {
                i += 1;
            }
            Kind::Op
        } else {
            i += c.len_utf8();
            match c {
                '(' => Kind::Open,
                ')' => Kind::Close,
                ',' => Kind::Comma,
                ';' => Kind::Semi,
                _ => Kind::Other,
            }
        };
        out.push(Tok {
            kind,
            start,
            end: i,
        });
    }
    out
}

/// Words that end an operand of `AND`/`OR` at its own depth.
const CLAUSE_END: &[&str] = &[
    "AND",
    "OR",
    "JOIN",
    "CROSS",
    "LEFT",
    "INNER",
    "THEN",
    "LOOP",
    "ORDER",
    "GROUP",
    "LIMIT",
    "RETURNING",
    "FOR",
    "UNION",
    "HAVING",
    "WHERE",
    "INTO",
    "ON",
    "ELSE",
    "END",
    "WHEN",
    "SELECT",
    "DO",
    "OFFSET",
    "EXCEPT",
    "INTERSECT",
    "WINDOW",
];

/// Words that begin an expression whose first conjunct may be dropped (as do `:=` and a
/// function body's opening tag).
const CLAUSE_START: &[&str] = &[
    "WHERE", "WHEN", "ON", "IF", "HAVING", "AND", "OR", "ELSIF", "SELECT", "RETURN", "THEN", "ELSE",
];

struct Cx<'a> {
    text: &'a str,
    toks: Vec<Tok>,
}

impl Cx<'_> {
    fn s(&self, k: usize) -> &str {
        let t = self.toks[k];
        &self.text[t.start..t.end]
    }

    fn word(&self, k: usize, w: &str) -> bool {
        k < self.toks.len() && self.toks[k].kind == Kind::Word && self.s(k).eq_ignore_ascii_case(w)
    }

    /// Whether the `=` at `k` assigns: it follows a bare name that opens a `SET` list
    /// (`SET a = 1`) or continues one (`SET a = 1, b = 2`).
    fn assigns(&self, k: usize) -> bool {
        if k < 2 || self.toks[k - 1].kind != Kind::Word {
            return false;
        }
        if self.word(k - 2, "SET") {
            return true;
        }
        if self.toks[k - 2].kind != Kind::Comma {
            return false;
        }
        let mut depth = 0i32;
        for j in (0..k - 2).rev() {
            match self.toks[j].kind {
                Kind::Close => depth += 1,
                Kind::Open if depth == 0 => return false,
                Kind::Open => depth -= 1,
                Kind::Semi | Kind::Tag => return false,
                Kind::Word if depth == 0 => {
                    if self.word(j, "SET") {
                        return true;
                    }
                    if self.is_any(j, &["WHERE", "FROM", "SELECT", "RETURNING", "VALUES"]) {
                        return false;
                    }
                }
                _ => {}
            }
        }
        false
    }

    fn is_any(&self, k: usize, ws: &[&str]) -> bool {
        ws.iter().any(|w| self.word(k, w))
    }

    /// The index of the `)` that closes the `(` at `k`.
    fn closing(&self, k: usize) -> Option<usize> {
        let mut depth = 0i32;
        for j in k..self.toks.len() {
            match self.toks[j].kind {
                Kind::Open => depth += 1,
                Kind::Close => {
                    depth -= 1;
                    if depth == 0 {
                        return Some(j);
                    }
                }
                _ => {}
            }
        }
        None
    }

    /// The last token of the operand that starts at `k`: up to a clause word, `,`, `;` or
    /// an unmatched `)` at its own depth.
    fn operand_end(&self, k: usize) -> Option<usize> {
        let mut depth = 0i32;
        let mut last = None;
        for j in k..self.toks.len() {
            match self.toks[j].kind {
                Kind::Open => depth += 1,
                Kind::Close if depth == 0 => break,
                Kind::Close => depth -= 1,
                Kind::Comma | Kind::Semi | Kind::Tag if depth == 0 => break,
                Kind::Word if depth == 0 && j > k && self.is_any(j, CLAUSE_END) => break,
                _ => {}
            }
            last = Some(j);
        }
        last
    }

    /// The first token of the operand that ends just before `k`.
    fn operand_start(&self, k: usize) -> Option<usize> {
        let mut depth = 0i32;
        let mut first = None;
        for j in (0..k).rev() {
            match self.toks[j].kind {
                Kind::Close => depth += 1,
                Kind::Open if depth == 0 => break,
                Kind::Open => depth -= 1,
                Kind::Comma | Kind::Semi | Kind::Tag if depth == 0 => break,
                Kind::Op if depth == 0 && self.s(j) == ":=" => break,
                Kind::Word if depth == 0 && self.is_any(j, CLAUSE_START) => break,
                _ => {}
            }
            first = Some(j);
        }
        first
    }
}

/// Every mutant of one file.
pub fn mutants(file: &str, text: &str) -> Vec<Mutant> {
    let cx = Cx {
        text,
        toks: tokens(text),
    };
    let mut out = Vec::new();
    let n = cx.toks.len();
    let mut add = |k0: usize, start: usize, end: usize, op: &'static str, rep: String| {
        out.push((k0, start, end, op, rep));
    };
    for k in 0..n {
        let t = cx.toks[k];
        let s = cx.s(k);
        match t.kind {
            Kind::Op => {
                let flip = match s {
                    "<" => Some("<="),
                    "<=" => Some("<"),
                    ">" => Some(">="),
                    ">=" => Some(">"),
                    "=" => Some("<>"),
                    "<>" | "!=" => Some("="),
                    _ => None,
                };
                // `SET x = ...` assigns (a function's setting, an UPDATE's column):
                // `<>` there is a syntax error, never a condition.
                if let Some(f) = flip.filter(|_| !(s == "=" && cx.assigns(k))) {
                    add(k, t.start, t.end, "comparison", f.to_string());
                }
            }
            // `EXISTS (SELECT 1 ...)` ignores what it selects: no mutant there.
            Kind::Int
                if k >= 3
                    && cx.word(k - 1, "SELECT")
                    && cx.toks[k - 2].kind == Kind::Open
                    && cx.word(k - 3, "EXISTS") => {}
            Kind::Int => {
                let v: u64 = s.parse().unwrap_or(0);
                add(k, t.start, t.end, "integer", (v + 1).to_string());
                if v > 0 {
                    add(k, t.start, t.end, "integer", (v - 1).to_string());
                }
            }
            Kind::Word => {
                let up = s.to_ascii_uppercase();
                match up.as_str() {
                    "AND" | "OR" => {
                        let other = if up == "AND" { "OR" } else { "AND" };
                        let between = (k.saturating_sub(4)..k).any(|j| cx.word(j, "BETWEEN"));
                        // `CREATE OR REPLACE` is syntax, not a condition.
                        let create = k >= 1 && cx.word(k - 1, "CREATE");
                        if !between && !create {
                            add(k, t.start, t.end, "and-or", other.to_string());
                        }
                        if up == "AND" && !between {
                            if let Some(e) = cx.operand_end(k + 1) {
                                add(k, t.start, cx.toks[e].end, "drop-conjunct", String::new());
                            }
                            if let Some(b) = cx.operand_start(k) {
                                add(k, cx.toks[b].start, t.end, "drop-conjunct", String::new());
                            }
                        }
                    }
                    "GREATEST" => add(k, t.start, t.end, "greatest-least", "LEAST".into()),
                    "LEAST" => add(k, t.start, t.end, "greatest-least", "GREATEST".into()),
                    "COALESCE" if k + 1 < n && cx.toks[k + 1].kind == Kind::Open => {
                        if let (Some(close), Some(e)) = (cx.closing(k + 1), cx.operand_end(k + 2)) {
                            let first = &text[cx.toks[k + 2].start..cx.toks[e].end];
                            if e + 1 < close {
                                add(
                                    k,
                                    t.start,
                                    cx.toks[close].end,
                                    "coalesce-default",
                                    format!("({first})"),
                                );
                            }
                        }
                    }
                    "FOR" if cx.is_any(k + 1, &["UPDATE", "SHARE", "NO", "KEY"]) => {
                        let mut e = k + 1;
                        while e + 1 < n && cx.is_any(e + 1, &["UPDATE", "SHARE", "NO", "KEY"]) {
                            e += 1;
                        }
                        if cx.word(e + 1, "OF") {
                            e += 2;
                            while e + 2 < n && cx.toks[e + 1].kind == Kind::Comma {
                                e += 2;
                            }
                        }
                        if cx.word(e + 1, "SKIP") && cx.word(e + 2, "LOCKED") {
                            e += 2;
                        } else if cx.word(e + 1, "NOWAIT") {
                            e += 1;
                        }
                        add(k, t.start, cx.toks[e].end, "row-lock", String::new());
                    }
                    "SKIP" if cx.word(k + 1, "LOCKED") => {
                        add(k, t.start, cx.toks[k + 1].end, "skip-locked", String::new());
                    }
                    "ASC" => add(k, t.start, t.end, "order-direction", "DESC".into()),
                    "DESC" => add(k, t.start, t.end, "order-direction", "ASC".into()),
                    "ORDER" if cx.word(k + 1, "BY") => {
                        if let Some(e) = cx.operand_end(k + 2) {
                            if !cx.is_any(e + 1, &["ASC", "DESC"])
                                && !cx.is_any(e, &["ASC", "DESC"])
                            {
                                let at = cx.toks[e].end;
                                add(k, at, at, "order-direction", " DESC".into());
                            }
                        }
                    }
                    _ if (up.starts_with("PG_ADVISORY") || up.starts_with("PG_TRY_ADVISORY"))
                        && k + 1 < n
                        && cx.toks[k + 1].kind == Kind::Open =>
                    {
                        if let Some(close) = cx.closing(k + 1) {
                            let rep = if up.starts_with("PG_TRY") {
                                "true"
                            } else {
                                "NULL"
                            };
                            add(k, t.start, cx.toks[close].end, "advisory-lock", rep.into());
                        }
                    }
                    _ => {}
                }
            }
            _ => {}
        }
    }
    let functions = function_starts(&cx);
    let mut seen = std::collections::BTreeSet::new();
    let mut res = Vec::new();
    for (k0, start, end, operator, replacement) in out {
        if !seen.insert((start, end, replacement.clone())) {
            continue;
        }
        let at = cx.toks[k0].start;
        let function = functions
            .iter()
            .rev()
            .find(|(s, _)| *s <= at)
            .map_or("-".to_string(), |(_, f)| f.clone());
        res.push(Mutant {
            file: file.to_string(),
            function,
            line: text[..at].matches('\n').count() + 1,
            operator,
            start,
            end,
            replacement,
        });
    }
    res
}

/// Where each `CREATE OR REPLACE FUNCTION name` (or `VIEW name`) begins, with its name.
fn function_starts(cx: &Cx) -> Vec<(usize, String)> {
    (0..cx.toks.len())
        .filter(|&k| (cx.word(k, "FUNCTION") || cx.word(k, "VIEW")) && k + 1 < cx.toks.len())
        .filter(|&k| k >= 2 && cx.word(k - 1, "REPLACE"))
        .map(|k| (cx.toks[k - 3].start, cx.s(k + 1).to_string()))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn made(sql: &str) -> Vec<(String, &'static str)> {
        mutants("t.sql", sql)
            .into_iter()
            .map(|m| (m.apply(sql), m.operator))
            .collect()
    }

    #[test]
    fn comparisons_integers_and_connectives() {
        let m = made("SELECT 1 WHERE a <= 2 AND b = $1 OR c");
        let texts: Vec<&str> = m.iter().map(|(t, _)| t.as_str()).collect();
        for want in [
            "SELECT 2 WHERE a <= 2 AND b = $1 OR c",
            "SELECT 0 WHERE a <= 2 AND b = $1 OR c",
            "SELECT 1 WHERE a < 2 AND b = $1 OR c",
            "SELECT 1 WHERE a <= 3 AND b = $1 OR c",
            "SELECT 1 WHERE a <= 2 OR b = $1 OR c",
            "SELECT 1 WHERE a <= 2 AND b <> $1 OR c",
            "SELECT 1 WHERE a <= 2 AND b = $1 AND c",
            "SELECT 1 WHERE a <= 2  OR c",
            "SELECT 1 WHERE  b = $1 OR c",
        ] {
            assert!(texts.contains(&want), "missing {want:?} in {texts:#?}");
        }
        // `$1` is a parameter, `:=` an assignment, and what `EXISTS` selects is never
        // read: none is touched.
        assert!(made("x := $1;").is_empty());
        assert!(made("x := EXISTS (SELECT 1 FROM t);").is_empty());
    }

    #[test]
    fn comments_and_strings_are_not_code_but_dollar_bodies_are() {
        let sql = "-- a < b\nSELECT '<' AS x, $fn$ SELECT GREATEST(a, b) $fn$ /* 1 */";
        let m = made(sql);
        assert_eq!(m.len(), 1, "{m:?}");
        assert!(m[0].0.contains("LEAST(a, b)"));
    }

    #[test]
    fn locks_coalesce_and_order() {
        let sql = "SELECT COALESCE(x, 0) FROM t ORDER BY a LIMIT 5 FOR UPDATE SKIP LOCKED; \
                   PERFORM pg_advisory_xact_lock(queen_pair_key(p, g));";
        let m = made(sql);
        let has = |op: &str, frag: &str| m.iter().any(|(t, o)| *o == op && t.contains(frag));
        assert!(has("coalesce-default", "SELECT (x) FROM"));
        assert!(has("order-direction", "ORDER BY a DESC LIMIT"));
        assert!(has("row-lock", "LIMIT 5 ;"));
        assert!(has("skip-locked", "FOR UPDATE ;"));
        assert!(has("advisory-lock", "PERFORM NULL;"));
    }

    #[test]
    fn two_changes_of_one_line_are_told_apart() {
        let sql = "SELECT a = b AND c = d";
        let names: Vec<String> = mutants("x.sql", sql)
            .iter()
            .map(|m| m.describe(sql))
            .collect();
        let unique: std::collections::BTreeSet<&String> = names.iter().collect();
        assert_eq!(unique.len(), names.len(), "{names:#?}");
    }

    #[test]
    fn a_dropped_conjunct_stays_inside_its_body_and_statement() {
        let sql = "CREATE OR REPLACE FUNCTION f() AS $fn$\nSELECT a AND b\n$fn$;\n\
                   DO $$ BEGIN x := c AND d; END $$;";
        let m = made(sql);
        let dropped: Vec<&str> = m
            .iter()
            .filter(|(_, op)| *op == "drop-conjunct")
            .map(|(t, _)| t.as_str())
            .collect();
        for want in ["SELECT  b\n$fn$", "SELECT a \n$fn$", "x :=  d;", "x := c ;"] {
            assert!(
                dropped.iter().any(|t| t.contains(want)),
                "{want:?} in {dropped:#?}"
            );
        }
        assert_eq!(dropped.len(), 4, "{dropped:#?}");
    }

    #[test]
    fn an_assignment_is_not_a_comparison() {
        let sql = "CREATE FUNCTION f() SET enable_seqscan = off AS $$\n\
                   UPDATE t SET a = 1, b = CASE WHEN c = 2 THEN 3 END WHERE d = 4;\n\
                   SELECT e, f = g FROM t;\n$$;";
        let flipped: Vec<String> = mutants("x.sql", sql)
            .iter()
            .filter(|m| m.operator == "comparison")
            .map(|m| {
                sql[..m.start]
                    .rsplit(' ')
                    .nth(1)
                    .unwrap_or_default()
                    .to_string()
            })
            .collect();
        assert_eq!(
            flipped,
            ["c", "d", "f"],
            "only the conditions' `=` are flipped"
        );
    }

    #[test]
    fn create_or_replace_is_not_a_condition() {
        let sql = "CREATE OR REPLACE FUNCTION f() AS $$\nSELECT a OR b\n$$;";
        let m = mutants("x.sql", sql);
        let ors: Vec<usize> = m
            .iter()
            .filter(|m| m.operator == "and-or")
            .map(|m| m.line)
            .collect();
        assert_eq!(ors, [2], "only the condition's OR is mutated");
    }

    #[test]
    fn a_mutant_names_its_function_and_line() {
        let sql = "CREATE OR REPLACE FUNCTION f() AS $$\nSELECT 1 < 2\n$$;";
        let m = mutants("x.sql", sql);
        let c = m.iter().find(|m| m.operator == "comparison").unwrap();
        assert_eq!((c.function.as_str(), c.line), ("f", 2));
        assert!(c
            .describe(sql)
            .contains("x.sql:2:10 f [comparison] `<` -> `<=`"));
    }
}
