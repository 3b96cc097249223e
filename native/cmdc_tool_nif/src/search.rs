//! Tool search over a registry (`cmdc_tool_core::search`): the index each registry keeps
//! beside its tools, updated by `registry.rs` on every change under the registry's write lock
//! (so it always reflects the registry's generation), and the search the NIF pair
//! `registry_search`/`registry_search_dirty` in `registry.rs` runs (this file knows the index,
//! not the registry). A search whose cost
//! (`Index::cost`: postings or bytes to read) is over a normal scheduler's budget, or that
//! would wait for a writer, answers `:yield` and runs again on a dirty scheduler.

use std::sync::{RwLock, RwLockWriteGuard, TryLockError};

use cmdc_tool_core::search::{Doc, Index, Mode, Prepared, Probe, Query};
use rustler::{Binary, NifMap, Term};

use crate::error::{Error, Result};
use crate::schema::Schema;

/// Units of `Index::cost` a normal scheduler takes (about 1-2 ns each: well under 1 ms).
const NORMAL_BUDGET: usize = 200_000;

/// What the index needs of a tool beyond the registry entry: `{title, namespace,
/// annotations}` (annotations: the names of those that are `true`).
pub type Meta = (Option<String>, Option<String>, Vec<String>);

/// A registry's index.
#[derive(Default)]
pub struct Live(RwLock<Index>);

impl Live {
    pub fn write(&self) -> RwLockWriteGuard<'_, Index> {
        self.0.write().unwrap_or_else(|e| e.into_inner())
    }
}

/// Reads one tool into words: done before any lock is taken.
pub fn prepare(name: &str, description: &str, schema: &Schema, meta: &Meta) -> Prepared {
    let (title, namespace, annotations) = meta;
    Doc {
        name,
        title: title.as_deref(),
        description,
        parameters: &schema.source,
        namespace: namespace.as_deref(),
        annotations,
    }
    .prepare()
}

/// A whole index for a replacement set (built off the locks, swapped in by the caller).
pub fn build(prepared: Vec<Prepared>) -> Index {
    let mut index = Index::new();
    index.insert_all(prepared);
    index
}

#[derive(NifMap)]
pub struct SearchOptions<'a> {
    mode: Term<'a>,
    limit: usize,
    namespaces: Vec<String>,
    annotations: Vec<String>,
    /// The query's embedding (`f32`s, little-endian), or `nil`.
    vector: Option<Binary<'a>>,
}

impl<'a> crate::options::Options<'a> for SearchOptions<'a> {
    const NIF: &'static str = "registry_search";
    const EXPECTED: &'static str = "mode: :bm25 | :regex | :dense | :hybrid, limit: integer, \
         namespaces: [string], annotations: [string], vector: binary | nil";
}

/// A mode atom.
fn mode(term: Term) -> Result<Mode> {
    match term.atom_to_string().as_deref() {
        Ok("bm25") => Ok(Mode::Bm25),
        Ok("regex") => Ok(Mode::Regex),
        Ok("dense") => Ok(Mode::Dense),
        Ok("hybrid") => Ok(Mode::Hybrid),
        _ => Err(Error::Message(format!(
            "mode: expects :bm25, :regex, :dense or :hybrid, got {}",
            crate::term::shown(term)
        ))),
    }
}

/// `f32`s from their little-endian bytes (how `CMDC.Tool.Search` passes vectors).
pub fn floats(bytes: &[u8]) -> Result<Vec<f32>> {
    if !bytes.len().is_multiple_of(4) {
        return Err(Error::Message(format!(
            "a vector is {} bytes, not a whole number of 32-bit floats",
            bytes.len()
        )));
    }
    Ok(bytes
        .chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect())
}

