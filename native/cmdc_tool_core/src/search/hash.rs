//! The hasher of the index's word and name maps: foldhash (a few nanoseconds for a short word,
//! where SipHash takes tens) keyed once per process from the OS's randomness (through std's
//! `RandomState`), so words in tool descriptions cannot be chosen to collide.

use std::collections::hash_map::RandomState;
use std::hash::BuildHasher;

use foldhash::fast::{FoldHasher, SeedableRandomState};
use foldhash::SharedSeed;
use once_cell::sync::Lazy;

static KEYS: Lazy<(u64, SharedSeed)> = Lazy::new(|| {
    let os = RandomState::new();
    (os.hash_one(1u8), SharedSeed::from_u64(os.hash_one(2u8)))
});

/// The keyed hasher (`Default` gives the process's keys, so equal words hash alike everywhere).
#[derive(Clone, Debug)]
pub struct Keyed(SeedableRandomState);

impl Default for Keyed {
    fn default() -> Self {
        Keyed(SeedableRandomState::with_seed(KEYS.0, &KEYS.1))
    }
}

impl BuildHasher for Keyed {
    type Hasher = FoldHasher<'static>;

    fn build_hasher(&self) -> FoldHasher<'static> {
        self.0.build_hasher()
    }
}

/// A map keyed by [`Keyed`].
pub type Map<K, V> = std::collections::HashMap<K, V, Keyed>;
