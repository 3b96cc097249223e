//! cmdc_tool's pure-Rust core. Nothing here knows about the BEAM: the NIF crate converts terms
//! and calls in, and `cargo test` exercises this crate without a VM.

pub mod etf;
pub mod providers;
pub mod registry;
pub mod schema;
