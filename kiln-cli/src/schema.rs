//! JSON Schema subset -> Kiln Frozen types (the spec's "Dynamic values").
//!
//! | JSON Schema | Kiln type |
//! |---|---|
//! | `{"type":"boolean"}` | `bool` |
//! | `{"type":"integer"}` (no format) | `i64` |
//! | `{"type":"integer","format":"int8"}` .. `"int64"`, `"uint8"` .. `"uint64"` | `i8` .. `i64`, `u8` .. `u64` |
//! | `{"type":"number"}`, `"format":"double"` | `f64` |
//! | `{"type":"number","format":"float"}` | `f32` |
//! | `{"type":"string"}` (any other format is an annotation) | `str` |
//! | `{"type":"string","format":"binary"}` | `list<u8>` |
//! | `{"type":"array","items":S}` | `list<S>` |
//! | `{"type":"object","properties":{..},"required":[..]}` | `struct{..}` in property order; a property not in `required` is `opt<..>`; no `required` = all present |
//! | `{"type":"object","additionalProperties":S}` (no properties) | `dict<str,S>` |
//! | `{"$ref":"#/$defs/Name"}` | the type of `$defs/Name` (cycles are an error) |
//!
//! Annotations (`title`, `description`, `$comment`, `examples`, `default`,
//! `deprecated`, `readOnly`, `writeOnly`, `$schema`, `$id`, root `$defs`)
//! are ignored. Value constraints (`minimum`, `maxLength`, `pattern`, ...)
//! are ignored with a warning: Kiln types do not carry them. Anything else
//! (`oneOf`, `enum`, a list of types, `null`, ...) is an error naming the
//! JSON pointer of the schema that uses it.

use std::fmt;

use kiln_nostd::frozen::Schema;
use serde_json::{Map, Value as Json};

/// Node capacity used when the CLI parses type text (a JSON Schema's type
/// may be larger than the library's default of 128 nodes).
pub const NODES: usize = 2048;

/// A Kiln type built from a JSON Schema, with the names the generator needs.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Type {
    /// `bool`
    Bool,
    /// `i8` `i16` `i32` `i64` `u8` `u16` `u32` `u64` `f32` `f64` `str`.
    Scalar(Scalar),
    /// `list<T>` (`list<u8>` for a binary string).
    List(Box<Type>),
    /// `opt<T>`: a property left out of `required`.
    Opt(Box<Type>),
    /// `dict<str,V>`.
    Dict(Box<Type>),
    /// `struct{...}`.
    Struct(Struct),
}

// `Type::Bool` is named, not linked: rustdoc 1.95 crashes (no resolutions for
// a doc link) on an intra-doc link in a re-export's docs in a private module.
/// The scalars a JSON Schema maps to: the core's own kinds (here only the
/// fixed-width numbers and `str`; `bool` is `Type::Bool`).
pub use kiln_nostd::frozen::Kind as Scalar;

/// A struct type: its fields and where its name comes from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Struct {
    /// A name for generated code: the `$defs` name, the property name or
    /// the root's title, in UpperCamelCase.
    pub name: String,
    /// The `$defs` entry this struct came from, if any: every `$ref` to it
    /// is the same struct.
    pub def: Option<String>,
    /// The fields in property order.
    pub fields: Vec<Field>,
}

/// One struct field.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Field {
    /// The property name (a Kiln field name).
    pub name: String,
    /// Its type (`opt<..>` when the property is not required).
    pub ty: Type,
}

impl Type {
    /// `list<u8>`.
    pub fn bytes() -> Type {
        Type::List(Box::new(Type::Scalar(Scalar::U8)))
    }

    /// The canonical type text.
    pub fn text(&self) -> String {
        self.to_string()
    }
}

