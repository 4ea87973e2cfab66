//! `kiln gen-rust`: Rust structs with `#[derive(Kiln)]` for a JSON Schema,
//! the Rust counterpart of the spec's Mojo generator.
//!
//! Two flavours of the same Frozen type (same type text, same schema hash):
//!
//! | Kiln | borrowed (default) | owned (`--owned`, feature `alloc`) |
//! |---|---|---|
//! | `bool`, `i8`..`u64`, `f32`, `f64` | the same | the same |
//! | `str` | `&'a str` | `String` |
//! | `list<u8>` | `&'a [u8]` | `Vec<u8>` |
//! | `list<T>`, numeric `T` | `ListView<'a, T>` | `Vec<T>` |
//! | `list<T>`, other `T` | `Seq<'a, T>` | `Vec<T>` |
//! | `dict<str,V>` | `DictView<'a, V>` | `BTreeMap<String, V>` |
//! | `opt<T>` | `Option<T>` | `Option<T>` |
//! | `struct{..}` | a struct, `<'a>` when a field borrows | a struct |
//!
//! Struct names: the `$defs` name, else the property name (`origin` ->
//! `Origin`; array items add `Item`, dict values `Value`), else the root's
//! `title` or the file name, in UpperCamelCase; a repeat gets a number. A
//! `$defs` entry used twice is one struct. A root that is not a struct
//! becomes a `pub type` alias. A compile-time assertion pins the root's
//! schema hash to the JSON Schema's.

use std::collections::{BTreeSet, HashMap, HashSet, VecDeque};
use std::fmt::Write as _;
use std::path::PathBuf;

use clap::Args;

use crate::schema::{self, Scalar, Struct, Type};

/// Which Rust types the generated structs use.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Mode {
    /// Views borrowed from the buffer (`&'a str`, `ListView`, `Seq`, `DictView`): no allocation.
    Borrowed,
    /// `String`, `Vec`, `BTreeMap` (kiln-nostd feature `alloc`); `PartialEq`.
    Owned,
}

/// `kiln gen-rust` arguments.
#[derive(Args, Debug)]
pub struct GenRustArgs {
    /// The JSON Schema file.
    #[arg(value_name = "SCHEMA.json")]
    pub schema: PathBuf,
    /// Owned fields (`String`, `Vec`, `BTreeMap`; needs kiln-nostd feature `alloc`) instead of borrowed views.
    #[arg(long)]
    pub owned: bool,
    /// Name of the root type (default: the schema's `title`, else the file name up to its first dot).
    #[arg(long, value_name = "NAME")]
    pub name: Option<String>,
}

/// `kiln schema-to-type` arguments.
#[derive(Args, Debug)]
pub struct SchemaToTypeArgs {
    /// The JSON Schema file.
    #[arg(value_name = "SCHEMA.json")]
    pub schema: PathBuf,
    /// Print `{"type": TEXT, "hash": "0x..."}` instead of two lines.
    #[arg(long)]
    pub json: bool,
}

/// Reads and converts a schema file. `Err` holds the exit code after the
/// message was printed (2 unreadable, 1 outside the subset).
fn load(path: &std::path::Path, root: Option<&str>) -> Result<schema::Converted, u8> {
    let text = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(err) => {
            eprintln!("kiln: cannot read {}: {err}", path.display());
            return Err(crate::EXIT_ERROR);
        }
    };
    let mut converted = schema::from_str(&text, &crate::validate::root_name(path));
    if let (Some(name), Ok(schema::Converted { ty: Type::Struct(root), .. })) = (root, converted.as_mut()) {
        root.name = schema::upper_camel(name);
    }
    match converted {
        Ok(c) => {
            for w in &c.warnings {
                eprintln!("kiln: warning: {}: {w}", path.display());
            }
            Ok(c)
        }
        Err(err) => {
            eprintln!("kiln: {}: {err}", path.display());
            Err(crate::EXIT_REJECTED)
        }
    }
}

/// Runs `kiln schema-to-type`: prints the canonical type text and its hash.
pub fn run_schema_to_type(args: &SchemaToTypeArgs) -> anyhow::Result<u8> {
    let c = match load(&args.schema, None) {
        Ok(c) => c,
        Err(code) => return Ok(code),
    };
    let (text, hash) = (c.text(), c.hash());
    let out = if args.json {
        serde_json::json!({"type": text, "hash": format!("0x{hash:016x}")}).to_string() + "\n"
    } else {
        format!("{text}\n0x{hash:016x}\n")
    };
    crate::output::print(&out)?;
    Ok(crate::EXIT_OK)
}

