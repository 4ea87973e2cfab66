//! Canonical type text: parse it into a fixed-capacity [`Schema`] (no
//! allocation; field names stay borrowed from the text), print it back, hash
//! it, and size it.
//!
//! Grammar (no spaces anywhere):
//!
//! ```text
//! type   = scalar | "list<" type ">" | "opt<" type ">" | "dict<str," type ">"
//!        | "struct{" { name ":" type "," } "}"
//! scalar = bool i8 i16 i32 i64 u8 u16 u32 u64 int uint f32 f64 str tensors
//! name   = [A-Za-z_][A-Za-z0-9_]*
//! ```

use crate::bytes::usize_from_u32;
use core::fmt;

use super::hash::hash_text;
use super::kind::{Kind, Shape, MAX_DEPTH};
use crate::error::{fail, Error, Result, Rule};

/// Node capacity of a [`Schema`] unless the caller picks another: enough
/// for the deepest legal type (64 containers and a scalar, 65 nodes) and
/// for records of a few dozen fields.
pub const DEFAULT_NODES: usize = 128;

/// One node of a parsed type, in pre-order. Field names are kept as byte
/// ranges of the text, so a node is 32 bytes and owns nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Node {
    pub shape: Shape,
    /// Field name (as a range of the text) when this node is a struct field.
    name_at: u32,
    name_len: u32,
    /// Index one past this node's subtree (its next sibling).
    end: u32,
    /// Text offset just past this node's type text.
    text_end: u32,
}

/// A parsed type: the canonical text and its nodes in pre-order.
///
/// `N` is the node capacity (one node per scalar, list, opt, dict or struct
/// in the text); more nodes than that is LIMIT ([`Rule::SchemaCapacity`]).
/// The schema is a few kilobytes on the stack and never allocates.
///
/// ```
/// use kiln_nostd::frozen::{Kind, Schema};
/// let s: Schema = Schema::parse("struct{id:i64,batch:tensors,}")?;
/// assert_eq!(s.to_string_in::<64>().as_deref(), Some("struct{id:i64,batch:tensors,}"));
/// assert_eq!(s.hash(), 0xe58aadc7552f0d82);
/// assert_eq!(s.min_size(), 8 + 64);
/// let batch = s.root().field("batch").expect("declared");
/// assert_eq!(batch.kind(), Kind::Tensors);
///
/// let err = Schema::<16>::parse("struct{id:i64}").unwrap_err();
/// assert_eq!((err.code().as_str(), err.offset()), ("TYPE", 13)); // `,` expected at byte 13
/// # Ok::<(), kiln_nostd::Error>(())
/// ```
#[derive(Clone, Debug)]
pub struct Schema<'t, const N: usize = DEFAULT_NODES> {
    text: &'t str,
    nodes: heapless::Vec<Node, N>,
}

impl<'t, const N: usize> Schema<'t, N> {
    /// Parses canonical type text. Malformed text is TYPE with the byte
    /// offset in the text; nesting deeper than 64 containers, or more nodes
    /// than `N`, is LIMIT.
    pub fn parse(text: &'t str) -> Result<Self> {
        if u32::try_from(text.len()).is_err() {
            return fail(Rule::SchemaCapacity, 0);
        }
        let mut p = TextParser { text: text.as_bytes(), pos: 0, nodes: heapless::Vec::new() };
        p.node(0, (0, 0))?;
        if p.pos != text.len() {
            return fail(Rule::TypeTextSyntax, p.pos);
        }
        Ok(Schema { text, nodes: p.nodes })
    }

    /// The text the schema was parsed from (canonical, since only canonical
    /// text parses).
    pub fn text(&self) -> &'t str {
        self.text
    }

    /// The whole type.
    pub fn root(&self) -> TypeRef<'_> {
        TypeRef { text: self.text, nodes: &self.nodes, index: 0 }
    }

    /// The schema hash of the type.
    pub fn hash(&self) -> u64 {
        self.root().hash()
    }

    /// Minimum wire size of one value (saturating).
    pub fn min_size(&self) -> u64 {
        self.root().min_size()
    }

    /// Containers nested in the type (1 to 64; a scalar is 0).
    pub fn depth(&self) -> u32 {
        self.root().depth()
    }

    /// Number of nodes used.
    pub fn node_count(&self) -> usize {
        self.nodes.len()
    }

    /// The canonical text in a fixed-capacity string (printed from the
    /// nodes), or `None` when it is longer than `L`.
    #[must_use]
    pub fn to_string_in<const L: usize>(&self) -> Option<heapless::String<L>> {
        self.root().to_string_in()
    }
}