impl fmt::Display for Type {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Type::Bool => f.write_str("bool"),
            Type::Scalar(s) => f.write_str(s.name()),
            Type::List(t) => write!(f, "list<{t}>"),
            Type::Opt(t) => write!(f, "opt<{t}>"),
            Type::Dict(t) => write!(f, "dict<str,{t}>"),
            Type::Struct(s) => {
                f.write_str("struct{")?;
                for field in &s.fields {
                    write!(f, "{}:{},", field.name, field.ty)?;
                }
                f.write_str("}")
            }
        }
    }
}

/// A schema this subset cannot map: the JSON pointer of the offending
/// schema (empty for the root) and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SchemaError {
    /// JSON pointer into the schema document (`""` is the root).
    pub pointer: String,
    /// What is wrong there.
    pub message: String,
}

impl SchemaError {
    fn new(pointer: &str, message: impl Into<String>) -> Self {
        SchemaError { pointer: pointer.to_owned(), message: message.into() }
    }
}

impl fmt::Display for SchemaError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let at = if self.pointer.is_empty() { "(root)" } else { &self.pointer };
        write!(f, "{at}: {}", self.message)
    }
}

impl std::error::Error for SchemaError {}

/// The result of a conversion: the type and warnings about ignored keywords.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Converted {
    /// The Kiln type.
    pub ty: Type,
    /// `POINTER: "minimum" is ignored ...` for each value constraint dropped.
    pub warnings: Vec<String>,
}

impl Converted {
    /// The canonical type text.
    pub fn text(&self) -> String {
        self.ty.text()
    }

    /// The schema hash of the type text.
    pub fn hash(&self) -> u64 {
        kiln_nostd::frozen::hash_text(&self.text())
    }
}

/// Keywords that only annotate: ignored anywhere.
const ANNOTATIONS: &[&str] = &[
    "title",
    "description",
    "$comment",
    "examples",
    "default",
    "deprecated",
    "readOnly",
    "writeOnly",
    "$schema",
    "$id",
    "contentMediaType",
    "contentEncoding",
];

/// Value constraints a Kiln type cannot carry: ignored with a warning.
const CONSTRAINTS: &[&str] = &[
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "minLength",
    "maxLength",
    "pattern",
    "minItems",
    "maxItems",
    "uniqueItems",
    "minProperties",
    "maxProperties",
];

/// Parses a JSON Schema document and converts it. `root_name` names the
/// root struct when the schema has no `title`.
pub fn from_str(text: &str, root_name: &str) -> Result<Converted, SchemaError> {
    let doc: Json = serde_json::from_str(text).map_err(|e| SchemaError::new("", format!("not JSON: {e}")))?;
    from_json(&doc, root_name)
}

/// Converts a parsed JSON Schema document. `root_name` names the root
/// struct when the schema has no `title`.
pub fn from_json(doc: &Json, root_name: &str) -> Result<Converted, SchemaError> {
    let defs = match doc.get("$defs") {
        None => None,
        Some(Json::Object(map)) => Some(map),
        Some(_) => return Err(SchemaError::new("/$defs", "\"$defs\" must be an object of schemas")),
    };
    let hint = doc.get("title").and_then(Json::as_str).map_or_else(|| upper_camel(root_name), upper_camel);
    let mut conv = Converter { defs, in_progress: Vec::new(), warnings: Vec::new() };
    let ty = conv.convert(doc, "", &hint, None)?;
    check_type(&ty)?;
    Ok(Converted { ty, warnings: conv.warnings })
}

/// The converted type must parse as Kiln type text (depth 64 at most, and
/// within the CLI's node capacity).
fn check_type(ty: &Type) -> Result<(), SchemaError> {
    let text = ty.text();
    Schema::<NODES>::parse(&text).map(|_| ()).map_err(|e| {
        SchemaError::new(
            "",
            format!(
                "the type is not valid Kiln type text: {} ({}, rule {})",
                e.rule().description(),
                e.code(),
                e.rule().id()
            ),
        )
    })
}

struct Converter<'d> {
    defs: Option<&'d Map<String, Json>>,
    /// `$defs` names being converted, outermost first (a repeat is a cycle).
    in_progress: Vec<String>,
    warnings: Vec<String>,
}

