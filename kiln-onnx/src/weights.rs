//! The weights of an ONNX model, wherever the export put them (rule R1):
//! the main graph's initializers, the initializers of subgraphs (`If`,
//! `Loop`, `Scan` bodies), and the values of `Constant` nodes of
//! [`INLINE_LIMIT`](crate::INLINE_LIMIT) bytes or more. [`weights`] lists
//! them for the converter's reader; [`lift`] rewrites a graph so that each
//! one is an initializer (of the graph it is in), which the graph written
//! then points into the Kiln file by reference. Both
//! take the same predicate ([`constant_weight`]), so the tensors the Kiln
//! file holds are the ones the rewritten graph points at.

use crate::proto::tensor_shape_proto::{dimension, Dimension};
use crate::proto::type_proto::{Tensor, Value};
use crate::proto::{GraphProto, ModelProto, NodeProto, TensorProto, TensorShapeProto, TypeProto, ValueInfoProto};
use crate::rule::{data_read, place, DataRead, Place};

/// Where a weight is in the model.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Origin {
    /// An initializer of the main graph.
    Initializer,
    /// An initializer of a subgraph held by node `node` (its name, or its op type).
    Subgraph {
        /// The node holding the subgraph.
        node: String,
    },
    /// The `value` of `Constant` node `node`; the tensor's name is the node's output.
    Constant {
        /// The Constant node.
        node: String,
    },
}

/// One weight: its name in the model (and in the Kiln file), its tensor and where it is.
#[derive(Clone, Debug)]
pub struct Weight<'m> {
    /// The initializer's name, or the Constant node's output.
    pub name: &'m str,
    /// The tensor (for a Constant, its `value`; that tensor's own `name` is not used).
    pub tensor: &'m TensorProto,
    /// Where it is.
    pub origin: Origin,
}

/// The tensor of a `Constant` node that is a weight: the node is a
/// standard-domain `Constant` with one output and a `value` tensor that
/// rule R1 puts in the Kiln file (`read`), and its output is not one of
/// `graph`'s outputs (a graph output must stay a node's output). Anything
/// else (`value_float`, `sparse_value`, a value read as data or of a type
/// Kiln cannot hold) stays a node.
pub fn constant_weight<'n>(node: &'n NodeProto, graph: &GraphProto, read: &DataRead) -> Option<&'n TensorProto> {
    let is_output = |name: &str| graph.output.iter().any(|o| o.name() == name);
    is_constant_weight(node, &is_output, read).then(|| node.attribute.first()?.t.as_ref()).flatten()
}

/// [`constant_weight`]'s test, with the graph's outputs as a predicate.
fn is_constant_weight(node: &NodeProto, is_output: &dyn Fn(&str) -> bool, read: &DataRead) -> bool {
    let standard = matches!(node.domain(), "" | "ai.onnx");
    if node.op_type() != "Constant" || !standard || node.output.len() != 1 || node.attribute.len() != 1 {
        return false;
    }
    let (Some(out), Some(attr)) = (node.output.first(), node.attribute.first()) else { return false };
    let Some(t) = attr.t.as_ref().filter(|_| attr.name() == "value") else { return false };
    !out.is_empty() && !is_output(out) && place(read, out, t.data_type(), &t.dims) == Place::Kiln
}

/// Calls `f` on every weight of `model` as [`weights`] lists them, in the
/// same order, with the tensor mutable: the converter's reader takes each
/// one's typed fields (`float_data`, ...) out once it has its bytes, so the
/// decoded model and the converted bytes are never both whole in memory.
pub fn each_weight_mut(model: &mut ModelProto, f: &mut dyn FnMut(&str, Origin, &mut TensorProto)) {
    let read = data_read(model);
    if let Some(g) = model.graph.as_mut() {
        walk_mut(g, None, &read, f);
    }
}

fn walk_mut(
    graph: &mut GraphProto,
    holder: Option<&str>,
    read: &DataRead,
    f: &mut dyn FnMut(&str, Origin, &mut TensorProto),
) {
    for t in &mut graph.initializer {
        let origin = holder.map_or(Origin::Initializer, |n| Origin::Subgraph { node: n.to_string() });
        let name = t.name().to_string();
        f(&name, origin, t);
    }
    let outputs: std::collections::HashSet<String> = graph.output.iter().map(|o| o.name().to_string()).collect();
    let is_output = |name: &str| outputs.contains(name);
    for node in &mut graph.node {
        let label = node_label(node);
        if is_constant_weight(node, &is_output, read) {
            let name = node.output.first().cloned().unwrap_or_default();
            if let Some(t) = node.attribute.first_mut().and_then(|a| a.t.as_mut()) {
                f(&name, Origin::Constant { node: label.clone() }, t);
            }
        }
        for attr in &mut node.attribute {
            for sub in attr.g.iter_mut().chain(attr.graphs.iter_mut()) {
                walk_mut(sub, Some(&label), read, f);
            }
        }
    }
}