/// One search of `live`: `{generation, [{name, score}]}`, best first; `Error::Yield` when it
/// is over a normal scheduler's budget or would wait for a writer (`dirty` false).
pub fn search(
    live: &Live,
    text: &[u8],
    opts: rustler::Term,
    dirty: bool,
) -> Result<(u64, Vec<(String, f64)>)> {
    let opts: SearchOptions = crate::options::decode(opts)?;
    let text = std::str::from_utf8(text)
        .map_err(|_| Error::Message("the search query is not UTF-8 text".into()))?;
    let probe = match &opts.vector {
        Some(bytes) => Some(Probe::new(&floats(bytes.as_slice())?)?),
        None => None,
    };
    let query = Query {
        text,
        mode: mode(opts.mode)?,
        limit: opts.limit,
        namespaces: &opts.namespaces,
        annotations: &opts.annotations,
        vector: probe.as_ref(),
    };
    let index = read(live, dirty)?;
    if !dirty && index.cost(&query) > NORMAL_BUDGET {
        return Err(Error::Yield);
    }
    let hits = index.search(&query)?;
    Ok((
        index.generation,
        hits.into_iter().map(|h| (h.name, h.score)).collect(),
    ))
}

/// The index for reading: waits only on a dirty scheduler.
fn read(live: &Live, dirty: bool) -> Result<std::sync::RwLockReadGuard<'_, Index>> {
    if dirty {
        return Ok(live.0.read().unwrap_or_else(|e| e.into_inner()));
    }
    match live.0.try_read() {
        Ok(index) => Ok(index),
        Err(TryLockError::Poisoned(e)) => Ok(e.into_inner()),
        // A writer holds it (a big registration): wait on a dirty scheduler.
        Err(TryLockError::WouldBlock) => Err(Error::Yield),
    }
}

/// Vectors set on a normal scheduler at most (each is checked, normalized and quantized: about
/// a µs for 384 dimensions).
const VECTORS_ON_NORMAL: usize = 64;

/// Sets tools' vectors (`[{name, f32 bytes}]`); `clear` first forgets every vector (another
/// model's). Answers how many tools hold a vector. A tool that left the registry meanwhile is
/// skipped (its vector has nothing to describe); any other bad vector fails the whole call
/// before any is set.
pub fn set_vectors(
    live: &Live,
    vectors: Vec<(Binary, Binary)>,
    clear: bool,
    dirty: bool,
) -> Result<usize> {
    if !dirty && vectors.len() > VECTORS_ON_NORMAL {
        return Err(Error::Yield);
    }
    let parsed = vectors
        .iter()
        .map(|(name, v)| {
            let name = std::str::from_utf8(name.as_slice())
                .map_err(|_| Error::Message("a tool name is not UTF-8 text".into()))?;
            Ok((name, floats(v.as_slice())?))
        })
        .collect::<Result<Vec<_>>>()?;
    let mut index = if dirty {
        live.write()
    } else {
        match live.0.try_write() {
            Ok(index) => index,
            Err(TryLockError::Poisoned(e)) => e.into_inner(),
            Err(TryLockError::WouldBlock) => return Err(Error::Yield),
        }
    };
    if clear {
        index.clear_vectors();
    }
    for (name, v) in parsed {
        if index.contains(name) {
            index.set_vector(name, &v)?;
        }
    }
    Ok(index.vector_count())
}

/// Slots scanned on a normal scheduler at most by [`missing`].
const SCAN_ON_NORMAL: usize = 20_000;

/// `[{name, passage}]` of at most `max` tools without a vector (none: `[]`, found in O(1)).
pub fn missing(live: &Live, max: usize, dirty: bool) -> Result<Vec<(String, String)>> {
    let index = read(live, dirty)?;
    if !dirty && index.vector_count() < index.len() && index.len() > SCAN_ON_NORMAL {
        return Err(Error::Yield);
    }
    Ok(index.missing_vectors(max))
}

/// `{tools, tools with a vector, dimension, vector bytes}`.
pub fn vector_info(live: &Live) -> (usize, usize, usize, usize) {
    let index = live.0.read().unwrap_or_else(|e| e.into_inner());
    (
        index.len(),
        index.vector_count(),
        index.vector_dim(),
        index.vector_bytes(),
    )
}

/// After a registration, with the registry's write lock held: takes the index's write lock
/// (lock order: registry, then index) and hands it back with the generation set, so the
/// caller can release the registry before inserting.
pub fn lock_for(live: &Live, generation: u64) -> RwLockWriteGuard<'_, Index> {
    let mut index = live.write();
    index.generation = generation;
    index
}

/// Inserts prepared tools (after the registry's lock is released).
pub fn insert(mut index: RwLockWriteGuard<'_, Index>, prepared: Vec<Prepared>) {
    index.insert_all(prepared);
}

