//! Foreign formats, named by content: the formats `kiln convert` reads
//! (safetensors, GGUF, HK, `.npy`, `.npz`, ONNX by its extension) and
//! llama.cpp's formats before GGUF, which it refuses. [`crate::open`] names
//! them with the command that converts them instead of a Kiln verdict
//! (`FRAME at byte 0`) that would not say what the file is; the CLI's
//! `kiln validate` and `kiln convert` detect with the same table.

use std::path::Path;

use kiln_nostd::int::u64_from;

/// Input formats `kiln convert` reads (also the values of `--from`, besides `auto`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Format {
    /// safetensors (8-byte header length, JSON header, data).
    Safetensors,
    /// GGUF v2/v3.
    Gguf,
    /// HK container (`HKNT`).
    Hk,
    /// One NumPy `.npy` array.
    Npy,
    /// A NumPy `.npz` archive (zip of `.npy`).
    Npz,
    /// Kiln: a standalone tensor directory or a record written by `kiln convert`.
    Kiln,
    /// An ONNX model (protobuf `ModelProto`): its initializers. No magic
    /// bytes: read by the `.onnx` extension or `--from onnx` only.
    Onnx,
}

impl Format {
    /// Every format, in the order `--from` lists them.
    pub const ALL: [Format; 7] =
        [Format::Safetensors, Format::Gguf, Format::Hk, Format::Npy, Format::Npz, Format::Kiln, Format::Onnx];

    /// The name used in messages and in `kiln.convert.source_format`.
    pub fn name(self) -> &'static str {
        match self {
            Format::Safetensors => "safetensors",
            Format::Gguf => "gguf",
            Format::Hk => "hk",
            Format::Npy => "npy",
            Format::Npz => "npz",
            Format::Kiln => "kiln",
            Format::Onnx => "onnx",
        }
    }

    /// Detects the format of the file at `path`: ONNX by its `.onnx`
    /// extension (ONNX has no magic bytes), anything else by its first bytes.
    pub fn detect_file(bytes: &[u8], path: &Path) -> Option<Format> {
        if path.extension().is_some_and(|e| e.eq_ignore_ascii_case("onnx")) {
            return Some(Format::Onnx);
        }
        Format::detect(bytes)
    }

    /// Detects the format from the first bytes (never ONNX: see [`Format::detect_file`]).
    pub fn detect(bytes: &[u8]) -> Option<Format> {
        match bytes.get(..4)? {
            b"GGUF" => Some(Format::Gguf),
            b"HKNT" => Some(Format::Hk),
            b"KLNT" | b"KLN0" => Some(Format::Kiln),
            b"PK\x03\x04" | b"PK\x05\x06" => Some(Format::Npz),
            _ if bytes.starts_with(b"\x93NUMPY") => Some(Format::Npy),
            _ => {
                // safetensors: u64 header length, then a JSON object.
                let n = u64::from_le_bytes(bytes.get(..8)?.try_into().ok()?);
                let first = bytes.get(8..)?.iter().find(|b| !b.is_ascii_whitespace())?;
                (n >= 2 && n <= u64_from(bytes.len()).saturating_sub(8) && *first == b'{')
                    .then_some(Format::Safetensors)
            }
        }
    }
}

/// A file of one of llama.cpp's formats before GGUF (2023): the magic, a
/// `u32` written little-endian, and what the format was. `kiln convert`
/// reads none of them: GGUF replaced them all, and llama.cpp's own scripts
/// convert them.
#[derive(Debug, PartialEq, Eq)]
pub struct LegacyGgml {
    /// The magic's four letters (`ggjt`); on disk they appear reversed (`tjgg`).
    pub magic: &'static str,
    /// What files of this magic hold.
    pub what: &'static str,
    /// What to do instead.
    pub advice: &'static str,
}

/// The advice for the model formats: llama.cpp's converter of these files.
const TO_GGUF: &str = "convert it to GGUF first with llama.cpp's convert scripts \
(convert_llama_ggml_to_gguf.py, called convert-llama-ggml-to-gguf.py in older trees; or convert the \
original weights with convert_hf_to_gguf.py), then convert the .gguf file";

