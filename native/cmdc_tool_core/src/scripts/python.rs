//! Python: described and called by the worker script (`priv/python/cmdc_worker.py`, setting
//! `worker`) in `describe` and `serve` modes, warm between calls, under the interpreter of the
//! script's folder (`interpreter.rs`; setting `interpreter` is the fallback).

use std::path::Path;

use super::interpreter;
use super::language::{BoxFuture, Calls, Describer, Language, Mode, Program, Settings};
use crate::error::{Error, Result};

pub struct Python;

/// UTF-8 whatever the locale, unbuffered frames, no `.pyc` next to the user's scripts.
const ENV: &[(&str, &str)] = &[
    ("PYTHONUTF8", "1"),
    ("PYTHONIOENCODING", "utf-8"),
    ("PYTHONUNBUFFERED", "1"),
    ("PYTHONDONTWRITEBYTECODE", "1"),
];

impl Language for Python {
    fn name(&self) -> &'static str {
        "python"
    }

    fn label(&self) -> &'static str {
        "Python"
    }

    fn extensions(&self) -> &'static [&'static str] {
        &["py"]
    }

    fn module_type(&self) -> &'static str {
        "PythonModule"
    }

    fn program(&self) -> &'static str {
        "python3"
    }

    fn allow_hint(&self) -> &'static str {
        "add `{function}.executionPolicy = \"auto\"` below the function"
    }

    fn describer(&self) -> Describer {
        Describer::Process
    }

    fn calls(&self) -> Calls {
        Calls::Warm
    }

    fn command<'a>(
        &'a self,
        mode: Mode,
        script: &'a Path,
        settings: &'a Settings,
        path_env: Option<&'a str>,
    ) -> BoxFuture<'a, Result<Program>> {
        Box::pin(async move {
            let worker = settings.get(self.name(), "worker").ok_or_else(|| {
                Error::Invalid("the Python worker script (setting `worker`) is not set".into())
            })?;
            let dir = script.parent().unwrap_or(Path::new("."));
            let configured = settings.get(self.name(), "interpreter");
            let program = interpreter::python_for(dir, configured, path_env).await?;
            let mut args = vec![worker.into()];
            match mode {
                Mode::Describe => args.push("describe".into()),
                Mode::Serve | Mode::Call => {
                    args.push("serve".into());
                    args.push(script.as_os_str().to_owned());
                }
            }
            Ok(Program {
                program,
                args,
                env: ENV.to_vec(),
            })
        })
    }
}
