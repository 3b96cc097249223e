//! NIFs for tool names: the one tool-name rule (`cmdc_tool_core::names`) and the name each
//! provider format gives a tool.

use cmdc_tool_core::names;
use cmdc_tool_core::providers::tool_name;
use rustler::Term;

use crate::error::Result;

/// The registered name a model meant by `called` (a name some provider was given), or `nil`.
/// Bounded: each name is at most 128 bytes and mapped twice; lists of tools are small.
#[rustler::nif]
fn tool_name_original(registered: Vec<String>, called: &str) -> Option<String> {
    names::original(registered.iter().map(String::as_str), called).map(str::to_owned)
}

/// The name of an MCP server's tool: `server__tool` made to follow the one tool-name rule.
#[rustler::nif]
fn tool_name_namespaced(server: &str, tool: &str) -> String {
    names::namespaced(server, tool)
}

/// `{:ok, name}` when `name` follows the one tool-name rule, else `{:error, message}`.
#[rustler::nif]
fn tool_name_check(name: &str) -> Result<&str> {
    names::check(name)?;
    Ok(name)
}

/// `{:ok, name_given}`: the name `format` is given for the tool `name`.
#[rustler::nif]
fn tool_name_for(name: &str, format: Term) -> Result<String> {
    Ok(tool_name(name, crate::options::format(format)?).into_owned())
}