// ---------------------------------------------------------------------------------------------
// Benchmark NIFs (`bench/search.exs`): a bare index of `{name, description, parameters_json}`
// documents, without tool modules, so 100,000 tools can be indexed in a benchmark run.

#[cfg(feature = "testing")]
pub use bench::*;

#[cfg(feature = "testing")]
mod bench {
    //! Times are this thread's CPU time (`CLOCK_THREAD_CPUTIME_ID`): on a machine shared with
    //! other work, wall time mostly measures the wait for a core. `bench/search_py.py` times
    //! the Python libraries the same way (`time.thread_time`).

    use std::sync::RwLock;

    use cmdc_tool_core::search::{Doc, Index, Mode, Prepared, Probe, Query};
    use rustler::{Binary, ResourceArc, Term};
    use serde_json::Value;

    pub struct BenchIndex(RwLock<Index>);

    #[rustler::resource_impl]
    impl rustler::Resource for BenchIndex {}

    type BenchDoc = (String, String, String);

    /// This thread's CPU time in ns.
    fn cpu_ns() -> f64 {
        let mut ts = libc::timespec {
            tv_sec: 0,
            tv_nsec: 0,
        };
        // SAFETY: a valid pointer to a timespec; the clock id is a constant Linux supports.
        unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
        ts.tv_sec as f64 * 1e9 + ts.tv_nsec as f64
    }

    fn parse(docs: &[BenchDoc]) -> Vec<Value> {
        docs.iter()
            .map(|d| serde_json::from_str(&d.2).unwrap_or(Value::Null))
            .collect()
    }

    fn doc<'a>(d: &'a BenchDoc, params: &'a Value) -> Doc<'a> {
        Doc {
            name: &d.0,
            title: None,
            description: &d.1,
            parameters: params,
            namespace: d.0.split_once("__").map(|(ns, _)| ns),
            annotations: &[],
        }
    }

    /// `{index, ns}`: CPU time to read and insert every document (parameters parsed before).
    #[rustler::nif(schedule = "DirtyCpu")]
    fn search_bench_build(docs: Vec<BenchDoc>) -> (ResourceArc<BenchIndex>, f64) {
        let parsed = parse(&docs);
        let start = cpu_ns();
        let prepared: Vec<Prepared> = docs
            .iter()
            .zip(&parsed)
            .map(|(d, p)| doc(d, p).prepare())
            .collect();
        let index = super::build(prepared);
        let ns = cpu_ns() - start;
        (ResourceArc::new(BenchIndex(RwLock::new(index))), ns)
    }

    /// CPU ns of each incremental add (read + insert) into the existing index, in order.
    #[rustler::nif(schedule = "DirtyCpu")]
    fn search_bench_add(index: ResourceArc<BenchIndex>, docs: Vec<BenchDoc>) -> Vec<f64> {
        let mut index = index.0.write().unwrap_or_else(|e| e.into_inner());
        // Parameters arrive parsed in a registry (the compiled schema's source): not timed.
        let parsed = parse(&docs);
        docs.iter()
            .zip(&parsed)
            .map(|(d, p)| {
                let start = cpu_ns();
                index.put(&doc(d, p));
                cpu_ns() - start
            })
            .collect()
    }