/// Runs `kiln gen-rust`: prints the Rust module.
pub fn run_gen_rust(args: &GenRustArgs) -> anyhow::Result<u8> {
    let c = match load(&args.schema, args.name.as_deref()) {
        Ok(c) => c,
        Err(code) => return Ok(code),
    };
    let mode = if args.owned { Mode::Owned } else { Mode::Borrowed };
    let alias = args.name.clone().unwrap_or_else(|| crate::validate::root_name(&args.schema));
    let source = args.schema.file_name().and_then(|n| n.to_str()).unwrap_or("the schema");
    match generate(&c.ty, &schema::upper_camel(&alias), mode, source) {
        Ok(code) => {
            crate::output::print(&code)?;
            Ok(crate::EXIT_OK)
        }
        Err(err) => {
            eprintln!("kiln: {}: {err}", args.schema.display());
            Ok(crate::EXIT_REJECTED)
        }
    }
}

/// Keywords a field may use as a raw identifier (`r#type`).
const RAW_KEYWORDS: &[&str] = &[
    "as", "async", "await", "break", "const", "continue", "dyn", "else", "enum", "extern", "false", "fn", "for", "if",
    "impl", "in", "let", "loop", "match", "mod", "move", "mut", "pub", "ref", "return", "static", "struct", "trait",
    "true", "type", "unsafe", "use", "where", "while", "abstract", "become", "box", "do", "final", "macro", "override",
    "priv", "typeof", "unsized", "virtual", "yield", "try", "gen",
];

/// Names a field cannot have in Rust, even raw.
const NOT_FIELDS: &[&str] = &["self", "Self", "super", "crate", "_"];

/// Type names the generated code uses or imports.
const RESERVED: &[&str] = &[
    "Kiln", "KilnType", "ListView", "Seq", "DictView", "BTreeMap", "String", "Vec", "Option", "Box", "Result", "Self",
    "Some", "None", "Ok", "Err",
];

/// Generates the module for `ty`. `alias` names the root when it is not a
/// struct; `source` is quoted in the header.
pub fn generate(ty: &Type, alias: &str, mode: Mode, source: &str) -> Result<String, String> {
    let mut g = Gen {
        mode,
        taken: RESERVED.iter().map(|s| (*s).to_owned()).collect(),
        by_def: HashMap::new(),
        queue: VecDeque::new(),
        uses: BTreeSet::new(),
        items: String::new(),
    };
    let text = ty.text();
    let hash = kiln_nostd::frozen::hash_text(&text);
    let lifetime = g.borrows(ty);
    let root = match ty {
        Type::Struct(_) => g.rust_type(ty),
        other => {
            let name = g.unique(alias);
            let target = g.rust_type(other);
            let generics = if lifetime { "<'a>" } else { "" };
            let _ = writeln!(g.items, "/// The root type: `{text}`.\npub type {name}{generics} = {target};\n");
            format!("{name}{generics}")
        }
    };
    while let Some((name, s)) = g.queue.pop_front() {
        g.emit(&name, &s)?;
    }
    let static_root = root.replace("<'a>", "<'static>");

    let mut out = String::new();
    let _ = writeln!(out, "// Generated by `kiln gen-rust` from {source}. Regenerate it rather than editing it.");
    let _ = writeln!(out, "// Type text:   {text}");
    let _ = writeln!(out, "// Schema hash: 0x{hash:016x}");
    let feature = if mode == Mode::Owned { "features = [\"derive\", \"alloc\"]" } else { "features = [\"derive\"]" };
    let _ = writeln!(out, "// Needs kiln-nostd with {feature}.\n");
    if g.uses.contains("BTreeMap") {
        out.push_str("use std::collections::BTreeMap;\n\n");
    }
    let kiln: Vec<&str> = g.uses.iter().copied().filter(|u| *u != "BTreeMap").collect();
    match kiln.as_slice() {
        [one] => {
            let _ = writeln!(out, "use kiln_nostd::frozen::{one};\n");
        }
        many => {
            let _ = writeln!(out, "use kiln_nostd::frozen::{{{}}};\n", many.join(", "));
        }
    }
    out.push_str(&g.items);
    let _ = writeln!(
        out,
        "// The generated type has the JSON Schema's schema hash.\nconst _: () = assert!(<{static_root} as ::kiln_nostd::frozen::KilnType>::SCHEMA_HASH == 0x{hash:016x});"
    );
    Ok(out)
}

struct Gen {
    mode: Mode,
    taken: HashSet<String>,
    /// `$defs` name -> struct name.
    by_def: HashMap<String, String>,
    /// Structs named but not yet written.
    queue: VecDeque<(String, Struct)>,
    /// Names to import.
    uses: BTreeSet<&'static str>,
    items: String,
}

