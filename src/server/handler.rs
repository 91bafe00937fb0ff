//! One request: decode its arguments, run it on the database through the
//! embedded API, write the reply frame(s). Bad input gets a typed error and
//! changes nothing: every argument is decoded before anything runs.

use std::io::{self, Write};

use bson::{Bson, Document};
use serde::de::DeserializeOwned;
use serde::Serialize;

use super::protocol::*;
use crate::{Collection, CollectionConfig, Db, Metric, SearchHit, Strategy, VectorField};

type Outcome<T> = Result<T, WireError>;

fn bad(message: String) -> WireError {
    WireError::new(ErrorKind::BadRequest, message)
}

fn slate(e: crate::Error) -> WireError {
    WireError::from(&e)
}

/// Writes one response frame.
pub(crate) fn reply<T: Serialize>(w: &mut impl Write, id: u64, outcome: Outcome<T>) -> io::Result<()> {
    reply_sent(w, id, outcome).map(drop)
}

/// [`reply`], saying whether the answer went (`false`: it was refused as
/// too large, and the refusal sent instead ends the request's answer).
fn reply_sent<T: Serialize>(w: &mut impl Write, id: u64, outcome: Outcome<T>) -> io::Result<bool> {
    let response = match outcome {
        Ok(v) => Response {
            id,
            ok: Some(v),
            err: None,
        },
        Err(e) => Response {
            id,
            ok: None,
            err: Some(e),
        },
    };
    let bytes = encode(&response)?;
    if bytes.len() > MAX_REPLY_BYTES {
        // Past what a client must accept (docs/protocol.md): refused as
        // the request's error, the connection kept.
        let err = bad(format!(
            "the answer would be a frame of {} bytes, more than the {MAX_REPLY_BYTES} a reply may carry: \
             ask for fewer documents or hits (a find streams its answer in smaller frames)",
            bytes.len()
        ));
        let refusal: Response<Done> = Response {
            id,
            ok: None,
            err: Some(err),
        };
        return write_frame(w, &encode(&refusal)?).map(|()| false);
    }
    write_frame(w, &bytes).map(|()| true)
}

/// `get_many`: each distinct id read and encoded once, and the answer's
/// size added up before it is built, so that a million repeats of one
/// large document's id are refused rather than copied a million times.
fn get_many(c: &Collection, ids: &[Bson]) -> Outcome<GetManyReply> {
    let mut slot_of: std::collections::HashMap<Vec<u8>, usize> = std::collections::HashMap::new();
    let mut distinct: Vec<Bson> = Vec::new();
    let mut slots = Vec::with_capacity(ids.len());
    for id in ids {
        // Ids equal as keys (1 and 1i64) find the same document. One that
        // is no key goes through as it is, for get_many to name.
        let slot = match slate_core::value::encode_id(id) {
            Ok(key) => *slot_of.entry(key).or_insert(distinct.len()),
            Err(_) => distinct.len(),
        };
        if slot == distinct.len() {
            distinct.push(id.clone());
        }
        slots.push(slot);
    }
    let refuse = |bytes: String| {
        bad(format!(
            "the answer would hold {bytes} bytes of documents; a reply may carry {MAX_REPLY_BYTES}: \
             ask for fewer documents"
        ))
    };
    // Read a chunk at a time, and refused once the distinct documents alone
    // pass the bound (before the rest are read or any is copied).
    let docs = c
        .get_many_within(&distinct, MAX_REPLY_BYTES)
        .map_err(slate)?
        .ok_or_else(|| refuse(format!("more than {MAX_REPLY_BYTES}")))?;
    let bins: Vec<Option<Bin>> = docs.iter().map(|d| d.as_ref().map(Bin::doc)).collect();
    let bytes: usize = slots
        .iter()
        .map(|&s| bins[s].as_ref().map_or(1, |b| b.0.len() + 5))
        .sum();
    if bytes > MAX_REPLY_BYTES {
        return Err(refuse(bytes.to_string()));
    }
    Ok(GetManyReply {
        docs: slots.iter().map(|&s| bins[s].clone()).collect(),
    })
}