impl<const N: usize> fmt::Display for Schema<'_, N> {
    /// Prints the canonical text from the parsed nodes.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        fmt::Display::fmt(&self.root(), f)
    }
}

/// One type inside a parsed [`Schema`]: the root, a field, an element.
///
/// ```
/// use kiln_nostd::frozen::{Kind, Schema};
/// let s: Schema = Schema::parse("dict<str,list<opt<f64>>>")?;
/// let v = s.root().elem().expect("dict value");
/// assert_eq!(v.kind(), Kind::List);
/// assert_eq!(v.to_string_in::<32>().as_deref(), Some("list<opt<f64>>"));
/// # Ok::<(), kiln_nostd::Error>(())
/// ```
#[derive(Clone, Copy, Debug)]
pub struct TypeRef<'s> {
    text: &'s str,
    nodes: &'s [Node],
    index: usize,
}

impl<'s> TypeRef<'s> {
    #[inline]
    fn node(&self) -> &'s Node {
        const MISSING: &Node = &Node { shape: Shape::scalar(Kind::U8), name_at: 0, name_len: 0, end: 0, text_end: 0 };
        // Fallback not taken: indexes come from the parsed node array: never MISSING.
        self.nodes.get(self.index).unwrap_or(MISSING)
    }

    #[inline]
    pub(crate) fn shape(&self) -> Shape {
        self.node().shape
    }

    /// The node at `index` of the same schema.
    fn node_ref(&self, index: usize) -> TypeRef<'s> {
        TypeRef { index, ..*self }
    }

    /// The kind.
    #[inline]
    pub fn kind(&self) -> Kind {
        self.node().shape.kind
    }

    /// Minimum wire size (saturating).
    pub fn min_size(&self) -> u64 {
        self.shape().min
    }

    /// Exact wire size when every value of the type has it.
    #[inline]
    #[must_use]
    pub fn width(&self) -> Option<u32> {
        self.node().shape.width
    }

    /// Containers nested at and below this type.
    pub fn depth(&self) -> u32 {
        self.shape().depth
    }

    /// The field name when this type is a struct field, else `""`.
    pub fn name(&self) -> &'s str {
        let n = self.node();
        let start = usize_from_u32(n.name_at);
        let len = usize_from_u32(n.name_len);
        // Fallback not taken: names were recorded inside the type text.
        self.text.get(start..start.saturating_add(len)).unwrap_or("")
    }

    /// The element of a list or opt, or the value type of a dict.
    #[inline]
    #[must_use]
    pub fn elem(&self) -> Option<TypeRef<'s>> {
        matches!(self.kind(), Kind::List | Kind::Opt | Kind::Dict).then(|| self.node_ref(self.index.saturating_add(1)))
    }

    /// The fields of a struct in declaration order (empty otherwise).
    pub fn fields(&self) -> Fields<'s> {
        let end = if self.kind() == Kind::Struct { self.end() } else { self.index.saturating_add(1) };
        Fields { ty: *self, next: self.index.saturating_add(1), end }
    }

    /// The field called `name` of a struct.
    #[must_use]
    pub fn field(&self, name: &str) -> Option<TypeRef<'s>> {
        self.fields().find(|f| f.name() == name)
    }

    #[inline]
    fn end(&self) -> usize {
        usize_from_u32(self.node().end)
    }

    /// The schema hash of this type.
    pub fn hash(&self) -> u64 {
        // Only canonical text parses, and a subtree's text is a slice of it.
        hash_text(self.text_slice())
    }

    /// This type's canonical text, as a slice of the parsed text.
    pub fn text_slice(&self) -> &'s str {
        let start = self.text_start();
        // Fallback not taken: node text spans were recorded inside the type text.
        self.text.get(start..start.saturating_add(self.text_len())).unwrap_or("")
    }

    fn text_start(&self) -> usize {
        self.node().text_at()
    }

    /// Length of the canonical text of this type (recorded by the parser,
    /// so no formatting machinery is linked on devices).
    pub fn text_len(&self) -> usize {
        usize_from_u32(self.node().text_end).saturating_sub(self.text_start())
    }

    /// The canonical text in a fixed-capacity string, or `None` when longer than `L`.
    #[must_use]
    pub fn to_string_in<const L: usize>(&self) -> Option<heapless::String<L>> {
        let mut s = heapless::String::new();
        fmt::write(&mut s, format_args!("{self}")).ok()?;
        Some(s)
    }
}