fn is_snake(name: &str) -> bool {
    !name.bytes().any(|b| b.is_ascii_uppercase())
}

impl Gen {
    /// `name`, or `name2`, `name3`... when taken.
    fn unique(&mut self, name: &str) -> String {
        let mut candidate = name.to_owned();
        let mut n = 2u32;
        while self.taken.contains(&candidate) {
            candidate = format!("{name}{n}");
            n = n.saturating_add(1);
        }
        self.taken.insert(candidate.clone());
        candidate
    }

    /// True when the Rust type of `ty` borrows from the buffer.
    fn borrows(&self, ty: &Type) -> bool {
        if self.mode == Mode::Owned {
            return false;
        }
        match ty {
            Type::Bool => false,
            Type::Scalar(s) => s.width().is_none(),
            Type::List(_) | Type::Dict(_) => true,
            Type::Opt(t) => self.borrows(t),
            Type::Struct(s) => s.fields.iter().any(|f| self.borrows(&f.ty)),
        }
    }

    /// The struct's Rust name, registering it on first sight.
    fn struct_name(&mut self, s: &Struct) -> String {
        if let Some(name) = s.def.as_ref().and_then(|d| self.by_def.get(d)) {
            return name.clone();
        }
        let name = self.unique(&s.name);
        if let Some(def) = &s.def {
            self.by_def.insert(def.clone(), name.clone());
        }
        self.queue.push_back((name.clone(), s.clone()));
        name
    }

    fn rust_type(&mut self, ty: &Type) -> String {
        let owned = self.mode == Mode::Owned;
        match ty {
            Type::Bool => "bool".to_owned(),
            Type::Scalar(Scalar::Str) => if owned { "String" } else { "&'a str" }.to_owned(),
            Type::Scalar(s) => s.name().to_owned(),
            Type::List(elem) => match (&**elem, owned) {
                (Type::Scalar(Scalar::U8), false) => "&'a [u8]".to_owned(),
                (e, true) => format!("Vec<{}>", self.rust_type(e)),
                (Type::Scalar(s), false) if s.width().is_some() => {
                    self.uses.insert("ListView");
                    format!("ListView<'a, {}>", s.name())
                }
                (e, false) => {
                    self.uses.insert("Seq");
                    format!("Seq<'a, {}>", self.rust_type(e))
                }
            },
            Type::Opt(t) => format!("Option<{}>", self.rust_type(t)),
            Type::Dict(v) => {
                let value = self.rust_type(v);
                if owned {
                    self.uses.insert("BTreeMap");
                    format!("BTreeMap<String, {value}>")
                } else {
                    self.uses.insert("DictView");
                    format!("DictView<'a, {value}>")
                }
            }
            Type::Struct(s) => {
                let name = self.struct_name(s);
                if self.borrows(ty) {
                    format!("{name}<'a>")
                } else {
                    name
                }
            }
        }
    }

