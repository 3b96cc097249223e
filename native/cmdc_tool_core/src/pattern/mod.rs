//! `pattern`s that can backtrack, decided without backtracking where possible: a superset
//! regular expression refuses most failing strings in linear time (`superset.rs`), and the
//! `pattern` keyword this crate compiles uses it first (`keyword.rs`). `engine.rs`: the
//! engine's options and limit, and which patterns can backtrack.

pub mod engine;
pub mod keyword;
pub mod superset;

#[cfg(test)]
mod tests;
