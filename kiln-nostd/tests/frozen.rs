//! Frozen values: one test (at least) per project ruling on Frozen values,
//! count checks, caps, type text and frame (spec/kiln-v2.md sections 2 to 5),
//! plus the golden cases of spec/kiln-v2-cases.json.

use kiln_derive::Kiln;
use kiln_nostd::frozen::{
    self, decode, decode_framed, decode_with, encode, encode_framed, encoded_len, frame_bytes, hash_text, DictPairs,
    DictView, Int, KilnType, ListView, Reader, Schema, Seq, TensorSpecs, Uint,
};
use kiln_nostd::{wire::EMPTY_BLOCK, DType, Directory, Error, ErrorCode, Limits, Rule, TensorSpec};

fn hex(s: &str) -> Vec<u8> {
    hex::decode(s.split_whitespace().collect::<String>()).unwrap()
}

fn check_with(ty: &str, buf: &[u8], limits: Limits, framed: bool) -> Result<(), Error> {
    let schema: Schema<'_> = Schema::parse(ty).unwrap();
    frozen::validate(buf, &schema, &limits, framed)
}

fn check(ty: &str, buf: &[u8]) -> Result<(), Error> {
    check_with(ty, buf, Limits::DEFAULT, false)
}

/// (code, offset, rule) of a rejection.
fn reject(ty: &str, buf: &[u8]) -> (ErrorCode, usize, Rule) {
    let e = check(ty, buf).expect_err("must reject");
    (e.code(), e.offset(), e.rule())
}

fn reject_with(ty: &str, buf: &[u8], limits: Limits) -> (ErrorCode, usize, Rule) {
    let e = check_with(ty, buf, limits, false).expect_err("must reject");
    (e.code(), e.offset(), e.rule())
}

// ---------------------------------------------------------------- Frozen values

#[test]
fn ruling_1_bool_is_one_byte_zero_or_one() {
    assert!(check("bool", &[0]).is_ok());
    assert!(check("bool", &[1]).is_ok());
    assert_eq!(reject("bool", &[2]), (ErrorCode::Type, 0, Rule::BoolValue));
    assert_eq!(reject("bool", &[0xff]).0, ErrorCode::Type);
    assert_eq!(reject("list<bool>", &hex("03000000 01 00 02")), (ErrorCode::Type, 6, Rule::BoolValue));
    assert_eq!(reject("struct{a:u8,b:bool,}", &[9, 7]), (ErrorCode::Type, 1, Rule::BoolValue));
    assert_eq!(decode::<bool>(&[1]), Ok(true));
    assert_eq!(decode::<bool>(&[2]).unwrap_err().rule(), Rule::BoolValue);
    assert_eq!(reject("bool", &[]), (ErrorCode::Eof, 0, Rule::ValueTruncated));
}

#[test]
fn ruling_2_integers_are_little_endian_int_is_i64_uint_is_u64() {
    assert_eq!(decode::<i16>(&[0xfe, 0xff]), Ok(-2));
    assert_eq!(decode::<u32>(&[1, 2, 3, 4]), Ok(0x0403_0201));
    assert_eq!(decode::<i64>(&(-5i64).to_le_bytes()), Ok(-5));
    assert_eq!(decode::<Int>(&(-5i64).to_le_bytes()), Ok(Int(-5)));
    assert_eq!(decode::<Uint>(&u64::MAX.to_le_bytes()), Ok(Uint(u64::MAX)));
    let mut out = [0u8; 8];
    assert_eq!(encode(&-2i16, &mut out), Ok(2));
    assert_eq!(out[..2], [0xfe, 0xff]);
    // Same bytes as i64 / u64, but another type (another hash).
    assert!(check("int", &(-1i64).to_le_bytes()).is_ok());
    assert_eq!(reject("uint", &[0; 7]), (ErrorCode::Eof, 0, Rule::ValueTruncated));
    assert_ne!(hash_text("int"), hash_text("i64"));
    assert_ne!(Int::SCHEMA_HASH, i64::SCHEMA_HASH);
    let s: Schema<'_> = Schema::parse("int").unwrap();
    let seven = (-7i64).to_le_bytes();
    let v = Reader::new().read(&seven, &s).unwrap();
    assert_eq!(v.as_i64(), Some(-7));
}

