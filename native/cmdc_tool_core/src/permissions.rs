//! One permission model for every tool kind: every spelling people use (sy-f-misc's
//! `executionPolicy`, `resultApprovalPolicy`, the older `permissionLevel`,
//! `requireExecutionApproval`, `requireResultApproval`, PowerShell `TOOL_CONFIG`,
//! `defaultPermissions`, metadata files, registry settings) turns into one
//! [`Permissions`] here, fail-safe:
//!
//! * within one layer (one function's attributes, one `TOOL_CONFIG`, one settings map) settings
//!   that disagree resolve to the **stricter** one;
//! * an unknown value (or key spelling of a known setting with a value that is not one of its
//!   values) means the **strictest** (`ask_always` / `always`), with a warning naming the origin
//!   and the setting;
//! * a later layer (a function's own settings) replaces an earlier one (the script's defaults)
//!   for each of the two dimensions it sets.
//!
//! The table of spellings lives in `docs/PERMISSIONS.md` and is tested case by case below.

use serde_json::{Map, Value};

/// Whether a call runs without asking, asks once per session, asks every time, or never runs.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Policy {
    Auto,
    AskOnce,
    AskAlways,
    Deny,
}

/// Whether a result goes to the approver before the model sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum ResultApproval {
    Never,
    OnError,
    Always,
}

impl Policy {
    /// The canonical spelling (`auto`, `ask-once`, `ask-always`, `deny`).
    pub fn as_str(self) -> &'static str {
        match self {
            Policy::Auto => "auto",
            Policy::AskOnce => "ask-once",
            Policy::AskAlways => "ask-always",
            Policy::Deny => "deny",
        }
    }
}

impl ResultApproval {
    /// The canonical spelling (`never`, `on-error`, `always`).
    pub fn as_str(self) -> &'static str {
        match self {
            ResultApproval::Never => "never",
            ResultApproval::OnError => "on-error",
            ResultApproval::Always => "always",
        }
    }
}

/// What one layer of settings says; `None` where it says nothing.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Layer {
    pub policy: Option<Policy>,
    pub result_approval: Option<ResultApproval>,
    pub warnings: Vec<String>,
}

/// The resolved permissions of a tool.
#[derive(Debug, Clone, PartialEq)]
pub struct Permissions {
    pub policy: Policy,
    pub result_approval: ResultApproval,
    pub warnings: Vec<String>,
}

/// The policy when nothing is said: ask once (a script's author did not say it is harmless).
pub const DEFAULT_POLICY: Policy = Policy::AskOnce;
pub const DEFAULT_RESULT_APPROVAL: ResultApproval = ResultApproval::Never;

/// Lower case without separators: `Ask_Once`, `ask-once`, `askOnce`, `ASK ONCE` → `askonce`.
fn squash(s: &str) -> String {
    s.chars()
        .filter(|c| !matches!(c, '-' | '_' | ' ' | '.'))
        .flat_map(char::to_lowercase)
        .collect()
}

/// The settings a key names, whatever its spelling.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Key {
    ExecutionPolicy,
    ResultApprovalPolicy,
    PermissionLevel,
    RequireExecutionApproval,
    RequireResultApproval,
    /// A nested layer (`TOOL_CONFIG`, `permissions`, `defaultPermissions` inside a map).
    Nested,
}

fn key(name: &str) -> Option<Key> {
    Some(match squash(name).as_str() {
        "executionpolicy" | "policy" | "permission" => Key::ExecutionPolicy,
        "resultapprovalpolicy" | "resultapproval" => Key::ResultApprovalPolicy,
        "permissionlevel" => Key::PermissionLevel,
        "requireexecutionapproval" => Key::RequireExecutionApproval,
        "requireresultapproval" => Key::RequireResultApproval,
        "toolconfig" | "permissions" => Key::Nested,
        _ => return None,
    })
}

/// A value as text for matching (strings, booleans, and `:atoms` sent as strings).
fn word(v: &Value) -> Option<String> {
    match v {
        Value::String(s) => Some(squash(s.trim_start_matches(':'))),
        Value::Bool(b) => Some(b.to_string()),
        _ => None,
    }
}