impl fmt::Display for TypeRef<'_> {
    /// The canonical text, printed from the nodes.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.kind() {
            Kind::List => write_wrapped(f, "list<", self.elem()),
            Kind::Opt => write_wrapped(f, "opt<", self.elem()),
            Kind::Dict => write_wrapped(f, "dict<str,", self.elem()),
            Kind::Struct => {
                f.write_str("struct{")?;
                for field in self.fields() {
                    write!(f, "{}:{field},", field.name())?;
                }
                f.write_str("}")
            }
            k => f.write_str(k.name()),
        }
    }
}

fn write_wrapped(f: &mut fmt::Formatter<'_>, open: &str, elem: Option<TypeRef<'_>>) -> fmt::Result {
    f.write_str(open)?;
    if let Some(e) = elem {
        fmt::Display::fmt(&e, f)?;
    }
    f.write_str(">")
}

/// The fields of a struct type, in declaration order.
#[derive(Clone, Debug)]
pub struct Fields<'s> {
    ty: TypeRef<'s>,
    next: usize,
    end: usize,
}

impl<'s> Iterator for Fields<'s> {
    type Item = TypeRef<'s>;
    #[inline]
    fn next(&mut self) -> Option<TypeRef<'s>> {
        if self.next >= self.end {
            return None;
        }
        let field = self.ty.node_ref(self.next);
        self.next = field.end().max(self.next.saturating_add(1));
        Some(field)
    }
}

impl Node {
    /// Where this node's type text starts: just past its field name and
    /// `:` for a field, else the recorded offset.
    fn text_at(&self) -> usize {
        let at = usize_from_u32(self.name_at);
        match self.name_len {
            0 => at,
            len => at.saturating_add(usize_from_u32(len)).saturating_add(1),
        }
    }
}

/// Recursive-descent parser; recursion depth is bounded by [`MAX_DEPTH`].
struct TextParser<'t, const N: usize> {
    text: &'t [u8],
    pos: usize,
    nodes: heapless::Vec<Node, N>,
}