#[test]
fn ruling_2_floats_keep_every_bit() {
    let nan = f64::from_bits(0x7FF8_0000_0000_0001);
    let mut out = [0u8; 8];
    encode(&nan, &mut out).unwrap();
    assert_eq!(out, 0x7FF8_0000_0000_0001u64.to_le_bytes());
    assert_eq!(decode::<f64>(&out).map(f64::to_bits), Ok(0x7FF8_0000_0000_0001));
    encode(&-0.0f32, &mut out).unwrap();
    assert_eq!(out[..4], [0, 0, 0, 0x80]);
    assert_eq!(decode::<f32>(&out[..4]).map(f32::to_bits), Ok(0x8000_0000));
    let snan = f32::from_bits(0x7F80_0001); // signalling NaN payload
    encode(&snan, &mut out).unwrap();
    assert_eq!(decode::<f32>(&out[..4]).map(f32::to_bits), Ok(0x7F80_0001));
    let s: Schema<'_> = Schema::parse("f64").unwrap();
    let buf = 0x7FF8_0000_0000_0001u64.to_le_bytes();
    assert_eq!(Reader::new().read(&buf, &s).unwrap().as_f64().map(f64::to_bits), Some(0x7FF8_0000_0000_0001));
    assert_eq!(hex("0000803f"), 1.0f32.to_le_bytes());
}

#[test]
fn ruling_3_str_is_length_then_utf8() {
    assert!(check("str", &hex("02000000 6869")).is_ok());
    assert!(check("str", &hex("00000000")).is_ok());
    assert_eq!(reject("str", &hex("02000000 fffe")), (ErrorCode::Utf8, 4, Rule::StrUtf8));
    // The offset is the first bad byte.
    assert_eq!(reject("struct{a:u8,s:str,}", &hex("07 03000000 61 c328")), (ErrorCode::Utf8, 6, Rule::StrUtf8));
    // Longer than the unread bytes: EOF at the length word.
    assert_eq!(reject("str", &hex("05000000 6869")), (ErrorCode::Eof, 0, Rule::ByteLengthPastEnd));
    // Above the byte cap: LIMIT, checked before the unread bytes.
    let cap = Limits::DEFAULT.with_byte_cap(4);
    assert_eq!(reject_with("str", &hex("05000000 6162636465"), cap), (ErrorCode::Limit, 0, Rule::ByteLengthCap));
    assert_eq!(reject_with("str", &hex("64000000"), cap), (ErrorCode::Limit, 0, Rule::ByteLengthCap));
    assert!(check_with("str", &hex("04000000 61626364"), cap, false).is_ok());
    assert_eq!(decode::<&str>(&hex("02000000 c3a9")), Ok("é"));
    assert_eq!(decode::<&str>(&hex("01000000 80")).unwrap_err().code(), ErrorCode::Utf8);
}

#[test]
fn ruling_4_list_is_count_then_elements_and_list_u8_is_a_byte_run() {
    assert!(check("list<u16>", &hex("02000000 0100 0200")).is_ok());
    assert!(check("list<u16>", &hex("00000000")).is_ok());
    // list<u8> uses the byte cap, not the count cap.
    let count_cap_1 = Limits::DEFAULT.with_count_cap(1);
    assert!(check_with("list<u8>", &hex("05000000 0102030405"), count_cap_1, false).is_ok());
    assert_eq!(reject_with("list<u16>", &hex("02000000 01000200"), count_cap_1), (ErrorCode::Limit, 0, Rule::CountCap));
    let byte_cap_4 = Limits::DEFAULT.with_byte_cap(4);
    assert_eq!(reject_with("list<u8>", &hex("05000000"), byte_cap_4), (ErrorCode::Limit, 0, Rule::ByteLengthCap));
    assert!(check_with("list<i8>", &hex("05000000 0102030405"), byte_cap_4, false).is_ok()); // i8 is a count
    assert_eq!(decode::<&[u8]>(&hex("03000000 010203")), Ok(&[1u8, 2, 3][..]));
    let two = hex("02000000 0100 0200");
    let v: ListView<'_, u16> = decode(&two).unwrap();
    assert_eq!(v.iter().collect::<Vec<_>>(), [1, 2]);
    // list<list<u8>>: the inner byte runs have minimum 4 each.
    assert_eq!(reject("list<list<u8>>", &hex("02000000 00000000")), (ErrorCode::Eof, 0, Rule::CountPastEnd));
}

#[test]
fn ruling_5_opt_is_a_tag_byte() {
    assert!(check("opt<u8>", &[0]).is_ok());
    assert!(check("opt<u8>", &[1, 7]).is_ok());
    // Absent: nothing follows.
    assert_eq!(reject("opt<u8>", &[0, 7]), (ErrorCode::Trailing, 1, Rule::TrailingBytes));
    assert_eq!(reject("opt<u8>", &[2]), (ErrorCode::Type, 0, Rule::OptTag));
    assert_eq!(reject("opt<u8>", &[1]), (ErrorCode::Eof, 1, Rule::ValueTruncated));
    assert_eq!(reject("opt<u8>", &[]), (ErrorCode::Eof, 0, Rule::ValueTruncated));
    assert_eq!(decode::<Option<u8>>(&[1, 7]), Ok(Some(7)));
    assert_eq!(decode::<Option<u8>>(&[0]), Ok(None));
    assert_eq!(decode::<Option<Option<u8>>>(&[1, 0]), Ok(Some(None)));
    assert_eq!(decode::<Option<u8>>(&[3]).unwrap_err().rule(), Rule::OptTag);
}

