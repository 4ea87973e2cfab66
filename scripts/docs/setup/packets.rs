// The packets of a block that arrives in pieces: here the example model in 1,500-byte pieces.
let bytes = std::fs::read("spec/examples/digits-mlp.kiln")?;
let packets = bytes.chunks(1500);