/// One JSON pointer token, escaped (`~` -> `~0`, `/` -> `~1`).
pub fn escape_token(token: &str) -> String {
    token.replace('~', "~0").replace('/', "~1")
}

fn unescape_token(token: &str) -> String {
    token.replace("~1", "/").replace("~0", "~")
}

fn child(ptr: &str, token: &str) -> String {
    format!("{ptr}/{}", escape_token(token))
}

/// True for a Kiln field name: `[A-Za-z_][A-Za-z0-9_]*`.
pub fn is_field_name(name: &str) -> bool {
    let mut bytes = name.bytes();
    bytes.next().is_some_and(|b| b.is_ascii_alphabetic() || b == b'_')
        && bytes.all(|b| b.is_ascii_alphanumeric() || b == b'_')
}

/// `user_id` / `user-id` / `userId` -> `UserId`; a leading digit gets a `T`.
pub fn upper_camel(text: &str) -> String {
    let mut out = String::new();
    for part in text.split(|c: char| !c.is_ascii_alphanumeric()).filter(|p| !p.is_empty()) {
        let mut chars = part.chars();
        if let Some(first) = chars.next() {
            out.push(first.to_ascii_uppercase());
            out.extend(chars);
        }
    }
    if out.is_empty() {
        out.push_str("Anon");
    }
    if out.starts_with(|c: char| c.is_ascii_digit()) {
        out.insert(0, 'T');
    }
    out
}

impl<'d> Converter<'d> {
    /// Converts the schema `s` found at `ptr`. `hint` names a struct it
    /// becomes; `def` is the `$defs` name when `s` is that entry.
    fn convert(&mut self, s: &Json, ptr: &str, hint: &str, def: Option<&str>) -> Result<Type, SchemaError> {
        let obj = match s {
            Json::Object(obj) => obj,
            Json::Bool(_) => return Err(SchemaError::new(ptr, "a boolean schema (true/false) is not supported")),
            _ => return Err(SchemaError::new(ptr, "a schema must be a JSON object")),
        };
        if let Some(r) = obj.get("$ref") {
            return self.reference(obj, r, ptr);
        }
        let ty = match obj.get("type") {
            Some(Json::String(t)) => t.as_str(),
            Some(Json::Array(_)) => {
                return Err(SchemaError::new(ptr, "a list of types (\"type\": [...]) is not supported"));
            }
            Some(_) => return Err(SchemaError::new(ptr, "\"type\" must be a string")),
            None => {
                let extra = obj.keys().find(|k| !ANNOTATIONS.contains(&k.as_str()) && k.as_str() != "$defs");
                return Err(match extra {
                    Some(k) if !CONSTRAINTS.contains(&k.as_str()) => {
                        SchemaError::new(ptr, format!("\"{k}\" is not supported"))
                    }
                    _ => SchemaError::new(ptr, "the schema needs a \"type\" or a \"$ref\""),
                });
            }
        };
        let allowed: &[&str] = match ty {
            "boolean" => &["type"],
            "integer" | "number" | "string" => &["type", "format"],
            "array" => &["type", "items"],
            "object" => &["type", "properties", "required", "additionalProperties"],
            "null" => return Err(SchemaError::new(ptr, "\"type\": \"null\" is not supported")),
            other => return Err(SchemaError::new(ptr, format!("unknown type \"{other}\""))),
        };
        self.check_keywords(obj, ptr, allowed)?;
        match ty {
            "boolean" => Ok(Type::Bool),
            "integer" => integer(obj, ptr),
            "number" => number(obj, ptr),
            "string" => string(obj, ptr),
            "array" => self.array(obj, ptr, hint),
            _ => self.object(obj, ptr, hint, def),
        }
    }