fn boolean(v: &Value) -> Option<bool> {
    match v {
        Value::Bool(b) => Some(*b),
        Value::Number(n) if n.as_u64() == Some(0) => Some(false),
        Value::Number(n) if n.as_u64() == Some(1) => Some(true),
        _ => match word(v).as_deref() {
            Some("true" | "yes" | "on") => Some(true),
            Some("false" | "no" | "off") => Some(false),
            _ => None,
        },
    }
}

fn execution_policy(v: &Value) -> Option<Policy> {
    Some(match word(v)?.as_str() {
        "auto" | "allow" => Policy::Auto,
        "askonce" | "ask" | "once" => Policy::AskOnce,
        "askalways" | "askeverytime" => Policy::AskAlways,
        "deny" | "forbidden" => Policy::Deny,
        _ => return None,
    })
}

fn result_policy(v: &Value) -> Option<ResultApproval> {
    Some(match word(v)?.as_str() {
        "never" | "none" | "no" | "false" => ResultApproval::Never,
        "onerror" | "error" | "errors" => ResultApproval::OnError,
        "always" | "yes" | "true" => ResultApproval::Always,
        _ => return None,
    })
}

fn level(v: &Value) -> Option<Policy> {
    Some(match word(v)?.as_str() {
        "public" => Policy::Auto,
        "moderate" => Policy::AskOnce,
        "sensitive" => Policy::AskAlways,
        _ => return None,
    })
}

fn show(v: &Value) -> String {
    let s = v.to_string();
    if s.chars().count() > 80 {
        format!("{}…", s.chars().take(80).collect::<String>())
    } else {
        s
    }
}

impl Layer {
    fn policy(&mut self, p: Policy) {
        self.policy = Some(self.policy.map_or(p, |q| q.max(p)));
    }

    fn result(&mut self, r: ResultApproval) {
        self.result_approval = Some(self.result_approval.map_or(r, |q| q.max(r)));
    }

    /// Reads one layer: a map of raw settings from `origin` (a file and place, for warnings).
    /// Keys that are not permission settings are ignored.
    pub fn read(settings: &Map<String, Value>, origin: &str) -> Layer {
        let mut layer = Layer::default();
        layer.merge(settings, origin);
        layer
    }

    fn merge(&mut self, settings: &Map<String, Value>, origin: &str) {
        for (name, v) in settings {
            let Some(k) = key(name) else { continue };
            let unknown = |what: &str| {
                format!(
                    "{origin}: {name} = {} is not {what}; treated as the strictest setting",
                    show(v)
                )
            };
            match k {
                Key::ExecutionPolicy => match execution_policy(v) {
                    Some(p) => self.policy(p),
                    None => {
                        self.warnings
                            .push(unknown("auto, ask-once, ask-always or deny"));
                        self.policy(Policy::AskAlways);
                    }
                },
                Key::ResultApprovalPolicy => match result_policy(v) {
                    Some(r) => self.result(r),
                    None => {
                        self.warnings.push(unknown("never, on-error or always"));
                        self.result(ResultApproval::Always);
                    }
                },
                Key::PermissionLevel => match level(v) {
                    Some(p) => self.policy(p),
                    None => {
                        self.warnings.push(unknown("public, moderate or sensitive"));
                        self.policy(Policy::AskAlways);
                    }
                },
                Key::RequireExecutionApproval => match boolean(v) {
                    Some(true) => self.policy(Policy::AskOnce),
                    Some(false) => self.policy(Policy::Auto),
                    None => {
                        self.warnings.push(unknown("true or false"));
                        self.policy(Policy::AskAlways);
                    }
                },
                Key::RequireResultApproval => match boolean(v) {
                    Some(true) => self.result(ResultApproval::Always),
                    Some(false) => self.result(ResultApproval::Never),
                    None => {
                        self.warnings.push(unknown("true or false"));
                        self.result(ResultApproval::Always);
                    }
                },
                Key::Nested => match v {
                    Value::Object(inner) => self.merge(inner, origin),
                    Value::Null => {}
                    _ => {
                        self.warnings.push(unknown("a JSON object of settings"));
                        self.policy(Policy::AskAlways);
                        self.result(ResultApproval::Always);
                    }
                },
            }
        }
    }
}