    fn query(text: &str, mode: Mode, limit: usize) -> Query<'_> {
        Query {
            text,
            mode,
            limit,
            namespaces: &[],
            annotations: &[],
            vector: None,
        }
    }

    /// `{ns per query, top names per query}`: each query's best CPU time of `rounds` runs.
    #[rustler::nif(schedule = "DirtyCpu")]
    fn search_bench_query(
        index: ResourceArc<BenchIndex>,
        queries: Vec<String>,
        regex: bool,
        limit: usize,
        rounds: usize,
    ) -> (Vec<f64>, Vec<Vec<String>>) {
        let index = index.0.read().unwrap_or_else(|e| e.into_inner());
        let mode = if regex { Mode::Regex } else { Mode::Bm25 };
        let times = queries
            .iter()
            .map(|q| {
                (0..rounds.max(1))
                    .map(|_| {
                        let start = cpu_ns();
                        let _ = std::hint::black_box(index.search(&query(q, mode, limit)));
                        cpu_ns() - start
                    })
                    .fold(f64::INFINITY, f64::min)
            })
            .collect();
        let tops = queries
            .iter()
            .map(|q| {
                index
                    .search(&query(q, mode, limit))
                    .map(|hits| hits.into_iter().map(|h| h.name).collect())
                    .unwrap_or_default()
            })
            .collect();
        (times, tops)
    }

    /// One query on a normal scheduler, for timing the whole NIF call from Elixir.
    #[rustler::nif]
    fn search_bench_one(index: ResourceArc<BenchIndex>, text: String, limit: usize) -> usize {
        let index = index.0.read().unwrap_or_else(|e| e.into_inner());
        index
            .search(&query(&text, Mode::Bm25, limit))
            .map(|h| h.len())
            .unwrap_or(0)
    }

    /// `[{name, passage}]` of every document: what an embedder reads (`Index::missing_vectors`).
    #[rustler::nif(schedule = "DirtyCpu")]
    fn search_bench_passages(index: ResourceArc<BenchIndex>) -> Vec<(String, String)> {
        let index = index.0.read().unwrap_or_else(|e| e.into_inner());
        index.missing_vectors(usize::MAX)
    }

    /// CPU ns of setting each vector (`[{name, f32 bytes}]`), in order: what adding a tool
    /// whose vector came from the disk cache costs the index.
    #[rustler::nif(schedule = "DirtyCpu")]
    fn search_bench_set_vectors(
        index: ResourceArc<BenchIndex>,
        vectors: Vec<(String, Binary)>,
    ) -> Result<Vec<f64>, String> {
        let mut index = index.0.write().unwrap_or_else(|e| e.into_inner());
        let mut times = Vec::with_capacity(vectors.len());
        for (name, bytes) in &vectors {
            let v = super::floats(bytes.as_slice()).map_err(|e| format!("{e:?}"))?;
            let start = cpu_ns();
            index.set_vector(name, &v).map_err(|e| e.to_string())?;
            times.push(cpu_ns() - start);
        }
        Ok(times)
    }

    /// `{tools with a vector, vector bytes}`.
    #[rustler::nif]
    fn search_bench_vector_info(index: ResourceArc<BenchIndex>) -> (usize, usize) {
        let index = index.0.read().unwrap_or_else(|e| e.into_inner());
        (index.vector_count(), index.vector_bytes())
    }

    /// [`search_bench_query`] in any mode (an atom), each query with its vector (`f32` bytes,
    /// or `nil`): `{ns per query, top names per query}`.
    #[rustler::nif(schedule = "DirtyCpu")]
    fn search_bench_query_mode<'a>(
        index: ResourceArc<BenchIndex>,
        queries: Vec<(String, Option<Binary<'a>>)>,
        mode: Term<'a>,
        limit: usize,
        rounds: usize,
    ) -> Result<(Vec<f64>, Vec<Vec<String>>), String> {
        let index = index.0.read().unwrap_or_else(|e| e.into_inner());
        let mode = super::mode(mode).map_err(|e| format!("{e:?}"))?;
        let probes = queries
            .iter()
            .map(|(_, v)| match v {
                Some(b) => super::floats(b.as_slice())
                    .map_err(|e| format!("{e:?}"))
                    .and_then(|f| Probe::new(&f).map_err(|e| e.to_string()))
                    .map(Some),
                None => Ok(None),
            })
            .collect::<Result<Vec<_>, String>>()?;
        let q = |text: &'_ str, probe: Option<&Probe>| -> Vec<String> {
            let query = Query {
                vector: None,
                ..query(text, mode, limit)
            };
            let query = Query {
                vector: probe,
                ..query
            };
            index
                .search(&query)
                .map(|hits| hits.into_iter().map(|h| h.name).collect())
                .unwrap_or_default()
        };
        let mut times = Vec::with_capacity(queries.len());
        let mut tops = Vec::with_capacity(queries.len());
        for ((text, _), probe) in queries.iter().zip(&probes) {
            let best = (0..rounds.max(1))
                .map(|_| {
                    let start = cpu_ns();
                    let _ = std::hint::black_box(q(text, probe.as_ref()));
                    cpu_ns() - start
                })
                .fold(f64::INFINITY, f64::min);
            times.push(best);
            tops.push(q(text, probe.as_ref()));
        }
        Ok((times, tops))
    }
}