/// The largest reply frame sent: the 64 MiB every client must accept.
pub(crate) const MAX_REPLY_BYTES: usize = 64 << 20;

fn args<A: DeserializeOwned>(op: &str, frame: &[u8]) -> Outcome<A> {
    decode::<ArgsOf<A>>(frame)
        .map(|a| a.args)
        .map_err(|e| bad(format!("op {op:?}: bad args: {e}")))
}

fn collection(db: &Db, name: &str, partitions: &Option<Bin>) -> Outcome<Collection> {
    let coll = db.collection(name).map_err(slate)?;
    match partitions {
        None => Ok(coll),
        Some(p) => {
            let values = p.to_values("partitions").map_err(bad)?;
            if values.len() > MAX_PARTITIONS {
                return Err(bad(format!(
                    "partitions: {} named, more than the server's limit of {MAX_PARTITIONS}",
                    values.len()
                )));
            }
            Ok(coll.partitions(values))
        }
    }
}

fn filter(f: &Option<Bin>) -> Outcome<Document> {
    match f {
        None => Ok(Document::new()),
        Some(b) => b.to_doc("filter").map_err(bad),
    }
}

fn to_usize(n: u64) -> usize {
    usize::try_from(n).unwrap_or(usize::MAX)
}

/// Client-chosen scan threads, capped at the machine's cores.
fn threads(n: u64) -> usize {
    let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
    to_usize(n).min(cores)
}

fn k_of(k: u64) -> Outcome<usize> {
    if k > MAX_K {
        return Err(WireError::new(
            ErrorKind::InvalidQuery,
            format!("k {k} is above the server's limit of {MAX_K}"),
        ));
    }
    Ok(to_usize(k))
}

fn strategy(s: &Option<String>) -> Outcome<Strategy> {
    match s {
        None => Ok(Strategy::Auto),
        Some(s) => s
            .parse()
            .map_err(|e: slate_query::Error| slate(crate::Error::from(e))),
    }
}

/// A wire configuration as the embedded one.
pub(crate) fn config_from_wire(c: &ConfigWire) -> Outcome<CollectionConfig> {
    let mut config = CollectionConfig::new(c.name.clone());
    for i in &c.indexes {
        config = config.index(i.clone());
    }
    for v in &c.vectors {
        let metric: Metric = v.metric.parse().map_err(|e| {
            WireError::new(
                ErrorKind::InvalidConfig,
                format!(
                    "invalid configuration of collection {:?}: vector field {:?}: {e}",
                    c.name, v.field
                ),
            )
        })?;
        config = config.vector_field_config(
            VectorField::new(v.field.clone(), to_usize(v.dim), metric).with_codes(v.codes),
        );
    }
    if let Some(p) = &c.partition_key {
        config = config.partition_key(p.clone());
    }
    Ok(config)
}

/// The embedded configuration on the wire.
pub(crate) fn config_to_wire(c: &CollectionConfig) -> ConfigWire {
    ConfigWire {
        name: c.name.clone(),
        indexes: c.indexes.clone(),
        vectors: c
            .vectors
            .iter()
            .map(|v| VectorFieldWire {
                field: v.field.clone(),
                dim: v.dim as u64,
                metric: v.metric.name().to_owned(),
                codes: v.codes,
            })
            .collect(),
        partition_key: c.partition_key.clone(),
    }
}

fn hits(hits: Vec<SearchHit>) -> Vec<HitWire> {
    hits.into_iter()
        .map(|h| HitWire {
            distance: h.distance,
            doc: Bin::doc(&h.doc),
        })
        .collect()
}

fn update_reply(r: crate::UpdateResult) -> UpdateReply {
    UpdateReply {
        matched: r.matched,
        modified: r.modified,
        upserted_id: r.upserted_id.as_ref().map(Bin::value),
    }
}

