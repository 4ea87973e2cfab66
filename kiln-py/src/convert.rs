//! `kiln.convert`: the converter of `kiln convert` (the `kiln-convert`
//! crate), run in this process. Each keyword is one of the command's flags,
//! with its names, default and size grammar ([`kiln_convert::parse_size`]),
//! so a file converts, and is refused, as with the command.

use kiln_convert::{error, Format, Options, Silent, To};
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

/// `value` of the keyword `name` (the flag `flag`) is none of `names`.
fn not_one_of<'a>(name: &str, flag: &str, value: &str, names: impl Iterator<Item = &'a str>) -> PyErr {
    let names: Vec<String> = names.map(|n| format!("{n:?}")).collect();
    PyValueError::new_err(format!("{name} ({flag}): {value:?} is not one of {}", names.join(", ")))
}

/// Bytes from a size string in the grammar of every size flag of `kiln
/// convert` (`kiln.numpy.parse_size` checks the range); `ValueError` with
/// the grammar otherwise.
#[pyfunction]
pub(crate) fn parse_size(text: &str) -> PyResult<u64> {
    kiln_convert::parse_size(text).map_err(PyValueError::new_err)
}

/// Runs `kiln convert SRC -o DST` with the flags the keywords stand for
/// (`max_shard_size` a size string, `to` and `from_format` the names `--to`
/// and `--from` take); the notes are returned, never printed. Usage faults
/// raise `ValueError`, I/O faults `OSError`, an input that cannot be
/// converted `ConvertError`; all with the CLI's message.
#[pyfunction]
#[pyo3(signature = (src, dst, *, max_shard_size=None, to=None, from_format=None, fsync=true))]
pub(crate) fn convert(
    py: Python<'_>,
    src: std::path::PathBuf,
    dst: std::path::PathBuf,
    max_shard_size: Option<&str>,
    to: Option<&str>,
    from_format: Option<&str>,
    fsync: bool,
) -> PyResult<Done> {
    let mut options = Options { fsync, ..Options::new(src, dst) };
    if let Some(size) = max_shard_size {
        let bytes =
            parse_size(size).map_err(|e| PyValueError::new_err(format!("max_shard_size (--max-shard-size): {e}")))?;
        options.max_shard_size = Some(bytes);
    }
    if let Some(name) = to {
        options.to = To::named(name).ok_or_else(|| not_one_of("to", "--to", name, To::ALL.iter().map(|t| t.name())))?;
    }
    if let Some(name) = from_format.filter(|&n| n != "auto") {
        let found = Format::ALL.into_iter().find(|f| f.name() == name);
        let names = std::iter::once("auto").chain(Format::ALL.iter().map(|f| f.name()));
        options.from = Some(found.ok_or_else(|| not_one_of("from_format", "--from", name, names))?);
    }
    match py.detach(|| kiln_convert::convert(&options, &Silent)) {
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
