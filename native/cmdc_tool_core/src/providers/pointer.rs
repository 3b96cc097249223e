//! JSON Pointer paths: building them for warnings and resolving local `$ref`s.

use serde_json::Value;

/// `path` extended by one segment, escaped as JSON Pointer wants (`~` → `~0`, `/` → `~1`).
pub(super) fn child(path: &str, seg: &str) -> String {
    let mut p = String::with_capacity(path.len() + seg.len() + 1);
    p.push_str(path);
    p.push('/');
    p.push_str(&seg.replace('~', "~0").replace('/', "~1"));
    p
}

/// Resolves a local `$ref` (`#`, `#/$defs/X`, any JSON Pointer into the root document).
pub(super) fn resolve<'v>(root: &'v Value, reference: &str) -> Option<&'v Value> {
    let pointer = reference.strip_prefix('#')?;
    if pointer.is_empty() {
        return Some(root);
    }
    root.pointer(pointer)
}

/// `path` as warnings say it.
pub(super) fn at(path: &str) -> &str {
    if path.is_empty() {
        "the root"
    } else {
        path
    }
}
