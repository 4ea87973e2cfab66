//! How a conversion fails, and which exit code that is.
//!
//! * [`Usage`] and [`IoFail`] are exit 2: the command line (an OUT that is a
//!   device or the input itself, an IN that is a directory or a FIFO) or the
//!   file system (cannot read, cannot write, disk full, file too large).
//! * Everything else is exit 1: the input's content cannot be converted.
//!   [`At`] carries the byte offset in the input where a reader knows it, so
//!   `kiln validate --json` can report it.

use std::fmt;
use std::io;

/// A usage error (exit 2): the arguments ask for something `kiln` refuses.
#[derive(Debug)]
pub struct Usage(pub String);

impl fmt::Display for Usage {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for Usage {}

/// An I/O failure (exit 2), with what was being done (naming the file).
#[derive(Debug)]
pub struct IoFail {
    /// What was being done, naming the file.
    pub what: String,
    /// The system's error.
    pub source: io::Error,
}

impl fmt::Display for IoFail {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}: {}", self.what, self.source)
    }
}

impl std::error::Error for IoFail {
    fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
        Some(&self.source)
    }
}

/// An I/O failure while doing `what`.
pub fn io_fail(what: impl Into<String>) -> impl FnOnce(io::Error) -> anyhow::Error {
    let what = what.into();
    move |source| anyhow::Error::new(IoFail { what, source })
}

/// A fault at a known byte of the input (exit 1).
#[derive(Debug)]
pub struct At {
    /// Absolute byte offset in the input file.
    pub offset: u64,
    /// The spec's code, when the reader reports one (HK).
    pub code: Option<&'static str>,
    /// A stable rule identifier, when the reader has one.
    pub rule: Option<&'static str>,
    /// What is wrong there.
    pub message: String,
}

impl fmt::Display for At {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "byte {}: {}", self.offset, self.message)?;
        if let Some(rule) = self.rule {
            write!(f, " (rule {rule})")?;
        }
        Ok(())
    }
}

impl std::error::Error for At {}

/// A fault at byte `offset` of the input.
pub fn at(offset: impl TryInto<u64>, message: impl fmt::Display) -> anyhow::Error {
    let offset = offset.try_into().unwrap_or(u64::MAX);
    anyhow::Error::new(At { offset, code: None, rule: None, message: message.to_string() })
}

/// The HK reader's error at its offset, with its code and rule.
pub fn hk_error(err: kiln_hk::Error) -> anyhow::Error {
    anyhow::Error::new(At {
        offset: err.offset_u64(),
        code: Some(err.code().as_str()),
        rule: Some(err.rule().id()),
        message: format!("{}: {}", err.code().as_str(), err.rule().description()),
    })
}

/// Valid in its own format, but Kiln cannot hold it (a dtype Kiln has no
/// counterpart for, more names than a directory holds, ...): `kiln convert`
/// refuses it (exit 1); `kiln validate` accepts the file and reports the
/// reason as `kiln_limit`.
#[derive(Debug)]
pub struct KilnLimit {
    /// The byte of the input it concerns, where a reader knows it.
    pub offset: Option<u64>,
    /// What Kiln cannot hold.
    pub message: String,
}

impl fmt::Display for KilnLimit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(offset) = self.offset {
            write!(f, "byte {offset}: ")?;
        }
        f.write_str(&self.message)
    }
}

impl std::error::Error for KilnLimit {}

/// What Kiln cannot hold, at no particular byte.
pub fn limit(message: impl fmt::Display) -> anyhow::Error {
    anyhow::Error::new(KilnLimit { offset: None, message: message.to_string() })
}

/// What Kiln cannot hold, at byte `offset` of the input.
pub fn limit_at(offset: impl TryInto<u64>, message: impl fmt::Display) -> anyhow::Error {
    let offset = Some(offset.try_into().unwrap_or(u64::MAX));
    anyhow::Error::new(KilnLimit { offset, message: message.to_string() })
}

/// The reason, when `e` is a refusal of what Kiln cannot hold ([`KilnLimit`]):
/// the chain from its second link on (the first names the input file).
pub fn limit_reason(e: &anyhow::Error) -> Option<String> {
    if !e.chain().any(|c| c.is::<KilnLimit>()) {
        return None;
    }
    let links: Vec<String> = e.chain().map(ToString::to_string).collect();
    Some(links.get(usize::from(links.len() > 1)..).unwrap_or_default().join(": "))
}

/// The exit code of a failed conversion: 2 for usage and I/O, else 1.
pub fn exit_code(e: &anyhow::Error) -> u8 {
    if e.chain().any(|c| c.is::<Usage>() || c.is::<IoFail>()) {
        2
    } else {
        1
    }
}

/// The first [`At`] in the chain: where in the input the reader stopped.
pub fn located(e: &anyhow::Error) -> Option<&At> {
    e.chain().find_map(|c| c.downcast_ref::<At>())
}

#[cfg(test)]
mod tests {
    use super::*;
    use anyhow::Context;

    #[test]
    fn exit_codes_and_offsets_survive_context() {
        let e = Err::<(), _>(at(24, "bad")).context("in.gguf (gguf)").unwrap_err();
        assert_eq!(exit_code(&e), 1);
        assert_eq!(located(&e).map(|a| a.offset), Some(24));
        assert_eq!(format!("{e:#}"), "in.gguf (gguf): byte 24: bad");
        let io = io_fail("cannot write out.kiln")(io::Error::other("File too large"));
        let e = Err::<(), _>(io).context("x").unwrap_err();
        assert_eq!(exit_code(&e), 2);
        assert!(format!("{e:#}").contains("cannot write out.kiln: File too large"));
        let e = anyhow::Error::new(Usage("no".into())).context("y");
        assert_eq!(exit_code(&e), 2);
        // A zip checksum fault is an io::Error from the decoder, but about content: exit 1.
        let e = anyhow::Error::new(io::Error::new(io::ErrorKind::InvalidData, "Invalid checksum")).context("member a");
        assert_eq!(exit_code(&e), 1);
    }
}
