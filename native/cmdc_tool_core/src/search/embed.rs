//! A sentence-embedding model run in Rust, for dense tool search (the `embedder` feature):
//! a BERT encoder (all-MiniLM-L6-v2 and its kin; `bert.rs`) with `candle` on the CPU, its WordPiece
//! tokenizer with `tokenizers` (pure Rust: no system ML runtime, no Python). A sentence's
//! vector is the mean of its tokens' last hidden states (padding left out), L2-normalized: what
//! sentence-transformers computes for these models, so vectors match theirs to float rounding.
//!
//! The model is a folder the user names (or fetches with `mix cmdc.model.fetch`): `config.json`,
//! `tokenizer.json` and `model.safetensors`, as sentence-transformers saves them.

use std::path::{Path, PathBuf};

use candle_core::{DType, Device, Tensor};
use candle_nn::VarBuilder;
use tokenizers::{PaddingParams, PaddingStrategy, Tokenizer, TruncationParams};

use super::bert::{Bert, Config};

use crate::error::{Error, Result};

/// Tokens read per text at most (sentence-transformers' `max_seq_length` for MiniLM-L6-v2);
/// a longer text is cut there.
pub const MAX_TOKENS: usize = 256;

/// Texts embedded per forward pass: more pad every text to the longest one for no gain.
const BATCH: usize = 16;

/// A loaded model.
pub struct Embedder {
    model: Bert,
    tokenizer: Tokenizer,
    dim: usize,
    dir: PathBuf,
}

impl std::fmt::Debug for Embedder {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "Embedder({}, {} dimensions)",
            self.dir.display(),
            self.dim
        )
    }
}

/// A model error as the core's: the folder named, and what to do.
fn model_error(dir: &Path, what: &str, e: impl std::fmt::Display) -> Error {
    Error::Invalid(format!(
        "the embedding model in {} cannot be used ({what}: {e}); give a folder holding a \
         sentence-transformers BERT model (config.json, tokenizer.json, model.safetensors), \
         e.g. the one `mix cmdc.model.fetch` downloads",
        dir.display()
    ))
}

impl Embedder {
    /// Loads the model of folder `dir`: tens of milliseconds for MiniLM (90 MB of weights read
    /// into memory); run it off the schedulers that must stay responsive.
    pub fn load(dir: &Path) -> Result<Self> {
        let read = |name: &str| {
            let path = dir.join(name);
            std::fs::read(&path).map_err(|e| Error::io(path, &e))
        };
        let config: Config = serde_json::from_slice(&read("config.json")?)
            .map_err(|e| model_error(dir, "config.json", e))?;
        let mut tokenizer = Tokenizer::from_bytes(read("tokenizer.json")?)
            .map_err(|e| model_error(dir, "tokenizer.json", e))?;
        tokenizer
            .with_truncation(Some(TruncationParams {
                max_length: MAX_TOKENS,
                ..TruncationParams::default()
            }))
            .map_err(|e| model_error(dir, "tokenizer.json", e))?;
        tokenizer.with_padding(Some(PaddingParams {
            strategy: PaddingStrategy::BatchLongest,
            ..PaddingParams::default()
        }));
        let weights = read("model.safetensors")?;
        let vb = VarBuilder::from_buffered_safetensors(weights, DType::F32, &Device::Cpu)
            .map_err(|e| model_error(dir, "model.safetensors", e))?;
        let model =
            Bert::load(vb, &config).map_err(|e| model_error(dir, "model.safetensors", e))?;
        Ok(Embedder {
            model,
            tokenizer,
            dim: config.hidden_size,
            dir: dir.to_path_buf(),
        })
    }

    /// The vectors' dimension (384 for MiniLM-L6).
    pub fn dim(&self) -> usize {
        self.dim
    }

    /// One unit-length vector per text, in order. An empty text embeds as the model's view of
    /// an empty sentence (its `[CLS] [SEP]`).
    pub fn embed(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
        let mut out = Vec::with_capacity(texts.len());
        for batch in texts.chunks(BATCH) {
            out.extend(self.batch(batch)?);
        }
        Ok(out)
    }