/// The pre-GGUF magics, as llama.cpp's `llama.h` defined them (`LLAMA_FILE_MAGIC_*`).
const LEGACY_GGML: [(u32, LegacyGgml); 5] = [
    (0x6767_6d6c, LegacyGgml { magic: "ggml", what: "an unversioned ggml model (pre-GGUF)", advice: TO_GGUF }),
    (0x6767_6d66, LegacyGgml { magic: "ggmf", what: "a versioned ggml model (GGMF, pre-GGUF)", advice: TO_GGUF }),
    (0x6767_6a74, LegacyGgml { magic: "ggjt", what: "a ggml model (GGJT, pre-GGUF)", advice: TO_GGUF }),
    (
        0x6767_6c61,
        LegacyGgml {
            magic: "ggla",
            what: "a ggml LoRA adapter (GGLA, pre-GGUF)",
            advice: "convert the original adapter to GGUF first with llama.cpp's convert scripts \
                     (convert_lora_to_gguf.py), then convert the .gguf file",
        },
    ),
    (
        0x6767_736e,
        LegacyGgml {
            magic: "ggsn",
            what: "a llama.cpp session file (GGSN: a saved context, not a model)",
            advice: "it holds no weights to convert; convert the model it was made with \
                     (GGUF, or first to GGUF with llama.cpp's convert scripts)",
        },
    ),
];

impl LegacyGgml {
    /// The pre-GGUF format `bytes` start with, if any.
    pub fn detect(bytes: &[u8]) -> Option<&'static LegacyGgml> {
        let magic = u32::from_le_bytes(bytes.get(..4)?.try_into().ok()?);
        LEGACY_GGML.iter().find(|(m, _)| *m == magic).map(|(_, l)| l)
    }

    /// Why `kiln convert` and `kiln validate` refuse it, and what to do.
    pub fn refusal(&self) -> String {
        format!("{}: kiln reads GGUF, not the formats before it; {}", self.what, self.advice)
    }
}

/// Why [`crate::open`] does not open the file at `path` whose bytes are
/// `bytes`, when it is a foreign format: the format's name (`"safetensors"`,
/// `"gguf"`, ..., or a pre-GGUF magic such as `"ggjt"`) and what it is,
/// with the command that converts it (or, before GGUF, what to do). `None`
/// for Kiln and for bytes no table entry matches (a Kiln reader then says
/// why it refuses them).
pub fn refusal(path: &Path, bytes: &[u8]) -> Option<(&'static str, String)> {
    // Kiln's magic first: a Kiln file named `.onnx` is still Kiln.
    if Format::detect(bytes) == Some(Format::Kiln) {
        return None;
    }
    match Format::detect_file(bytes, path) {
        Some(Format::Kiln) => None,
        Some(format) => {
            let out = path.with_extension("kiln");
            let message = format!(
                "{} ({}): not a Kiln file; convert it with `kiln convert {} -o {}`",
                path.display(),
                format.name(),
                path.display(),
                out.display()
            );
            Some((format.name(), message))
        }
        None => {
            LegacyGgml::detect(bytes).map(|l| (l.magic, format!("{} ({}): {}", path.display(), l.magic, l.refusal())))
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn formats_by_content_and_onnx_by_extension() {
        assert_eq!(Format::detect(b"GGUF\x03\0\0\0"), Some(Format::Gguf));
        assert_eq!(Format::detect(b"KLN0...."), Some(Format::Kiln));
        assert_eq!(Format::detect(b"\x93NUMPY\x01\0"), Some(Format::Npy));
        let mut st = 2u64.to_le_bytes().to_vec();
        st.extend_from_slice(b"{}");
        assert_eq!(Format::detect(&st), Some(Format::Safetensors));
        assert_eq!(Format::detect_file(b"", Path::new("m.ONNX")), Some(Format::Onnx));
        assert_eq!(Format::detect(b"nope"), None);
        assert_eq!(LegacyGgml::detect(&0x6767_6a74u32.to_le_bytes()).map(|l| l.magic), Some("ggjt"));
    }

    #[test]
    fn refusals_name_the_command() {
        let mut st = 2u64.to_le_bytes().to_vec();
        st.extend_from_slice(b"{}");
        let (format, why) = refusal(Path::new("d/m.safetensors"), &st).unwrap();
        assert_eq!(format, "safetensors");
        assert_eq!(
            why,
            "d/m.safetensors (safetensors): not a Kiln file; convert it with `kiln convert d/m.safetensors -o d/m.kiln`"
        );
        let (format, why) = refusal(Path::new("old.bin"), &0x6767_6a74u32.to_le_bytes()).unwrap();
        assert_eq!(format, "ggjt");
        assert!(why.starts_with("old.bin (ggjt): a ggml model (GGJT, pre-GGUF): kiln reads GGUF"), "{why}");
        assert_eq!(refusal(Path::new("m.kiln"), b"KLN0"), None);
        assert_eq!(refusal(Path::new("m.onnx"), b"KLNT"), None, "Kiln's magic wins over the extension");
        assert_eq!(refusal(Path::new("m.onnx"), b"\x08\x07").map(|r| r.0), Some("onnx"));
        assert_eq!(refusal(Path::new("m.kiln"), b"????"), None);
    }
}
