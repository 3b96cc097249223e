//! cmdc_tool's pure-Rust core. Nothing here knows about the BEAM: the NIF crate converts terms
//! and calls in, and `cargo test` exercises this crate without a VM.

pub mod budget;
pub mod compiled;
pub mod dialect;
pub mod discovery;
pub mod error;
pub mod etf;
pub mod exec;
pub mod fs;
pub mod http;
pub mod matcher;
pub mod names;
pub mod pattern;
pub mod permissions;
pub mod providers;
pub mod registry;
pub mod schema;
pub mod scripts;
pub mod search;
pub mod tape;
#[cfg(test)]
mod test_rng;
