//! The tool registry: names → tools, with the portable name rule, conflicts, reserved names,
//! per-tool settings and "did you mean" suggestions. Generic over the module handle `M` (an atom
//! in the NIF, a `String` in tests) and the compiled schema handle `S`, so it knows no BEAM type.

use std::collections::{btree_map, BTreeMap, HashMap, HashSet};
use std::sync::Arc;

pub use crate::names::{check as check_name, NAME_RULE};

/// Suggestions returned for an unknown name, at most.
pub const MAX_SUGGESTIONS: usize = 3;

/// A description must say something: a model picks tools by it.
pub fn check_description(description: &str) -> crate::error::Result<()> {
    if description.trim().is_empty() {
        Err(crate::error::Error::Tool(
            "the description is empty; a model chooses tools by their description, so every \
             tool needs a non-empty one"
                .into(),
        ))
    } else {
        Ok(())
    }
}

/// One registered tool.
#[derive(Debug)]
pub struct Entry<M, S> {
    pub name: String,
    pub module: M,
    /// `description/0`, captured at registration.
    pub description: String,
    /// The module defines `description/1`: its description depends on the context.
    pub contextual: bool,
    pub schema: S,
}

/// Who already holds a name.
#[derive(Debug, Clone, PartialEq)]
pub enum Holder<M> {
    /// A registered module.
    Module(M),
    /// A name reserved for a built-in at `new/1`.
    Reserved,
}

#[derive(Debug, Clone, PartialEq)]
pub enum RegistryError<M> {
    /// A tool of the batch is invalid: the module and a message stating the rule it breaks.
    Invalid { module: M, message: String },
    /// The name is held by another module (or reserved).
    Conflict { name: String, holder: Holder<M> },
}

/// Tools in registration order: each has a sequence number, the key of an ordered map, so
/// adding and removing one is O(log n) and the order needs no re-indexing.
#[derive(Debug)]
struct Ordered<M, S> {
    entries: BTreeMap<u64, Arc<Entry<M, S>>>,
    /// Name → sequence number.
    index: HashMap<String, u64>,
    next: u64,
}

impl<M, S> Default for Ordered<M, S> {
    fn default() -> Self {
        Ordered {
            entries: BTreeMap::new(),
            index: HashMap::new(),
            next: 0,
        }
    }
}

impl<M, S> Ordered<M, S> {
    fn get(&self, name: &str) -> Option<&Arc<Entry<M, S>>> {
        self.index.get(name).and_then(|seq| self.entries.get(seq))
    }

    /// Adds `e`, or replaces the entry of the same name in its place.
    fn put(&mut self, e: Entry<M, S>) {
        match self.index.get(&e.name) {
            Some(seq) => {
                self.entries.insert(*seq, Arc::new(e));
            }
            None => {
                self.index.insert(e.name.clone(), self.next);
                self.entries.insert(self.next, Arc::new(e));
                self.next += 1;
            }
        }
    }

    fn remove(&mut self, name: &str) -> bool {
        match self.index.remove(name) {
            Some(seq) => self.entries.remove(&seq).is_some(),
            None => false,
        }
    }
}

/// A whole set of tools, indexed, ready to swap in with [`Registry::apply_set`].
#[derive(Debug)]
pub struct ToolSet<M, S> {
    tools: Ordered<M, S>,
}

/// Names → tools. Registering or unregistering a tool is O(log n); a batch, O(batch log n).
#[derive(Debug)]
pub struct Registry<M, S> {
    tools: Ordered<M, S>,
    reserved: HashSet<String>,
    settings: HashMap<String, Vec<u8>>,
    generation: u64,
}

impl<M: Clone + PartialEq, S> Registry<M, S> {
    pub fn new<I: IntoIterator<Item = String>>(reserved: I) -> Self {
        Registry {
            tools: Ordered::default(),
            reserved: reserved.into_iter().collect(),
            settings: HashMap::new(),
            generation: 0,
        }
    }

    /// Bumped by every change to the set of tools (not by settings).
    pub fn generation(&self) -> u64 {
        self.generation
    }

    pub fn len(&self) -> usize {
        self.tools.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.tools.entries.is_empty()
    }

    pub fn get(&self, name: &str) -> Option<&Arc<Entry<M, S>>> {
        self.tools.get(name)
    }