#[test]
fn ruling_6_dict_keys_strictly_increase_by_raw_bytes() {
    let ok = hex("02000000 01000000 61 0a 01000000 62 14");
    assert!(check("dict<str,u8>", &ok).is_ok());
    let swapped = hex("02000000 01000000 62 0a 01000000 61 14");
    assert_eq!(reject("dict<str,u8>", &swapped), (ErrorCode::Type, 10, Rule::DictKeyOrder));
    let duplicate = hex("02000000 01000000 61 0a 01000000 61 14");
    assert_eq!(reject("dict<str,u8>", &duplicate), (ErrorCode::Type, 10, Rule::DictKeyOrder));
    // Raw UTF-8 byte order: "Z" (5a) < "a" (61) < "ab" < "z" (7a) < "é" (c3 a9).
    let mut pairs = [("é", 5u8), ("z", 4), ("ab", 3), ("a", 2), ("Z", 1)];
    let mut out = [0u8; 64];
    let n = encode(&DictPairs(&pairs[..]), &mut out).unwrap();
    assert!(check("dict<str,u8>", &out[..n]).is_ok());
    let d: DictView<'_, u8> = decode(&out[..n]).unwrap();
    assert_eq!(d.keys().collect::<Vec<_>>(), ["Z", "a", "ab", "z", "é"]);
    assert_eq!(d.get("ab"), Some(3));
    assert_eq!(d.get("b"), None);
    // A sorted input encodes the same bytes.
    pairs.sort_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
    let mut again = [0u8; 64];
    assert_eq!(encode(&DictPairs(&pairs[..]), &mut again), Ok(n));
    assert_eq!(out[..n], again[..n]);
    // The encoder refuses a repeated key.
    assert_eq!(encode(&DictPairs(&[("a", 1u8), ("a", 2)][..]), &mut out).unwrap_err().rule(), Rule::DuplicateDictKey);
    assert_eq!(
        encode(&DictPairs(&[("b", 1u8), ("a", 2), ("b", 3)][..]), &mut out).unwrap_err().rule(),
        Rule::DuplicateDictKey
    );
    // Only str keys exist.
    assert_eq!(Schema::<8>::parse("dict<u8,u8>").unwrap_err().code(), ErrorCode::Type);
    // Bad UTF-8 in a key is UTF8.
    assert_eq!(reject("dict<str,u8>", &hex("01000000 01000000 ff 00")), (ErrorCode::Utf8, 8, Rule::StrUtf8));
    assert_eq!(decode::<DictView<'_, u8>>(&swapped).unwrap_err().rule(), Rule::DictKeyOrder);
}

#[test]
fn ruling_7_struct_fields_in_order_without_padding() {
    #[derive(Kiln, Debug, PartialEq)]
    struct S {
        a: u8,
        b: u32,
        c: i16,
    }
    let mut out = [0u8; 16];
    let n = encode(&S { a: 1, b: 2, c: -1 }, &mut out).unwrap();
    assert_eq!(out[..n], hex("01 02000000 ffff"));
    assert!(check(S::TYPE_TEXT, &out[..n]).is_ok());
    // struct{} is 0 bytes.
    #[derive(Kiln, Debug, PartialEq)]
    struct Empty {}
    assert_eq!(Empty::TYPE_TEXT, "struct{}");
    assert_eq!(encode(&Empty {}, &mut out), Ok(0));
    assert_eq!(decode::<Empty>(&[]), Ok(Empty {}));
    assert!(check("struct{}", &[]).is_ok());
    assert_eq!(reject("struct{}", &[0]).0, ErrorCode::Trailing);
    // A list of struct{}: the cap bounds the count (minimum 0 bytes).
    assert!(check("list<struct{}>", &hex("05000000")).is_ok());
    assert!(check_with("list<struct{}>", &hex("ffffffff"), Limits::MAX, false).is_ok());
    assert_eq!(reject("list<struct{}>", &hex("01000001")), (ErrorCode::Limit, 0, Rule::CountCap));
}

/// The spec's 200-byte block: one unnamed f32 vector 1.0, -2.0.
fn f32_block() -> Vec<u8> {
    include_bytes!(concat!(env!("CARGO_MANIFEST_DIR"), "/../spec/examples/small/f32-vector.kiln")).to_vec()
}

#[test]
fn ruling_8_tensors_field_is_one_block_and_the_next_field_follows_it() {
    let block = f32_block();
    let mut buf = 7i64.to_le_bytes().to_vec();
    buf.extend_from_slice(&block);
    let schema: Schema<'_> = Schema::parse("struct{id:i64,batch:tensors,}").unwrap();
    let v = Reader::new().read(&buf, &schema).unwrap();
    let dir = v.field("batch").unwrap().as_tensors().unwrap();
    assert_eq!((dir.start(), dir.end(), dir.len()), (8, 208, 1));
    let mut vals = [0f32; 2];
    dir.get(0).unwrap().copy_to(&mut vals).unwrap();
    assert_eq!(vals, [1.0, -2.0]);

    // A field after the block starts at its end.
    let mut tail = block.clone();
    tail.push(9);
    let s2: Schema<'_> = Schema::parse("struct{batch:tensors,tail:u8,}").unwrap();
    let v2 = Reader::new().read(&tail, &s2).unwrap();
    assert_eq!(v2.field("tail").map(|t| (t.offset(), t.as_u64())), Some((200, Some(9))));
    assert_eq!(reject("struct{batch:tensors,tail:u8,}", &block), (ErrorCode::Eof, 200, Rule::ValueTruncated));

    // Directory errors keep their codes, at absolute offsets.
    let mut bad = buf.clone();
    bad[8 + 4] = 1; // version byte
    assert_eq!(reject("struct{id:i64,batch:tensors,}", &bad), (ErrorCode::Frame, 12, Rule::DirectoryVersion));
    assert_eq!(reject("tensors", &block[..63]).0, ErrorCode::Eof);
    // The directory's count check uses the count cap.
    let no_tensors = Limits::DEFAULT.with_count_cap(0);
    assert_eq!(
        reject_with("struct{id:i64,batch:tensors,}", &buf, no_tensors),
        (ErrorCode::Limit, 16, Rule::TensorCountCap)
    );

    // Typed: Directory decodes, TensorSpecs encodes the canonical block.
    #[derive(Kiln)]
    struct Batch<'a> {
        id: i64,
        batch: Directory<'a>,
    }
    let b: Batch<'_> = decode(&buf).unwrap();
    assert_eq!((b.id, b.batch.len()), (7, 1));
    let mut out = vec![0u8; encoded_len(&b)];
    assert_eq!(encode(&b, &mut out), Ok(208));
    assert_eq!(out, buf);
    #[derive(kiln_derive::KilnType, kiln_derive::Encode)]
    struct BatchOut<'s> {
        id: i64,
        batch: TensorSpecs<'s>,
    }
    let data = hex("0000803f 000000c0");
    let specs = [TensorSpec::new(DType::F32, &[2], &data)];
    let mut out2 = vec![0u8; encoded_len(&BatchOut { id: 7, batch: TensorSpecs(&specs) })];
    encode(&BatchOut { id: 7, batch: TensorSpecs(&specs) }, &mut out2).unwrap();
    assert_eq!(out2, buf);
    assert_eq!(BatchOut::SCHEMA_HASH, Batch::SCHEMA_HASH);
}

