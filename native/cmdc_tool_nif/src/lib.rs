//! cmdc_tool's native core. Every `#[rustler::nif]` in the modules below is registered with
//! `CMDC.Tool.Native` by `rustler::init!`; this file holds only the module list and the table.
//! `testing` (the `testing` cargo feature) adds the test and benchmark NIFs, whose stubs
//! `CMDC.Tool.Native.Testing` adds to `CMDC.Tool.Native` in the same builds.

pub mod atoms;
pub mod beam;
pub mod compiled;
pub mod discovery;
#[cfg(feature = "embedder")]
pub mod embed;
pub mod encode;
pub mod error;
pub mod exec;
pub mod http;
pub mod http_server;
pub mod json;
pub mod layout;
pub mod matcher;
pub mod modules;
pub mod names;
pub mod nulls;
pub mod options;
pub mod permissions;
pub mod registry;
pub mod runtime;
pub mod schema;
pub mod scripts;
pub mod search;
pub mod stdio;
pub mod term;
#[cfg(feature = "testing")]
pub mod testing;
pub mod twins;

rustler::init!("Elixir.CMDC.Tool.Native");