    /// Rejects keywords outside `allowed`, the annotations and the constraints
    /// (which are dropped with a warning).
    fn check_keywords(&mut self, obj: &Map<String, Json>, ptr: &str, allowed: &[&str]) -> Result<(), SchemaError> {
        for key in obj.keys() {
            let k = key.as_str();
            if allowed.contains(&k) || ANNOTATIONS.contains(&k) {
                continue;
            }
            if k == "$defs" {
                if ptr.is_empty() {
                    continue;
                }
                return Err(SchemaError::new(ptr, "\"$defs\" is only supported at the root"));
            }
            if CONSTRAINTS.contains(&k) {
                let at = if ptr.is_empty() { "(root)" } else { ptr };
                self.warnings.push(format!("{at}: \"{k}\" is ignored (a Kiln type does not carry value constraints)"));
                continue;
            }
            return Err(SchemaError::new(ptr, format!("\"{k}\" is not supported")));
        }
        Ok(())
    }

    fn reference(&mut self, obj: &Map<String, Json>, r: &Json, ptr: &str) -> Result<Type, SchemaError> {
        let Some(r) = r.as_str() else {
            return Err(SchemaError::new(ptr, "\"$ref\" must be a string"));
        };
        let sibling_ok = |k: &str| k == "$ref" || ANNOTATIONS.contains(&k) || (k == "$defs" && ptr.is_empty());
        if let Some(k) = obj.keys().find(|k| !sibling_ok(k)) {
            return Err(SchemaError::new(ptr, format!("\"{k}\" next to \"$ref\" is not supported")));
        }
        let Some(token) = r.strip_prefix("#/$defs/").filter(|t| !t.is_empty() && !t.contains('/')) else {
            return Err(SchemaError::new(ptr, format!("\"$ref\": \"{r}\" is not supported (only \"#/$defs/Name\")")));
        };
        let name = unescape_token(token);
        let Some(target) = self.defs.and_then(|d| d.get(&name)) else {
            return Err(SchemaError::new(
                ptr,
                format!("\"$ref\": \"{r}\" does not resolve: no \"$defs\" entry \"{name}\""),
            ));
        };
        if let Some(at) = self.in_progress.iter().position(|n| *n == name) {
            let mut chain: Vec<&str> = self.in_progress.iter().skip(at).map(String::as_str).collect();
            chain.push(&name);
            return Err(SchemaError::new(
                ptr,
                format!("\"$ref\": \"{r}\" is a cycle ({}): a Kiln type cannot contain itself", chain.join(" -> ")),
            ));
        }
        self.in_progress.push(name.clone());
        let result = self.convert(target, &child("/$defs", &name), &upper_camel(&name), Some(&name));
        self.in_progress.pop();
        result
    }

    fn array(&mut self, obj: &Map<String, Json>, ptr: &str, hint: &str) -> Result<Type, SchemaError> {
        match obj.get("items") {
            Some(items @ Json::Object(_)) => {
                let elem = self.convert(items, &child(ptr, "items"), &format!("{hint}Item"), None)?;
                Ok(Type::List(Box::new(elem)))
            }
            Some(Json::Array(_)) => {
                Err(SchemaError::new(&child(ptr, "items"), "tuple \"items\" (a list of schemas) is not supported"))
            }
            Some(_) => Err(SchemaError::new(&child(ptr, "items"), "\"items\" must be a schema object")),
            None => Err(SchemaError::new(ptr, "an array needs an \"items\" schema")),
        }
    }