#[test]
fn ruling_9_standalone_value_is_trailing_past_its_end() {
    assert_eq!(reject("u8", &[0, 0]), (ErrorCode::Trailing, 1, Rule::TrailingBytes));
    assert_eq!(reject("str", &hex("01000000 61 00")), (ErrorCode::Trailing, 5, Rule::TrailingBytes));
    let mut block = EMPTY_BLOCK.to_vec();
    block.push(0);
    assert_eq!(reject("tensors", &block), (ErrorCode::Trailing, 64, Rule::TrailingBytes));
    assert_eq!(decode::<u16>(&[0, 0, 0]).unwrap_err().code(), ErrorCode::Trailing);
}

// ---------------------------------------------------------------- count checks

#[test]
fn count_checks_run_in_the_spec_order() {
    let ty = "list<struct{id:u32,name:str,}>"; // m = 8
                                               // 1. word missing
    assert_eq!(reject(ty, &hex("0100")), (ErrorCode::Eof, 0, Rule::CountTruncated));
    // 2. above the cap, even though also past the end
    assert_eq!(reject(ty, &hex("01000001")), (ErrorCode::Limit, 0, Rule::CountCap));
    // 3. (count * m overflowing u64 needs m > 2^32: unit-tested in check.rs)
    // 4. count * m past the unread bytes, before any element is read
    assert_eq!(reject(ty, &hex("02000000 01000000 01000000 61")), (ErrorCode::Eof, 0, Rule::CountPastEnd));
    // 5. then the elements, with their own errors
    assert_eq!(
        reject(ty, &hex("02000000 01000000 0a000000 61 02000000 00000000")),
        (ErrorCode::Eof, 8, Rule::ByteLengthPastEnd)
    );
    // Dict entries: m = 4 + the value's minimum.
    assert_eq!(
        reject("dict<str,u64>", &hex("02000000").iter().copied().chain([0; 20]).collect::<Vec<_>>()).0,
        ErrorCode::Eof
    );
    let fits: Vec<u8> = hex("02000000").into_iter().chain([0; 24]).collect();
    assert_eq!(reject("dict<str,u64>", &fits).2, Rule::DictKeyOrder); // passes the count check
}

