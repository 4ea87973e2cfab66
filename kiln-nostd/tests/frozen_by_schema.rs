//! The schema-driven encoder (`frozen::encode_by_schema`) over an in-memory
//! value tree: each encoding rule refused when broken, random types and
//! values round tripping through the core's reader, and the bytes of the
//! typed `Encode` path (derived structs) for the same values.

mod frozen_types;

use std::collections::BTreeMap;
use std::marker::PhantomData;

use frozen_types::{f32_block, types, T};
use kiln_nostd::frozen::{
    self, encode_by_schema, encode_by_schema_framed, DictPairs, Encode, Encoder, Int, Kind, Place, Reader, Refusal,
    Schema, Source, StructNames, TensorSpecs, TensorsOut, TypeRef, Uint, Value,
};
use kiln_nostd::{wire::EMPTY_BLOCK, DType, Directory, ErrorCode, Rule, TensorSpec};
use proptest::prelude::*;

/// A value of the test's object model.
#[derive(Clone, Debug, PartialEq)]
enum V {
    Bool(bool),
    Int(i128),
    F32(u32),
    F64(u64),
    Str(String),
    List(Vec<V>),
    /// A list that says it has `.0` items and gives `.1`.
    Counted(usize, Vec<V>),
    /// A list of fixed-width numbers as one run of wire bytes.
    Run(Vec<u8>),
    Opt(Option<Box<V>>),
    Dict(Vec<(String, V)>),
    /// A dict that says it has `.0` entries and gives `.1`.
    CountedDict(usize, Vec<(String, V)>),
    Struct(Vec<(String, V)>),
    /// A `tensors` value as a block.
    Tensors(Vec<u8>),
    /// A `tensors` value of one unnamed f32 vector (these bits), for the writer path.
    F32Tensor(Vec<u32>),
}

/// A refusal or a fault, owned, with the path the encoder reported it at.
#[derive(Clone, Debug, PartialEq)]
struct Fail {
    rule: Rule,
    offset: usize,
    detail: String,
    path: String,
}

impl Fail {
    fn of(e: kiln_nostd::Error) -> Fail {
        Fail { rule: e.rule(), offset: e.offset(), detail: String::new(), path: String::new() }
    }
}

/// The source over `V` trees.
struct Tree<'a> {
    /// Give lists of fixed-width numbers as runs (as a binding does NumPy arrays).
    runs: bool,
    /// Give a struct value's names (as a mapping does); else fields are only looked up.
    listed: bool,
    /// How many times a `tensors` value is written.
    tensor_writes: usize,
    _v: PhantomData<&'a V>,
}

impl Tree<'_> {
    fn new() -> Self {
        Tree { runs: false, listed: true, tensor_writes: 1, _v: PhantomData }
    }
}

type Items<'a> = std::iter::Map<std::slice::Iter<'a, V>, fn(&'a V) -> Result<&'a V, Fail>>;
type Entries<'a> =
    std::iter::Map<std::slice::Iter<'a, (String, V)>, fn(&'a (String, V)) -> Result<(&'a str, &'a V), Fail>>;
type Names<'a> = std::iter::Map<std::slice::Iter<'a, (String, V)>, fn(&'a (String, V)) -> Result<&'a str, Fail>>;

fn items<'a>(v: &'a [V]) -> Items<'a> {
    let map: fn(&'a V) -> Result<&'a V, Fail> = Ok;
    v.iter().map(map)
}

fn entries(es: &[(String, V)]) -> Entries<'_> {
    es.iter().map(|e| Ok((e.0.as_str(), &e.1)))
}

fn names(es: &[(String, V)]) -> Names<'_> {
    es.iter().map(|e| Ok(e.0.as_str()))
}

/// The wire bytes of a scalar item of a numeric list (what a NumPy array holds).
fn wire(kind: Kind, v: &V) -> Option<Vec<u8>> {
    let width = kind.width()? as usize;
    Some(match v {
        V::Bool(b) => vec![u8::from(*b)],
        V::Int(n) => n.to_le_bytes()[..width].to_vec(),
        V::F32(bits) => bits.to_le_bytes().to_vec(),
        V::F64(bits) => bits.to_le_bytes().to_vec(),
        _ => return None,
    })
}

