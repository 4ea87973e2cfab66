//! Oracles shared by the fuzz targets (beyond "no crash"):
//!
//! * an accepted directory's views lie inside the caller's buffer, inside
//!   the block, in descriptor order and do not overlap;
//! * re-encoding an accepted directory's tensors with the [`Writer`]
//!   reproduces the block bytes exactly (canonical form);
//! * a rejected input's error offset lies inside the buffer, or equals its
//!   length for EOF.

use kiln_nostd::{DType, Directory, Error, ErrorCode, Tensor, TensorSpec, Writer};

/// A rejected input: the offset is inside the buffer, or equals its length
/// for EOF (the bytes that would have been needed start there).
pub fn check_error(e: &Error, len: usize) {
    check_offset(e.offset(), e.code(), len, e);
}

/// [`check_error`] for any reader's error (the HK reader's has its own type).
pub fn check_offset(offset: usize, code: ErrorCode, len: usize, e: &dyn core::fmt::Display) {
    assert!(
        offset < len || (offset == len && code == ErrorCode::Eof),
        "error offset {offset} outside the buffer ({len} bytes): {e}"
    );
}

/// Every view of an accepted directory is inside `buf` and inside the
/// block, ranges come in order without overlap, and every accessor works.
pub fn check_views(buf: &[u8], dir: &Directory<'_>) {
    let range = buf.as_ptr_range();
    assert!(dir.end() <= buf.len() && dir.start() <= dir.end());
    assert_eq!(dir.block().len(), dir.block_len());
    assert!(dir.payload_start() >= dir.start() && dir.payload_start() <= dir.end());
    assert_eq!((dir.payload_start() - dir.start()) % 64, 0, "payload base not 64-aligned in the block");
    let mut last_end = dir.payload_start();
    for (i, t) in dir.iter().enumerate() {
        assert_eq!(t.index(), i);
        let b = t.bytes();
        assert_eq!(b.len(), t.byte_len());
        assert!(b.is_empty() || (range.start <= b.as_ptr() && b.as_ptr_range().end <= range.end), "view outside the buffer");
        let at = t.absolute_offset();
        assert!(at >= dir.payload_start() && at + b.len() <= dir.end(), "view outside the block");
        assert_eq!((at - dir.payload_start()) % 64, 0, "payload not 64-aligned");
        if !b.is_empty() {
            assert!(at >= last_end, "views overlap or are out of order");
            last_end = at + b.len();
        }
        assert!(t.rank() <= 8 && t.shape().len() == t.rank());
        let _ = (t.name(), t.layout(), t.block_size(), t.descriptor(), t.element_count());
        if let Some(n) = t.name() {
            assert!(dir.find(n).is_some_and(|f| f.index() == i), "find() misses a name");
        }
        if let Some(q) = t.quant() {
            assert!(q.scale.index() != i && q.scale.quant().is_none());
            if let Some(o) = q.outer {
                assert_eq!((o.dtype(), o.element_count()), (DType::F32, 1));
            }
        }
        check_typed(&t);
    }
    assert!(dir.iter().len() == dir.len());
    assert!(dir.get(dir.len()).is_none());
}

/// Typed copies agree with the wire bytes; zero-copy views only where the
/// host allows them, and then equal to the copies.
#[allow(clippy::assertions_on_constants)] // the host's byte order is the point
fn check_typed(t: &Tensor<'_>) {
    fn one<T: kiln_nostd::dtype::Element + PartialEq + core::fmt::Debug>(t: &Tensor<'_>) {
        let mut out = vec![<T as bytemuck::Zeroable>::zeroed(); t.byte_len() / T::WIDTH + 1];
        if let Ok(n) = t.copy_to(&mut out) {
            assert_eq!(n * T::WIDTH, t.byte_len());
            let mut wire = vec![0u8; t.byte_len()];
            assert_eq!(kiln_nostd::dtype::encode_le(&out[..n], &mut wire), Some(wire.len()));
            assert_eq!(wire, t.bytes(), "copy_to + encode_le does not give the wire bytes back");
            if let Some(v) = t.as_slice::<T>() {
                assert!(!cfg!(target_endian = "big") || T::WIDTH == 1, "a multi-byte view on a big-endian host");
                assert_eq!(bytemuck::cast_slice::<T, u8>(v), t.bytes());
            }
        } else {
            assert!(t.as_slice::<T>().is_none());
        }
    }
    one::<u8>(t);
    one::<i8>(t);
    one::<u16>(t);
    one::<i16>(t);
    one::<u32>(t);
    one::<i32>(t);
    one::<u64>(t);
    one::<i64>(t);
    one::<f32>(t);
    one::<f64>(t);
}