impl<const N: usize> TextParser<'_, N> {
    fn take(&mut self, lit: &str) -> bool {
        let end = self.pos.saturating_add(lit.len());
        if self.text.get(self.pos..end) == Some(lit.as_bytes()) {
            self.pos = end;
            return true;
        }
        false
    }

    fn expect(&mut self, lit: &str) -> Result<()> {
        if self.take(lit) {
            Ok(())
        } else {
            fail(Rule::TypeTextSyntax, self.pos)
        }
    }

    /// The identifier at `pos` (`[A-Za-z_][A-Za-z0-9_]*`), not consumed.
    fn ident(&self) -> &[u8] {
        // Fallback not taken: pos never passes the end of the text.
        let rest = self.text.get(self.pos..).unwrap_or(&[]);
        let starts = rest.first().is_some_and(|b| b.is_ascii_alphabetic() || *b == b'_');
        let len = if starts { rest.iter().take_while(|b| b.is_ascii_alphanumeric() || **b == b'_').count() } else { 0 };
        // Fallback not taken: len counts bytes of rest: in range.
        rest.get(..len).unwrap_or(&[])
    }

    fn push(&mut self, shape: Shape, name: (u32, u32), at: usize) -> Result<usize> {
        let index = self.nodes.len();
        // Fallback not taken: parse refused text of 4 GiB or more.
        let text_at = if name.1 == 0 { u32::try_from(at).unwrap_or(u32::MAX) } else { name.0 };
        let node = Node { shape, name_at: text_at, name_len: name.1, end: 0, text_end: 0 };
        self.nodes.push(node).map_err(|_| Error::new(Rule::SchemaCapacity, at))?;
        Ok(index)
    }

    /// Parses one type at `pos`, `depth` containers deep. `name` is the
    /// field name's (offset, length) when the type is a struct field.
    fn node(&mut self, depth: u32, name: (u32, u32)) -> Result<usize> {
        let start = self.pos;
        for (lit, kind) in [("list<", Kind::List), ("opt<", Kind::Opt), ("dict<", Kind::Dict)] {
            if self.take(lit) {
                return self.wrapper(kind, depth, name, start);
            }
        }
        if self.take("struct{") {
            return self.structure(depth, name, start);
        }
        let word = self.ident();
        let kind = core::str::from_utf8(word).ok().and_then(Kind::from_name);
        match kind {
            Some(k) => {
                self.pos = self.pos.saturating_add(word.len());
                let index = self.push(Shape::scalar(k), name, start)?;
                self.close(index, Shape::scalar(k));
                Ok(index)
            }
            None => fail(Rule::TypeTextSyntax, start),
        }
    }

    fn open(&self, depth: u32, start: usize) -> Result<()> {
        if depth >= MAX_DEPTH {
            return fail(Rule::TypeDepth, start);
        }
        Ok(())
    }

    fn wrapper(&mut self, kind: Kind, depth: u32, name: (u32, u32), start: usize) -> Result<usize> {
        self.open(depth, start)?;
        let index = self.push(Shape::scalar(kind), name, start)?;
        if kind == Kind::Dict {
            self.expect("str,")?;
        }
        let child = self.node(depth.saturating_add(1), (0, 0))?;
        self.expect(">")?;
        let child_shape = self.nodes.get(child).map_or(Shape::scalar(Kind::U8), |n| n.shape);
        self.close(index, Shape::wrap(kind, &child_shape));
        Ok(index)
    }

    fn structure(&mut self, depth: u32, name: (u32, u32), start: usize) -> Result<usize> {
        self.open(depth, start)?;
        let index = self.push(Shape::empty_struct(), name, start)?;
        let mut shape = Shape::empty_struct();
        while !self.take("}") {
            let field = self.ident();
            if field.is_empty() {
                return fail(Rule::TypeTextSyntax, self.pos);
            }
            // Fallback not taken: parse refused text of 4 GiB or more.
            let field_name = (u32::try_from(self.pos).unwrap_or(u32::MAX), u32::try_from(field.len()).unwrap_or(0));
            self.check_unique(index, field)?;
            self.pos = self.pos.saturating_add(field.len());
            self.expect(":")?;
            let child = self.node(depth.saturating_add(1), field_name)?;
            self.expect(",")?;
            let child_shape = self.nodes.get(child).map_or(Shape::scalar(Kind::U8), |n| n.shape);
            shape = shape.add_field(&child_shape);
        }
        self.close(index, shape);
        Ok(index)
    }

    /// Rejects a field name that an earlier field of the struct at `index` has.
    fn check_unique(&self, index: usize, name: &[u8]) -> Result<()> {
        let mut i = index.saturating_add(1);
        while let Some(n) = self.nodes.get(i) {
            let at = usize_from_u32(n.name_at);
            let len = usize_from_u32(n.name_len);
            if self.text.get(at..at.saturating_add(len)) == Some(name) {
                return fail(Rule::DuplicateField, self.pos);
            }
            i = usize_from_u32(n.end).max(i.saturating_add(1));
        }
        Ok(())
    }

    /// Records a finished node's shape, subtree end and text end (the
    /// parser stands just past the node's text).
    fn close(&mut self, index: usize, shape: Shape) {
        // Fallback not taken: parse refused text of 4 GiB or more, and each node takes some of it.
        let end = u32::try_from(self.nodes.len()).unwrap_or(u32::MAX);
        let text_end = u32::try_from(self.pos).unwrap_or(u32::MAX);
        if let Some(n) = self.nodes.get_mut(index) {
            n.shape = shape;
            n.end = end;
            n.text_end = text_end;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ErrorCode;

    fn err(text: &str) -> (ErrorCode, usize, Rule) {
        let e = Schema::<256>::parse(text).unwrap_err();
        (e.code(), e.offset(), e.rule())
    }

    #[test]
    fn canonical_text_round_trips_through_the_nodes() {
        for text in [
            "bool",
            "i8",
            "uint",
            "tensors",
            "list<u8>",
            "list<list<u8>>",
            "list<opt<str>>",
            "opt<opt<str>>",
            "dict<str,f64>",
            "dict<str,list<f64>>",
            "struct{}",
            "struct{a:struct{},b:opt<int>,}",
            "struct{id:i64,batch:tensors,}",
            "struct{list:i8,struct:u8,_x9:dict<str,struct{q:bool,}>,}",
        ] {
            let s: Schema<'_> = Schema::parse(text).unwrap();
            assert_eq!(s.to_string_in::<128>().as_deref(), Some(text));
            assert_eq!(s.hash(), hash_text(text), "{text}");
            assert_eq!(s.root().text_slice(), text);
            // Every subtree's recorded text span equals its printed text.
            fn walk(t: TypeRef<'_>) {
                assert_eq!(t.text_slice(), t.to_string_in::<128>().unwrap().as_str());
                t.elem().into_iter().chain(t.fields()).for_each(walk);
            }
            walk(s.root());
        }
    }

    #[test]
    fn malformed_text_is_type_at_the_byte() {
        assert_eq!(err("struct{a:i8}"), (ErrorCode::Type, 11, Rule::TypeTextSyntax)); // ',' missing
        assert_eq!(err("struct{a:i8,"), (ErrorCode::Type, 12, Rule::TypeTextSyntax));
        assert_eq!(err("list<u8"), (ErrorCode::Type, 7, Rule::TypeTextSyntax));
        assert_eq!(err("dict<i8,u8>"), (ErrorCode::Type, 5, Rule::TypeTextSyntax)); // keys are str
        assert_eq!(err("u128"), (ErrorCode::Type, 0, Rule::TypeTextSyntax));
        assert_eq!(err("struct{ a:i8,}"), (ErrorCode::Type, 7, Rule::TypeTextSyntax)); // no spaces
        assert_eq!(err("opt<>"), (ErrorCode::Type, 4, Rule::TypeTextSyntax));
        assert_eq!(err("struct{1a:i8,}"), (ErrorCode::Type, 7, Rule::TypeTextSyntax));
        assert_eq!(err("bool "), (ErrorCode::Type, 4, Rule::TypeTextSyntax)); // trailing text
        assert_eq!(err("list <u8>"), (ErrorCode::Type, 0, Rule::TypeTextSyntax));
        assert_eq!(err(""), (ErrorCode::Type, 0, Rule::TypeTextSyntax));
        assert_eq!(err("struct{a:i8,a:u8,}"), (ErrorCode::Type, 12, Rule::DuplicateField));
    }

    #[test]
    fn depth_64_parses_and_65_is_limit() {
        let mut deep = heapless::String::<512>::new();
        for _ in 0..64 {
            deep.push_str("list<").unwrap();
        }
        deep.push_str("u8").unwrap();
        for _ in 0..64 {
            deep.push('>').unwrap();
        }
        let s: Schema<'_> = Schema::parse(&deep).unwrap();
        assert_eq!(s.depth(), 64);
        let mut deeper = heapless::String::<512>::new();
        deeper.push_str("opt<").unwrap();
        deeper.push_str(&deep).unwrap();
        deeper.push('>').unwrap();
        let e = Schema::<128>::parse(&deeper).unwrap_err();
        assert_eq!((e.code(), e.rule(), e.offset()), (ErrorCode::Limit, Rule::TypeDepth, 4 + 63 * 5)); // the 65th container
                                                                                                       // struct levels count too
        let mut st = heapless::String::<1024>::new();
        for _ in 0..65 {
            st.push_str("struct{a:").unwrap();
        }
        assert_eq!(Schema::<128>::parse(&st).unwrap_err().rule(), Rule::TypeDepth);
    }

    #[test]
    fn capacity_is_limit() {
        let e = Schema::<2>::parse("struct{a:u8,b:u8,}").unwrap_err();
        assert_eq!((e.code(), e.rule(), e.offset()), (ErrorCode::Limit, Rule::SchemaCapacity, 14));
    }

    #[test]
    fn minimum_sizes_follow_the_table() {
        let min = |t: &str| Schema::<64>::parse(t).unwrap().min_size();
        assert_eq!(min("bool"), 1);
        assert_eq!(min("u8"), 1);
        assert_eq!(min("i16"), 2);
        assert_eq!(min("f32"), 4);
        assert_eq!(min("uint"), 8);
        assert_eq!(min("str"), 4);
        assert_eq!(min("list<u8>"), 4);
        assert_eq!(min("list<tensors>"), 4);
        assert_eq!(min("opt<tensors>"), 1);
        assert_eq!(min("dict<str,u64>"), 4);
        assert_eq!(min("tensors"), 64);
        assert_eq!(min("struct{}"), 0);
        assert_eq!(min("struct{id:u32,name:str,}"), 8);
        assert_eq!(min("struct{a:tensors,b:struct{c:opt<i8>,d:f64,},}"), 64 + 1 + 8);
    }

    #[test]
    fn type_refs_walk_the_tree() {
        let s: Schema<'_> = Schema::parse("struct{id:i64,tags:dict<str,list<f32>>,}").unwrap();
        let names: heapless::Vec<&str, 4> = s.root().fields().map(|f| f.name()).collect();
        assert_eq!(names.as_slice(), ["id", "tags"]);
        let tags = s.root().field("tags").unwrap();
        assert_eq!(tags.text_slice(), "dict<str,list<f32>>");
        assert_eq!(tags.hash(), hash_text("dict<str,list<f32>>"));
        assert_eq!(tags.elem().unwrap().elem().unwrap().kind(), Kind::F32);
        assert!(s.root().field("nope").is_none());
        assert_eq!(s.node_count(), 5);
    }
}
