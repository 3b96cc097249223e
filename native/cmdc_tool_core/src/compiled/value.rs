//! `serde_json::Value` as an [`Instance`]: what `cargo test` runs programs over (the NIF
//! crate reads BEAM terms through the same trait).

use serde_json::{Map, Value};

use super::program::{Checked, Instance, Stop, ValueKind};

/// `serde_json::Value` as an instance: the same program runs in `cargo test` without a VM.
impl<'a> Instance<'a> for &'a Value {
    fn kind(self) -> ValueKind<'a> {
        match self {
            Value::Null => ValueKind::Null,
            Value::Bool(b) => ValueKind::Bool(*b),
            Value::Number(n) => match (n.as_i64(), n.as_u64(), n.as_f64()) {
                (Some(i), _, _) => ValueKind::Int(i),
                // Integers past i64 fall back, as big integers do from terms.
                (None, Some(_), _) => ValueKind::Other,
                (None, None, Some(f)) => ValueKind::Float(f),
                _ => ValueKind::Other,
            },
            Value::String(s) => ValueKind::Str(s.as_bytes()),
            Value::Array(_) => ValueKind::Array,
            Value::Object(_) => ValueKind::Object,
        }
    }

    fn name(self, _buf: &mut [u8; 256]) -> Option<&str> {
        None
    }

    fn object_len(self) -> usize {
        self.as_object().map_or(0, Map::len)
    }

    fn members<F: FnMut(&str, Self) -> Checked>(self, mut f: F) -> Checked {
        for (k, v) in self.as_object().into_iter().flatten() {
            f(k, v)?;
        }
        Ok(())
    }

    fn elements<F: FnMut(usize, Self) -> Checked>(self, mut f: F) -> Result<usize, Stop> {
        let list = self.as_array().map_or(&[][..], Vec::as_slice);
        for (i, v) in list.iter().enumerate() {
            f(i, v)?;
        }
        Ok(list.len())
    }
}