#[test]
fn hostile_count_returns_eof_without_reading_elements() {
    // 12 bytes claiming 16,777,216 structs of minimum 8 bytes.
    let buf = hex("00000001 0000000000000000");
    assert_eq!(buf.len(), 12);
    assert_eq!(reject("list<struct{id:u32,name:str,}>", &buf), (ErrorCode::Eof, 0, Rule::CountPastEnd));
    #[derive(Kiln, Debug)]
    struct Item<'a> {
        id: u32,
        name: &'a str,
    }
    assert_eq!(decode::<Seq<'_, Item<'_>>>(&buf).unwrap_err().rule(), Rule::CountPastEnd);
    assert_eq!(decode::<ListView<'_, u64>>(&buf).unwrap_err().rule(), Rule::CountPastEnd);
    assert_eq!(decode::<DictView<'_, u8>>(&buf).unwrap_err().rule(), Rule::CountPastEnd);
}

// ---------------------------------------------------------------- caps

#[test]
fn caps_default_and_configurable_to_the_wire_maximum() {
    assert_eq!(Limits::DEFAULT.count_cap, 16_777_216);
    assert_eq!(Limits::DEFAULT.byte_cap, 16_777_216);
    // At the cap: not LIMIT (here EOF); one above: LIMIT.
    assert_eq!(reject("list<u16>", &hex("00000001")).0, ErrorCode::Eof);
    assert_eq!(reject("list<u16>", &hex("01000001")).0, ErrorCode::Limit);
    assert_eq!(reject("dict<str,u8>", &hex("01000001")), (ErrorCode::Limit, 0, Rule::CountCap));
    assert_eq!(reject("str", &hex("01000001")), (ErrorCode::Limit, 0, Rule::ByteLengthCap));
    assert_eq!(reject("list<u8>", &hex("01000001")), (ErrorCode::Limit, 0, Rule::ByteLengthCap));
    // Dict keys are strings: byte cap.
    let keys = Limits::DEFAULT.with_byte_cap(1);
    assert_eq!(
        reject_with("dict<str,u8>", &hex("01000000 02000000 6162 00"), keys),
        (ErrorCode::Limit, 4, Rule::ByteLengthCap)
    );
    // Raised to u32::MAX the same counts are EOF, not LIMIT.
    assert_eq!(reject_with("list<u16>", &hex("ffffffff"), Limits::MAX).0, ErrorCode::Eof);
    assert_eq!(reject_with("str", &hex("ffffffff"), Limits::MAX).0, ErrorCode::Eof);
    // Typed decoders use the same caps.
    let small = Limits::DEFAULT.with_count_cap(1);
    assert_eq!(
        decode_with::<ListView<'_, u16>>(&hex("02000000 01000200"), &small, false).unwrap_err().rule(),
        Rule::CountCap
    );
}

// ---------------------------------------------------------------- type text and hash

#[test]
fn type_text_scalars_compounds_and_names() {
    for s in
        ["bool", "i8", "i16", "i32", "i64", "u8", "u16", "u32", "u64", "int", "uint", "f32", "f64", "str", "tensors"]
    {
        let schema: Schema<'_> = Schema::parse(s).unwrap();
        assert_eq!(schema.to_string(), s);
    }
    for bad in [
        "struct{a:i8}",
        "struct{a:i8 ,}",
        "struct{a: i8,}",
        "List<u8>",
        "dict<str, u8>",
        "struct{9:i8,}",
        "struct{a-b:i8,}",
        "f16",
    ] {
        assert_eq!(Schema::<16>::parse(bad).unwrap_err().code(), ErrorCode::Type, "{bad}");
    }
    assert!(Schema::<16>::parse("struct{_:i8,A9_b:u8,}").is_ok());
}

#[test]
fn schema_hash_of_the_spec_struct() {
    const H: u64 = hash_text("struct{id:i64,batch:tensors,}");
    assert_eq!(H, 0xe58aadc7552f0d82);
    let s: Schema<'_> = Schema::parse("struct{id:i64,batch:tensors,}").unwrap();
    assert_eq!(s.hash(), 0xe58aadc7552f0d82);
    #[derive(Kiln)]
    struct Spec<'a> {
        id: i64,
        batch: Directory<'a>,
    }
    assert_eq!(Spec::TYPE_TEXT, "struct{id:i64,batch:tensors,}");
    const DERIVED: u64 = Spec::SCHEMA_HASH;
    assert_eq!(DERIVED, 0xe58aadc7552f0d82);
    // dict<str,V> hashes as `dict<` `str` `,` V `>`.
    let tokens = ["dict<", "str", ",", "f64", ">"].iter().fold(frozen::Fnv::new(), |h, t| h.token(t));
    assert_eq!(hash_text("dict<str,f64>"), tokens.finish());
}