fn find_query<'c>(coll: &'c Collection, a: &FindArgs) -> Outcome<crate::Find<'c>> {
    let mut q = coll.find(filter(&a.filter)?);
    for s in &a.sort {
        q = q.sort(s.clone());
    }
    if a.skip > 0 {
        q = q.skip(to_usize(a.skip));
    }
    if let Some(n) = a.limit {
        q = q.limit(to_usize(n));
    }
    if let Some(p) = &a.projection {
        q = q.project(p.clone());
    }
    Ok(q)
}

/// `find`: documents streamed in frames of about [`FIND_BATCH_BYTES`], all
/// from one snapshot; an error after some frames ends the answer with `err`.
fn find(db: &Db, id: u64, frame: &[u8], w: &mut impl Write) -> io::Result<()> {
    let cursor = args::<FindArgs>("find", frame).and_then(|a| {
        let coll = collection(db, &a.collection, &a.partitions)?;
        Ok((coll, a))
    });
    let (coll, a) = match cursor {
        Ok(v) => v,
        Err(e) => return reply::<FindReply>(w, id, Err(e)),
    };
    let docs = match find_query(&coll, &a).and_then(|q| q.iter().map_err(slate)) {
        Ok(docs) => docs,
        Err(e) => return reply::<FindReply>(w, id, Err(e)),
    };
    let mut batch = Vec::new();
    let mut bytes = 0;
    for doc in docs {
        let doc = match doc {
            Ok(d) => d,
            Err(e) => return reply::<FindReply>(w, id, Err(slate(e.into()))),
        };
        let b = Bin::doc(&doc);
        bytes += b.0.len();
        batch.push(b);
        if bytes >= FIND_BATCH_BYTES {
            let docs = std::mem::take(&mut batch);
            bytes = 0;
            // A frame refused as too large (one huge document) ends the
            // answer with that error: no frame of it may follow.
            if !reply_sent(w, id, Ok(FindReply { docs, more: true }))? {
                return Ok(());
            }
        }
    }
    reply(
        w,
        id,
        Ok(FindReply {
            docs: batch,
            more: false,
        }),
    )
}

fn search(db: &Db, a: SearchArgs) -> Outcome<SearchReply> {
    let coll = collection(db, &a.collection, &a.partitions)?;
    let vector = a.vector.to_f32s("vector").map_err(bad)?;
    let mut s = coll
        .search(&a.field, &vector)
        .k(k_of(a.k)?)
        .filter(filter(&a.filter)?)
        .strategy(strategy(&a.strategy)?)
        .threads(threads(a.threads))
        // Refused before the hits' documents pass what a reply may carry,
        // rather than built in full and refused as a frame.
        .max_bytes(MAX_REPLY_BYTES);
    if let Some(p) = a.projection {
        s = s.project(p);
    }
    let (found, explain) = s.explain().map_err(slate)?;
    Ok(SearchReply {
        hits: hits(found),
        explain: a.explain.then(|| explain.to_string()),
    })
}