    /// Tools in registration order.
    pub fn entries(&self) -> btree_map::Values<'_, u64, Arc<Entry<M, S>>> {
        self.tools.entries.values()
    }

    pub fn reserved(&self) -> &HashSet<String> {
        &self.reserved
    }

    /// Checks a batch on its own: the rules for each tool, then names given twice in it. Needs
    /// only `&self` (reserved names never change), so callers run it under a read lock.
    pub fn check_batch(&self, batch: &[Entry<M, S>]) -> Result<(), RegistryError<M>> {
        for e in batch {
            check_name(&e.name)
                .and_then(|_| check_description(&e.description))
                .map_err(|error| RegistryError::Invalid {
                    module: e.module.clone(),
                    message: error.to_string(),
                })?;
            if self.reserved.contains(&e.name) {
                return Err(RegistryError::Conflict {
                    name: e.name.clone(),
                    holder: Holder::Reserved,
                });
            }
        }
        let mut seen: HashMap<&str, &M> = HashMap::with_capacity(batch.len());
        for e in batch {
            if let Some(first) = seen.insert(&e.name, &e.module) {
                if *first != e.module {
                    return Err(RegistryError::Conflict {
                        name: e.name.clone(),
                        holder: Holder::Module(first.clone()),
                    });
                }
            }
        }
        Ok(())
    }

    /// Adds a batch: all or none. A name held by another module is a conflict; the same module
    /// registered again replaces its entry (e.g. after a code reload).
    pub fn register(&mut self, batch: Vec<Entry<M, S>>) -> Result<(), RegistryError<M>> {
        self.check_batch(&batch)?;
        self.register_checked(batch)
    }

    /// [`Registry::register`] for a batch that passed [`Registry::check_batch`]: only conflicts
    /// with registered names are left to check, so a write lock is held for O(batch).
    pub fn register_checked(&mut self, batch: Vec<Entry<M, S>>) -> Result<(), RegistryError<M>> {
        for e in &batch {
            if let Some(existing) = self.get(&e.name) {
                if existing.module != e.module {
                    return Err(RegistryError::Conflict {
                        name: e.name.clone(),
                        holder: Holder::Module(existing.module.clone()),
                    });
                }
            }
        }
        if batch.is_empty() {
            return Ok(());
        }
        for e in batch {
            self.tools.put(e);
        }
        self.generation += 1;
        Ok(())
    }

    /// Swaps the whole set: all or none. Settings of names that stay are kept.
    pub fn replace(&mut self, batch: Vec<Entry<M, S>>) -> Result<(), RegistryError<M>> {
        let set = self.prepare_set(batch)?;
        drop(self.apply_set(set));
        Ok(())
    }

    /// Checks a replacement set and builds its index (under a read lock, or none).
    pub fn prepare_set(&self, batch: Vec<Entry<M, S>>) -> Result<ToolSet<M, S>, RegistryError<M>> {
        self.check_batch(&batch)?;
        let mut tools = Ordered::default();
        for e in batch {
            tools.put(e);
        }
        Ok(ToolSet { tools })
    }

    /// Installs a prepared set (O(settings) under the write lock) and hands back the old one,
    /// for the caller to drop once the lock is released.
    pub fn apply_set(&mut self, set: ToolSet<M, S>) -> ToolSet<M, S> {
        self.settings
            .retain(|name, _| set.tools.index.contains_key(name));
        let old = ToolSet {
            tools: std::mem::replace(&mut self.tools, set.tools),
        };
        self.generation += 1;
        old
    }

    /// Removes a tool and its settings: `true` when it was registered.
    pub fn unregister(&mut self, name: &str) -> bool {
        if !self.tools.remove(name) {
            return false;
        }
        self.settings.remove(name);
        self.generation += 1;
        true
    }

    /// Stores a tool's settings (opaque bytes to this crate). `false` when the name is unknown.
    pub fn put_settings(&mut self, name: &str, settings: Vec<u8>) -> bool {
        if !self.tools.index.contains_key(name) {
            return false;
        }
        self.settings.insert(name.to_owned(), settings);
        true
    }

    pub fn settings(&self, name: &str) -> Option<&[u8]> {
        self.settings.get(name).map(Vec::as_slice)
    }

    /// The registered names nearest to `name`, best first.
    pub fn suggest(&self, name: &str) -> Vec<String> {
        suggest(self.entries().map(|e| e.name.as_str()), name)
    }
}

/// Lower-case, without `_` and `-`: `readFile`, `read-file` and `read_file` are the same here.
fn fold_into(out: &mut Vec<char>, name: &str) {
    out.clear();
    out.extend(
        name.chars()
            .filter(|c| *c != '_' && *c != '-')
            .flat_map(char::to_lowercase),
    );
}

/// Reusable rows for [`distance`], so scanning thousands of names allocates nothing.
#[derive(Default)]
pub struct Rows {
    prev2: Vec<usize>,
    prev: Vec<usize>,
    cur: Vec<usize>,
}

/// Optimal string alignment distance (Levenshtein plus adjacent transpositions), giving up and
/// answering `max + 1` once the distance is surely above `max`.
pub fn distance(a: &[char], b: &[char], max: usize) -> usize {
    distance_with(&mut Rows::default(), a, b, max)
}

