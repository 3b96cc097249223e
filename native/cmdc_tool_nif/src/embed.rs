//! The native sentence embedder (`cmdc_tool_core::search::embed`) as a resource: loaded once
//! from a model folder, shared by every process that holds it. Both NIFs run on dirty
//! schedulers: loading reads ~90 MB, and one text costs milliseconds of matrix products.
//! Mirrors `CMDC.Tool.Search.Embedder.Native`.

use std::path::Path;

use cmdc_tool_core::search::embed::Embedder;
use rustler::{Binary, Env, ResourceArc, Term};

use crate::error::Result;

/// A loaded model. `AssertUnwindSafe`: the tokenizer's trait objects do not say they are
/// unwind-safe; a panic inside a NIF call leaves nothing of the model half-changed (embedding
/// only reads it).
pub struct Model(std::panic::AssertUnwindSafe<Embedder>);

#[rustler::resource_impl]
impl rustler::Resource for Model {}

/// Texts embedded per call at most (a bigger list is the caller's to split: one call should
/// not hold a dirty scheduler for seconds).
const MAX_TEXTS: usize = 256;

/// `{:ok, {model, dimension}}` for the model folder `dir`.
#[rustler::nif(schedule = "DirtyIo")]
fn embedder_load(dir: String) -> Result<(ResourceArc<Model>, usize)> {
    let embedder = Embedder::load(Path::new(&dir))?;
    let dim = embedder.dim();
    Ok((
        ResourceArc::new(Model(std::panic::AssertUnwindSafe(embedder))),
        dim,
    ))
}

/// `{:ok, [vector]}`, each vector its `f32`s little-endian, unit length, in the texts' order.
#[rustler::nif(schedule = "DirtyCpu")]
fn embedder_embed<'a>(
    env: Env<'a>,
    model: ResourceArc<Model>,
    texts: Vec<Binary<'a>>,
) -> Result<Vec<Term<'a>>> {
    if texts.len() > MAX_TEXTS {
        return Err(crate::error::Error::Message(format!(
            "{} texts in one call; at most {MAX_TEXTS}: embed them in batches",
            texts.len()
        )));
    }
    let texts = texts
        .iter()
        .map(|t| {
            std::str::from_utf8(t.as_slice())
                .map_err(|_| crate::error::Error::Message("a text to embed is not UTF-8".into()))
        })
        .collect::<Result<Vec<&str>>>()?;
    let vectors = model.0.embed(&texts)?;
    Ok(vectors
        .iter()
        .map(|v| {
            let bytes: Vec<u8> = v.iter().flat_map(|x| x.to_le_bytes()).collect();
            crate::term::binary(env, &bytes)
        })
        .collect())
}
