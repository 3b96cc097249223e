//! A fingerprint of a whole scan, so an unchanged disk costs no conversion.

use std::path::{Path, PathBuf};

use super::model::Scan;

/// A fingerprint of a whole scan (every file's paths, mtime, size and metadata, every note):
/// equal digests mean nothing on disk that discovery looks at changed, so a caller holding the
/// previous result can skip converting and comparing it.
pub fn digest(scan: &Scan) -> u64 {
    use std::collections::hash_map::DefaultHasher;
    use std::hash::{Hash, Hasher};

    fn path(h: &mut DefaultHasher, p: &Path) {
        p.as_os_str().as_encoded_bytes().hash(h);
    }
    fn opt_path(h: &mut DefaultHasher, p: &Option<PathBuf>) {
        p.is_some().hash(h);
        if let Some(p) = p {
            path(h, p);
        }
    }

    let mut h = DefaultHasher::new();
    scan.project_trusted.hash(&mut h);
    scan.files.len().hash(&mut h);
    for f in &scan.files {
        (f.source as u8, f.kind as u8, f.mtime_ns, f.size).hash(&mut h);
        f.provider.hash(&mut h);
        path(&mut h, &f.root);
        path(&mut h, &f.path);
        path(&mut h, &f.real_path);
        opt_path(&mut h, &f.meta_path);
        opt_path(&mut h, &f.doc_path);
        opt_path(&mut h, &f.cache_path);
        f.doc.hash(&mut h);
        // Metadata is small and rare: its Debug text covers every field.
        f.meta.as_ref().map(|m| format!("{m:?}")).hash(&mut h);
        f.plugin
            .as_ref()
            .map(|p| (&p.name, &p.version))
            .hash(&mut h);
    }
    for notes in [&scan.ignored, &scan.errors] {
        notes.len().hash(&mut h);
        for n in notes.iter() {
            (n.source as u8, n.kind as u8).hash(&mut h);
            n.provider.hash(&mut h);
            path(&mut h, &n.path);
            n.reason.hash(&mut h);
        }
    }
    h.finish()
}
