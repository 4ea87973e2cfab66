# The example's ONNX graph converted: digits.kiln and digits.kiln.onnx (as the block's comment says).
kiln convert spec/examples/digits-mlp.onnx -o digits.kiln --onnx-graph digits.kiln.onnx
