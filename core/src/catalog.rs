//! Collection configurations and their persistence in the catalog column family.

use bson::{doc, Bson, Document};
use slate_vector::Metric;

use crate::value::is_under;
use crate::{Error, Result};

/// The column family that holds one catalog entry per collection.
pub const CATALOG_CF: &str = "__catalog";

/// The column family of the database's own metadata: its format version.
pub const META_CF: &str = "__meta";

/// The on-disk format this build writes and the newest it reads. A database
/// written before the format was recorded counts as this one (the layout
/// has not changed since), and is marked at its next open.
pub const FORMAT: u32 = 1;

/// The key of the format version in [`META_CF`] (a little-endian `u32`).
pub const FORMAT_KEY: &[u8] = b"format";

/// The column family of collection `name`.
pub fn collection_cf(name: &str) -> String {
    format!("c.{name}")
}

/// A vector field of a collection: its dot path, dimension and metric.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct VectorField {
    /// Dot path of the field in the document.
    pub field: String,
    /// Number of f32 components every vector of the field has.
    pub dim: usize,
    /// How distances are measured.
    pub metric: Metric,
    /// Whether the field's cache keeps an 8-bit code of every vector
    /// ([`CacheConfig::codes`](slate_vector::CacheConfig::codes)). Default: off.
    pub codes: bool,
}

impl VectorField {
    /// A vector field at `field` with `dim` components compared by `metric`.
    pub fn new(field: impl Into<String>, dim: usize, metric: Metric) -> Self {
        Self {
            field: field.into(),
            dim,
            metric,
            codes: false,
        }
    }

    /// Keeps an 8-bit code of every vector in the cache, a quarter more
    /// memory at dim 384 for gathers that read only the vectors the codes
    /// cannot rule out (see [`CacheConfig::codes`](slate_vector::CacheConfig::codes)).
    #[must_use]
    pub fn with_codes(mut self, on: bool) -> Self {
        self.codes = on;
        self
    }
}

/// What a collection is: its name, indexes, vector fields and partition key.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct CollectionConfig {
    /// The collection's name.
    pub name: String,
    /// Dot paths of the indexed fields, in creation order.
    pub indexes: Vec<String>,
    /// The vector fields (fixed at creation).
    pub vectors: Vec<VectorField>,
    /// In a partitioned collection, the field whose value names the partition
    /// (the tenant) of each document.
    pub partition_key: Option<String>,
}

impl CollectionConfig {
    /// The partition for `value` in a collection of this configuration; an
    /// error in one that is not partitioned when a value is given, and in
    /// one that is when none is (what every read and write of it checks).
    pub fn part(&self, value: Option<&Bson>) -> Result<crate::Part> {
        match (&self.partition_key, value) {
            (None, None) => Ok(crate::Part::none()),
            (Some(_), Some(v)) => crate::Part::of(v),
            (None, Some(_)) => Err(Error::InvalidPartition {
                reason: format!("collection {:?} is not partitioned", self.name),
            }),
            (Some(key), None) => Err(Error::InvalidPartition {
                reason: format!(
                    "collection {:?} is partitioned by {key:?}: name a partition",
                    self.name
                ),
            }),
        }
    }

    /// A collection named `name` with no index, no vector field, no partitions.
    pub fn new(name: impl Into<String>) -> Self {
        Self {
            name: name.into(),
            indexes: Vec::new(),
            vectors: Vec::new(),
            partition_key: None,
        }
    }

    /// Adds a secondary index on `field` (a dot path). Default: none.
    #[must_use]
    pub fn index(mut self, field: impl Into<String>) -> Self {
        self.indexes.push(field.into());
        self
    }

    /// Adds a vector field. Default: none.
    #[must_use]
    pub fn vector(mut self, field: impl Into<String>, dim: usize, metric: Metric) -> Self {
        self.vectors.push(VectorField::new(field, dim, metric));
        self
    }

    /// Adds a vector field configured in full (its codes, say). Default: none.
    #[must_use]
    pub fn vector_field_config(mut self, field: VectorField) -> Self {
        self.vectors.push(field);
        self
    }

