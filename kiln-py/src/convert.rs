//! `kiln.convert`: the converter of `kiln convert` (the `kiln_cli::convert`
//! library), run in this process. The arguments are the command's own,
//! parsed by its own parser, so every default, size grammar and refusal is
//! the CLI's.

use clap::{Args, Command, FromArgMatches};
use kiln_cli::convert::{self as converter, error, ConvertArgs};
use pyo3::exceptions::{PyOSError, PyValueError};
use pyo3::prelude::*;

pyo3::create_exception!(
    kiln,
    ConvertError,
    PyValueError,
    "An input `kiln.convert` (and `kiln convert`) cannot convert: `str(err)` is the CLI's message, `offset` \
     the byte of the input where the reader stopped (None when it names no byte), `rule` and `code` the \
     reader's where it has them."
);

/// What a conversion did: (input format, tensors written, bytes written,
/// notes about what was not carried as-is).
type Done = (&'static str, usize, u64, Vec<String>);

/// Runs `kiln convert ARGS` (without the command name; `--quiet` is added:
/// the notes are returned instead of printed). Usage faults raise
/// `ValueError`, I/O faults `OSError`, an input that cannot be converted
/// `ConvertError`; all with the CLI's message.
#[pyfunction]
pub(crate) fn convert(py: Python<'_>, args: Vec<String>) -> PyResult<Done> {
    let command = ConvertArgs::augment_args(Command::new("kiln convert").no_binary_name(true));
    let matches = command
        .try_get_matches_from(args.iter().map(String::as_str).chain(["--quiet"]))
        .map_err(|e| PyValueError::new_err(e.render().to_string()))?;
    let parsed = ConvertArgs::from_arg_matches(&matches).map_err(|e| PyValueError::new_err(e.to_string()))?;
    match py.detach(|| converter::convert(&parsed)) {
        Ok(s) => Ok((s.format.name(), s.tensors, s.bytes, s.notes)),
        Err(e) => {
            let message = format!("{e:#}");
            if error::exit_code(&e) == 2 {
                let io = e.chain().any(|c| c.is::<error::IoFail>());
                return Err(if io { PyOSError::new_err(message) } else { PyValueError::new_err(message) });
            }
            let err = ConvertError::new_err(message);
            let at = error::located(&e);
            let v = err.value(py);
            v.setattr("offset", at.map(|a| a.offset))?;
            v.setattr("rule", at.and_then(|a| a.rule))?;
            v.setattr("code", at.and_then(|a| a.code))?;
            Err(err)
        }
    }
}