#[test]
fn depth_over_64_is_limit() {
    let deep = format!("{}u8{}", "list<".repeat(64), ">".repeat(64));
    assert_eq!(Schema::<128>::parse(&deep).unwrap().depth(), 64);
    let deeper = format!("opt<{deep}>");
    let e = Schema::<128>::parse(&deeper).unwrap_err();
    assert_eq!((e.code(), e.rule()), (ErrorCode::Limit, Rule::TypeDepth));
    let structs = format!("{}{}", "struct{a:".repeat(65), "u8,}".repeat(65));
    assert_eq!(Schema::<128>::parse(&structs).unwrap_err().code(), ErrorCode::Limit);
    // The typed API refuses a type deeper than 64 at decode time.
    type D8<T> = Option<Option<Option<Option<Option<Option<Option<Option<T>>>>>>>>;
    type D64 = D8<D8<D8<D8<D8<D8<D8<D8<u8>>>>>>>>;
    assert_eq!(<D64 as KilnType>::TY.depth(), 64);
    assert_eq!(decode::<D64>(&[0]), Ok(None));
    assert_eq!(decode::<Option<D64>>(&[0]).unwrap_err().rule(), Rule::TypeDepth);
}

// ---------------------------------------------------------------- frame

#[test]
fn frame_is_sixteen_bytes_then_one_value() {
    let ty = "struct{id:i64,batch:tensors,}";
    let mut buf = frame_bytes(0xe58aadc7552f0d82).to_vec();
    buf.extend_from_slice(&7i64.to_le_bytes());
    buf.extend_from_slice(&EMPTY_BLOCK);
    assert!(check_with(ty, &buf, Limits::DEFAULT, true).is_ok());
    let framed = |b: &[u8]| {
        let e = check_with(ty, b, Limits::DEFAULT, true).expect_err("reject");
        (e.code(), e.offset(), e.rule())
    };
    assert_eq!(framed(&buf[..15]), (ErrorCode::Eof, 0, Rule::FrameTruncated));
    assert_eq!(framed(&[]).0, ErrorCode::Eof);
    for (at, rule) in [
        (0, Rule::FrameMagic),
        (3, Rule::FrameMagic),
        (4, Rule::FrameProfile),
        (5, Rule::FrameFlags),
        (6, Rule::FrameReserved),
        (7, Rule::FrameReserved),
    ] {
        let mut b = buf.clone();
        b[at] ^= 1;
        let got = framed(&b);
        assert_eq!((got.0, got.2), (ErrorCode::Frame, rule), "byte {at}");
    }
    // Hash mismatch: SCHEMA before the first field (the body here is garbage).
    let mut wrong = frame_bytes(1).to_vec();
    wrong.extend_from_slice(&[0xff; 3]);
    assert_eq!(framed(&wrong), (ErrorCode::Schema, 8, Rule::SchemaHash));
    // Bytes after the value: TRAILING.
    let mut long = buf.clone();
    long.push(0);
    assert_eq!(framed(&long), (ErrorCode::Trailing, buf.len(), Rule::TrailingBytes));
    // Typed framing.
    #[derive(Kiln, Debug)]
    struct Spec<'a> {
        id: i64,
        batch: Directory<'a>,
    }
    let v: Spec<'_> = decode_framed(&buf).unwrap();
    assert_eq!(v.id, 7);
    let mut out = vec![0u8; buf.len()];
    assert_eq!(encode_framed(&v, &mut out), Ok(buf.len()));
    assert_eq!(out, buf);
    assert_eq!(decode_framed::<u8>(&buf).unwrap_err().code(), ErrorCode::Schema);
}

// ---------------------------------------------------------------- golden cases

