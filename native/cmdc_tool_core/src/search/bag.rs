//! A tool's distinct words with their weighted frequencies, gathered without an allocation
//! per word: the words sit end to end in one string and a small open-addressing table (keyed
//! hash, `hash.rs`, so crafted text cannot force collisions) finds repeats.

use std::hash::BuildHasher;

use super::hash::Keyed;

/// Distinct words → weighted frequency, in first-seen order.
#[derive(Debug, Default)]
pub struct Bag {
    text: String,
    /// End of each word in `text` (its start is the previous end), and its frequency.
    words: Vec<(u32, f32)>,
    /// Index + 1 into `words`, 0 when empty; a power of two, at most half full.
    table: Vec<u32>,
}

impl Bag {
    /// A bag sized for about `words` distinct words.
    pub fn with_capacity(words: usize) -> Self {
        let mut bag = Bag {
            text: String::with_capacity(6 * words),
            words: Vec::with_capacity(words),
            table: Vec::new(),
        };
        bag.table = vec![0; (2 * words).next_power_of_two().max(64)];
        bag
    }

    /// Adds `weight` to `word`'s frequency.
    pub fn add(&mut self, word: &str, weight: f32) {
        if self.table.len() < 2 * (self.words.len() + 1) {
            self.grow();
        }
        let mask = self.table.len() - 1;
        let mut at = Keyed::default().hash_one(word) as usize & mask;
        loop {
            match self.table[at] {
                0 => break,
                e if self.word(e as usize - 1) == word => {
                    self.words[e as usize - 1].1 += weight;
                    return;
                }
                _ => at = (at + 1) & mask,
            }
        }
        self.text.push_str(word);
        self.words.push((self.text.len() as u32, weight));
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
            self.words[i - 1].0 as usize
        };
        &self.text[start..self.words[i].0 as usize]
    }

    /// `(word, weighted frequency)`, in first-seen order.
    pub fn iter(&self) -> impl Iterator<Item = (&str, f32)> {
        (0..self.len()).map(|i| (self.word(i), self.words[i].1))
    }

    fn grow(&mut self) {
        let size = (self.table.len() * 2).max(64);
        let mask = size - 1;
        let mut table = vec![0u32; size];
        for i in 0..self.words.len() {
            let mut at = Keyed::default().hash_one(self.word(i)) as usize & mask;
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
        let got: Vec<(&str, f32)> = bag.iter().collect();
        assert_eq!(got, [("read", 1.5), ("fil", 4.0), ("", 1.0)]);
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
        assert!(bag.iter().all(|(_, x)| x == 6.0));
        assert_eq!(bag.word(4_999), "w4999");
    }
}
