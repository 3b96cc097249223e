//! Dense vectors beside the postings: one per slot, quantized to `i8` with a per-vector scale
//! (a 384-dimension vector is 388 bytes, so 10,000 tools hold under 4 MB and a full scan reads
//! that, not 15 MB of `f32`). Vectors are unit length before quantizing, so a dot product is a
//! cosine; the quantization moves a cosine by about 1e-3, well below the gaps that order the
//! candidates a fusion keeps.
//!
//! Incremental like the postings: a slot's vector is set after its tool is placed and cleared
//! when the slot is freed (a tool whose content changed is a new placement, so its old vector
//! never outlives it).

use crate::error::{Error, Result};

/// Largest dimension accepted (BERT-large and the common API embedders are ≤ 4,096).
pub const MAX_DIM: usize = 4_096;

/// The vectors of an index's slots.
#[derive(Debug, Default)]
pub(super) struct Vectors {
    /// Fixed by the first vector stored (0: none yet); reset when the last one goes.
    dim: usize,
    /// `dim` quantized components per slot, slot after slot.
    data: Vec<i8>,
    /// Per slot: the factor turning an `i8` dot product back into a cosine (0: no vector).
    scale: Vec<f32>,
    /// Slots holding a vector.
    count: usize,
}

/// A query vector, quantized like the stored ones.
#[derive(Debug, Clone)]
pub struct Probe {
    q: Vec<i8>,
    scale: f32,
}

impl Probe {
    /// The query's vector: checked (finite, not all zero), normalized, quantized.
    pub fn new(v: &[f32]) -> Result<Self> {
        let (q, scale) = quantize(v)?;
        Ok(Probe { q, scale })
    }

    pub fn dim(&self) -> usize {
        self.q.len()
    }
}

/// Normalizes then quantizes `v`: the components and the factor back (norm 1 → `1 / 127²`
/// times the two vectors' maxima).
fn quantize(v: &[f32]) -> Result<(Vec<i8>, f32)> {
    if v.is_empty() || v.len() > MAX_DIM {
        return Err(Error::Invalid(format!(
            "a vector has {} dimensions; 1 to {MAX_DIM} are accepted",
            v.len()
        )));
    }
    if v.iter().any(|x| !x.is_finite()) {
        return Err(Error::Invalid(
            "a vector holds NaN or an infinity: check the embedder's output".into(),
        ));
    }
    let norm = v.iter().map(|x| x * x).sum::<f32>().sqrt();
    let max = v.iter().fold(0f32, |m, x| m.max(x.abs()));
    if norm == 0.0 || max == 0.0 {
        return Err(Error::Invalid(
            "a vector is all zeros: it has no direction to compare".into(),
        ));
    }
    // Components scaled so the largest is ±127; the factor undoes both scalings.
    let to_i8 = 127.0 / max;
    let q = v.iter().map(|x| (x * to_i8).round() as i8).collect();
    Ok((q, max / (127.0 * norm)))
}

impl Vectors {
    pub(super) fn dim(&self) -> usize {
        self.dim
    }

    pub(super) fn count(&self) -> usize {
        self.count
    }

    pub(super) fn has(&self, slot: u32) -> bool {
        self.scale.get(slot as usize).is_some_and(|s| *s != 0.0)
    }

    /// Bytes held (for the memory figure of `bench/search.exs`).
    pub(super) fn bytes(&self) -> usize {
        self.data.capacity() + 4 * self.scale.capacity()
    }

    /// Stores `v` as `slot`'s vector (replacing any). The first vector fixes the dimension.
    pub(super) fn set(&mut self, slot: u32, v: &[f32]) -> Result<()> {
        if self.dim != 0 && v.len() != self.dim {
            return Err(Error::Invalid(format!(
                "a vector has {} dimensions; this index holds vectors of {}: embed every tool \
                 and query with one model (or clear the vectors first)",
                v.len(),
                self.dim
            )));
        }
        let (q, scale) = quantize(v)?;
        self.dim = q.len();
        let at = slot as usize;
        if self.scale.len() <= at {
            self.scale.resize(at + 1, 0.0);
        }
        if self.data.len() < (at + 1) * self.dim {
            // Doubling, as a `Vec` would: one tool at a time stays amortized O(dim).
            let want = ((at + 1) * self.dim).max(2 * self.data.len());
            self.data.resize(want, 0);
        }
        if self.scale[at] == 0.0 {
            self.count += 1;
        }
        self.data[at * self.dim..(at + 1) * self.dim].copy_from_slice(&q);
        self.scale[at] = scale;
        Ok(())
    }