impl<'a> Source for Tree<'a> {
    type Value = &'a V;
    type Error = Fail;
    type Str = &'a str;
    type Items = Items<'a>;
    type Entries = Entries<'a>;
    type Names = Names<'a>;
    type Run = Vec<u8>;

    fn bool(&mut self, v: &&'a V) -> Result<Option<bool>, Fail> {
        Ok(match v {
            V::Bool(b) => Some(*b),
            _ => None,
        })
    }

    fn int(&mut self, v: &&'a V, _: Kind) -> Result<Option<i128>, Fail> {
        Ok(match v {
            V::Int(n) => Some(*n),
            _ => None,
        })
    }

    fn f32(&mut self, v: &&'a V) -> Result<Option<f32>, Fail> {
        Ok(match v {
            V::F32(bits) => Some(f32::from_bits(*bits)),
            _ => None,
        })
    }

    fn f64(&mut self, v: &&'a V) -> Result<Option<f64>, Fail> {
        Ok(match v {
            V::F64(bits) => Some(f64::from_bits(*bits)),
            _ => None,
        })
    }

    fn str(&mut self, v: &&'a V) -> Result<Option<&'a str>, Fail> {
        Ok(match v {
            V::Str(s) => Some(s.as_str()),
            _ => None,
        })
    }

    fn list(&mut self, v: &&'a V, _: TypeRef<'_>) -> Result<Option<(usize, Items<'a>)>, Fail> {
        Ok(match v {
            V::List(xs) => Some((xs.len(), items(xs))),
            V::Counted(n, xs) => Some((*n, items(xs))),
            _ => None,
        })
    }

    fn numbers(&mut self, v: &&'a V, elem: Kind) -> Result<Option<Vec<u8>>, Fail> {
        Ok(match v {
            V::Run(bytes) => Some(bytes.clone()),
            V::List(xs) if self.runs => {
                xs.iter().map(|x| wire(elem, x)).collect::<Option<Vec<_>>>().map(|w| w.concat())
            }
            _ => None,
        })
    }

    fn opt(&mut self, v: &&'a V) -> Result<Option<&'a V>, Fail> {
        Ok(match v {
            V::Opt(x) => x.as_deref(),
            // Any other value is present (as a binding takes a plain value for an opt).
            other => Some(*other),
        })
    }

    fn dict(&mut self, v: &&'a V, _: TypeRef<'_>) -> Result<Option<(usize, Entries<'a>)>, Fail> {
        Ok(match v {
            V::Dict(es) => Some((es.len(), entries(es))),
            V::CountedDict(n, es) => Some((*n, entries(es))),
            _ => None,
        })
    }

    fn names(&mut self, v: &&'a V) -> Result<StructNames<Names<'a>>, Fail> {
        Ok(match v {
            V::Struct(fields) if self.listed => StructNames::Listed(names(fields)),
            V::Struct(_) => StructNames::Unlisted,
            _ => StructNames::NotAStruct,
        })
    }

    fn field(&mut self, v: &&'a V, name: &str) -> Result<Option<&'a V>, Fail> {
        Ok(match v {
            V::Struct(fields) => fields.iter().find(|(n, _)| n == name).map(|(_, x)| x),
            _ => None,
        })
    }

    fn tensors(&mut self, v: &&'a V, out: &mut TensorsOut<'_>) -> Result<(), Fail> {
        for _ in 0..self.tensor_writes {
            match v {
                V::Tensors(block) => {
                    let dir = Directory::parse(block).map_err(Fail::of)?;
                    out.write_directory(&dir).map_err(Fail::of)?;
                }
                V::F32Tensor(bits) => {
                    let data: Vec<u8> = bits.iter().flat_map(|b| b.to_le_bytes()).collect();
                    let shape = [bits.len() as u64];
                    out.write(&[TensorSpec::new(DType::F32, &shape, &data)]).map_err(Fail::of)?;
                }
                _ => {}
            }
        }
        Ok(())
    }

    fn refuse(&mut self, r: Refusal<'_>, _: &&'a V) -> Fail {
        Fail { rule: r.error.rule(), offset: r.error.offset(), detail: format!("{:?}", r.detail), path: String::new() }
    }

    fn within(&mut self, mut e: Fail, place: Place<'_>) -> Fail {
        let here = match place {
            Place::Item(i) => format!("[{i}]"),
            Place::Key(k) => format!("[{k:?}]"),
            Place::Field(f) => format!(".{f}"),
        };
        e.path.insert_str(0, &here);
        e
    }
}

fn encode_with<'a>(text: &str, v: &'a V, mut tree: Tree<'a>) -> Result<Vec<u8>, Fail> {
    let schema: Schema<'_, 512> = Schema::parse(text).unwrap();
    let mut out = Vec::new();
    let n = encode_by_schema(schema.root(), &v, &mut tree, &mut out)?;
    assert_eq!(n, out.len());
    Ok(out)
}

fn enc(text: &str, v: &V) -> Result<Vec<u8>, Fail> {
    encode_with(text, v, Tree::new())
}

/// The rule, offset, detail and path of a refused value.
fn refused(text: &str, v: &V) -> (Rule, usize, String, String) {
    let f = enc(text, v).unwrap_err();
    (f.rule, f.offset, f.detail, f.path)
}

fn st(fields: &[(&str, V)]) -> V {
    V::Struct(fields.iter().map(|(n, v)| (n.to_string(), v.clone())).collect())
}

fn s(x: &str) -> V {
    V::Str(x.to_owned())
}

// ---------------------------------------------------------------- rules

#[test]
fn every_integer_kind_takes_its_range_and_refuses_one_past_each_end() {
    let ranges: [(Kind, i128, i128); 10] = [
        (Kind::I8, i8::MIN.into(), i8::MAX.into()),
        (Kind::I16, i16::MIN.into(), i16::MAX.into()),
        (Kind::I32, i32::MIN.into(), i32::MAX.into()),
        (Kind::I64, i64::MIN.into(), i64::MAX.into()),
        (Kind::Int, i64::MIN.into(), i64::MAX.into()),
        (Kind::U8, 0, u8::MAX.into()),
        (Kind::U16, 0, u16::MAX.into()),
        (Kind::U32, 0, u32::MAX.into()),
        (Kind::U64, 0, u64::MAX.into()),
        (Kind::Uint, 0, u64::MAX.into()),
    ];
    for (kind, lo, hi) in ranges {
        let w = kind.width().unwrap() as usize;
        assert_eq!(enc(kind.name(), &V::Int(lo)).unwrap(), lo.to_le_bytes()[..w], "{kind:?}");
        assert_eq!(enc(kind.name(), &V::Int(hi)).unwrap(), hi.to_le_bytes()[..w], "{kind:?}");
        for bad in [lo - 1, hi + 1, i128::MIN, i128::MAX] {
            let want = format!("IntRange {{ kind: {kind:?}, value: {bad} }}");
            assert_eq!(refused(kind.name(), &V::Int(bad)), (Rule::IntRange, 0, want, String::new()));
        }
    }
    // The offset is where the integer would go, and the path says which.
    let e = enc("struct{a:str,b:list<u16>,}", &st(&[("a", s("xy")), ("b", V::List(vec![V::Int(1), V::Int(-1)]))]));
    let e = e.unwrap_err();
    assert_eq!((e.rule, e.offset, e.path.as_str()), (Rule::IntRange, 6 + 4 + 2, ".b[1]"));
    assert_eq!(e.rule.code(), ErrorCode::Type);
}

#[test]
fn a_value_of_another_kind_is_value_shape() {
    for (text, v) in [
        ("bool", V::Int(1)),
        ("i32", V::F64(0)),
        ("uint", s("1")),
        ("f32", V::F64(0)),
        ("f64", V::F32(0)),
        ("str", V::Int(0)),
        ("list<str>", s("abc")),
        ("list<u8>", V::Int(3)),
        ("dict<str,u8>", V::List(vec![])),
        ("struct{a:u8,}", V::Dict(vec![])),
        ("opt<bool>", V::Int(0)),
    ] {
        let want = format!("Shape {{ ty: {:?} }}", if text == "opt<bool>" { "bool" } else { text });
        let off = usize::from(text == "opt<bool>");
        assert_eq!(refused(text, &v), (Rule::ValueShape, off, want, String::new()), "{text}");
    }
    // A run where the element type has no fixed width is not a list of it.
    assert_eq!(refused("list<str>", &V::Run(vec![1, 2])).0, Rule::ValueShape);
}

#[test]
fn counts_above_u32_are_count_too_wide() {
    let Ok(n) = usize::try_from(1u64 << 32) else {
        return; // a 32-bit host cannot say such a count
    };
    assert_eq!(
        refused("list<u8>", &V::Counted(n, vec![])),
        (Rule::CountTooWide, 0, format!("Count({n})"), String::new())
    );
    assert_eq!(refused("opt<dict<str,u8>>", &V::CountedDict(n, vec![])).0, Rule::CountTooWide);
    assert_eq!(Rule::CountTooWide.code(), ErrorCode::Limit);
}

#[test]
fn lists_and_dicts_give_exactly_their_count() {
    let two = vec![V::Int(1), V::Int(2)];
    assert_eq!(
        refused("list<u8>", &V::Counted(3, two.clone())),
        (Rule::ItemCount, 6, "ItemCount { count: 3, given: 2 }".into(), String::new())
    );
    assert_eq!(
        refused("list<u8>", &V::Counted(1, two)),
        (Rule::ItemCount, 5, "ItemCount { count: 1, given: 2 }".into(), String::new())
    );
    let es = vec![("a".to_string(), V::Int(1))];
    assert_eq!(refused("dict<str,u8>", &V::CountedDict(2, es.clone())).0, Rule::ItemCount);
    assert_eq!(refused("dict<str,u8>", &V::CountedDict(0, es)).0, Rule::ItemCount);
}

#[test]
fn dict_keys_must_come_strictly_increasing_by_bytes() {
    let d = |keys: &[&str]| V::Dict(keys.iter().map(|k| (k.to_string(), V::Int(0))).collect());
    // Byte order, not char order: "Z" < "a" < "é".
    assert_eq!(enc("dict<str,u8>", &d(&["Z", "a", "é"])).unwrap().len(), 4 + 6 + 6 + 7);
    assert_eq!(
        refused("dict<str,u8>", &d(&["a", "b", "b"])),
        (Rule::DuplicateDictKey, 4 + 12, "DuplicateKey(\"b\")".into(), String::new())
    );
    assert_eq!(
        refused("dict<str,u8>", &d(&["b", "a"])),
        (Rule::DictKeyOrder, 4 + 6, "KeyOrder { prev: \"b\", key: \"a\" }".into(), String::new())
    );
    assert_eq!(refused("dict<str,u8>", &d(&["é", "z"])).0, Rule::DictKeyOrder);
    // A value fault says under which key.
    let bad = V::Dict(vec![("k".into(), V::Int(300))]);
    assert_eq!(refused("dict<str,u8>", &bad).3, "[\"k\"]");
}

#[test]
fn struct_fields_are_the_types_in_its_order() {
    let ty = "struct{id:i64,name:str,}";
    // Given in any order, written in declaration order.
    let out = enc(ty, &st(&[("name", s("n")), ("id", V::Int(7))])).unwrap();
    assert_eq!(out, [7, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, b'n']);
    assert_eq!(
        refused(ty, &st(&[("id", V::Int(1))])),
        (Rule::MissingField, 8, format!("MissingField {{ field: \"name\", ty: {ty:?} }}"), String::new())
    );
    assert_eq!(
        refused(ty, &st(&[("id", V::Int(1)), ("name", s("x")), ("extra", V::Int(2))])),
        (Rule::UnknownField, 0, format!("UnknownField {{ name: \"extra\", ty: {ty:?} }}"), String::new())
    );
    // Looked up by name only (an object's attributes), extra names are not asked about.
    let tree = Tree { listed: false, ..Tree::new() };
    let extra = st(&[("id", V::Int(7)), ("name", s("n")), ("extra", V::Int(2))]);
    assert_eq!(encode_with(ty, &extra, tree).unwrap(), out);
    // Nested faults carry the path.
    let deep =
        st(&[("a", V::List(vec![V::Dict(vec![]), V::Dict(vec![("k".into(), V::Opt(Some(Box::new(s("x")))))])]))]);
    assert_eq!(refused("struct{a:list<dict<str,opt<u8>>>,}", &deep).3, ".a[1][\"k\"]");
}

#[test]
fn opts_nest_with_one_tag_each() {
    let some = |v: V| V::Opt(Some(Box::new(v)));
    assert_eq!(enc("opt<opt<i8>>", &V::Opt(None)).unwrap(), [0]);
    assert_eq!(enc("opt<opt<i8>>", &some(V::Opt(None))).unwrap(), [1, 0]);
    assert_eq!(enc("opt<opt<i8>>", &some(some(V::Int(-1)))).unwrap(), [1, 1, 0xff]);
    // A plain value in an opt is present.
    assert_eq!(enc("opt<opt<i8>>", &V::Int(3)).unwrap(), [1, 1, 3]);
}

#[test]
fn number_runs_are_whole_elements_and_bool_runs_bytes_0_or_1() {
    assert_eq!(enc("list<u16>", &V::Run(vec![1, 0, 2, 0])).unwrap(), [2, 0, 0, 0, 1, 0, 2, 0]);
    assert_eq!(
        refused("list<u16>", &V::Run(vec![1, 0, 2])),
        (Rule::NumberRun, 0, "NumberRun { kind: U16, len: 3 }".into(), String::new())
    );
    assert_eq!(enc("list<bool>", &V::Run(vec![0, 1, 1])).unwrap(), [3, 0, 0, 0, 0, 1, 1]);
    let e = refused("struct{a:u8,b:list<bool>,}", &st(&[("a", V::Int(0)), ("b", V::Run(vec![1, 2]))]));
    assert_eq!((e.0, e.1, e.3.as_str()), (Rule::BoolValue, 1 + 4 + 1, ".b"));
    // A run of nothing is the empty list.
    assert_eq!(enc("list<f64>", &V::Run(vec![])).unwrap(), [0, 0, 0, 0]);
}

#[test]
fn tensors_are_written_exactly_once() {
    let one = enc("tensors", &V::Tensors(f32_block())).unwrap();
    assert_eq!(one, f32_block());
    // The writer path writes the same block for the same tensor.
    assert_eq!(enc("tensors", &V::F32Tensor(vec![1f32.to_bits(), (-2f32).to_bits()])).unwrap(), one);
    let e = refused("struct{a:u8,t:tensors,}", &st(&[("a", V::Int(1)), ("t", V::Int(0))]));
    assert_eq!((e.0, e.1, e.2.as_str(), e.3.as_str()), (Rule::TensorsWrite, 1, "Tensors", ".t"));
    let e = encode_with("tensors", &V::Tensors(EMPTY_BLOCK.to_vec()), Tree { tensor_writes: 2, ..Tree::new() });
    assert_eq!(
        e.unwrap_err(),
        Fail { rule: Rule::TensorsWrite, offset: 64, detail: String::new(), path: String::new() }
    );
    // The source's own fault comes out with its place.
    let e = enc("struct{a:u8,t:tensors,}", &st(&[("a", V::Int(1)), ("t", V::Tensors(vec![b'K'; 70]))])).unwrap_err();
    assert_eq!((e.rule.code(), e.path.as_str()), (ErrorCode::Frame, ".t"));
}

#[test]
fn a_full_buffer_is_eof_where_the_bytes_stop() {
    let ty = "struct{a:list<str>,b:opt<u64>,t:tensors,}";
    let v = st(&[
        ("a", V::List(vec![s("ab"), s("")])),
        ("b", V::Opt(Some(Box::new(V::Int(9))))),
        ("t", V::Tensors(EMPTY_BLOCK.to_vec())),
    ]);
    let whole = enc(ty, &v).unwrap();
    let schema: Schema<'_> = Schema::parse(ty).unwrap();
    let mut buf = vec![0u8; whole.len()];
    let n = encode_by_schema(schema.root(), &&v, &mut Tree::new(), &mut Encoder::new(&mut buf)).unwrap();
    assert_eq!((n, &buf[..]), (whole.len(), &whole[..]));
    for cut in 0..whole.len() {
        let mut short = vec![0u8; cut];
        let e = encode_by_schema(schema.root(), &&v, &mut Tree::new(), &mut Encoder::new(&mut short)).unwrap_err();
        assert_eq!(e.rule, Rule::ValueOutputTooSmall, "cut {cut}");
        assert!(e.offset <= cut, "cut {cut}: {e:?}");
        // What fitted is the encoding's prefix.
        assert_eq!(short[..e.offset], whole[..e.offset]);
    }
}

#[test]
fn framed_values_follow_the_frame_of_the_types_hash() {
    let ty = "dict<str,list<f32>>";
    let v = V::Dict(vec![("w".into(), V::List(vec![V::F32(f32::NAN.to_bits() | 1), V::F32((-0f32).to_bits())]))]);
    let schema: Schema<'_> = Schema::parse(ty).unwrap();
    let mut out = Vec::new();
    let n = encode_by_schema_framed(schema.root(), &&v, &mut Tree::new(), &mut out).unwrap();
    assert_eq!(n, out.len());
    assert_eq!(out[..16], frozen::frame_bytes(schema.hash()));
    assert_eq!(out[16..], enc(ty, &v).unwrap()[..]);
    let back = Reader::new().framed(true).read(&out, &schema).unwrap();
    assert_eq!(read(back), v);
    // A full frame is refused as output, not as the value.
    let mut short = [0u8; 8];
    let e = encode_by_schema_framed(schema.root(), &&v, &mut Tree::new(), &mut Encoder::new(&mut short)).unwrap_err();
    assert_eq!((e.rule, e.offset), (Rule::ValueOutputTooSmall, 0));
}

// ---------------------------------------------------------------- round trip

fn values(t: &T) -> BoxedStrategy<V> {
    let int = |lo: i128, hi: i128| (lo..=hi).prop_map(V::Int).boxed();
    match t {
        T::Scalar(k) => match k {
            Kind::Bool => any::<bool>().prop_map(V::Bool).boxed(),
            Kind::I8 => int(i8::MIN.into(), i8::MAX.into()),
            Kind::I16 => int(i16::MIN.into(), i16::MAX.into()),
            Kind::I32 => int(i32::MIN.into(), i32::MAX.into()),
            Kind::I64 | Kind::Int => int(i64::MIN.into(), i64::MAX.into()),
            Kind::U8 => int(0, u8::MAX.into()),
            Kind::U16 => int(0, u16::MAX.into()),
            Kind::U32 => int(0, u32::MAX.into()),
            Kind::U64 | Kind::Uint => int(0, u64::MAX.into()),
            Kind::F32 => any::<u32>().prop_map(V::F32).boxed(),
            Kind::F64 => any::<u64>().prop_map(V::F64).boxed(),
            Kind::Str => ".{0,6}".prop_map(V::Str).boxed(),
            _ => prop_oneof![Just(EMPTY_BLOCK.to_vec()), Just(f32_block())].prop_map(V::Tensors).boxed(),
        },
        T::List(e) => prop::collection::vec(values(e), 0..4).prop_map(V::List).boxed(),
        T::Opt(e) => prop::option::of(values(e)).prop_map(|o| V::Opt(o.map(Box::new))).boxed(),
        T::Dict(e) => prop::collection::btree_map(".{0,3}", values(e), 0..4)
            .prop_map(|m| V::Dict(m.into_iter().collect()))
            .boxed(),
        T::Struct(fields) => fields
            .iter()
            .map(values)
            .collect::<Vec<_>>()
            .prop_map(|xs| V::Struct(xs.into_iter().enumerate().map(|(i, x)| (format!("f{i}"), x)).collect()))
            .boxed(),
    }
}

fn typed_values() -> impl Strategy<Value = (T, V)> {
    types().prop_flat_map(|t| {
        let v = values(&t);
        (Just(t), v)
    })
}

/// A checked value read back into the model through the reader's API.
fn read(v: Value<'_, '_>) -> V {
    match v.kind() {
        Kind::Bool => V::Bool(v.as_bool().unwrap()),
        Kind::I8 | Kind::I16 | Kind::I32 | Kind::I64 | Kind::Int => V::Int(v.as_i64().unwrap().into()),
        Kind::U8 | Kind::U16 | Kind::U32 | Kind::U64 | Kind::Uint => V::Int(v.as_u64().unwrap().into()),
        Kind::F32 => V::F32(v.as_f32().unwrap().to_bits()),
        Kind::F64 => V::F64(v.as_f64().unwrap().to_bits()),
        Kind::Str => V::Str(v.as_str().unwrap().to_owned()),
        Kind::Tensors => V::Tensors(v.as_tensors().unwrap().block().to_vec()),
        Kind::List => V::List(v.as_list().unwrap().iter().map(read).collect()),
        Kind::Opt => V::Opt(v.as_opt().unwrap().map(|x| Box::new(read(x)))),
        Kind::Dict => V::Dict(v.as_dict().unwrap().iter().map(|(k, x)| (k.to_owned(), read(x))).collect()),
        Kind::Struct => V::Struct(v.as_struct().unwrap().fields().map(|(n, x)| (n.to_owned(), read(x))).collect()),
    }
}

proptest! {
    #![proptest_config(ProptestConfig { cases: if cfg!(miri) { 16 } else { 256 }, ..ProptestConfig::default() })]

    /// Random type, random value: encoded by the schema, the core's reader
    /// accepts the bytes and reads the same tree back; lists of numbers give
    /// the same bytes as runs; mapping and attribute structs agree.
    #[test]
    fn random_values_round_trip_through_the_reader((t, v) in typed_values()) {
        let text = t.to_string();
        let bytes = enc(&text, &v).unwrap();
        let schema: Schema<'_, 512> = Schema::parse(&text).unwrap();
        let back = Reader::new().read(&bytes, &schema).unwrap();
        prop_assert_eq!(read(back), v.clone());
        prop_assert_eq!(back.end(), bytes.len());
        prop_assert!(schema.min_size() <= bytes.len() as u64);
        prop_assert_eq!(encode_with(&text, &v, Tree { runs: true, ..Tree::new() }).unwrap(), bytes.clone());
        prop_assert_eq!(encode_with(&text, &v, Tree { listed: false, ..Tree::new() }).unwrap(), bytes.clone());
        // Into a fixed buffer of exactly the size, the same bytes.
        let mut buf = vec![0u8; bytes.len()];
        let n = encode_by_schema(schema.root(), &&v, &mut Tree::new(), &mut Encoder::new(&mut buf)).unwrap();
        prop_assert_eq!((n, buf), (bytes.len(), bytes));
    }
}

// ---------------------------------------------------------------- typed path

#[derive(kiln_derive::Kiln, Clone, Debug, PartialEq)]
struct Inner {
    flag: bool,
    label: Option<String>,
}

#[derive(kiln_derive::Kiln, Debug)]
struct Record<'a> {
    id: i64,
    small: u8,
    short: i16,
    word: u32,
    wide: Int,
    uwide: Uint,
    ratio: f64,
    half: f32,
    name: &'a str,
    blob: &'a [u8],
    scores: Vec<f32>,
    tags: BTreeMap<String, i32>,
    maybe: Option<Option<u16>>,
    inner: Inner,
    items: Vec<Inner>,
    nested: Vec<Vec<String>>,
}

/// Encode-only: `tensors` from specs, a dict from unsorted pairs.
#[derive(kiln_derive::KilnType, kiln_derive::Encode)]
struct Shipped<'a> {
    step: u32,
    weights: TensorSpecs<'a>,
    meta: DictPairs<'a, &'a str, u8>,
}

fn inner_v(i: &Inner) -> V {
    st(&[("flag", V::Bool(i.flag)), ("label", V::Opt(i.label.clone().map(|l| Box::new(V::Str(l)))))])
}

fn typed_bytes<E: Encode>(value: &E) -> Vec<u8> {
    let mut out = vec![0u8; frozen::encoded_len(value)];
    assert_eq!(frozen::encode(value, &mut out), Ok(out.len()));
    out
}

proptest! {
    #![proptest_config(ProptestConfig { cases: if cfg!(miri) { 16 } else { 256 }, ..ProptestConfig::default() })]

    /// The same values through the derived `Encode` and through the schema
    /// of its `TYPE_TEXT`: the same bytes.
    #[test]
    fn the_schema_path_writes_what_the_typed_path_writes(
        id in any::<i64>(), small in any::<u8>(), short in any::<i16>(), word in any::<u32>(),
        wide in any::<i64>(), uwide in any::<u64>(), ratio in any::<u64>(), half in any::<u32>(),
        name in ".{0,8}", blob in prop::collection::vec(any::<u8>(), 0..8),
        scores in prop::collection::vec(any::<u32>(), 0..6),
        tags in prop::collection::btree_map(".{0,4}", any::<i32>(), 0..5),
        maybe in prop::option::of(prop::option::of(any::<u16>())),
        flag in any::<bool>(), label in prop::option::of(".{0,4}"),
        n in 0usize..3,
        nested in prop::collection::vec(prop::collection::vec(".{0,3}", 0..3), 0..3),
        runs in any::<bool>(),
    ) {
        let inner = Inner { flag, label };
        let value = Record {
            id, small, short, word, wide: Int(wide), uwide: Uint(uwide), ratio: f64::from_bits(ratio),
            half: f32::from_bits(half), name: &name, blob: &blob,
            scores: scores.iter().copied().map(f32::from_bits).collect(), tags: tags.clone(), maybe,
            inner: inner.clone(), items: vec![inner.clone(); n], nested: nested.clone(),
        };
        let typed = typed_bytes(&value);
        let int = |x: i128| V::Int(x);
        let tree = st(&[
            ("id", int(id.into())), ("small", int(small.into())), ("short", int(short.into())),
            ("word", int(word.into())), ("wide", int(wide.into())), ("uwide", int(uwide.into())),
            ("ratio", V::F64(ratio)), ("half", V::F32(half)), ("name", s(&name)),
            ("blob", V::List(blob.iter().map(|b| int((*b).into())).collect())),
            ("scores", V::List(scores.iter().map(|b| V::F32(*b)).collect())),
            ("tags", V::Dict(tags.iter().map(|(k, x)| (k.clone(), int((*x).into()))).collect())),
            ("maybe", V::Opt(maybe.map(|m| Box::new(V::Opt(m.map(|x| Box::new(int(x.into())))))))),
            ("inner", inner_v(&inner)),
            ("items", V::List(vec![inner_v(&inner); n])),
            ("nested", V::List(nested.iter().map(|l| V::List(l.iter().map(|x| s(x)).collect())).collect())),
        ]);
        prop_assert_eq!(encode_with(Record::TYPE_TEXT, &tree, Tree { runs, ..Tree::new() }).unwrap(), typed);

        // Tensors from specs and a dict from unsorted pairs (the binding sorts: here, the test).
        let data: Vec<u8> = scores.iter().flat_map(|b| b.to_le_bytes()).collect();
        let shape = [scores.len() as u64];
        let specs = [TensorSpec::new(DType::F32, &shape, &data)];
        let pairs: Vec<(&str, u8)> = tags.keys().rev().map(|k| (k.as_str(), small)).collect();
        let shipped = Shipped { step: word, weights: TensorSpecs(&specs), meta: DictPairs(&pairs) };
        let typed = typed_bytes(&shipped);
        let tree = st(&[
            ("step", int(word.into())),
            ("weights", V::F32Tensor(scores.clone())),
            ("meta", V::Dict(tags.keys().map(|k| (k.clone(), int(small.into()))).collect())),
        ]);
        prop_assert_eq!(encode_with(Shipped::TYPE_TEXT, &tree, Tree::new()).unwrap(), typed);
    }
}