fn distance_with(rows: &mut Rows, a: &[char], b: &[char], max: usize) -> usize {
    if a.len().abs_diff(b.len()) > max {
        return max + 1;
    }
    let w = b.len() + 1;
    let Rows { prev2, prev, cur } = rows;
    prev2.clear();
    prev2.resize(w, 0);
    prev.clear();
    prev.extend(0..w);
    cur.clear();
    cur.resize(w, 0);
    for i in 1..=a.len() {
        cur[0] = i;
        let mut row_min = cur[0];
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut d = (prev[j] + 1).min(cur[j - 1] + 1).min(prev[j - 1] + cost);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                d = d.min(prev2[j - 2] + 1);
            }
            cur[j] = d;
            row_min = row_min.min(d);
        }
        if row_min > max {
            return max + 1;
        }
        std::mem::swap(prev2, prev);
        std::mem::swap(prev, cur);
    }
    prev[b.len()]
}

fn contains(haystack: &[char], needle: &[char]) -> bool {
    needle.len() <= haystack.len() && haystack.windows(needle.len()).any(|w| w == needle)
}

/// "Did you mean": names whose folded form is within an edit distance that grows with the
/// length of the name (1 for short names, up to 3), or that contain / are contained in it;
/// nearest first, then alphabetical, at most [`MAX_SUGGESTIONS`].
pub fn suggest<'a, I: IntoIterator<Item = &'a str>>(candidates: I, name: &str) -> Vec<String> {
    let mut target = Vec::new();
    fold_into(&mut target, name);
    if target.is_empty() {
        return Vec::new();
    }
    let max = match target.len() {
        0..=3 => 1,
        4..=7 => 2,
        _ => 3,
    };
    let mut rows = Rows::default();
    let mut folded = Vec::new();
    let mut scored: Vec<(usize, &str)> = Vec::new();
    for cand in candidates {
        fold_into(&mut folded, cand);
        let d = distance_with(&mut rows, &target, &folded, max);
        let score = if d <= max {
            d
        } else if folded.len() >= 3
            && target.len() >= 3
            && (contains(&folded, &target) || contains(&target, &folded))
        {
            max + 1
        } else {
            continue;
        };
        scored.push((score, cand));
    }
    scored.sort_unstable();
    scored
        .into_iter()
        .take(MAX_SUGGESTIONS)
        .map(|(_, n)| n.to_owned())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn entry(name: &str, module: &str) -> Entry<String, ()> {
        Entry {
            name: name.into(),
            module: module.into(),
            description: format!("The {name} tool."),
            contextual: false,
            schema: (),
        }
    }

    fn reg() -> Registry<String, ()> {
        Registry::new(vec!["bash".to_string()])
    }

    #[test]
    fn names_follow_the_one_rule() {
        // The rule itself is tested in `names`; the registry refuses what it refuses.
        assert!(check_name("fs.read").is_ok());
        assert!(check_name("read file")
            .unwrap_err()
            .to_string()
            .contains(NAME_RULE));
    }

    #[test]
    fn descriptions_must_not_be_blank() {
        assert!(check_description("Reads a file.").is_ok());
        assert!(matches!(
            check_description("  \n"),
            Err(crate::error::Error::Tool(m)) if m.contains("description is empty")
        ));
    }

    #[test]
    fn register_is_all_or_none() {
        let mut r = reg();
        r.register(vec![entry("a", "A"), entry("b", "B")]).unwrap();
        assert_eq!(r.len(), 2);
        let g = r.generation();
        // One bad tool in the batch: nothing of the batch is registered.
        let err = r
            .register(vec![entry("c", "C"), entry("bad name", "Bad")])
            .unwrap_err();
        match err {
            RegistryError::Invalid { module, message } => {
                assert_eq!(module, "Bad");
                assert!(message.contains("position 3"), "{message}");
            }
            other => panic!("{other:?}"),
        }
        assert!(r.get("c").is_none());
        assert_eq!(r.generation(), g);
        // A conflict with a registered name names its holder.
        let err = r
            .register(vec![entry("d", "D"), entry("a", "Other")])
            .unwrap_err();
        assert_eq!(
            err,
            RegistryError::Conflict {
                name: "a".into(),
                holder: Holder::Module("A".into())
            }
        );
        assert!(r.get("d").is_none());
        // The same module again is an update, not a conflict.
        r.register(vec![entry("a", "A")]).unwrap();
        assert_eq!(r.len(), 2);
    }

    #[test]
    fn reserved_names_and_batch_duplicates_conflict() {
        let mut r = reg();
        let err = r.register(vec![entry("bash", "MyBash")]).unwrap_err();
        assert_eq!(
            err,
            RegistryError::Conflict {
                name: "bash".into(),
                holder: Holder::Reserved
            }
        );
        let err = r
            .register(vec![entry("x", "X1"), entry("x", "X2")])
            .unwrap_err();
        assert_eq!(
            err,
            RegistryError::Conflict {
                name: "x".into(),
                holder: Holder::Module("X1".into())
            }
        );
        assert!(r.is_empty());
    }

    #[test]
    fn unregister_keeps_order_and_index() {
        let mut r = reg();
        r.register(vec![entry("a", "A"), entry("b", "B"), entry("c", "C")])
            .unwrap();
        r.put_settings("b", vec![1]);
        assert!(r.unregister("b"));
        assert!(!r.unregister("b"));
        let names: Vec<&str> = r.entries().map(|e| e.name.as_str()).collect();
        assert_eq!(names, ["a", "c"]);
        assert_eq!(r.get("c").unwrap().module, "C");
        assert_eq!(r.settings("b"), None);
    }

    /// Issue 16: unregistering one of 30k tools was an O(n) shift and re-index under the write
    /// lock. Now no other tool's slot moves: its key and its index entry stay as they were.
    #[test]
    fn unregister_touches_only_its_own_tool_at_30k_tools() {
        let mut r = reg();
        let batch = (0..30_000)
            .map(|i| entry(&format!("tool_{i}"), &format!("M{i}")))
            .collect();
        r.register(batch).unwrap();
        let index = r.tools.index.clone();
        let keys: Vec<u64> = r.tools.entries.keys().copied().collect();
        for i in (0..30_000).step_by(3) {
            assert!(r.unregister(&format!("tool_{i}")));
        }
        assert_eq!(r.len(), 20_000);
        for (name, seq) in &r.tools.index {
            assert_eq!(index.get(name), Some(seq), "{name} moved");
        }
        let kept: Vec<u64> = keys.into_iter().filter(|k| k % 3 != 0).collect();
        assert_eq!(r.tools.entries.keys().copied().collect::<Vec<_>>(), kept);
        // Order is registration order; a new tool goes last, a re-registered one stays put.
        r.register(vec![entry("late", "L"), entry("tool_1", "M1")])
            .unwrap();
        let names: Vec<&str> = r.entries().map(|e| e.name.as_str()).collect();
        assert_eq!(names[..2], ["tool_1", "tool_2"]);
        assert_eq!(names.last(), Some(&"late"));
        assert_eq!(r.get("tool_29999").unwrap().module, "M29999");
    }

    #[test]
    fn replace_swaps_atomically_and_keeps_surviving_settings() {
        let mut r = reg();
        r.register(vec![entry("a", "A"), entry("b", "B")]).unwrap();
        assert!(r.put_settings("a", vec![7]));
        assert!(r.put_settings("b", vec![8]));
        assert!(!r.put_settings("zzz", vec![9]));
        let err = r.replace(vec![entry("bash", "X")]).unwrap_err();
        assert!(matches!(err, RegistryError::Conflict { .. }));
        assert_eq!(r.len(), 2);
        r.replace(vec![entry("a", "A2"), entry("c", "C")]).unwrap();
        assert_eq!(r.get("a").unwrap().module, "A2");
        assert!(r.get("b").is_none());
        assert_eq!(r.settings("a"), Some(&[7u8][..]));
        assert_eq!(r.settings("b"), None);
    }

    #[test]
    fn distance_counts_edits_and_transpositions() {
        let c = |s: &str| s.chars().collect::<Vec<_>>();
        assert_eq!(distance(&c("kitten"), &c("sitting"), 5), 3);
        assert_eq!(distance(&c("read"), &c("raed"), 5), 1);
        assert_eq!(distance(&c("abc"), &c("abc"), 0), 0);
        assert_eq!(distance(&c("a"), &c("abcdef"), 2), 3);
    }

    #[test]
    fn suggestions_catch_what_models_get_wrong() {
        let names = [
            "read_file",
            "write_file",
            "list_dir",
            "search",
            "get_weather",
            "bash",
        ];
        let s = |n: &str| suggest(names, n);
        assert_eq!(s("readFile"), ["read_file"]);
        assert_eq!(s("read-file"), ["read_file"]);
        assert_eq!(s("raed_file")[0], "read_file");
        assert_eq!(s("weather"), ["get_weather"]);
        assert_eq!(s("serach"), ["search"]);
        assert_eq!(s("list"), ["list_dir"]);
        assert!(s("completely_unrelated").is_empty());
        assert!(s("").is_empty());
        let many: Vec<String> = (0..10).map(|i| format!("tool_{i}")).collect();
        assert_eq!(
            suggest(many.iter().map(String::as_str), "tool_x").len(),
            MAX_SUGGESTIONS
        );
    }
}
