//! The permission normalizer (`cmdc_tool_core::permissions`) for settings held in Elixir
//! (registry settings, metadata files, `tool_options/0`): JSON text in, resolved values out.

use cmdc_tool_core::permissions::Layer;
use serde_json::{Map, Value};

/// `{policy | nil, result_approval | nil, warnings}` for one layer of settings given as a JSON
/// object (canonical spellings: `"ask-once"`, `"on-error"`). Never fails: text that is not a
/// JSON object counts as an unknown setting (the strictest, with a warning).
#[rustler::nif]
fn permissions_resolve(
    settings_json: String,
    origin: String,
) -> (Option<&'static str>, Option<&'static str>, Vec<String>) {
    let layer = match serde_json::from_str::<Value>(&settings_json) {
        Ok(Value::Object(m)) => Layer::read(&m, &origin),
        _ => {
            let mut m = Map::new();
            m.insert("permissions".into(), Value::String(settings_json));
            Layer::read(&m, &origin)
        }
    };
    (
        layer.policy.map(|p| p.as_str()),
        layer.result_approval.map(|r| r.as_str()),
        layer.warnings,
    )
}
