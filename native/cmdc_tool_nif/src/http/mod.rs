//! NIFs of the HTTP layer (`cmdc_tool_core::http`).

pub mod client;