/// `search_batch`: one blocked pass when unfiltered and not forced, else the
/// queries one by one (same hits either way).
fn search_batch(db: &Db, a: SearchBatchArgs) -> Outcome<SearchBatchReply> {
    let coll = collection(db, &a.collection, &a.partitions)?;
    let vectors = a.vectors.to_f32s("vectors").map_err(bad)?;
    let k = k_of(a.k)?;
    let filter = filter(&a.filter)?;
    let strategy = strategy(&a.strategy)?;
    let threads = threads(a.threads);
    let config = coll.config().map_err(slate)?;
    let (dim, metric) = config
        .vector_field(&a.field)
        .map(|f| (f.dim, f.metric))
        .ok_or_else(|| {
            slate(
                slate_core::Error::UnknownVectorField {
                    collection: config.name.clone(),
                    field: a.field.clone(),
                }
                .into(),
            )
        })?;
    // Every query checked (each error naming its own) before any runs.
    slate_vector::check_batch(&vectors, dim, metric)
        .map_err(|e| slate(crate::Error::Query(slate_query::Error::Vector(e))))?;
    let queries = (vectors.len() / dim) as u64;
    if queries.saturating_mul(k as u64) > MAX_BATCH_HITS {
        return Err(WireError::new(
            ErrorKind::InvalidQuery,
            format!(
                "{queries} queries of k {k} ask for more than the server's limit of {MAX_BATCH_HITS} hits a batch"
            ),
        ));
    }
    if filter.is_empty() && strategy == Strategy::Auto {
        let all = coll
            .search_batch_within(
                &a.field,
                &vectors,
                k,
                threads,
                a.projection.as_deref(),
                Some(MAX_REPLY_BYTES),
            )
            .map_err(slate)?;
        return Ok(SearchBatchReply {
            results: all.into_iter().map(hits).collect(),
        });
    }
    let mut results = Vec::with_capacity(vectors.len() / dim);
    // What the answers so far carry is taken from the next query's bound.
    let mut sent = 0usize;
    for q in vectors.chunks_exact(dim) {
        let mut s = coll
            .search(&a.field, q)
            .k(k)
            .filter(&filter)
            .strategy(strategy)
            .threads(threads)
            .max_bytes(MAX_REPLY_BYTES.saturating_sub(sent));
        if let Some(p) = &a.projection {
            s = s.project(p.clone());
        }
        let answer = hits(s.run().map_err(slate)?);
        sent += answer.iter().map(|h| h.doc.0.len()).sum::<usize>();
        results.push(answer);
    }
    Ok(SearchBatchReply { results })
}

