//! One test per directory rule: a valid block, one field changed, the rule
//! (and so the code and offset) the parser must report.

use kiln_nostd::{
    wire::EMPTY_BLOCK,
    writer::{sort_dict, QuantSpec, TensorRef},
    DType, Directory, ErrorCode, Limits, Parser, Rule, TensorSpec, Writer,
};

const F32_DATA: [u8; 8] = [0x00, 0x00, 0x80, 0x3f, 0x00, 0x00, 0x00, 0xc0];
/// Descriptor field offsets (descriptor 0 starts at 64).
const DESC: usize = 64;

fn write(specs: &[TensorSpec<'_>]) -> Vec<u8> {
    let mut out = vec![0; Writer::new().encoded_len(specs).unwrap()];
    Writer::new().write(specs, &mut out).unwrap();
    out
}

/// One unnamed f32 vector [1.0, -2.0]: the spec's 200-byte block.
fn f32_block() -> Vec<u8> {
    write(&[TensorSpec::new(DType::F32, &[2], &F32_DATA)])
}

/// "a": u8[3] at payload 0, "b": i16[2] at payload 64. Heap "ab" at 320, payload base 384.
fn named_block() -> Vec<u8> {
    write(&[
        TensorSpec::new(DType::U8, &[3], &[1, 2, 3]).named("a"),
        TensorSpec::new(DType::I16, &[2], &[1, 0, 2, 0]).named("b"),
    ])
}

/// "q": e2m1[32] scheme 1 -> "s": e8m0[1]; with `outer`, scheme 2 -> "o": f32[1].
fn quant_block(outer: bool) -> Vec<u8> {
    let q = TensorSpec::new(DType::E2M1, &[32], &[0x21; 16]).named("q");
    let q = if outer {
        q.quantized(QuantSpec::ScalesOuter {
            axis: 0,
            group_size: 32,
            scale: TensorRef::Name("s"),
            outer: TensorRef::Name("o"),
        })
    } else {
        q.quantized(QuantSpec::Scales { axis: 0, group_size: 32, scale: TensorRef::Name("s") })
    };
    let s = TensorSpec::new(DType::E8M0, &[1], &[127]).named("s");
    let o = TensorSpec::new(DType::F32, &[], &F32_DATA[..4]).named("o");
    if outer {
        write(&[q, s, o])
    } else {
        write(&[q, s])
    }
}

/// Opaque code 4096, layout Q4_K, block 18, 18 bytes. Heap "Q4_K" at 192.
fn opaque_block() -> Vec<u8> {
    write(&[TensorSpec::opaque(4096, "Q4_K", 18, &[32], &[7; 18])])
}

fn put(buf: &mut [u8], at: usize, bytes: &[u8]) {
    buf[at..at + bytes.len()].copy_from_slice(bytes);
}

#[track_caller]
fn expect(buf: &[u8], rule: Rule, offset: usize) {
    expect_with(Parser::new(), buf, rule, offset);
}

#[track_caller]
fn expect_with(p: Parser<'_>, buf: &[u8], rule: Rule, offset: usize) {
    let err = p.parse(buf).expect_err("must be rejected");
    assert_eq!((err.rule(), err.offset()), (rule, offset), "got: {err}");
    assert_eq!(err.code(), rule.code());
}

#[test]
fn fixtures_are_valid_and_the_f32_block_is_the_spec_example() {
    for b in [f32_block(), named_block(), quant_block(false), quant_block(true), opaque_block(), EMPTY_BLOCK.to_vec()] {
        Directory::parse(&b).unwrap();
    }
    let b = f32_block();
    assert_eq!(b.len(), 200);
    assert_eq!(&b[192..], &F32_DATA);
    assert_eq!(hex::encode(EMPTY_BLOCK), "4b4c4e5402020000".to_owned() + &"0".repeat(112));
}

// Steps 1 and 2.
#[test]
fn header_framing() {
    expect(b"KL", Rule::HeaderTruncated, 2);
    expect(&b"KLNT\x02\x02"[..], Rule::HeaderTruncated, 6);
    let b = f32_block();
    let mut m = b.clone();
    m[0] = b'X';
    expect(&m, Rule::DirectoryMagic, 0);
    // A wrong magic is FRAME even when the buffer is short.
    expect(b"XLNT", Rule::DirectoryMagic, 0);
    let mut m = b.clone();
    m[4] = 1;
    expect(&m, Rule::DirectoryVersion, 4);
    let mut m = b.clone();
    m[5] |= 4;
    expect(&m, Rule::UnknownFlag, 5);
    let mut m = b.clone();
    m[5] = 0;
    expect(&m, Rule::LittleEndianFlagClear, 5);
    for at in [6, 7, 32, 63] {
        let mut m = b.clone();
        m[at] = 1;
        expect(&m, Rule::HeaderReserved, at);
    }
}

// Steps 3 to 7.
#[test]
fn caps_sizes_and_padding() {
    let b = f32_block();
    expect_with(Parser::new().limits(Limits::DEFAULT.with_count_cap(0)), &b, Rule::TensorCountCap, 8);
    Parser::new().limits(Limits::DEFAULT.with_count_cap(1)).parse(&b).unwrap();
    let n = named_block();
    expect_with(Parser::new().limits(Limits::DEFAULT.with_byte_cap(1)), &n, Rule::NameBytesCap, 12);

    let mut m = b.clone();
    put(&mut m, 24, &129u64.to_le_bytes());
    expect(&m, Rule::DirectoryBytesMismatch, 24);

    let mut m = b.clone();
    put(&mut m, 8, &2u32.to_le_bytes());
    put(&mut m, 24, &256u64.to_le_bytes());
    expect(&m, Rule::DirectoryTruncated, 200);

    let mut m = b.clone();
    put(&mut m, 16, &(u64::MAX - 10).to_le_bytes());
    expect(&m, Rule::PayloadSizeOverflow, 16);

    expect(&b[..199], Rule::BlockTruncated, 199);
    let mut m = b.clone();
    put(&mut m, 16, &9u64.to_le_bytes());
    expect(&m, Rule::BlockTruncated, 200);

    let mut m = n.clone();
    m[330] = 1;
    expect(&m, Rule::NonzeroPadding, 330);
}

// Step 8.
#[test]
fn descriptor_reserved_and_names() {
    let b = f32_block();
    for at in [DESC + 3, DESC + 112, DESC + 127] {
        let mut m = b.clone();
        m[at] = 1;
        expect(&m, Rule::DescriptorReserved, at);
    }
    let mut m = EMPTY_BLOCK.to_vec();
    m[5] = 3;
    expect(&m, Rule::NameFlagOnEmpty, 5);
    let mut m = b.clone();
    put(&mut m, DESC + 4, &0u16.to_le_bytes());
    expect(&m, Rule::NameWithoutFlag, DESC + 4);
    let mut m = b.clone();
    put(&mut m, DESC + 8, &0u16.to_le_bytes());
    expect(&m, Rule::LayoutFieldMismatch, DESC + 8);

    let n = named_block();
    let d1 = DESC + 128;
    let mut m = n.clone();
    put(&mut m, d1 + 6, &0u16.to_le_bytes());
    expect(&m, Rule::MissingName, d1 + 6);
    let mut m = n.clone();
    put(&mut m, d1 + 4, &0u16.to_le_bytes());
    expect(&m, Rule::HeapOrder, d1 + 4);
    let mut m = n.clone();
    put(&mut m, d1 + 6, &2u16.to_le_bytes());
    expect(&m, Rule::HeapOverrun, d1 + 6);
    let mut m = n.clone();
    put(&mut m, 12, &3u32.to_le_bytes());
    put(&mut m, 24, &259u64.to_le_bytes());
    expect(&m, Rule::HeapHole, 322);
    let mut m = n.clone();
    m[320] = 0xFF;
    expect(&m, Rule::NameUtf8, 320);
    let mut m = n.clone();
    m[321] = b'a';
    expect(&m, Rule::DuplicateName, d1 + 4);
    let mut scratch = [0u32; 8];
    expect_with(Parser::new().scratch(&mut scratch), &m, Rule::DuplicateName, d1 + 4);

    let mut o = opaque_block();
    o[192 + 1] = 0xC0;
    expect(&o, Rule::LayoutUtf8, 193);
}

// Step 9.
#[test]
fn dtype_shape_and_ranges() {
    let b = f32_block();
    for code in [0u16, 20, 4095, 32768, 65535] {
        let mut m = b.clone();
        put(&mut m, DESC, &code.to_le_bytes());
        expect(&m, Rule::UnknownDtype, DESC);
    }
    let mut m = b.clone();
    m[DESC + 2] = 9;
    expect(&m, Rule::RankTooLarge, DESC + 2);
    let mut m = b.clone();
    put(&mut m, DESC + 56, &1u64.to_le_bytes());
    expect(&m, Rule::ShapeTail, DESC + 56);
    let mut m = b.clone();
    m[DESC + 2] = 3;
    put(&mut m, DESC + 56, &(1u64 << 32).to_le_bytes());
    put(&mut m, DESC + 64, &(1u64 << 32).to_le_bytes());
    expect(&m, Rule::ShapeOverflow, DESC + 48);
    let mut m = b.clone();
    put(&mut m, DESC + 32, &1u64.to_le_bytes());
    put(&mut m, DESC + 40, &u64::MAX.to_le_bytes());
    expect(&m, Rule::RangeOverflow, DESC + 32);
    let mut m = b.clone();
    put(&mut m, DESC + 40, &9u64.to_le_bytes());
    expect(&m, Rule::RangePastPayload, DESC + 40);
    let mut m = b.clone();
    put(&mut m, DESC + 48, &3u64.to_le_bytes());
    expect(&m, Rule::LengthMismatch, DESC + 40);
    let mut m = b.clone();
    put(&mut m, DESC + 12, &1u32.to_le_bytes());
    expect(&m, Rule::LayoutOnDenseDtype, DESC + 12);
    let mut m = b.clone();
    put(&mut m, DESC, &4096u16.to_le_bytes());
    expect(&m, Rule::OpaqueWithoutLayout, DESC + 10);
    for bs in [0u32, 7] {
        let mut o = opaque_block();
        put(&mut o, DESC + 12, &bs.to_le_bytes());
        expect(&o, Rule::OpaqueBlockSize, DESC + 12);
    }
    let mut m = named_block();
    put(&mut m, DESC + 128 + 32, &0u64.to_le_bytes());
    expect(&m, Rule::RangeOverlap, DESC + 128 + 32);
}

// Step 10.
#[test]
fn canonical_placement() {
    let mut m = f32_block();
    put(&mut m, DESC + 32, &64u64.to_le_bytes());
    put(&mut m, 16, &72u64.to_le_bytes());
    m.extend_from_slice(&[0; 64]);
    expect(&m, Rule::NonCanonicalOffset, DESC + 32);
    let mut m = f32_block();
    put(&mut m, 16, &9u64.to_le_bytes());
    m.push(0);
    expect(&m, Rule::NonCanonicalPayloadBytes, 16);
    let mut m = named_block();
    m[384 + 10] = 1;
    expect(&m, Rule::NonzeroGap, 394);
}

// Step 11.
#[test]
fn element_bytes_and_quantization() {
    let mut b = write(&[TensorSpec::new(DType::Bool, &[3], &[0, 1, 0])]);
    b[192 + 2] = 2;
    expect(&b, Rule::BoolByte, 194);
    let mut b = write(&[TensorSpec::new(DType::U4, &[3], &[0x21, 0x03])]);
    b[193] = 0x13;
    expect(&b, Rule::PackedHighNibble, 193);

    let f = f32_block();
    let mut m = f.clone();
    put(&mut m, DESC + 16, &3u16.to_le_bytes());
    expect(&m, Rule::UnknownQuantScheme, DESC + 16);
    let mut m = f.clone();
    put(&mut m, DESC + 20, &1u32.to_le_bytes());
    expect(&m, Rule::QuantFieldsOnPlain, DESC + 16);

    let q = quant_block(false);
    let mut m = q.clone();
    put(&mut m, DESC + 18, &1u16.to_le_bytes());
    expect(&m, Rule::QuantAxis, DESC + 18);
    let mut m = q.clone();
    put(&mut m, DESC + 20, &0u32.to_le_bytes());
    expect(&m, Rule::QuantAxis, DESC + 20);
    for idx in [0u32, 2, u32::MAX] {
        let mut m = q.clone();
        put(&mut m, DESC + 24, &idx.to_le_bytes());
        expect(&m, Rule::ScaleIndex, DESC + 24);
    }
    let mut m = q.clone();
    put(&mut m, DESC + 128 + 16, &1u16.to_le_bytes());
    expect(&m, Rule::QuantChain, DESC + 24);
    let mut m = q.clone();
    put(&mut m, DESC + 20, &16u32.to_le_bytes());
    expect(&m, Rule::ScaleCount, DESC + 24);
    let mut m = q.clone();
    put(&mut m, DESC + 28, &1u32.to_le_bytes());
    expect(&m, Rule::OuterIndex, DESC + 28);

    let qo = quant_block(true);
    for idx in [0u32, 1, 3] {
        let mut m = qo.clone();
        put(&mut m, DESC + 28, &idx.to_le_bytes());
        expect(&m, Rule::OuterIndex, DESC + 28);
    }
    let mut m = qo.clone();
    put(&mut m, DESC + 256, &DType::I32.code().to_le_bytes());
    expect(&m, Rule::OuterTensor, DESC + 28);
}

// Step 12 and embedding.
#[test]
fn trailing_and_embedded_blocks() {
    let mut m = f32_block();
    m.push(0);
    expect(&m, Rule::TrailingBytes, 200);

    // struct{id:i64,batch:tensors,}: the block starts at 8 and the next field at its end.
    let mut rec = 7i64.to_le_bytes().to_vec();
    rec.extend_from_slice(&f32_block());
    rec.extend_from_slice(b"next");
    let dir = Parser::new().parse_at(&rec, 8).unwrap();
    assert_eq!((dir.start(), dir.end()), (8, 208));
    assert_eq!(dir.get(0).unwrap().absolute_offset(), 200);
    rec[8 + 4] = 1;
    let err = Parser::new().parse_at(&rec, 8).unwrap_err();
    assert_eq!((err.rule(), err.offset()), (Rule::DirectoryVersion, 12));
    let err = Parser::new().parse_at(&rec, 999).unwrap_err();
    assert_eq!(err.code(), ErrorCode::Eof);
}

// The first failing step wins, across descriptors.
#[test]
fn check_order_across_descriptors() {
    // Step 10 fault in descriptor 0, step 9 fault in descriptor 1: step 9 wins.
    let mut m = named_block();
    put(&mut m, DESC + 128, &0u16.to_le_bytes()); // dtype 0 in descriptor 1
    m[384 + 5] = 9; // gap byte after "a"
    expect(&m, Rule::UnknownDtype, DESC + 128);
    // Step 11 fault in descriptor 0, step 10 fault in descriptor 1: step 10 wins.
    let mut b = write(&[
        TensorSpec::new(DType::Bool, &[1], &[1]).named("a"),
        TensorSpec::new(DType::U8, &[1], &[1]).named("b"),
    ]);
    b[384] = 2; // bool byte
    b[384 + 7] = 1; // gap byte
    expect(&b, Rule::NonzeroGap, 391);
    // Step 8 (reserved, FRAME) beats a step-8 name fault in an earlier descriptor.
    let mut m = named_block();
    m[320] = 0xFF;
    m[DESC + 128 + 3] = 1;
    expect(&m, Rule::DescriptorReserved, DESC + 128 + 3);
    // Step 2 beats step 5.
    let mut m = f32_block();
    m[4] = 3;
    expect(&m[..100], Rule::DirectoryVersion, 4);
}

#[test]
fn writer_refusals() {
    let shape = [1u64; 9];
    let err = Writer::new().encoded_len(&[TensorSpec::new(DType::U8, &shape, &[1])]).unwrap_err();
    assert_eq!(err.rule(), Rule::FieldTooWide);
    let err = Writer::new().write(&[TensorSpec::new(DType::F32, &[2], &F32_DATA)], &mut [0; 199]).unwrap_err();
    assert_eq!((err.rule(), err.offset()), (Rule::OutputTooSmall, 199));
    // Invalid input is refused with the reader's own rule.
    let err = Writer::new().write(&[TensorSpec::new(DType::F32, &[3], &F32_DATA)], &mut [0; 256]).unwrap_err();
    assert_eq!(err.rule(), Rule::LengthMismatch);
    let dup = [TensorSpec::new(DType::U8, &[1], &[1]).named("x"), TensorSpec::new(DType::U8, &[1], &[2]).named("x")];
    assert_eq!(Writer::new().write(&dup, &mut [0; 512]).unwrap_err().rule(), Rule::DuplicateName);
    let q = TensorSpec::new(DType::U8, &[1], &[1]).named("x").quantized(QuantSpec::Scales {
        axis: 0,
        group_size: 1,
        scale: TensorRef::Name("nope"),
    });
    assert_eq!(Writer::new().write(&[q], &mut [0; 512]).unwrap_err().rule(), Rule::UnknownReference);
    let mut unnamed = [TensorSpec::new(DType::U8, &[1], &[1])];
    assert_eq!(sort_dict(&mut unnamed).unwrap_err().rule(), Rule::DictKeyMissing);
    // The caps bind the writer too.
    let err = Writer::new()
        .limits(Limits::DEFAULT.with_count_cap(0))
        .write(&[TensorSpec::new(DType::U8, &[1], &[1])], &mut [0; 256])
        .unwrap_err();
    assert_eq!(err.rule(), Rule::TensorCountCap);
}

#[test]
fn dict_helper_sorts_by_key_bytes_and_keeps_references() {
    let mut specs = [
        TensorSpec::new(DType::E2M1, &[32], &[0x21; 16]).named("z.weight").quantized(QuantSpec::Scales {
            axis: 0,
            group_size: 32,
            scale: TensorRef::Index(1),
        }),
        TensorSpec::new(DType::E8M0, &[1], &[127]).named("a.scale"),
        TensorSpec::new(DType::U8, &[1], &[1]).named("B"),
    ];
    sort_dict(&mut specs).unwrap();
    let names: Vec<_> = specs.iter().map(|s| s.name.unwrap()).collect();
    assert_eq!(names, ["B", "a.scale", "z.weight"]);
    let b = write(&specs);
    let dir = Directory::parse(&b).unwrap();
    let q = dir.find("z.weight").unwrap().quant().unwrap();
    assert_eq!(q.scale.name(), Some("a.scale"));
    assert_eq!(q.scale.index(), 1);
}

#[test]
fn views_of_quant_opaque_and_typed_access() {
    let qo = quant_block(true);
    let dir = Directory::parse(&qo).unwrap();
    let q = dir.get(0).unwrap().quant().unwrap();
    assert_eq!((q.scheme, q.axis, q.group_size), (2, 0, 32));
    assert_eq!(q.scale.bytes(), &[127]);
    assert_eq!(q.outer.unwrap().name(), Some("o"));
    assert!(dir.get(1).unwrap().quant().is_none());
    let o = opaque_block();
    let t = Directory::parse(&o).unwrap().get(0).unwrap();
    assert_eq!((t.dtype(), t.layout(), t.block_size(), t.byte_len()), (DType::Opaque(4096), Some("Q4_K"), 18, 18));
    let f = f32_block();
    let t = Directory::parse(&f).unwrap().get(0).unwrap();
    let mut out = [0f32; 2];
    assert_eq!(t.copy_to(&mut out), Ok(2));
    assert_eq!(out, [1.0, -2.0]);
    assert!(t.as_slice::<u32>().is_none());
    let err = Directory::parse(b"KL").unwrap_err();
    assert_eq!(err.to_string(), "EOF at byte 2: the buffer ends inside the 64-byte directory header");
}