    fn batch(&self, texts: &[&str]) -> Result<Vec<Vec<f32>>> {
        let fail = |e: &dyn std::fmt::Display| {
            Error::Invalid(format!("embedding with {} failed: {e}", self.dir.display()))
        };
        let encodings = self
            .tokenizer
            .encode_batch(texts.to_vec(), true)
            .map_err(|e| fail(&e))?;
        let width = encodings.first().map_or(0, |e| e.get_ids().len());
        let mut ids = Vec::with_capacity(texts.len() * width);
        let mut mask = Vec::with_capacity(texts.len() * width);
        for e in &encodings {
            ids.extend_from_slice(e.get_ids());
            mask.extend_from_slice(e.get_attention_mask());
        }
        let device = Device::Cpu;
        let shape = (texts.len(), width);
        let run = || -> candle_core::Result<Vec<Vec<f32>>> {
            let ids = Tensor::from_vec(ids, shape, &device)?;
            let mask = Tensor::from_vec(mask, shape, &device)?;
            let hidden = self.model.forward(&ids, &mask)?;
            // Mean over the real tokens: padding's states multiplied by 0, divided by the count.
            let weights = mask.to_dtype(DType::F32)?.unsqueeze(2)?;
            let summed = hidden.broadcast_mul(&weights)?.sum(1)?;
            // Never zero: every text has its `[CLS]` and `[SEP]`, and a mean of BERT states is
            // never the zero vector in practice (a zero would give NaN, which the index refuses).
            let counts = weights.sum(1)?;
            let mean = summed.broadcast_div(&counts)?;
            let norms = mean.sqr()?.sum_keepdim(1)?.sqrt()?;
            mean.broadcast_div(&norms)?.to_vec2::<f32>()
        };
        run().map_err(|e| fail(&e))
    }
}

#[cfg(test)]
mod tests {
    //! Against the real model when it is on this machine: `$CMDC_EMBED_MODEL`, else the cache
    //! folder `mix cmdc.model.fetch` fills; skipped with the reason printed otherwise.

    use super::*;

    fn model_dir() -> Option<PathBuf> {
        let dir = std::env::var_os("CMDC_EMBED_MODEL")
            .map(PathBuf::from)
            .or_else(|| {
                let base = std::env::var_os("CMDC_TEST_CACHE")
                    .map(PathBuf::from)
                    .or_else(|| {
                        std::env::var_os("XDG_CACHE_HOME")
                            .map(|x| PathBuf::from(x).join("cmdc_tool"))
                            .or_else(|| {
                                std::env::var_os("HOME")
                                    .map(|h| PathBuf::from(h).join(".cache/cmdc_tool"))
                            })
                    })?;
                Some(base.join("models/all-MiniLM-L6-v2"))
            })?;
        if dir.join("model.safetensors").is_file() {
            Some(dir)
        } else {
            eprintln!(
                "skipped: no model in {} (run `mix cmdc.model.fetch` or set CMDC_EMBED_MODEL)",
                dir.display()
            );
            None
        }
    }

    fn cos(a: &[f32], b: &[f32]) -> f32 {
        a.iter().zip(b).map(|(x, y)| x * y).sum()
    }

    #[test]
    fn similar_requests_land_near_the_tool_that_serves_them() {
        let Some(dir) = model_dir() else { return };
        let e = Embedder::load(&dir).unwrap();
        assert_eq!(e.dim(), 384);
        let v = e
            .embed(&[
                "show me what's inside ./config/settings.yaml",
                "filesystem read text file. Read the complete contents of a file as text.",
                "home assistant get dashboard config. Get the configuration of a dashboard.",
                "",
            ])
            .unwrap();
        assert_eq!(v.len(), 4);
        for x in &v {
            assert!((cos(x, x) - 1.0).abs() < 1e-4);
        }
        assert!(
            cos(&v[0], &v[1]) > cos(&v[0], &v[2]),
            "{} vs {}",
            cos(&v[0], &v[1]),
            cos(&v[0], &v[2])
        );
        // Batched and alone agree (padding is left out of the mean).
        let alone = e
            .embed(&["filesystem read text file. Read the complete contents of a file as text."])
            .unwrap();
        assert!(cos(&alone[0], &v[1]) > 0.9999);
    }

    #[test]
    fn a_folder_without_a_model_says_what_to_give() {
        let dir = std::env::temp_dir().join("cmdc_no_model_here");
        let e = Embedder::load(&dir).unwrap_err().to_string();
        assert!(e.contains("config.json"), "{e}");
        let tmp = std::env::temp_dir().join(format!("cmdc_bad_model_{}", std::process::id()));
        std::fs::create_dir_all(&tmp).unwrap();
        std::fs::write(tmp.join("config.json"), "{}").unwrap();
        let e = Embedder::load(&tmp).unwrap_err().to_string();
        assert!(
            e.contains("config.json") && e.contains("mix cmdc.model.fetch"),
            "{e}"
        );
        std::fs::remove_dir_all(&tmp).unwrap();
    }
}