/// The tensors of an accepted directory as writer input (indexes kept).
pub fn specs<'a>(tensors: &'a [Tensor<'a>]) -> Vec<TensorSpec<'a>> {
    tensors.iter().map(TensorSpec::from_tensor).collect()
}

/// Canonical form: the writer, given the accepted tensors, writes the block
/// bytes exactly.
pub fn check_canonical(dir: &Directory<'_>) {
    let tensors: Vec<Tensor<'_>> = dir.iter().collect();
    let specs = specs(&tensors);
    let len = Writer::new().encoded_len(&specs).expect("an accepted directory has a length");
    assert_eq!(len, dir.block_len(), "encoded_len differs from the accepted block");
    let mut out = vec![0u8; len];
    let n = Writer::new()
        .limits(kiln_nostd::Limits::MAX)
        .write(&specs, &mut out)
        .unwrap_or_else(|e| panic!("the writer refuses an accepted directory: {e}"));
    assert_eq!(n, len);
    assert!(out == dir.block(), "accepted block is not canonical: re-encoding differs");
}

/// All directory oracles.
pub fn check_directory(buf: &[u8], dir: &Directory<'_>) {
    check_views(buf, dir);
    check_canonical(dir);
}

/// The oracle of the `convert_*` targets: runs `kiln convert` on `data` read
/// as `format`. A refusal is fine (the converter's errors are checked for
/// panics only); a conversion must write a Kiln record that the core
/// validates, holding the reader's tensors in order with the payload bytes
/// the reader took from the input. Returns the record's bytes when it converted.
pub fn check_conversion(data: &[u8], format: kiln_convert::Format) -> Option<Vec<u8>> {
    use kiln_convert::{convert_bytes, ReadOptions, To};
    let done = convert_bytes(data, Some(format), &ReadOptions::default(), To::Record).ok()?;
    let parser = kiln_nostd::Parser::new().limits(kiln_nostd::Limits::MAX);
    let (metadata, dir) = match kiln_model::parse_any_with(&done.output, parser) {
        Ok(parsed) => parsed,
        Err(e) => panic!("a converted {format:?} file is not valid Kiln: {e}"),
    };
    assert!(metadata.is_some(), "the record has no metadata");
    assert_eq!(dir.len(), done.model.tensors.len(), "tensor count");
    for ((t, want), payload) in dir.iter().zip(&done.model.tensors).zip(&done.payloads) {
        assert_eq!(t.name(), Some(&*want.name), "tensor {} name", t.index());
        assert_eq!(t.dtype(), want.dtype, "tensor {} dtype", want.name);
        assert_eq!(t.shape(), want.shape.as_slice(), "tensor {} shape", want.name);
        assert_eq!(t.bytes(), payload.as_slice(), "tensor {} bytes", want.name);
        // A plain range of the input is checked against the input itself.
        if let kiln_convert::Source::File { offset } = want.source {
            let start = usize::try_from(offset).unwrap();
            assert_eq!(data.get(start..start + payload.len()), Some(payload.as_slice()), "tensor {} input range", want.name);
        }
    }
    Some(done.output)
}

/// Kiln -> safetensors -> Kiln gives the same tensors back (name, dtype,
/// shape, bytes, layout), for a record [`check_conversion`] produced.
pub fn check_safetensors_round_trip(record: &[u8]) {
    use kiln_convert::{convert_bytes, Format, ReadOptions, To};
    let read = ReadOptions::default();
    let st = match convert_bytes(record, Some(Format::Kiln), &read, To::Safetensors) {
        Ok(done) => done.output,
        // The way out may refuse what safetensors cannot name; not a fault.
        Err(_) => return,
    };
    let again = match convert_bytes(&st, Some(Format::Safetensors), &read, To::Record) {
        Ok(done) => done.output,
        Err(e) => panic!("safetensors written by kiln convert does not convert back: {e:#}"),
    };
    let parser = || kiln_nostd::Parser::new().limits(kiln_nostd::Limits::MAX);
    let (_, first) = kiln_model::parse_any_with(record, parser()).unwrap();
    let (_, second) = kiln_model::parse_any_with(&again, parser()).unwrap();
    assert_eq!(first.len(), second.len(), "tensor count after the round trip");
    for (a, b) in first.iter().zip(second.iter()) {
        assert_eq!(a.name(), b.name(), "name after the round trip");
        assert_eq!(a.dtype(), b.dtype(), "{:?}: dtype after the round trip", a.name());
        assert_eq!(a.shape(), b.shape(), "{:?}: shape after the round trip", a.name());
        assert_eq!(a.layout(), b.layout(), "{:?}: layout after the round trip", a.name());
        assert_eq!(a.bytes(), b.bytes(), "{:?}: bytes after the round trip", a.name());
    }
}