    /// Forgets `slot`'s vector (its tool left or changed).
    pub(super) fn clear(&mut self, slot: u32) {
        if let Some(s) = self.scale.get_mut(slot as usize) {
            if *s != 0.0 {
                *s = 0.0;
                self.count -= 1;
            }
        }
        if self.count == 0 {
            *self = Vectors::default();
        }
    }

    /// Forgets every vector (another model's are coming).
    pub(super) fn clear_all(&mut self) {
        *self = Vectors::default();
    }

    /// Every slot's cosine with the probe, in slot order, for those with a vector.
    pub(super) fn each(&self, probe: &Probe, mut f: impl FnMut(u32, f32)) {
        if probe.q.len() != self.dim || self.dim == 0 {
            return;
        }
        for (slot, (row, scale)) in self
            .data
            .chunks_exact(self.dim)
            .zip(&self.scale)
            .enumerate()
        {
            if *scale != 0.0 {
                f(slot as u32, dot(row, &probe.q) as f32 * scale * probe.scale);
            }
        }
    }
}

/// `i8` dot product in `i32` (no overflow: 4,096 × 127² < 2³¹), written so the compiler
/// vectorizes it (widening multiply-adds).
#[inline]
fn dot(a: &[i8], b: &[i8]) -> i32 {
    a.iter()
        .zip(b)
        .map(|(x, y)| i32::from(*x) * i32::from(*y))
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn cos(a: &[f32], b: &[f32]) -> f32 {
        let n = |v: &[f32]| v.iter().map(|x| x * x).sum::<f32>().sqrt();
        a.iter().zip(b).map(|(x, y)| x * y).sum::<f32>() / (n(a) * n(b))
    }

    #[test]
    fn quantized_cosines_stay_within_a_hundredth() {
        let mut rng = crate::test_rng::Rng(0x9E37_79B9_7F4A_7C15);
        let mut f = move || (rng.below(1_000_001) as f32) / 1e6 - 0.5;
        let mut vs = Vectors::default();
        let rows: Vec<Vec<f32>> = (0..50).map(|_| (0..384).map(|_| f()).collect()).collect();
        for (i, r) in rows.iter().enumerate() {
            vs.set(i as u32, r).unwrap();
        }
        let q: Vec<f32> = (0..384).map(|_| f()).collect();
        let probe = Probe::new(&q).unwrap();
        let mut seen = 0;
        vs.each(&probe, |slot, c| {
            seen += 1;
            assert!(
                (c - cos(&rows[slot as usize], &q)).abs() < 0.01,
                "slot {slot}"
            );
        });
        assert_eq!(seen, 50);
    }

    #[test]
    fn one_dimension_per_index_and_bad_vectors_are_refused() {
        let mut vs = Vectors::default();
        vs.set(0, &[1.0, 0.0, 0.0]).unwrap();
        let e = vs.set(1, &[1.0, 0.0]).unwrap_err().to_string();
        assert!(
            e.contains("2 dimensions") && e.contains("vectors of 3"),
            "{e}"
        );
        assert!(vs
            .set(1, &[0.0, 0.0, 0.0])
            .unwrap_err()
            .to_string()
            .contains("all zeros"));
        assert!(vs
            .set(1, &[f32::NAN, 0.0, 1.0])
            .unwrap_err()
            .to_string()
            .contains("NaN"));
        assert!(Probe::new(&[]).is_err());
        vs.set(5, &[0.0, 2.0, 0.0]).unwrap();
        assert_eq!((vs.count(), vs.has(5), vs.has(3)), (2, true, false));
        vs.clear(0);
        vs.clear(0);
        assert_eq!(vs.count(), 1);
        vs.clear(5);
        // The last one gone, another dimension may come.
        assert_eq!((vs.count(), vs.dim()), (0, 0));
        vs.set(0, &[1.0, 1.0]).unwrap();
        assert_eq!(vs.dim(), 2);
    }
}