#[test]
fn golden_cases_of_the_spec() {
    let path = concat!(env!("CARGO_MANIFEST_DIR"), "/../spec/kiln-v2-cases.json");
    let text = std::fs::read_to_string(path).expect("spec/kiln-v2-cases.json");
    let json: serde_json::Value = serde_json::from_str(&text).unwrap();
    let cases = json["cases"].as_array().unwrap();
    assert!(cases.len() >= 46);
    for case in cases {
        let name = case["name"].as_str().unwrap();
        let ty = case["type"].as_str().unwrap();
        let framed = case["framed"].as_bool().unwrap_or(false);
        let buf = hex(case["hex"].as_str().unwrap());
        let got = check_with(ty, &buf, Limits::DEFAULT, framed);
        match case["expect"].as_str().unwrap() {
            "accept" => assert!(got.is_ok(), "{name}: {got:?}"),
            code => assert_eq!(got.map_err(|e| e.code().as_str()), Err(code), "{name}"),
        }
    }
}

// ---------------------------------------------------------------- typed API

#[derive(Kiln, Debug)]
struct Record<'a> {
    id: i64,
    name: &'a str,
    scores: ListView<'a, f32>,
    tags: DictView<'a, i32>,
    note: Option<&'a str>,
    raw: &'a [u8],
}