    /// Partitions the collection by the value of `field`. Default: not partitioned.
    #[must_use]
    pub fn partition_key(mut self, field: impl Into<String>) -> Self {
        self.partition_key = Some(field.into());
        self
    }

    /// The vector field named `field`.
    pub fn vector_field(&self, field: &str) -> Option<&VectorField> {
        self.vectors.iter().find(|v| v.field == field)
    }

    /// Checks names, paths and dimensions.
    pub fn validate(&self) -> Result<()> {
        validate_collection_name(&self.name)?;
        let bad = |reason: String| Error::InvalidConfig {
            collection: self.name.clone(),
            reason,
        };
        for field in self.indexes.iter().chain(self.partition_key.iter()) {
            validate_path(field).map_err(|r| bad(format!("field {field:?}: {r}")))?;
        }
        for (i, f) in self.indexes.iter().enumerate() {
            if self.indexes[..i].contains(f) {
                return Err(bad(format!("index on {f:?} listed twice")));
            }
        }
        for (i, v) in self.vectors.iter().enumerate() {
            validate_path(&v.field).map_err(|r| bad(format!("vector field {:?}: {r}", v.field)))?;
            if v.dim == 0 || v.dim > 65_536 {
                return Err(bad(format!(
                    "vector field {:?}: dim {} not in 1..=65536",
                    v.field, v.dim
                )));
            }
            if self.vectors[..i].iter().any(|w| w.field == v.field) {
                return Err(bad(format!("vector field {:?} listed twice", v.field)));
            }
            if v.field == "_id"
                || self.indexes.contains(&v.field)
                || self.partition_key.as_ref() == Some(&v.field)
            {
                return Err(bad(format!(
                    "vector field {:?} cannot also be _id, an index or the partition key",
                    v.field
                )));
            }
        }
        Ok(())
    }

    /// Refuses vector fields one inside the other (`emb`, `emb.v`): whichever
    /// is taken out of a document first leaves the other nothing to hold.
    /// Checked when a collection is created (not by [`validate`](Self::validate),
    /// so that a collection created before the check can still take
    /// indexes).
    pub(crate) fn validate_vector_paths(&self) -> Result<()> {
        for (i, v) in self.vectors.iter().enumerate() {
            if let Some(w) = self.vectors[..i]
                .iter()
                .find(|w| is_under(&v.field, &w.field) || is_under(&w.field, &v.field))
            {
                return Err(Error::InvalidConfig {
                    collection: self.name.clone(),
                    reason: format!(
                        "vector fields {:?} and {:?}: one lies inside the other",
                        w.field, v.field
                    ),
                });
            }
        }
        Ok(())
    }

    pub(crate) fn to_document(&self) -> Document {
        let vectors: Vec<Bson> = self
            .vectors
            .iter()
            .map(|v| {
                let mut d = doc! { "field": &v.field, "dim": v.dim as i64, "metric": v.metric.to_string() };
                // Written only when on, so catalogs from before codes read as off.
                if v.codes {
                    d.insert("codes", true);
                }
                Bson::Document(d)
            })
            .collect();
        let mut d = doc! {
            "name": &self.name,
            "indexes": self.indexes.iter().map(|s| Bson::String(s.clone())).collect::<Vec<_>>(),
            "vectors": vectors,
        };
        if let Some(p) = &self.partition_key {
            d.insert("partition_key", p);
        }
        d
    }

