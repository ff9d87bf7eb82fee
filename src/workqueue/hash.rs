//! A fast, randomly seeded hasher for the queue's maps.
//!
//! The queue hashes every key three times per add/get/done cycle, and std's SipHash was about a
//! fifth of that cycle's time. This is the folded-multiply construction of foldhash/ahash's
//! fallback (multiply to 128 bits, xor the halves), with a random seed per map so colliding
//! keys cannot be precomputed. It is not a cryptographic hash; SipHash's stronger guarantee
//! buys nothing here, where keys are object names an attacker would first need rights to create.

use std::hash::{BuildHasher, Hasher};

/// Builds [`KeyHasher`]s sharing one random seed (one per map).
#[derive(Clone, Debug)]
pub(crate) struct RandomSeed {
    seed: u64,
    multiplier: u64,
}

impl Default for RandomSeed {
    fn default() -> Self {
        // std's RandomState is seeded from the OS once per thread and bumped per instance.
        let random = std::collections::hash_map::RandomState::new();
        let seed = random.hash_one(0x9e37_79b9_7f4a_7c15_u64);
        // An odd multiplier keeps every bit of the input relevant.
        let multiplier = random.hash_one(seed) | 1;
        RandomSeed { seed, multiplier }
    }
}

impl BuildHasher for RandomSeed {
    type Hasher = KeyHasher;

    #[inline]
    fn build_hasher(&self) -> KeyHasher {
        KeyHasher { state: self.seed, multiplier: self.multiplier }
    }
}

/// The hasher built by [`RandomSeed`].
#[derive(Debug)]
pub(crate) struct KeyHasher {
    state: u64,
    multiplier: u64,
}

#[inline]
fn folded_multiply(a: u64, b: u64) -> u64 {
    let full = u128::from(a) * u128::from(b);
    (full as u64) ^ ((full >> 64) as u64)
}

impl KeyHasher {
    #[inline]
    fn mix(&mut self, word: u64) {
        self.state = folded_multiply(self.state ^ word, self.multiplier);
    }
}

impl Hasher for KeyHasher {
    #[inline]
    fn write(&mut self, bytes: &[u8]) {
        // Whole words, then the last (possibly overlapping) word; short inputs are read as two
        // overlapping halves, as foldhash does, so no byte is copied.
        let len = bytes.len();
        let word = |at: usize| u64::from_le_bytes(bytes[at..at + 8].try_into().expect("8 bytes"));
        let half = |at: usize| u32::from_le_bytes(bytes[at..at + 4].try_into().expect("4 bytes"));
        match len {
            0 => self.mix(0),
            1..=3 => {
                let (first, middle, last) = (bytes[0], bytes[len / 2], bytes[len - 1]);
                self.mix(u64::from(first) | u64::from(middle) << 8 | u64::from(last) << 16);
            }
            4..=8 => self.mix(u64::from(half(0)) | u64::from(half(len - 4)) << 32),
            _ => {
                let mut at = 0;
                while at + 8 < len {
                    self.mix(word(at));
                    at += 8;
                }
                self.mix(word(len - 8));
            }
        }
        // The length tells apart inputs whose words overlap the same way.
        self.state = self.state.wrapping_add(len as u64);
    }

    #[inline]
    fn write_u8(&mut self, i: u8) {
        self.mix(u64::from(i));
    }

    #[inline]
    fn write_u16(&mut self, i: u16) {
        self.mix(u64::from(i));
    }

    #[inline]
    fn write_u32(&mut self, i: u32) {
        self.mix(u64::from(i));
    }

    #[inline]
    fn write_u64(&mut self, i: u64) {
        self.mix(i);
    }

    #[inline]
    fn write_usize(&mut self, i: usize) {
        self.mix(i as u64);
    }

    #[inline]
    fn finish(&self) -> u64 {
        folded_multiply(self.state, self.multiplier.rotate_left(32))
    }
}

#[cfg(test)]
mod tests {
    use std::collections::HashSet;

    use super::*;

    fn hash(seed: &RandomSeed, key: &str) -> u64 {
        seed.hash_one(key)
    }

    #[test]
    fn distinct_keys_of_every_length_hash_apart() {
        let seed = RandomSeed::default();
        let keys: Vec<String> = (0..40)
            .flat_map(|len| {
                (0..50u8).map(move |variant| (0..len).map(|i| char::from(b'a' + (i as u8 + variant) % 26)).collect())
            })
            .collect::<HashSet<_>>()
            .into_iter()
            .collect();
        let hashes: HashSet<u64> = keys.iter().map(|key| hash(&seed, key)).collect();
        assert_eq!(hashes.len(), keys.len());
    }

    #[test]
    fn a_key_and_its_zero_padded_twin_hash_apart() {
        let seed = RandomSeed::default();
        assert_ne!(seed.hash_one(b"ab".as_slice()), seed.hash_one(b"ab\0".as_slice()));
        assert_ne!(seed.hash_one(0u64), seed.hash_one(1u64));
    }

    #[test]
    fn each_map_gets_its_own_seed() {
        let (one, two) = (RandomSeed::default(), RandomSeed::default());
        assert_ne!(hash(&one, "default/db"), hash(&two, "default/db"));
    }

    #[test]
    fn low_bits_spread_over_buckets() {
        // hashbrown picks buckets with the low bits: sequential keys must not pile up.
        let seed = RandomSeed::default();
        let buckets: HashSet<u64> = (0..1024u64).map(|key| seed.hash_one(key) & 1023).collect();
        assert!(buckets.len() > 550, "{} of 1024 buckets used", buckets.len());
    }
}
