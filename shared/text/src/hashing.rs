//! Stable content hashes (XXH3-128: specified, fast, identical on every platform and build).

use xxhash_rust::xxh3::Xxh3;

/// Hex of the XXH3-128 of `bytes`.
pub fn hash_hex(bytes: &[u8]) -> String {
    format!("{:032x}", xxhash_rust::xxh3::xxh3_128(bytes))
}

/// Hashes a sequence of fields; each is length-prefixed so field boundaries are unambiguous.
#[derive(Default)]
pub struct Hasher128(Xxh3);

impl std::fmt::Debug for Hasher128 {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Hasher128")
    }
}

impl Hasher128 {
    pub fn new() -> Self {
        Self(Xxh3::new())
    }

    pub fn field(&mut self, bytes: &[u8]) {
        self.0.update(&(bytes.len() as u64).to_le_bytes());
        self.0.update(bytes);
    }

    pub fn hex(&self) -> String {
        format!("{:032x}", self.0.digest128())
    }
}
