//! A linear-time necessary condition for a `pattern` that can backtrack: a regular expression
//! for the `regex` crate that matches every string the pattern matches (a *superset*), built
//! from `fancy-regex`'s parse tree of the same translation `jsonschema` compiles.
//!
//! A string the superset refuses is refused by the pattern, decided in time linear in the
//! string with no backtracking; a string it accepts still needs the pattern's own match.
//! Rewrites (each only widens what matches):
//! - a back-reference `\N` → `(?:G)?`, G being group N's expression, rewritten the same way
//!   (what a group captured is one match of G; `?` covers a group that took no part);
//! - a look-around → the empty expression; an atomic group or possessive quantifier → its
//!   plain form; a conditional on a group → the alternation of its branches.
//!
//! No superset (`None`) for anything unclear: a reference to a group that encloses it,
//! case-insensitive references, `\G`, `\K`, recursion, subroutine calls, control verbs, or an
//! expansion past [`MAX_NODES`] nodes or [`MAX_DEPTH`] nested references.

use fancy_regex::{Assertion, Expr};
use regex::{Regex, RegexBuilder};

/// Nodes a superset may have once back-references are expanded (each copies a group).
pub const MAX_NODES: usize = 4_096;
/// References expanded inside references.
pub const MAX_DEPTH: usize = 8;
/// The compiled superset's size limit (the `regex` crate's default is 10 MiB).
const SIZE_LIMIT: usize = 1 << 20;

/// The superset of `pattern` (ECMA-262, as written in a schema), or `None`.
pub fn superset(pattern: &str) -> Option<Regex> {
    let source = superset_source(pattern)?;
    RegexBuilder::new(&source)
        .size_limit(SIZE_LIMIT)
        .build()
        .ok()
}

/// The superset's source text, or `None` (also for a pattern without any construct to
/// rewrite: the `regex` crate then runs the pattern itself, nothing to gain).
pub fn superset_source(pattern: &str) -> Option<String> {
    let translated = jsonschema_regex::to_rust_regex(pattern).ok()?;
    let tree = Expr::parse_tree(&translated).ok()?;
    let mut groups = Vec::new();
    collect_groups(&tree.expr, &mut groups);
    let mut rewriter = Rewriter {
        groups: &groups,
        nodes: 0,
        rewrote: false,
    };
    let expr = rewriter.rewrite(&tree.expr, &mut Vec::new(), 0)?;
    if !rewriter.rewrote {
        return None;
    }
    let mut source = String::new();
    expr.to_str(&mut source, 0);
    Some(source)
}

/// Capturing groups in the order the parser numbers them (group N at index N - 1).
fn collect_groups<'e>(expr: &'e Expr, groups: &mut Vec<&'e Expr>) {
    if let Expr::Group(inner) = expr {
        groups.push(expr);
        collect_groups(inner, groups);
        return;
    }
    for child in expr.children_iter() {
        collect_groups(child, groups);
    }
}

struct Rewriter<'g> {
    groups: &'g [&'g Expr],
    nodes: usize,
    rewrote: bool,
}

impl Rewriter<'_> {
    /// `expr` rewritten; `open`: the groups enclosing it (a reference to one of those is
    /// recursive: no superset); `depth`: references being expanded around it.
    fn rewrite(&mut self, expr: &Expr, open: &mut Vec<*const Expr>, depth: usize) -> Option<Expr> {
        self.nodes += 1;
        if self.nodes > MAX_NODES {
            return None;
        }
        Some(match expr {
            Expr::Empty | Expr::Any { .. } | Expr::Literal { .. } | Expr::Delegate { .. } => {
                expr.clone()
            }
            Expr::Assertion(a) => Expr::Assertion(plain_assertion(a)?),
            Expr::Concat(children) => Expr::Concat(self.all(children, open, depth)?),
            Expr::Alt(children) => Expr::Alt(self.all(children, open, depth)?),
            Expr::Group(inner) => {
                open.push(expr as *const Expr);
                let inner = self.rewrite(inner, open, depth);
                open.pop();
                Expr::Group(inner?.into())
            }
            Expr::Repeat {
                child,
                lo,
                hi,
                greedy,
            } => Expr::Repeat {
                child: Box::new(self.rewrite(child, open, depth)?),
                lo: *lo,
                hi: *hi,
                greedy: *greedy,
            },
            Expr::Backref {
                group,
                casei: false,
            } => self.reference(*group, open, depth)?,
            Expr::LookAround(..) => {
                self.rewrote = true;
                Expr::Empty
            }
            Expr::AtomicGroup(inner) => {
                self.rewrote = true;
                self.rewrite(inner, open, depth)?
            }
            Expr::Conditional {
                condition,
                true_branch,
                false_branch,
            } if matches!(**condition, Expr::BackrefExistsCondition { .. }) => {
                self.rewrote = true;
                let branches = [(**true_branch).clone(), (**false_branch).clone()];
                Expr::Alt(self.all(&branches, open, depth)?)
            }
            _ => return None,
        })
    }

    fn all(
        &mut self,
        children: &[Expr],
        open: &mut Vec<*const Expr>,
        depth: usize,
    ) -> Option<Vec<Expr>> {
        children
            .iter()
            .map(|child| self.rewrite(child, open, depth))
            .collect()
    }

    /// `\N` → `(?:G)?`, G group N's expression rewritten (a fresh copy: its own groups
    /// capture nothing anyone reads).
    fn reference(
        &mut self,
        group: usize,
        open: &mut Vec<*const Expr>,
        depth: usize,
    ) -> Option<Expr> {
        self.rewrote = true;
        let target = *self.groups.get(group.checked_sub(1)?)?;
        if depth >= MAX_DEPTH || open.contains(&(target as *const Expr)) {
            return None;
        }
        let Expr::Group(inner) = target else {
            return None;
        };
        open.push(target as *const Expr);
        let copy = self.rewrite(inner, open, depth + 1);
        open.pop();
        Some(Expr::Repeat {
            child: Box::new(Expr::Concat(vec![copy?])),
            lo: 0,
            hi: 1,
            greedy: true,
        })
    }
}

/// The assertions `Expr::to_str` writes for the `regex` crate; any other → no superset.
fn plain_assertion(a: &Assertion) -> Option<Assertion> {
    use Assertion::*;
    match a {
        StartText
        | EndText
        | StartLine { .. }
        | StartLineOniguruma { .. }
        | EndLine { .. }
        | WordBoundary
        | NotWordBoundary
        | LeftWordBoundary
        | RightWordBoundary
        | LeftWordHalfBoundary
        | RightWordHalfBoundary => Some(*a),
        _ => None,
    }
}