    pub(crate) fn from_bytes(name: &str, bytes: &[u8]) -> Result<Self> {
        let corrupt = |what: &str| Error::Corrupt {
            what: format!("catalog entry of collection {name:?}: {what}"),
        };
        let d = Document::from_reader(bytes).map_err(|e| corrupt(&e.to_string()))?;
        let strings = |key: &str| -> Result<Vec<String>> {
            d.get_array(key)
                .map_err(|_| corrupt(key))?
                .iter()
                .map(|b| b.as_str().map(str::to_owned).ok_or_else(|| corrupt(key)))
                .collect()
        };
        let mut vectors = Vec::new();
        for v in d.get_array("vectors").map_err(|_| corrupt("vectors"))? {
            let v = v.as_document().ok_or_else(|| corrupt("vectors"))?;
            let field = v.get_str("field").map_err(|_| corrupt("vector field"))?;
            let dim = v.get_i64("dim").map_err(|_| corrupt("vector dim"))?;
            let metric = v
                .get_str("metric")
                .ok()
                .and_then(|m| m.parse::<Metric>().ok())
                .ok_or_else(|| corrupt("vector metric"))?;
            let codes = match v.get("codes") {
                None => false,
                Some(Bson::Boolean(on)) => *on,
                Some(_) => return Err(corrupt("vector codes")),
            };
            vectors.push(
                VectorField::new(
                    field,
                    usize::try_from(dim).map_err(|_| corrupt("vector dim"))?,
                    metric,
                )
                .with_codes(codes),
            );
        }
        Ok(Self {
            name: d.get_str("name").map_err(|_| corrupt("name"))?.to_owned(),
            indexes: strings("indexes")?,
            vectors,
            partition_key: d.get_str("partition_key").ok().map(str::to_owned),
        })
    }
}

/// Collection names: 1 to 200 bytes, no NUL, not starting with `__` (reserved).
pub fn validate_collection_name(name: &str) -> Result<()> {
    let reason = if name.is_empty() {
        "empty"
    } else if name.len() > 200 {
        "longer than 200 bytes"
    } else if name.contains('\0') {
        "contains NUL"
    } else if name.starts_with("__") {
        "names starting with __ are reserved"
    } else {
        return Ok(());
    };
    Err(Error::InvalidCollectionName {
        name: name.to_owned(),
        reason,
    })
}

/// Dot paths: non-empty components, no NUL, not starting with `$`.
pub fn validate_path(path: &str) -> std::result::Result<(), &'static str> {
    if path.is_empty() {
        return Err("empty path");
    }
    if path.contains('\0') {
        return Err("contains NUL");
    }
    if path.split('.').any(|c| c.is_empty()) {
        return Err("empty path component");
    }
    if path.starts_with('$') {
        return Err("starts with $");
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_round_trips_through_the_catalog_encoding() {
        let c = CollectionConfig::new("docs")
            .index("status")
            .index("meta.tags")
            .vector("emb", 384, Metric::Cosine)
            .vector_field_config(VectorField::new("coded", 8, Metric::L2).with_codes(true))
            .partition_key("tenant");
        c.validate().expect("valid");
        let bytes = bson::to_vec(&c.to_document()).expect("encode");
        assert_eq!(CollectionConfig::from_bytes("docs", &bytes).expect("decode"), c);
        assert!(c.vector_field("coded").is_some_and(|v| v.codes));
        assert!(c.vector_field("emb").is_some_and(|v| !v.codes));
        // A catalog entry without `codes` (written before them) reads as off;
        // one with a codes value that is not a boolean is corrupt.
        let mut d = c.to_document();
        let mut vectors = d.get_array("vectors").expect("vectors").clone();
        if let Some(Bson::Document(v)) = vectors.get_mut(1) {
            v.insert("codes", "yes");
        }
        d.insert("vectors", vectors);
        let bytes = bson::to_vec(&d).expect("encode");
        assert!(matches!(
            CollectionConfig::from_bytes("docs", &bytes),
            Err(Error::Corrupt { .. })
        ));
    }

    #[test]
    fn invalid_configs_are_refused_with_the_reason() {
        assert!(CollectionConfig::new("__x").validate().is_err());
        assert!(CollectionConfig::new("").validate().is_err());
        assert!(CollectionConfig::new("a").index("x..y").validate().is_err());
        assert!(CollectionConfig::new("a")
            .index("x")
            .index("x")
            .validate()
            .is_err());
        let e = CollectionConfig::new("a")
            .vector("v", 0, Metric::L2)
            .validate()
            .unwrap_err();
        assert!(e.to_string().contains("dim 0"), "{e}");
        assert!(CollectionConfig::new("a")
            .vector("v", 3, Metric::L2)
            .vector("v", 3, Metric::L2)
            .validate()
            .is_err());
    }
}