/// Resolves layers, earliest first (defaults, then the tool's own): each dimension comes from
/// the last layer that sets it, else the default.
pub fn resolve(layers: &[Layer]) -> Permissions {
    let policy = layers
        .iter()
        .rev()
        .find_map(|l| l.policy)
        .unwrap_or(DEFAULT_POLICY);
    let result_approval = layers
        .iter()
        .rev()
        .find_map(|l| l.result_approval)
        .unwrap_or(DEFAULT_RESULT_APPROVAL);
    let warnings = layers.iter().flat_map(|l| l.warnings.clone()).collect();
    Permissions {
        policy,
        result_approval,
        warnings,
    }
}

/// The permission keys a tool entry of a description document may carry at its top level
/// (sy-f-misc's own `.tool.json` keeps them there).
fn top_level(tool: &Map<String, Value>) -> Map<String, Value> {
    tool.iter()
        .filter(|(k, _)| !matches!(key(k), None | Some(Key::Nested)))
        .map(|(k, v)| (k.clone(), v.clone()))
        .collect()
}

fn canonical(p: &Permissions) -> Value {
    serde_json::json!({
        "executionPolicy": p.policy.as_str(),
        "resultApprovalPolicy": p.result_approval.as_str(),
    })
}

/// Normalizes a script description document in place: `defaultPermissions` and each tool's
/// settings (its `permissions` object and any permission keys at its top level, as sy-f-misc
/// writes them) become canonical `{"executionPolicy", "resultApprovalPolicy"}`; warnings are
/// appended to the document's `warnings`, naming `file` and the setting. Idempotent.
pub fn normalize_document(doc: &mut Value, file: &str) {
    let Some(obj) = doc.as_object_mut() else {
        return;
    };
    let defaults = match obj.get("defaultPermissions") {
        Some(Value::Object(m)) => Layer::read(m, &format!("{file} (script defaults)")),
        Some(Value::Null) | None => Layer::default(),
        Some(other) => {
            let mut m = Map::new();
            m.insert("defaultPermissions".into(), other.clone());
            Layer::read(&m, &format!("{file} (script defaults)"))
        }
    };
    let mut warnings: Vec<String> = defaults.warnings.clone();
    let base = resolve(std::slice::from_ref(&defaults));
    if let Some(tools) = obj.get_mut("tools").and_then(Value::as_array_mut) {
        for tool in tools.iter_mut() {
            let Some(t) = tool.as_object_mut() else {
                continue;
            };
            let name = t
                .get("function")
                .and_then(|f| f.get("name"))
                .and_then(Value::as_str)
                .unwrap_or("?")
                .to_owned();
            let origin = format!("{file}: {name}");
            let mut own = Layer::read(&top_level(t), &origin);
            if let Some(Value::Object(p)) = t.get("permissions") {
                own.merge(p, &origin);
            } else if let Some(p @ (Value::String(_) | Value::Number(_) | Value::Array(_))) =
                t.get("permissions")
            {
                let mut m = Map::new();
                m.insert("permissions".into(), p.clone());
                own.merge(&m, &origin);
            }
            let own_warnings = std::mem::take(&mut own.warnings);
            warnings.extend(own_warnings);
            let resolved = resolve(&[defaults.clone(), own]);
            t.insert("permissions".into(), canonical(&resolved));
        }
    }
    obj.insert("defaultPermissions".into(), canonical(&base));
    if !warnings.is_empty() {
        let list = obj
            .entry("warnings")
            .or_insert_with(|| Value::Array(Vec::new()));
        if let Value::Array(list) = list {
            for w in warnings {
                if !list.iter().any(|x| x.as_str() == Some(&w)) {
                    list.push(Value::String(w));
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Every row of the table in `docs/PERMISSIONS.md`: `| settings | policy | result | warns |`.
    #[test]
    fn the_documented_table_holds_row_by_row() {
        let doc = include_str!("../../../docs/PERMISSIONS.md");
        let mut rows = 0;
        for line in doc.lines() {
            let cells: Vec<&str> = line
                .trim()
                .trim_matches('|')
                .split('|')
                .map(str::trim)
                .collect();
            if cells.len() != 4 || !cells[0].starts_with('`') {
                continue;
            }
            let settings: Value = serde_json::from_str(cells[0].trim_matches('`'))
                .unwrap_or_else(|e| panic!("row {line:?}: {e}"));
            let layer = Layer::read(settings.as_object().unwrap(), "t.py: f");
            let got = resolve(&[layer]);
            assert_eq!(got.policy.as_str(), cells[1].trim_matches('`'), "{line}");
            assert_eq!(
                got.result_approval.as_str(),
                cells[2].trim_matches('`'),
                "{line}"
            );
            assert_eq!(
                !got.warnings.is_empty(),
                cells[3] == "yes",
                "{line}: {:?}",
                got.warnings
            );
            rows += 1;
        }
        assert!(rows >= 30, "only {rows} rows read from the table");
    }

    #[test]
    fn warnings_name_the_origin_and_the_setting() {
        let layer = Layer::read(
            json!({"permissionLevel": "dangerous"}).as_object().unwrap(),
            "tools.py: wipe",
        );
        assert_eq!(
            layer.warnings,
            vec![
                "tools.py: wipe: permissionLevel = \"dangerous\" is not public, moderate or \
                  sensitive; treated as the strictest setting"
            ]
        );
    }

    #[test]
    fn a_tool_setting_replaces_the_default_per_dimension() {
        let defaults = Layer::read(
            json!({"executionPolicy": "ask-always", "resultApprovalPolicy": "on-error"})
                .as_object()
                .unwrap(),
            "d",
        );
        let own = Layer::read(json!({"executionPolicy": "auto"}).as_object().unwrap(), "f");
        let p = resolve(&[defaults, own]);
        assert_eq!(
            (p.policy, p.result_approval),
            (Policy::Auto, ResultApproval::OnError)
        );
        assert_eq!(
            (resolve(&[]).policy, resolve(&[]).result_approval),
            (Policy::AskOnce, ResultApproval::Never)
        );
    }

    #[test]
    fn sy_f_misc_caches_keep_their_per_tool_permissions() {
        // py2tool.py writes the permission attributes at each tool's top level.
        let mut doc = json!({
            "type": "PythonModule", "name": "files", "rulePrompt": "",
            "tools": [
                {"type": "function", "function": {"name": "rm", "parameters": {}},
                 "permissionLevel": "sensitive", "requireResultApproval": true},
                {"type": "function", "function": {"name": "ls", "parameters": {}},
                 "permissionLevel": "public"},
                {"type": "function", "function": {"name": "cat", "parameters": {}}}
            ]
        });
        normalize_document(&mut doc, "files.tool.json");
        let perms = |i: usize| doc["tools"][i]["permissions"].clone();
        assert_eq!(
            perms(0),
            json!({"executionPolicy": "ask-always", "resultApprovalPolicy": "always"})
        );
        assert_eq!(
            perms(1),
            json!({"executionPolicy": "auto", "resultApprovalPolicy": "never"})
        );
        assert_eq!(
            perms(2),
            json!({"executionPolicy": "ask-once", "resultApprovalPolicy": "never"})
        );
        assert!(doc.get("warnings").is_none());
        // normalizing again changes nothing
        let once = doc.clone();
        normalize_document(&mut doc, "files.tool.json");
        assert_eq!(doc, once);
    }

    #[test]
    fn broken_settings_in_a_document_are_strictest_with_a_warning() {
        let mut doc = json!({
            "type": "PowerShellModule", "name": "ps",
            "defaultPermissions": {"TOOL_CONFIG": "{not json"},
            "tools": [
                {"type": "function", "function": {"name": "Get-It", "parameters": {}},
                 "permissions": {"executionPolicy": "auto"}},
                {"type": "function", "function": {"name": "Set-It", "parameters": {}}}
            ]
        });
        normalize_document(&mut doc, "ps.ps1");
        assert_eq!(doc["tools"][0]["permissions"]["executionPolicy"], "auto");
        assert_eq!(
            doc["tools"][0]["permissions"]["resultApprovalPolicy"],
            "always"
        );
        assert_eq!(
            doc["tools"][1]["permissions"]["executionPolicy"],
            "ask-always"
        );
        let w = doc["warnings"][0].as_str().unwrap();
        assert!(
            w.starts_with("ps.ps1 (script defaults): TOOL_CONFIG"),
            "{w}"
        );
    }
}
