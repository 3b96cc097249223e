//! What the index reads of a tool, and the weight of each field: a word in the name says more
//! about a tool than one deep in its description.

use serde_json::Value;

use super::bag::Bag;
use super::tokenize;

/// Field weights (BM25F-style: a word's frequency is the sum of its fields' weights).
const NAME: f32 = 3.0;
const TITLE: f32 = 2.0;
const NAMESPACE: f32 = 1.0;
const DESCRIPTION: f32 = 1.0;
const PARAM_NAME: f32 = 1.0;
const PARAM_DESCRIPTION: f32 = 0.5;

/// Parameters read, at most (a schema of thousands of properties is not read whole).
const MAX_PARAMS: usize = 200;
/// Nesting read into `properties` / `items`.
const MAX_DEPTH: usize = 3;

/// One tool as the index reads it.
#[derive(Debug, Clone, Copy)]
pub struct Doc<'a> {
    pub name: &'a str,
    pub title: Option<&'a str>,
    pub description: &'a str,
    /// The tool's parameters (a JSON Schema): property names and descriptions are read.
    pub parameters: &'a Value,
    pub namespace: Option<&'a str>,
    /// Annotations whose value is `true` (e.g. `readOnlyHint`).
    pub annotations: &'a [String],
}

/// `readOnlyHint`, `read_only` and `readonly` are one key: lower case, no `_`/`-`, no `hint`.
pub fn annotation_key(key: &str) -> String {
    let k: String = key
        .chars()
        .filter(|c| *c != '_' && *c != '-')
        .flat_map(char::to_lowercase)
        .collect();
    match k.strip_suffix("hint") {
        Some(s) if !s.is_empty() => s.to_owned(),
        _ => k,
    }
}

/// A tool read into words, ready for [`super::Index::insert`].
#[derive(Debug)]
pub struct Prepared {
    pub(super) name: String,
    pub(super) namespace: Option<String>,
    pub(super) annotations: Vec<String>,
    /// Word → weighted frequency.
    pub(super) words: Bag,
    /// Weighted length.
    pub(super) len: f32,
    /// What the regex mode reads.
    pub(super) text: String,
}

impl Prepared {
    pub fn name(&self) -> &str {
        &self.name
    }
}

impl Doc<'_> {
    /// Reads the tool into words (the costly part of indexing; no index needed).
    pub fn prepare(&self) -> Prepared {
        // About one distinct word per 8 bytes of text (sized once: no regrowth).
        let bytes = self.name.len() + self.description.len() + self.title.map_or(0, str::len);
        let mut words = Bag::with_capacity(bytes / 8 + 16);
        let mut len = 0.0f32;
        let mut add = |text: &str, weight: f32| {
            tokenize::each_word(text, |w| {
                len += weight;
                words.add(w, weight);
            })
        };
        add(self.name, NAME);
        add(self.title.unwrap_or(""), TITLE);
        add(self.namespace.unwrap_or(""), NAMESPACE);
        add(self.description, DESCRIPTION);
        let mut params = Vec::with_capacity(16);
        collect_params(self.parameters, 0, &mut params);
        // Sized once: name, title, description and each `param: description` line.
        let size = params
            .iter()
            .map(|(n, d)| n.len() + d.map_or(0, |d| d.len() + 2) + 1)
            .sum::<usize>()
            + bytes
            + 3;
        let mut text = String::with_capacity(size);
        for part in [self.name, self.title.unwrap_or(""), self.description] {
            text.push_str(part);
            text.push('\n');
        }
        for (name, description) in params {
            add(name, PARAM_NAME);
            text.push_str(name);
            if let Some(d) = description {
                add(d, PARAM_DESCRIPTION);
                text.push_str(": ");
                text.push_str(d);
            }
            text.push('\n');
        }
        Prepared {
            name: self.name.to_owned(),
            namespace: self.namespace.map(str::to_owned),
            annotations: self.annotations.iter().map(|a| annotation_key(a)).collect(),
            words,
            len,
            text,
        }
    }
}

/// `(property name, description)` pairs of a schema, breadth bounded by [`MAX_PARAMS`].
fn collect_params<'v>(schema: &'v Value, depth: usize, out: &mut Vec<(&'v str, Option<&'v str>)>) {
    if depth >= MAX_DEPTH {
        return;
    }
    if let Some(props) = schema.get("properties").and_then(Value::as_object) {
        for (name, sub) in props {
            if out.len() >= MAX_PARAMS {
                return;
            }
            out.push((name, sub.get("description").and_then(Value::as_str)));
            collect_params(sub, depth + 1, out);
        }
    }
    if let Some(items) = schema.get("items") {
        collect_params(items, depth + 1, out);
    }
}

/// The passage a sentence-embedding model reads for a tool, from the text `Doc::prepare` keeps
/// (name, title, description, then a line per parameter): the name as words (`server__read_file`
/// is "server read file", `getUser` "get user"), then the rest as one paragraph. Models
/// trained on sentences place "read file" near "show me what's inside", not `read_file`.
pub fn passage(text: &str) -> String {
    let (name, rest) = text.split_once('\n').unwrap_or((text, ""));
    let mut out = String::with_capacity(text.len() + 8);
    let mut prev: Option<char> = None;
    for c in name.chars() {
        if c.is_alphanumeric() {
            if prev.is_some_and(|p| p.is_lowercase() && c.is_uppercase()) {
                out.push(' ');
            }
            out.extend(c.to_lowercase());
        } else if !out.ends_with(' ') && !out.is_empty() {
            out.push(' ');
        }
        prev = Some(c);
    }
    let out_len = out.trim_end().len();
    out.truncate(out_len);
    for line in rest.lines().map(str::trim).filter(|l| !l.is_empty()) {
        out.push_str(if out.ends_with(['.', ':', '!', '?']) {
            " "
        } else {
            ". "
        });
        out.push_str(line);
    }
    out
}

#[cfg(test)]
mod passage_tests {
    use super::passage;

    #[test]
    fn names_become_words_and_lines_one_paragraph() {
        assert_eq!(
            passage("filesystem__read_text_file\n\nRead a file.\npath: Where it is\n"),
            "filesystem read text file. Read a file. path: Where it is"
        );
        assert_eq!(passage("getUserById"), "get user by id");
        assert_eq!(passage("a.b-c\nTitle\nDo it"), "a b c. Title. Do it");
    }
}