    fn object(
        &mut self,
        obj: &Map<String, Json>,
        ptr: &str,
        hint: &str,
        def: Option<&str>,
    ) -> Result<Type, SchemaError> {
        let additional = obj.get("additionalProperties");
        let Some(props) = obj.get("properties") else {
            return match additional {
                Some(value @ Json::Object(_)) => {
                    if obj.contains_key("required") {
                        return Err(SchemaError::new(
                            &child(ptr, "required"),
                            "\"required\" on a dict (additionalProperties only) is not supported",
                        ));
                    }
                    let v = self.convert(value, &child(ptr, "additionalProperties"), &format!("{hint}Value"), None)?;
                    Ok(Type::Dict(Box::new(v)))
                }
                // No properties and no others: the empty struct.
                Some(Json::Bool(false)) => match obj.get("required").and_then(Json::as_array).and_then(|r| r.first()) {
                    Some(name) => Err(SchemaError::new(
                        &child(&child(ptr, "required"), "0"),
                        format!("required property {name} is not in \"properties\""),
                    )),
                    None => self.fields(&Map::new(), None, ptr, hint, def),
                },
                _ => Err(SchemaError::new(
                    ptr,
                    "an object needs \"properties\" (a struct) or an \"additionalProperties\" schema (a dict)",
                )),
            };
        };
        let Json::Object(props) = props else {
            return Err(SchemaError::new(&child(ptr, "properties"), "\"properties\" must be an object of schemas"));
        };
        match additional {
            None | Some(Json::Bool(false)) => {}
            Some(_) => return Err(SchemaError::new(
                &child(ptr, "additionalProperties"),
                "\"additionalProperties\" next to \"properties\" is not supported (a struct has only its properties)",
            )),
        }
        let required = match obj.get("required") {
            None => None,
            Some(Json::Array(list)) => {
                let mut names = Vec::new();
                for (i, item) in list.iter().enumerate() {
                    let at = child(&child(ptr, "required"), &i.to_string());
                    let Some(name) = item.as_str() else {
                        return Err(SchemaError::new(&at, "\"required\" must list property names"));
                    };
                    if !props.contains_key(name) {
                        return Err(SchemaError::new(
                            &at,
                            format!("required property \"{name}\" is not in \"properties\""),
                        ));
                    }
                    if names.contains(&name) {
                        return Err(SchemaError::new(&at, format!("\"{name}\" is listed twice in \"required\"")));
                    }
                    names.push(name);
                }
                Some(names)
            }
            Some(_) => return Err(SchemaError::new(&child(ptr, "required"), "\"required\" must be an array")),
        };
        self.fields(props, required.as_deref(), ptr, hint, def)
    }

    fn fields(
        &mut self,
        props: &Map<String, Json>,
        required: Option<&[&str]>,
        ptr: &str,
        hint: &str,
        def: Option<&str>,
    ) -> Result<Type, SchemaError> {
        let mut fields = Vec::with_capacity(props.len());
        for (name, schema) in props {
            let at = child(&child(ptr, "properties"), name);
            if !is_field_name(name) {
                return Err(SchemaError::new(
                    &at,
                    format!("property name \"{name}\" is not a Kiln field name ([A-Za-z_][A-Za-z0-9_]*)"),
                ));
            }
            let ty = self.convert(schema, &at, &upper_camel(name), None)?;
            let present = required.is_none_or(|r| r.contains(&name.as_str()));
            let ty = if present { ty } else { Type::Opt(Box::new(ty)) };
            fields.push(Field { name: name.clone(), ty });
        }
        Ok(Type::Struct(Struct { name: hint.to_owned(), def: def.map(str::to_owned), fields }))
    }
}

fn integer(obj: &Map<String, Json>, ptr: &str) -> Result<Type, SchemaError> {
    let scalar = match obj.get("format").map(|f| f.as_str()) {
        None => Scalar::I64,
        Some(Some("int8")) => Scalar::I8,
        Some(Some("int16")) => Scalar::I16,
        Some(Some("int32")) => Scalar::I32,
        Some(Some("int64")) => Scalar::I64,
        Some(Some("uint8")) => Scalar::U8,
        Some(Some("uint16")) => Scalar::U16,
        Some(Some("uint32")) => Scalar::U32,
        Some(Some("uint64")) => Scalar::U64,
        Some(other) => return Err(bad_format(ptr, other, "int8 .. int64, uint8 .. uint64")),
    };
    Ok(Type::Scalar(scalar))
}

