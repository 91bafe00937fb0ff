//! Seed 000's record: eight fields, six always present and two nullable
//! (`last_contacted_at` ~30% null, `notes` ~50% null), generated
//! deterministically, as BSON for Slate and as columns or JSON for SQLite.

use slate::bson::{doc, Bson, DateTime, Document};

/// xorshift64: deterministic data without a dependency.
#[derive(Debug)]
pub struct Rng(pub u64);

impl Rng {
    /// The next 64 random bits.
    pub fn next(&mut self) -> u64 {
        let mut x = self.0;
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        self.0 = x;
        x
    }

    /// Uniform in `0..n`.
    pub fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    /// Uniform in `-1..1`.
    pub fn unit(&mut self) -> f32 {
        (self.next() % 20_000) as f32 / 10_000.0 - 1.0
    }
}

/// One record of seed 000's schema.
#[derive(Debug, Clone)]
pub struct Rec {
    pub id: i64,
    pub user: String,
    pub name: String,
    pub status: &'static str,
    pub contacts_count: i64,
    pub rec1: &'static str,
    pub rec2: &'static str,
    pub rec3: &'static str,
    pub last_contacted_at: Option<i64>,
    pub notes: Option<String>,
}

const SYLLABLES: &[&str] = &["ka", "lo", "mi", "ra", "to", "ne", "su", "vi", "da", "pe"];
const BASE_MS: i64 = 1_700_000_000_000;

/// `n` records of user `user`, ids `first_id..first_id + n`.
pub fn records(user: usize, first_id: i64, n: usize) -> Vec<Rec> {
    let seed = (user as u64 + 1).wrapping_mul(0x2545_F491_4F6C_DD1D) ^ first_id as u64;
    let mut rng = Rng(0x9E37_79B9_7F4A_7C15 ^ seed);
    (0..n)
        .map(|i| {
            let syllables: String = (0..3)
                .map(|_| SYLLABLES[rng.below(SYLLABLES.len() as u64) as usize])
                .collect();
            let status = if rng.below(2) == 0 { "active" } else { "rejected" };
            let contacts_count = rng.below(101) as i64;
            let rec1 = ["ProductA", "ProductB", "ProductC"][rng.below(3) as usize];
            let rec2 = ["ProductX", "ProductY", "ProductZ"][rng.below(3) as usize];
            let rec3 = ["Widget1", "Widget2", "Widget3"][rng.below(3) as usize];
            let last_contacted_at = if rng.below(10) < 3 {
                None
            } else {
                Some(BASE_MS - rng.below(365 * 24 * 3600 * 1000) as i64)
            };
            let notes = if rng.below(2) == 0 {
                None
            } else {
                Some(format!("note {} for {syllables}", rng.below(1_000_000)))
            };
            let id = first_id + i as i64;
            Rec {
                id,
                user: format!("u{user}"),
                name: format!("{syllables} {id}"),
                status,
                contacts_count,
                rec1,
                rec2,
                rec3,
                last_contacted_at,
                notes,
            }
        })
        .collect()
}

impl Rec {
    /// The BSON document (with the `user` field when `partitioned`).
    pub fn to_doc(&self, partitioned: bool) -> Document {
        let mut d = doc! {
            "_id": self.id,
            "name": self.name.as_str(),
            "status": self.status,
            "contacts_count": self.contacts_count,
            "product_recommendation1": self.rec1,
            "product_recommendation2": self.rec2,
            "product_recommendation3": self.rec3,
            "last_contacted_at": self
                .last_contacted_at
                .map_or(Bson::Null, |ms| Bson::DateTime(DateTime::from_millis(ms))),
            "notes": self.notes.as_deref().map_or(Bson::Null, |s| Bson::String(s.to_owned())),
        };
        if partitioned {
            d.insert("user", self.user.as_str());
        }
        d
    }

    /// The JSON text of the same document (dates as epoch milliseconds).
    pub fn to_json(&self) -> String {
        serde_json::json!({
            "_id": self.id,
            "name": self.name,
            "status": self.status,
            "contacts_count": self.contacts_count,
            "product_recommendation1": self.rec1,
            "product_recommendation2": self.rec2,
            "product_recommendation3": self.rec3,
            "last_contacted_at": self.last_contacted_at,
            "notes": self.notes,
        })
        .to_string()
    }
}

/// `count` distinct ids drawn from `first..first + n` (all of them when
/// `count >= n`), in random order.
pub fn lookup_ids(first: i64, n: usize, count: usize) -> Vec<i64> {
    let mut rng = Rng(0xD1B5_4A32_D192_ED03);
    let mut all: Vec<i64> = (0..n as i64).map(|i| first + i).collect();
    // Partial Fisher-Yates: the first `count` slots end up a random sample.
    let count = count.min(n);
    for i in 0..count {
        let j = i + rng.below((n - i) as u64) as usize;
        all.swap(i, j);
    }
    all.truncate(count);
    all
}