/// Runs request `env` (whose frame is `frame`) and writes its reply.
pub(crate) fn handle(db: &Db, env: &Envelope, frame: &[u8], w: &mut impl Write) -> io::Result<()> {
    let id = env.id;
    let op = env.op.as_str();
    match op {
        "ping" | "auth" => reply(w, id, Ok(Done {})),
        "list_collections" => reply(
            w,
            id,
            db.list_collections()
                .map(|collections| ListReply { collections })
                .map_err(slate),
        ),
        "create_collection" => reply(
            w,
            id,
            args::<CreateCollectionArgs>(op, frame).and_then(|a| {
                db.create_collection(config_from_wire(&a.config)?)
                    .map(|_| Done {})
                    .map_err(slate)
            }),
        ),
        "drop_collection" => reply(
            w,
            id,
            args::<CollectionArgs>(op, frame)
                .and_then(|a| db.drop_collection(&a.collection).map(|_| Done {}).map_err(slate)),
        ),
        "collection_config" => reply(
            w,
            id,
            args::<CollectionArgs>(op, frame).and_then(|a| {
                let c = db.collection(&a.collection).map_err(slate)?;
                Ok(config_to_wire(&c.config().map_err(slate)?))
            }),
        ),
        "create_index" | "drop_index" => reply(
            w,
            id,
            args::<IndexArgs>(op, frame).and_then(|a| {
                let c = db.collection(&a.collection).map_err(slate)?;
                let r = if op == "create_index" {
                    c.create_index(&a.field)
                } else {
                    c.drop_index(&a.field)
                };
                r.map(|_| Done {}).map_err(slate)
            }),
        ),
        "insert_one" => reply(
            w,
            id,
            args::<InsertOneArgs>(op, frame).and_then(|a| {
                let c = collection(db, &a.collection, &a.partitions)?;
                let doc = a.doc.to_doc("doc").map_err(bad)?;
                let id = c.insert_one(doc).map_err(slate)?;
                Ok(InsertOneReply { id: Bin::value(&id) })
            }),
        ),
        "insert_many" => reply(
            w,
            id,
            args::<InsertManyArgs>(op, frame).and_then(|a| {
                let c = collection(db, &a.collection, &a.partitions)?;
                let docs = a
                    .docs
                    .iter()
                    .enumerate()
                    .map(|(i, d)| d.to_doc(&format!("docs[{i}]")))
                    .collect::<Result<Vec<_>, _>>()
                    .map_err(bad)?;
                let ids = c.insert_many(docs).map_err(slate)?;
                Ok(InsertManyReply {
                    ids: Bin::value(&Bson::Array(ids)),
                })
            }),
        ),
        "get" => reply(
            w,
            id,
            args::<GetArgs>(op, frame).and_then(|a| {
                let c = collection(db, &a.collection, &a.partitions)?;
                let key = a.id.to_value("id").map_err(bad)?;
                let doc = c.get(key).map_err(slate)?;
                Ok(GetReply {
                    doc: doc.as_ref().map(Bin::doc),
                })
            }),
        ),
        "get_many" => reply(
            w,
            id,
            args::<GetManyArgs>(op, frame).and_then(|a| {
                let c = collection(db, &a.collection, &a.partitions)?;
                let ids = a.ids.to_values("ids").map_err(bad)?;
                let parts = c.partition_count();
                if (ids.len() as u64).saturating_mul(parts as u64) > MAX_LOOKUPS {
                    return Err(bad(format!(
                        "ids: {} ids in {parts} partitions, more than the server's limit of {MAX_LOOKUPS} lookups",
                        ids.len(),
                    )));
                }
                get_many(&c, &ids)
            }),
        ),
        "replace_one" => reply(
            w,
            id,
            args::<ReplaceArgs>(op, frame).and_then(|a| {
                let c = collection(db, &a.collection, &a.partitions)?;
                let f = a.filter.to_doc("filter").map_err(bad)?;
                let doc = a.doc.to_doc("doc").map_err(bad)?;
                c.replace_one(f, doc, a.upsert).map(update_reply).map_err(slate)
            }),
        ),
        "update_one" | "update_many" => reply(
            w,
            id,
            args::<UpdateArgs>(op, frame).and_then(|a| {
                let c = collection(db, &a.collection, &a.partitions)?;
                let f = a.filter.to_doc("filter").map_err(bad)?;
                let u = a.update.to_doc("update").map_err(bad)?;
                let r = if op == "update_one" {
                    c.update_one(f, u, a.upsert)
                } else {
                    c.update_many(f, u, a.upsert)
                };
                r.map(update_reply).map_err(slate)
            }),
        ),
        "delete_one" | "delete_many" => reply(
            w,
            id,
            args::<DeleteArgs>(op, frame).and_then(|a| {
                let c = collection(db, &a.collection, &a.partitions)?;
                let f = a.filter.to_doc("filter").map_err(bad)?;
                let r = if op == "delete_one" {
                    c.delete_one(f)
                } else {
                    c.delete_many(f)
                };
                r.map(|deleted| DeleteReply { deleted }).map_err(slate)
            }),
        ),
        "find" => find(db, id, frame, w),
        "count" => reply(
            w,
            id,
            args::<FindArgs>(op, frame).and_then(|a| {
                let c = collection(db, &a.collection, &a.partitions)?;
                let count = find_query(&c, &a)?.count().map_err(slate)?;
                Ok(CountReply { count })
            }),
        ),
        "explain" => reply(
            w,
            id,
            args::<FindArgs>(op, frame).and_then(|a| {
                let c = collection(db, &a.collection, &a.partitions)?;
                let plan = find_query(&c, &a)?.explain().map_err(slate)?;
                Ok(ExplainReply {
                    plan: plan.to_string(),
                })
            }),
        ),
        "search" => reply(w, id, args::<SearchArgs>(op, frame).and_then(|a| search(db, a))),
        "search_batch" => reply(
            w,
            id,
            args::<SearchBatchArgs>(op, frame).and_then(|a| search_batch(db, a)),
        ),
        other => reply::<Done>(
            w,
            id,
            Err(WireError::new(
                ErrorKind::UnknownOp,
                format!("unknown op {other:?} (request id {id})"),
            )),
        ),
    }
}
