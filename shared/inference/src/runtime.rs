//! The process-wide ONNX Runtime environment, loaded once from a shared library.

use std::path::Path;
use std::sync::OnceLock;

use ort::environment::Environment;

use crate::error::{Error, Result};

static ENVIRONMENT: OnceLock<std::result::Result<Environment, String>> = OnceLock::new();

/// Loads ONNX Runtime from `library` on first use; later calls reuse it (one runtime per
/// process: the library cannot be swapped once loaded).
pub fn environment(library: &Path) -> Result<&'static Environment> {
    if !library.exists() {
        return Err(Error::MissingFile {
            what: "ONNX Runtime library",
            path: library.to_owned(),
        });
    }
    let loaded = ENVIRONMENT.get_or_init(|| {
        ort::init_from(library)
            .map_err(|e| e.to_string())?
            .with_name("casement")
            .build()
            .map_err(|e| e.to_string())
    });
    loaded.as_ref().map_err(|reason| Error::Runtime {
        path: library.to_owned(),
        reason: reason.clone(),
    })
}