fn node_label(node: &NodeProto) -> String {
    if node.name().is_empty() {
        format!("({})", node.op_type())
    } else {
        node.name().to_string()
    }
}

/// Every weight of `model`'s graph in rule R3's order: the graph's
/// initializers, then for each node in order its Constant value (when a
/// weight) and each subgraph of its attributes (`g`, then `graphs`),
/// pre-order. Initializers are listed whatever their type and size (the Kiln
/// file holds every initializer); Constants only when [`constant_weight`]
/// says so.
pub fn weights(model: &ModelProto) -> Vec<Weight<'_>> {
    let read = data_read(model);
    let mut out = Vec::new();
    if let Some(g) = &model.graph {
        walk(g, None, &read, &mut out);
    }
    out
}

fn walk<'m>(graph: &'m GraphProto, holder: Option<&str>, read: &DataRead, out: &mut Vec<Weight<'m>>) {
    for t in &graph.initializer {
        let origin = holder.map_or(Origin::Initializer, |n| Origin::Subgraph { node: n.to_string() });
        out.push(Weight { name: t.name(), tensor: t, origin });
    }
    for node in &graph.node {
        if let (Some(t), Some(name)) = (constant_weight(node, graph, read), node.output.first()) {
            out.push(Weight { name, tensor: t, origin: Origin::Constant { node: node_label(node) } });
        }
        let label = node_label(node);
        for attr in &node.attribute {
            for sub in attr.g.iter().chain(attr.graphs.iter()) {
                walk(sub, Some(&label), read, out);
            }
        }
    }
}

/// Rewrites `model` for the graph `--onnx-graph` writes: each Constant
/// weight becomes an initializer of its output's name in the graph it is in
/// (the node removed), as ONNX Runtime itself turns Constants into
/// initializers. Subgraph initializers stay in their subgraph: moved to the
/// main graph they would be outer-scope values there, which ONNX Runtime's
/// kernels do not pre-pack as constants, and the results would differ in
/// the last bits (seen on an LSTM in an `If` branch). For IR versions before
/// 4, which want every initializer of the main graph among its inputs, each
/// Constant lifted there is added to them too. Returns how many were lifted.
pub fn lift(model: &mut ModelProto) -> usize {
    let old_ir = model.ir_version() < 4;
    let read = data_read(model);
    let Some(graph) = model.graph.as_mut() else { return 0 };
    lift_in(graph, old_ir, &read)
}

fn lift_in(graph: &mut GraphProto, with_inputs: bool, read: &DataRead) -> usize {
    let nodes = std::mem::take(&mut graph.node);
    let mut kept = Vec::with_capacity(nodes.len());
    let mut count = 0;
    for mut node in nodes {
        if let (Some(t), Some(out)) = (constant_weight(&node, graph, read), node.output.first()) {
            let mut t = t.clone();
            t.name = Some(out.clone());
            if with_inputs {
                graph.input.push(input_of(&t));
            }
            graph.initializer.push(t);
            count += 1;
            continue;
        }
        for attr in &mut node.attribute {
            for sub in attr.g.iter_mut().chain(attr.graphs.iter_mut()) {
                count += lift_in(sub, false, read);
            }
        }
        kept.push(node);
    }
    graph.node = kept;
    count
}

