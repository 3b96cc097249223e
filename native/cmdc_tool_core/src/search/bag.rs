//! A tool's distinct words with their weighted frequencies, gathered without an allocation
//! per word: the words sit end to end in one string and a small open-addressing table (keyed
//! hash, `hash.rs`, so crafted text cannot force collisions) finds repeats. Each word keeps its
//! hash, so the index's term table does not hash it again, and a thread's last bag is kept for
//! its next tool (no allocations for an add once a thread has made one).

use std::cell::RefCell;
use std::hash::BuildHasher;

use super::hash::Keyed;

/// A distinct word: where it ends in `text` (it starts where the previous one ends), its
/// weighted frequency and its hash.
#[derive(Debug, Clone, Copy)]
struct Entry {
    end: u32,
    tf: f32,
    hash: u64,
}

/// Distinct words → weighted frequency, in first-seen order.
#[derive(Debug, Default)]
pub struct Bag {
    text: String,
    words: Vec<Entry>,
    /// Index + 1 into `words`, 0 when empty; a power of two, at most half full.
    table: Vec<u32>,
    hasher: Keyed,
}

/// Table slots past which a bag is not kept for reuse (a huge tool's bag is freed): a thread
/// keeps at most 16 kB of table, 32 kB of entries and 128 kB of words (2,048 words of at most
/// 64 bytes) for its next tool.
const KEEP_SLOTS: usize = 4_096;

thread_local! {
    static SPARE: RefCell<Option<Bag>> = const { RefCell::new(None) };
}

impl Bag {
    /// An empty bag sized for about `words` distinct words: this thread's spare one when there
    /// is one.
    pub fn with_capacity(words: usize) -> Self {
        let slots = (2 * words).next_power_of_two().max(64);
        let spare = SPARE.with(|s| s.borrow_mut().take());
        match spare {
            Some(mut bag) => {
                bag.text.clear();
                bag.words.clear();
                bag.table.clear();
                bag.table.resize(slots, 0);
                bag.words.reserve(words);
                bag.text.reserve(6 * words);
                bag
            }
            None => Bag {
                text: String::with_capacity(6 * words),
                words: Vec::with_capacity(words),
                table: vec![0; slots],
                hasher: Keyed::default(),
            },
        }
    }

    /// Hands the bag's buffers to this thread's next [`Bag::with_capacity`].
    pub fn recycle(self) {
        if self.table.len() <= KEEP_SLOTS {
            SPARE.with(|s| *s.borrow_mut() = Some(self));
        }
    }

    /// Adds `weight` to `word`'s frequency.
    pub fn add(&mut self, word: &str, weight: f32) {
        if self.table.len() < 2 * (self.words.len() + 1) {
            self.grow();
        }
        let hash = self.hasher.hash_one(word);
        let mask = self.table.len() - 1;
        let mut at = hash as usize & mask;
        loop {
            match self.table[at] {
                0 => break,
                e if self.words[e as usize - 1].hash == hash
                    && self.word(e as usize - 1) == word =>
                {
                    self.words[e as usize - 1].tf += weight;
                    return;
                }
                _ => at = (at + 1) & mask,
            }
        }
        self.text.push_str(word);
        self.words.push(Entry {
            end: self.text.len() as u32,
            tf: weight,
            hash,
        });
        self.table[at] = self.words.len() as u32;
    }

    /// Distinct words.
    pub fn len(&self) -> usize {
        self.words.len()
    }

    /// The `i`-th distinct word.
    pub fn word(&self, i: usize) -> &str {
        let start = if i == 0 {
            0
        } else {
            self.words[i - 1].end as usize
        };
        &self.text[start..self.words[i].end as usize]
    }

    /// `(word, weighted frequency, hash)`, in first-seen order; the hash is
    /// [`Keyed`]'s of the word.
    pub fn iter(&self) -> impl Iterator<Item = (&str, f32, u64)> {
        (0..self.len()).map(|i| (self.word(i), self.words[i].tf, self.words[i].hash))
    }

    fn grow(&mut self) {
        let size = (self.table.len() * 2).max(64);
        let mask = size - 1;
        let mut table = vec![0u32; size];
        for (i, e) in self.words.iter().enumerate() {
            let mut at = e.hash as usize & mask;
            while table[at] != 0 {
                at = (at + 1) & mask;
            }
            table[at] = i as u32 + 1;
        }
        self.table = table;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn repeats_add_up_in_first_seen_order() {
        let mut bag = Bag::default();
        for (w, x) in [
            ("read", 1.0),
            ("fil", 3.0),
            ("read", 0.5),
            ("", 1.0),
            ("fil", 1.0),
        ] {
            bag.add(w, x);
        }
        let got: Vec<(&str, f32)> = bag.iter().map(|(w, x, _)| (w, x)).collect();
        assert_eq!(got, [("read", 1.5), ("fil", 4.0), ("", 1.0)]);
        assert!(bag
            .iter()
            .all(|(w, _, h)| h == Keyed::default().hash_one(w)));
    }

    #[test]
    fn thousands_of_words_stay_distinct() {
        let mut bag = Bag::default();
        for round in 0..3 {
            for i in 0..5_000 {
                bag.add(&format!("w{i}"), 1.0 + round as f32);
            }
        }
        assert_eq!(bag.len(), 5_000);
        assert!(bag.iter().all(|(_, x, _)| x == 6.0));
        assert_eq!(bag.word(4_999), "w4999");
    }

    #[test]
    fn a_recycled_bag_starts_empty() {
        let mut bag = Bag::with_capacity(4);
        bag.add("old", 1.0);
        bag.recycle();
        let mut bag = Bag::with_capacity(4);
        assert_eq!(bag.len(), 0);
        bag.add("new", 2.0);
        bag.add("old", 1.0);
        let got: Vec<(&str, f32)> = bag.iter().map(|(w, x, _)| (w, x)).collect();
        assert_eq!(got, [("new", 2.0), ("old", 1.0)]);
    }
}