fn number(obj: &Map<String, Json>, ptr: &str) -> Result<Type, SchemaError> {
    match obj.get("format").map(|f| f.as_str()) {
        None | Some(Some("double")) => Ok(Type::Scalar(Scalar::F64)),
        Some(Some("float")) => Ok(Type::Scalar(Scalar::F32)),
        Some(other) => Err(bad_format(ptr, other, "float, double")),
    }
}

fn string(obj: &Map<String, Json>, ptr: &str) -> Result<Type, SchemaError> {
    match obj.get("format").map(|f| f.as_str()) {
        Some(Some("binary")) => Ok(Type::bytes()),
        // date-time, uuid, email ...: annotations on a string.
        None | Some(Some(_)) => Ok(Type::Scalar(Scalar::Str)),
        Some(None) => Err(SchemaError::new(&child(ptr, "format"), "\"format\" must be a string")),
    }
}

fn bad_format(ptr: &str, format: Option<&str>, expected: &str) -> SchemaError {
    let at = child(ptr, "format");
    match format {
        Some(f) => SchemaError::new(&at, format!("format \"{f}\" is not supported here (use {expected})")),
        None => SchemaError::new(&at, "\"format\" must be a string"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn text(doc: Json) -> String {
        from_json(&doc, "Root").unwrap_or_else(|e| panic!("{doc}: {e}")).text()
    }

    fn err(doc: Json) -> String {
        from_json(&doc, "Root").expect_err("rejected").to_string()
    }

    #[test]
    fn scalars_and_formats() {
        assert_eq!(text(json!({"type": "boolean"})), "bool");
        assert_eq!(text(json!({"type": "integer"})), "i64");
        for (f, t) in [
            ("int8", "i8"),
            ("int16", "i16"),
            ("int32", "i32"),
            ("int64", "i64"),
            ("uint8", "u8"),
            ("uint16", "u16"),
            ("uint32", "u32"),
            ("uint64", "u64"),
        ] {
            assert_eq!(text(json!({"type": "integer", "format": f})), t);
        }
        assert_eq!(text(json!({"type": "number"})), "f64");
        assert_eq!(text(json!({"type": "number", "format": "double"})), "f64");
        assert_eq!(text(json!({"type": "number", "format": "float"})), "f32");
        assert_eq!(text(json!({"type": "string"})), "str");
        assert_eq!(text(json!({"type": "string", "format": "date-time"})), "str");
        assert_eq!(text(json!({"type": "string", "format": "binary"})), "list<u8>");
        assert_eq!(
            err(json!({"type": "integer", "format": "int128"})),
            "/format: format \"int128\" is not supported here (use int8 .. int64, uint8 .. uint64)"
        );
        assert_eq!(
            err(json!({"type": "number", "format": "half"})),
            "/format: format \"half\" is not supported here (use float, double)"
        );
    }

    #[test]
    fn objects_keep_property_order_and_required_makes_opt() {
        let doc = json!({
            "type": "object",
            "properties": {
                "zeta": {"type": "integer", "format": "uint32"},
                "alpha": {"type": "string"},
                "mid": {"type": "array", "items": {"type": "number", "format": "float"}}
            },
            "required": ["zeta", "mid"]
        });
        assert_eq!(text(doc), "struct{zeta:u32,alpha:opt<str>,mid:list<f32>,}");
        // No `required`: every property is present.
        let doc = json!({"type": "object", "properties": {"b": {"type": "boolean"}, "a": {"type": "boolean"}}});
        assert_eq!(text(doc), "struct{b:bool,a:bool,}");
        // `required: []`: every property is optional.
        let doc = json!({"type": "object", "properties": {"a": {"type": "boolean"}}, "required": []});
        assert_eq!(text(doc), "struct{a:opt<bool>,}");
        assert_eq!(text(json!({"type": "object", "properties": {}})), "struct{}");
        assert_eq!(text(json!({"type": "object", "additionalProperties": false})), "struct{}");
        assert_eq!(
            err(json!({"type": "object", "additionalProperties": false, "required": ["a"]})),
            "/required/0: required property \"a\" is not in \"properties\""
        );
        assert_eq!(
            text(json!({"type": "object", "properties": {"a": {"type": "boolean"}}, "additionalProperties": false})),
            "struct{a:bool,}"
        );
    }

    #[test]
    fn order_survives_parsing_text() {
        let c =
            from_str(r#"{"type":"object","properties":{"z":{"type":"boolean"},"a":{"type":"string"}}}"#, "R").unwrap();
        assert_eq!(c.text(), "struct{z:bool,a:str,}");
        assert_eq!(c.hash(), kiln_nostd::frozen::hash_text("struct{z:bool,a:str,}"));
    }

    #[test]
    fn additional_properties_only_is_a_dict() {
        let doc = json!({"type": "object", "additionalProperties": {"type": "array", "items": {"type": "integer", "format": "int32"}}});
        assert_eq!(text(doc), "dict<str,list<i32>>");
        assert_eq!(
            err(json!({"type": "object", "properties": {"a": {"type": "boolean"}}, "additionalProperties": {"type": "string"}})),
            "/additionalProperties: \"additionalProperties\" next to \"properties\" is not supported (a struct has only its properties)"
        );
        assert!(err(json!({"type": "object"})).starts_with("(root): an object needs \"properties\""));
        assert!(err(json!({"type": "object", "additionalProperties": true})).starts_with("(root): an object needs"));
    }

    #[test]
    fn refs_resolve_and_cycles_are_errors() {
        let doc = json!({
            "$schema": "https://json-schema.org/draft/2020-12/schema",
            "title": "batch record",
            "type": "object",
            "properties": {
                "origin": {"$ref": "#/$defs/Point"},
                "path": {"type": "array", "items": {"$ref": "#/$defs/Point", "description": "a vertex"}}
            },
            "$defs": {"Point": {"type": "object", "properties": {"x": {"type": "number"}, "y": {"type": "number"}}}}
        });
        let c = from_json(&doc, "Root").unwrap();
        assert_eq!(c.text(), "struct{origin:struct{x:f64,y:f64,},path:list<struct{x:f64,y:f64,}>,}");
        let Type::Struct(root) = &c.ty else { panic!("struct") };
        assert_eq!(root.name, "BatchRecord");
        let Type::Struct(origin) = &root.fields[0].ty else { panic!("struct") };
        assert_eq!((origin.name.as_str(), origin.def.as_deref()), ("Point", Some("Point")));

        let cyclic = json!({
            "$ref": "#/$defs/A",
            "$defs": {
                "A": {"type": "object", "properties": {"b": {"$ref": "#/$defs/B"}}},
                "B": {"type": "array", "items": {"$ref": "#/$defs/A"}}
            }
        });
        assert_eq!(
            err(cyclic),
            "/$defs/B/items: \"$ref\": \"#/$defs/A\" is a cycle (A -> B -> A): a Kiln type cannot contain itself"
        );
        assert_eq!(
            err(json!({"$ref": "#/$defs/Nope"})),
            "(root): \"$ref\": \"#/$defs/Nope\" does not resolve: no \"$defs\" entry \"Nope\""
        );
        assert_eq!(
            err(json!({"$ref": "other.json#/x"})),
            "(root): \"$ref\": \"other.json#/x\" is not supported (only \"#/$defs/Name\")"
        );
        assert_eq!(
            err(json!({"$ref": "#/$defs/A", "type": "object", "$defs": {"A": {"type": "boolean"}}})),
            "(root): \"type\" next to \"$ref\" is not supported"
        );
        // The same $defs entry may appear twice without being a cycle.
        let twice = json!({
            "type": "array",
            "items": {"type": "array", "items": {"$ref": "#/$defs/N"}},
            "$defs": {"N": {"type": "integer", "format": "uint8"}}
        });
        assert_eq!(text(twice), "list<list<u8>>");
        // Escaped pointer tokens.
        let escaped = json!({"$ref": "#/$defs/a~1b", "$defs": {"a/b": {"type": "boolean"}}});
        assert_eq!(text(escaped), "bool");
    }

    #[test]
    fn unsupported_constructs_name_the_pointer() {
        let doc = json!({
            "type": "object",
            "properties": {"tags": {"type": "array", "items": {"oneOf": [{"type": "string"}, {"type": "integer"}]}}}
        });
        assert_eq!(err(doc), "/properties/tags/items: \"oneOf\" is not supported");
        assert_eq!(err(json!({"type": "string", "enum": ["a"]})), "(root): \"enum\" is not supported");
        assert_eq!(
            err(json!({"type": ["string", "null"]})),
            "(root): a list of types (\"type\": [...]) is not supported"
        );
        assert_eq!(err(json!({"type": "null"})), "(root): \"type\": \"null\" is not supported");
        assert_eq!(err(json!({"type": "tuple"})), "(root): unknown type \"tuple\"");
        assert_eq!(err(json!({"description": "x"})), "(root): the schema needs a \"type\" or a \"$ref\"");
        assert_eq!(err(json!(true)), "(root): a boolean schema (true/false) is not supported");
        assert_eq!(err(json!({"type": "array"})), "(root): an array needs an \"items\" schema");
        assert_eq!(
            err(json!({"type": "array", "items": [{"type": "string"}]})),
            "/items: tuple \"items\" (a list of schemas) is not supported"
        );
        assert_eq!(
            err(json!({"type": "object", "properties": {"a-b": {"type": "string"}}})),
            "/properties/a-b: property name \"a-b\" is not a Kiln field name ([A-Za-z_][A-Za-z0-9_]*)"
        );
        assert_eq!(
            err(json!({"type": "object", "properties": {"a": {"type": "string"}}, "required": ["b"]})),
            "/required/0: required property \"b\" is not in \"properties\""
        );
        assert_eq!(
            err(json!({"type": "object", "properties": {"a/b": {"type": "string", "not": {}}}})),
            "/properties/a~1b: property name \"a/b\" is not a Kiln field name ([A-Za-z_][A-Za-z0-9_]*)"
        );
        assert_eq!(
            err(json!({"type": "object", "properties": {"a": {"type": "boolean", "$defs": {}}}})),
            "/properties/a: \"$defs\" is only supported at the root"
        );
        assert!(from_str("{", "R").unwrap_err().to_string().starts_with("(root): not JSON: "));
    }

    #[test]
    fn constraints_are_dropped_with_a_warning() {
        let c = from_json(&json!({"type": "array", "items": {"type": "string", "maxLength": 3}, "minItems": 1}), "R")
            .unwrap();
        assert_eq!(c.text(), "list<str>");
        assert_eq!(
            c.warnings,
            [
                "(root): \"minItems\" is ignored (a Kiln type does not carry value constraints)",
                "/items: \"maxLength\" is ignored (a Kiln type does not carry value constraints)"
            ]
        );
    }

    #[test]
    fn depth_above_64_is_an_error() {
        let mut doc = json!({"type": "boolean"});
        for _ in 0..65 {
            doc = json!({"type": "array", "items": doc});
        }
        assert_eq!(
            err(doc),
            "(root): the type is not valid Kiln type text: the type nests more than 64 containers (LIMIT, rule TypeDepth)"
        );
        let mut ok = json!({"type": "boolean"});
        for _ in 0..64 {
            ok = json!({"type": "array", "items": ok});
        }
        assert!(from_json(&ok, "R").is_ok());
    }

    #[test]
    fn names_are_upper_camel() {
        assert_eq!(upper_camel("user_id"), "UserId");
        assert_eq!(upper_camel("user-id"), "UserId");
        assert_eq!(upper_camel("userId"), "UserId");
        assert_eq!(upper_camel("batch record"), "BatchRecord");
        assert_eq!(upper_camel("9lives"), "T9lives");
        assert_eq!(upper_camel("__"), "Anon");
        assert!(is_field_name("_x9") && !is_field_name("9x") && !is_field_name("") && !is_field_name("a.b"));
    }
}