#[test]
fn derived_record_round_trips_and_matches_the_schema() {
    assert_eq!(
        Record::TYPE_TEXT,
        "struct{id:i64,name:str,scores:list<f32>,tags:dict<str,i32>,note:opt<str>,raw:list<u8>,}"
    );
    assert_eq!(Record::SCHEMA_HASH, hash_text(Record::TYPE_TEXT));
    assert_eq!(<Record<'_> as KilnType>::TY.min_size(), 8 + 4 + 4 + 4 + 1 + 4);

    // Build the bytes with the encoder pieces, then decode lazily.
    let scores = [1.5f32, -0.0, f32::from_bits(0x7fc0_0001)];
    let mut scores_le = [0u8; 12];
    kiln_nostd::dtype::encode_le(&scores, &mut scores_le).unwrap();
    let tags = [("zeta", 3i32), ("alpha", -1)];
    let mut tag_buf = [0u8; 64];
    let tn = encode(&DictPairs(&tags[..]), &mut tag_buf).unwrap();
    let tags_view: DictView<'_, i32> = decode(&tag_buf[..tn]).unwrap();
    let rec = Record {
        id: -9,
        name: "kiln",
        scores: ListView::from_wire(&scores_le),
        tags: tags_view,
        note: None,
        raw: &[0, 255],
    };
    let mut out = vec![0u8; encoded_len(&rec)];
    let n = encode(&rec, &mut out).unwrap();
    assert_eq!(n, out.len());
    assert!(check(Record::TYPE_TEXT, &out).is_ok());

    let back: Record<'_> = decode(&out).unwrap();
    assert_eq!((back.id, back.name, back.note, back.raw), (-9, "kiln", None, &[0u8, 255][..]));
    assert_eq!(back.scores.iter().map(f32::to_bits).collect::<Vec<_>>(), scores.map(f32::to_bits));
    assert_eq!(back.tags.iter().collect::<Vec<_>>(), [("alpha", -1), ("zeta", 3)]);
    assert_eq!(back.tags.get("zeta"), Some(3));
    let mut again = vec![0u8; n];
    encode(&back, &mut again).unwrap();
    assert_eq!(again, out);

    // The lazy Value API reads the same buffer.
    let schema: Schema<'_> = Schema::parse(Record::TYPE_TEXT).unwrap();
    let v = Reader::new().read(&out, &schema).unwrap();
    let list = v.field("scores").unwrap().as_list().unwrap();
    let mut copied = [0f32; 3];
    assert_eq!(list.copy_to(&mut copied), Ok(3));
    assert_eq!(copied.map(f32::to_bits), scores.map(f32::to_bits));
    let d = v.field("tags").unwrap().as_dict().unwrap();
    assert_eq!(d.get("alpha").and_then(|v| v.as_i64()), Some(-1));
    let mut scratch = [0usize; 2];
    assert_eq!(d.index(&mut scratch).unwrap().get("zeta").and_then(|v| v.as_i64()), Some(3));
    assert!(v.field("note").unwrap().as_opt().is_some_and(|o| o.is_none()));
    assert_eq!(v.field("raw").unwrap().as_bytes(), Some(&[0u8, 255][..]));
    assert_eq!(v.raw(), &out[..]);
}

#[test]
fn encoder_reports_a_short_buffer_and_sizes_first() {
    let mut small = [0u8; 5];
    let e = encode("hello", &mut small).unwrap_err();
    assert_eq!((e.code(), e.rule()), (ErrorCode::Eof, Rule::ValueOutputTooSmall));
    assert_eq!(encoded_len("hello"), 9);
    assert_eq!(frozen::encoded_len_framed("hello"), 25);
}

#[test]
fn list_views_are_zero_copy_when_aligned() {
    // Place the elements at an aligned address: the count word at bytes 4..8
    // of 8-aligned storage puts the f64s at byte 8.
    // Little-endian wire words in 8-aligned storage, on any host.
    let words = [(2u64 << 32).to_le(), 1.0f64.to_bits().to_le(), (-2.0f64).to_bits().to_le()];
    let bytes: &[u8] = bytemuck::cast_slice(&words);
    let buf = &bytes[4..];
    let v: ListView<'_, f64> = decode(buf).unwrap();
    if cfg!(target_endian = "little") {
        assert_eq!(v.as_slice(), Some(&[1.0, -2.0][..]));
    }
    let schema: Schema<'_> = Schema::parse("list<f64>").unwrap();
    let list = Reader::new().read(buf, &schema).unwrap().as_list().unwrap();
    if cfg!(target_endian = "little") {
        assert_eq!(list.view::<f64>(), Some(&[1.0, -2.0][..]));
    }
    assert_eq!(list.view::<f32>(), None); // wrong element type
                                          // Any alignment: the copy works (and the view refuses misaligned bytes).
    let mut shifted = vec![0u8];
    shifted.extend_from_slice(buf);
    let v2: ListView<'_, f64> = decode(&shifted[1..]).unwrap();
    let mut out = [0f64; 2];
    assert_eq!(v2.copy_to(&mut out), Ok(2));
    assert_eq!(out, [1.0, -2.0]);
    assert_eq!(v2.iter().collect::<Vec<_>>(), [1.0, -2.0]);
}

// ---------------------------------------------------------------- trusted reader and accessors

#[test]
fn trusted_reader_skips_utf8_but_keeps_every_bounds_check() {
    let schema: Schema<'_> = Schema::parse("struct{s:str,k:dict<str,u8>,b:bool,}").unwrap();
    let bad_utf8 = hex("02000000 fffe 01000000 01000000 ff 07 01");
    assert_eq!(Reader::new().read(&bad_utf8, &schema).unwrap_err().code(), ErrorCode::Utf8);
    let v = Reader::new().trusted(true).read(&bad_utf8, &schema).unwrap();
    assert_eq!(v.field("s").unwrap().as_str_bytes(), Some(&[0xff, 0xfe][..]));
    assert_eq!(v.field("s").unwrap().as_str(), None);
    let d = v.field("k").unwrap().as_dict().unwrap();
    assert_eq!(d.entries().map(|(k, _)| k.to_vec()).collect::<Vec<_>>(), [vec![0xff]]);
    // Bounds, tags, order and trailing bytes are still checked.
    let trusted = Reader::new().trusted(true);
    assert_eq!(trusted.read(&bad_utf8[..bad_utf8.len() - 1], &schema).unwrap_err().code(), ErrorCode::Eof);
    let long = hex("20000000 fffe 01000000 01000000 ff 07 01");
    assert_eq!(trusted.read(&long, &schema).unwrap_err().rule(), Rule::ByteLengthPastEnd);
    let mut bad_bool = bad_utf8.clone();
    *bad_bool.last_mut().unwrap() = 2;
    assert_eq!(trusted.read(&bad_bool, &schema).unwrap_err().rule(), Rule::BoolValue);
    let mut extra = bad_utf8.clone();
    extra.push(0);
    assert_eq!(trusted.read(&extra, &schema).unwrap_err().code(), ErrorCode::Trailing);
    assert_eq!(
        trusted.limits(Limits::DEFAULT.with_byte_cap(1)).read(&bad_utf8, &schema).unwrap_err().code(),
        ErrorCode::Limit
    );
}

#[test]
fn accessors_of_another_kind_return_none() {
    let schema: Schema<'_> = Schema::parse("struct{a:u8,b:list<i16>,}").unwrap();
    let buf = hex("05 01000000 ffff");
    let v = Reader::new().read(&buf, &schema).unwrap();
    let a = v.field("a").unwrap();
    assert_eq!((a.as_u64(), a.as_i64(), a.as_bool(), a.as_f32(), a.as_str()), (Some(5), None, None, None, None));
    assert!(a.as_list().is_none() && a.as_dict().is_none() && a.as_struct().is_none() && a.as_tensors().is_none());
    assert!(v.as_list().is_none() && v.as_opt().is_none() && v.field("c").is_none());
    let b = v.field("b").unwrap().as_list().unwrap();
    assert_eq!(b.get(0).and_then(|x| x.as_i64()), Some(-1));
    assert!(b.get(1).is_none());
    assert!(v.field("b").unwrap().as_bytes().is_none()); // list<i16> is not a byte run
    assert_eq!(v.as_struct().unwrap().field_at(1).map(|x| x.offset()), Some(1));
    assert_eq!(v.as_struct().unwrap().len(), 2);
}
