//! The one cache of provider output: built tools lists of one registry, keyed by (format,
//! strictness, context bytes), cleared by one rule: the registry's generation changed. Bounded
//! in entries and in bytes (contexts are caller data, so their number is not ours to trust);
//! when over, the oldest entries go first.
//!
//! Generic over the stored value, so the NIF keeps its resource handles here (handed out as
//! binaries without a copy) and cargo tests exercise the rules without a VM.

use std::collections::{HashMap, VecDeque};

use super::format::Format;

/// What selects one built list: the format, strictness (already `false` for a format without a
/// strict mode) and the context as bytes (`term_to_binary/1` of the caller's context).
pub type Key = (Format, bool, Vec<u8>);

/// Entries kept per registry, at most.
pub const MAX_ENTRIES: usize = 64;
/// Bytes of stored output kept per registry, at most (one list larger than this is still kept,
/// alone: the newest list is always cached).
pub const MAX_BYTES: usize = 64 << 20;

/// The key for a format and strictness as given: strictness folded away where the format has
/// no strict mode, so `strict: true` and `false` share one entry there.
pub fn key(format: Format, strict: bool, context: &[u8]) -> Key {
    (format, strict && format.has_strict(), context.to_vec())
}

#[derive(Debug)]
pub struct OutputCache<V> {
    generation: u64,
    entries: HashMap<Key, (V, usize)>,
    /// Keys oldest first, for eviction.
    order: VecDeque<Key>,
    bytes: usize,
    max_entries: usize,
    max_bytes: usize,
}

impl<V: Clone> Default for OutputCache<V> {
    fn default() -> Self {
        Self::with_limits(MAX_ENTRIES, MAX_BYTES)
    }
}

impl<V: Clone> OutputCache<V> {
    pub fn with_limits(max_entries: usize, max_bytes: usize) -> Self {
        OutputCache {
            generation: 0,
            entries: HashMap::new(),
            order: VecDeque::new(),
            bytes: 0,
            max_entries: max_entries.max(1),
            max_bytes,
        }
    }

    /// The one invalidation rule: the registry changed, so everything built before goes.
    pub fn changed(&mut self, generation: u64) {
        self.generation = generation;
        self.entries.clear();
        self.order.clear();
        self.bytes = 0;
    }

    pub fn get(&self, key: &Key) -> Option<V> {
        self.entries.get(key).map(|(v, _)| v.clone())
    }

    /// Stores a list built from the registry at `generation`; `false` (nothing stored) when the
    /// registry has changed since, so a stale list is never served.
    pub fn insert(&mut self, generation: u64, key: Key, value: V, bytes: usize) -> bool {
        if generation != self.generation {
            return false;
        }
        if let Some((_, old)) = self.entries.remove(&key) {
            self.bytes -= old;
            self.order.retain(|k| *k != key);
        }
        while !self.order.is_empty()
            && (self.order.len() >= self.max_entries || self.bytes + bytes > self.max_bytes)
        {
            if let Some(oldest) = self.order.pop_front() {
                if let Some((_, b)) = self.entries.remove(&oldest) {
                    self.bytes -= b;
                }
            }
        }
        self.order.push_back(key.clone());
        self.entries.insert(key, (value, bytes));
        self.bytes += bytes;
        true
    }

    pub fn len(&self) -> usize {
        self.entries.len()
    }

    pub fn is_empty(&self) -> bool {
        self.entries.is_empty()
    }

    /// Bytes of output stored.
    pub fn bytes(&self) -> usize {
        self.bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ctx(i: usize) -> Vec<u8> {
        i.to_be_bytes().to_vec()
    }

    #[test]
    fn a_change_of_generation_clears_everything() {
        let mut c: OutputCache<u32> = OutputCache::default();
        assert!(c.insert(0, key(Format::Mcp, false, b"a"), 1, 10));
        assert!(c.insert(0, key(Format::Gemini, false, b"a"), 2, 10));
        assert_eq!(c.get(&key(Format::Mcp, false, b"a")), Some(1));
        c.changed(1);
        assert!(c.is_empty());
        assert_eq!(c.bytes(), 0);
        assert_eq!(c.get(&key(Format::Mcp, false, b"a")), None);
    }

    #[test]
    fn a_list_built_before_a_change_is_not_stored() {
        let mut c: OutputCache<u32> = OutputCache::default();
        c.changed(5);
        assert!(!c.insert(4, key(Format::Mcp, false, b""), 1, 1));
        assert!(c.is_empty());
        assert!(c.insert(5, key(Format::Mcp, false, b""), 1, 1));
    }

    #[test]
    fn strictness_is_folded_where_a_format_has_none() {
        assert_eq!(
            key(Format::Gemini, true, b"x"),
            key(Format::Gemini, false, b"x")
        );
        assert_ne!(
            key(Format::OpenAI, true, b"x"),
            key(Format::OpenAI, false, b"x")
        );
    }

    #[test]
    fn many_contexts_stay_within_the_entry_bound_oldest_out_first() {
        let mut c: OutputCache<usize> = OutputCache::with_limits(8, usize::MAX);
        for i in 0..1_000 {
            assert!(c.insert(0, key(Format::Mcp, false, &ctx(i)), i, 1));
            assert!(c.len() <= 8);
        }
        assert_eq!(c.len(), 8);
        assert_eq!(c.bytes(), 8);
        assert_eq!(c.get(&key(Format::Mcp, false, &ctx(991))), None);
        assert_eq!(c.get(&key(Format::Mcp, false, &ctx(992))), Some(992));
        assert_eq!(c.get(&key(Format::Mcp, false, &ctx(999))), Some(999));
    }

    #[test]
    fn bytes_stay_within_their_bound_and_the_newest_is_always_kept() {
        let mut c: OutputCache<usize> = OutputCache::with_limits(100, 100);
        for i in 0..50 {
            c.insert(0, key(Format::Anthropic, false, &ctx(i)), i, 30);
            assert!(c.bytes() <= 100);
        }
        assert_eq!(c.len(), 3);
        // Larger than the whole bound: kept alone.
        c.insert(0, key(Format::Anthropic, false, b"big"), 7, 500);
        assert_eq!(c.len(), 1);
        assert_eq!(c.get(&key(Format::Anthropic, false, b"big")), Some(7));
    }

    #[test]
    fn storing_a_key_again_replaces_it() {
        let mut c: OutputCache<usize> = OutputCache::with_limits(2, usize::MAX);
        c.insert(0, key(Format::Mcp, false, b"a"), 1, 5);
        c.insert(0, key(Format::Mcp, false, b"a"), 2, 7);
        assert_eq!(c.len(), 1);
        assert_eq!(c.bytes(), 7);
        assert_eq!(c.get(&key(Format::Mcp, false, b"a")), Some(2));
    }
}