/// A graph input declaring tensor `t` (its type and dims), for IR < 4.
fn input_of(t: &TensorProto) -> ValueInfoProto {
    let dim = t.dims.iter().map(|&d| Dimension { denotation: None, value: Some(dimension::Value::DimValue(d)) });
    let tensor = Tensor { elem_type: t.data_type, shape: Some(TensorShapeProto { dim: dim.collect() }) };
    ValueInfoProto {
        name: t.name.clone(),
        r#type: Some(TypeProto { denotation: None, value: Some(Value::TensorType(tensor)) }),
        ..ValueInfoProto::default()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::proto::AttributeProto;

    fn tensor(name: &str, code: i32, dims: &[i64]) -> TensorProto {
        TensorProto { name: Some(name.into()), data_type: Some(code), dims: dims.to_vec(), ..TensorProto::default() }
    }

    fn constant(out: &str, t: TensorProto) -> NodeProto {
        NodeProto {
            op_type: Some("Constant".into()),
            output: vec![out.into()],
            attribute: vec![AttributeProto { name: Some("value".into()), t: Some(t), ..AttributeProto::default() }],
            ..NodeProto::default()
        }
    }

    fn op(op: &str, inputs: &[&str]) -> NodeProto {
        NodeProto {
            op_type: Some(op.into()),
            input: inputs.iter().map(|s| (*s).to_string()).collect(),
            ..NodeProto::default()
        }
    }

    fn if_node(then: GraphProto) -> NodeProto {
        NodeProto {
            op_type: Some("If".into()),
            name: Some("branch".into()),
            attribute: vec![AttributeProto {
                name: Some("then_branch".into()),
                g: Some(then),
                ..AttributeProto::default()
            }],
            ..NodeProto::default()
        }
    }

    fn model() -> ModelProto {
        let sub = GraphProto {
            initializer: vec![tensor("sub.big", 1, &[300]), tensor("sub.small", 1, &[3])],
            node: vec![constant("sub.c", tensor("", 1, &[256])), op("Mul", &["x", "sub.c"])],
            ..GraphProto::default()
        };
        let main = GraphProto {
            initializer: vec![tensor("w", 1, &[512]), tensor("shape", 7, &[2])],
            node: vec![
                constant("c.big", tensor("ignored", 1, &[16, 16])),
                constant("c.shape", tensor("", 7, &[2])),
                constant("c.scale", tensor("", 1, &[])),
                op("Reshape", &["w", "c.shape"]),
                if_node(sub),
            ],
            ..GraphProto::default()
        };
        ModelProto { ir_version: Some(8), graph: Some(main), ..ModelProto::default() }
    }

    #[test]
    fn weights_are_every_initializer_and_every_constant_not_read_as_data_in_walk_order() {
        let m = model();
        let names: Vec<&str> = weights(&m).iter().map(|w| w.name).collect();
        assert_eq!(names, ["w", "shape", "c.big", "c.scale", "sub.big", "sub.small", "sub.c"]);
    }

    #[test]
    fn lift_turns_constant_weights_into_initializers_of_their_own_graph() {
        let mut m = model();
        assert_eq!(lift(&mut m), 3);
        let g = m.graph.as_ref().unwrap();
        let names: Vec<&str> = g.initializer.iter().map(TensorProto::name).collect();
        assert_eq!(names, ["w", "shape", "c.big", "c.scale"]);
        let ops: Vec<&str> = g.node.iter().map(NodeProto::op_type).collect();
        assert_eq!(ops, ["Constant", "Reshape", "If"], "the shape a Reshape reads stays a Constant");
        let sub = g.node[2].attribute[0].g.as_ref().unwrap();
        let sub_names: Vec<&str> = sub.initializer.iter().map(TensorProto::name).collect();
        assert_eq!(sub_names, ["sub.big", "sub.small", "sub.c"], "subgraph initializers stay where they are");
        assert_eq!(sub.node.len(), 1);
        assert!(g.input.is_empty(), "IR 8 needs no inputs for initializers");
        // The same tensors as the reader's list, in another order.
        let mut lifted: Vec<&str> = names.iter().chain(sub_names.iter()).copied().collect();
        let m0 = model();
        let mut listed: Vec<&str> = weights(&m0).iter().map(|w| w.name).collect();
        lifted.sort_unstable();
        listed.sort_unstable();
        assert_eq!(lifted, listed);
    }

    #[test]
    fn each_weight_mut_visits_what_weights_lists_in_the_same_order() {
        let mut m = model();
        let listed: Vec<(String, Origin)> =
            weights(&m).iter().map(|w| (w.name.to_string(), w.origin.clone())).collect();
        let mut visited = Vec::new();
        each_weight_mut(&mut m, &mut |name, origin, _| visited.push((name.to_string(), origin)));
        assert_eq!(visited, listed);
    }

    #[test]
    fn old_ir_versions_get_an_input_per_lifted_main_graph_initializer() {
        let mut m = model();
        m.ir_version = Some(3);
        lift(&mut m);
        let g = m.graph.as_ref().unwrap();
        assert_eq!(g.input.iter().map(ValueInfoProto::name).collect::<Vec<_>>(), ["c.big", "c.scale"]);
    }

    #[test]
    fn a_constant_that_is_a_graph_output_stays_a_node() {
        let mut m = model();
        let g = m.graph.as_mut().unwrap();
        g.output.push(ValueInfoProto { name: Some("c.big".into()), ..ValueInfoProto::default() });
        let names: Vec<&str> = weights(&m).iter().map(|w| w.name).collect();
        assert!(!names.contains(&"c.big"));
        assert_eq!(lift(&mut m), 2);
    }
}