    fn emit(&mut self, name: &str, s: &Struct) -> Result<(), String> {
        self.uses.insert("Kiln");
        let ty = Type::Struct(s.clone());
        let generics = if self.borrows(&ty) { "<'a>" } else { "" };
        let derives = match self.mode {
            Mode::Borrowed => "Debug, Clone, Copy, Kiln",
            Mode::Owned => "Debug, Clone, PartialEq, Kiln",
        };
        let mut body = String::new();
        for f in &s.fields {
            if NOT_FIELDS.contains(&f.name.as_str()) {
                return Err(format!("property \"{}\" cannot be a Rust field name", f.name));
            }
            let ident = if RAW_KEYWORDS.contains(&f.name.as_str()) { format!("r#{}", f.name) } else { f.name.clone() };
            let rust = self.rust_type(&f.ty);
            let _ = writeln!(body, "    pub {ident}: {rust},");
        }
        let origin = match &s.def {
            Some(def) => format!(" (`#/$defs/{}`)", schema::escape_token(def)),
            None => String::new(),
        };
        let _ = writeln!(self.items, "/// `{ty}`{origin}");
        let _ = writeln!(self.items, "#[derive({derives})]");
        if !s.fields.iter().all(|f| is_snake(&f.name)) {
            self.items.push_str("#[allow(non_snake_case)]\n");
        }
        if body.is_empty() {
            let _ = writeln!(self.items, "pub struct {name}{generics} {{}}\n");
        } else {
            let _ = writeln!(self.items, "pub struct {name}{generics} {{\n{body}}}\n");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn gen(doc: serde_json::Value, mode: Mode) -> String {
        let c = schema::from_json(&doc, "root").unwrap();
        generate(&c.ty, "Root", mode, "test.json").unwrap()
    }

    #[test]
    fn borrowed_structs_with_defs_and_nested_names() {
        let doc = json!({
            "title": "record",
            "type": "object",
            "properties": {
                "id": {"type": "integer"},
                "name": {"type": "string"},
                "scores": {"type": "array", "items": {"type": "number", "format": "float"}},
                "raw": {"type": "string", "format": "binary"},
                "tags": {"type": "object", "additionalProperties": {"type": "integer", "format": "int32"}},
                "origin": {"$ref": "#/$defs/Point"},
                "path": {"type": "array", "items": {"$ref": "#/$defs/Point"}},
                "meta": {"type": "object", "properties": {"type": {"type": "string"}, "n": {"type": "boolean"}}},
                "names": {"type": "array", "items": {"type": "string"}}
            },
            "required": ["id", "name", "scores", "raw", "tags", "origin", "path", "meta", "names"],
            "$defs": {"Point": {"type": "object", "properties": {"x": {"type": "number"}, "y": {"type": "number"}}}}
        });
        let code = gen(doc, Mode::Borrowed);
        assert!(code.contains("use kiln_nostd::frozen::{DictView, Kiln, ListView, Seq};\n"), "{code}");
        assert!(code.contains(
            "#[derive(Debug, Clone, Copy, Kiln)]\npub struct Record<'a> {\n    pub id: i64,\n    pub name: &'a str,\n    pub scores: ListView<'a, f32>,\n    pub raw: &'a [u8],\n    pub tags: DictView<'a, i32>,\n    pub origin: Point,\n    pub path: Seq<'a, Point>,\n    pub meta: Meta<'a>,\n    pub names: Seq<'a, &'a str>,\n}\n"
        ), "{code}");
        assert!(code.contains("/// `struct{x:f64,y:f64,}` (`#/$defs/Point`)\n#[derive(Debug, Clone, Copy, Kiln)]\npub struct Point {\n"), "{code}");
        assert_eq!(code.matches("pub struct Point").count(), 1);
        assert!(code.contains("pub struct Meta<'a> {\n    pub r#type: &'a str,\n    pub n: bool,\n}"), "{code}");
        assert!(code
            .contains("const _: () = assert!(<Record<'static> as ::kiln_nostd::frozen::KilnType>::SCHEMA_HASH == 0x"));
    }

    #[test]
    fn owned_structs_and_optional_fields() {
        let doc = json!({
            "type": "object",
            "properties": {
                "note": {"type": "string"},
                "tags": {"type": "object", "additionalProperties": {"type": "array", "items": {"type": "string"}}},
                "userId": {"type": "integer", "format": "uint64"}
            },
            "required": ["tags", "userId"]
        });
        let code = gen(doc, Mode::Owned);
        assert!(code.contains("use std::collections::BTreeMap;\n\nuse kiln_nostd::frozen::Kiln;\n"), "{code}");
        assert!(code.contains(
            "#[derive(Debug, Clone, PartialEq, Kiln)]\n#[allow(non_snake_case)]\npub struct Root {\n    pub note: Option<String>,\n    pub tags: BTreeMap<String, Vec<String>>,\n    pub userId: u64,\n}"
        ), "{code}");
        assert!(code.contains("// Needs kiln-nostd with features = [\"derive\", \"alloc\"]."));
    }

    #[test]
    fn a_non_struct_root_is_an_alias_and_names_do_not_collide() {
        let doc = json!({"type": "array", "items": {"type": "object", "properties": {
            "seq": {"type": "object", "properties": {"a": {"type": "boolean"}}},
            "Seq": {"type": "object", "properties": {}}
        }}});
        let code = gen(doc, Mode::Borrowed);
        assert!(code.contains("pub type Root<'a> = Seq<'a, RootItem>;"), "{code}");
        assert!(code.contains("pub struct Seq2 {\n    pub a: bool,\n}"), "{code}");
        assert!(code.contains("pub struct Seq3 {}"), "{code}");
        assert!(code.contains("assert!(<Root<'static> as ::kiln_nostd::frozen::KilnType>::SCHEMA_HASH"));
        let bad =
            schema::from_json(&json!({"type": "object", "properties": {"self": {"type": "boolean"}}}), "r").unwrap();
        assert_eq!(
            generate(&bad.ty, "R", Mode::Owned, "x").unwrap_err(),
            "property \"self\" cannot be a Rust field name"
        );
    }
}
