//! A BERT encoder (the architecture of all-MiniLM-L6-v2 and the other sentence-transformers
//! BERT models) over `candle-core`/`candle-nn`: embeddings, then self-attention blocks, as
//! Hugging Face's `BertModel` computes them (post-layer-norm, exact-erf GELU). Written here
//! rather than taken from `candle-transformers`, whose 120 models cost minutes of cold compile
//! for the one 600-line file this needs.

use candle_core::{DType, Module, Result, Tensor};
use candle_nn::{embedding, layer_norm, linear, Embedding, LayerNorm, Linear, VarBuilder};
use serde::Deserialize;

/// The fields of `config.json` the encoder reads.
#[derive(Debug, Clone, Deserialize)]
pub(super) struct Config {
    pub(super) vocab_size: usize,
    pub(super) hidden_size: usize,
    pub(super) num_hidden_layers: usize,
    pub(super) num_attention_heads: usize,
    pub(super) intermediate_size: usize,
    pub(super) max_position_embeddings: usize,
    #[serde(default = "two")]
    pub(super) type_vocab_size: usize,
    #[serde(default = "eps")]
    pub(super) layer_norm_eps: f64,
    #[serde(default = "gelu")]
    pub(super) hidden_act: String,
}

fn two() -> usize {
    2
}

fn eps() -> f64 {
    1e-12
}

fn gelu() -> String {
    "gelu".into()
}

struct Layer {
    query: Linear,
    key: Linear,
    value: Linear,
    attention_out: Linear,
    attention_norm: LayerNorm,
    intermediate: Linear,
    out: Linear,
    out_norm: LayerNorm,
}

/// The encoder: token ids in, each token's last hidden state out.
pub(super) struct Bert {
    words: Embedding,
    positions: Embedding,
    types: Embedding,
    norm: LayerNorm,
    layers: Vec<Layer>,
    heads: usize,
    max_positions: usize,
}

impl Bert {
    /// The weights under `vb` (names as sentence-transformers saves them: `embeddings.…`,
    /// `encoder.layer.N.…`; a `bert.` prefix, as full checkpoints have, is tried second).
    pub(super) fn load(vb: VarBuilder, c: &Config) -> Result<Self> {
        if c.hidden_act != "gelu" {
            candle_core::bail!("hidden_act {:?} (only \"gelu\" is supported)", c.hidden_act);
        }
        if c.num_attention_heads == 0 || !c.hidden_size.is_multiple_of(c.num_attention_heads) {
            candle_core::bail!(
                "hidden_size {} is not a multiple of num_attention_heads {}",
                c.hidden_size,
                c.num_attention_heads
            );
        }
        let vb = if vb.contains_tensor("embeddings.word_embeddings.weight") {
            vb
        } else {
            vb.pp("bert")
        };
        let (h, eps) = (c.hidden_size, c.layer_norm_eps);
        let e = vb.pp("embeddings");
        let layers = (0..c.num_hidden_layers)
            .map(|i| {
                let l = vb.pp(format!("encoder.layer.{i}"));
                Ok(Layer {
                    query: linear(h, h, l.pp("attention.self.query"))?,
                    key: linear(h, h, l.pp("attention.self.key"))?,
                    value: linear(h, h, l.pp("attention.self.value"))?,
                    attention_out: linear(h, h, l.pp("attention.output.dense"))?,
                    attention_norm: layer_norm(h, eps, l.pp("attention.output.LayerNorm"))?,
                    intermediate: linear(h, c.intermediate_size, l.pp("intermediate.dense"))?,
                    out: linear(c.intermediate_size, h, l.pp("output.dense"))?,
                    out_norm: layer_norm(h, eps, l.pp("output.LayerNorm"))?,
                })
            })
            .collect::<Result<Vec<_>>>()?;
        Ok(Bert {
            words: embedding(c.vocab_size, h, e.pp("word_embeddings"))?,
            positions: embedding(c.max_position_embeddings, h, e.pp("position_embeddings"))?,
            types: embedding(c.type_vocab_size, h, e.pp("token_type_embeddings"))?,
            norm: layer_norm(h, eps, e.pp("LayerNorm"))?,
            layers,
            heads: c.num_attention_heads,
            max_positions: c.max_position_embeddings,
        })
    }

    /// `ids` and `mask` are `(batch, tokens)` `u32`s (mask 1 for a real token, 0 for padding);
    /// the answer is `(batch, tokens, hidden)`.
    pub(super) fn forward(&self, ids: &Tensor, mask: &Tensor) -> Result<Tensor> {
        let (batch, tokens) = ids.dims2()?;
        if tokens > self.max_positions {
            candle_core::bail!(
                "{tokens} tokens; the model reads at most {}",
                self.max_positions
            );
        }
        let device = ids.device();
        let positions = Tensor::arange(0u32, tokens as u32, device)?.unsqueeze(0)?;
        let types = Tensor::zeros((batch, tokens), DType::U32, device)?;
        let mut x = self
            .words
            .forward(ids)?
            .broadcast_add(&self.positions.forward(&positions)?)?
            .add(&self.types.forward(&types)?)?;
        x = self.norm.forward(&x)?;
        // Padding masked out: −10,000 added to its attention scores (as BERT's own code).
        let bias = mask
            .to_dtype(DType::F32)?
            .affine(10_000.0, -10_000.0)?
            .reshape((batch, 1, 1, tokens))?;
        for layer in &self.layers {
            x = self.layer(layer, &x, &bias)?;
        }
        Ok(x)
    }

    fn layer(&self, l: &Layer, x: &Tensor, bias: &Tensor) -> Result<Tensor> {
        let (batch, tokens, hidden) = x.dims3()?;
        let head = hidden / self.heads;
        let split = |t: Tensor| {
            t.reshape((batch, tokens, self.heads, head))?
                .transpose(1, 2)?
                .contiguous()
        };
        let q = split(l.query.forward(x)?)?;
        let k = split(l.key.forward(x)?)?;
        let v = split(l.value.forward(x)?)?;
        let scores = (q.matmul(&k.t()?.contiguous()?)? / (head as f64).sqrt())?;
        let probs = candle_nn::ops::softmax_last_dim(&scores.broadcast_add(bias)?)?;
        let context = probs
            .matmul(&v)?
            .transpose(1, 2)?
            .contiguous()?
            .reshape((batch, tokens, hidden))?;
        let attended = l
            .attention_norm
            .forward(&l.attention_out.forward(&context)?.add(x)?)?;
        let inner = l.intermediate.forward(&attended)?.gelu_erf()?;
        l.out_norm.forward(&l.out.forward(&inner)?.add(&attended)?)
    }
}
