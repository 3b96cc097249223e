//! `pattern`s that can backtrack, decided without backtracking where possible: a superset
//! regular expression refuses most failing strings in linear time (`superset.rs`), and the
//! `pattern` keyword this crate compiles uses it first (`keyword.rs`).

pub mod keyword;
pub mod superset;

#[cfg(test)]
mod tests;
