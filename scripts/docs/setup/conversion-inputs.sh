# One small input of each format docs/conversion.md converts: model.safetensors,
# model.gguf, model.hk, arrays.npz and model.onnx.
kiln convert spec/examples/digits-mlp.kiln -o model.safetensors
cp spec/examples/small/f32-vector-named.hk model.hk
cp spec/examples/digits-mlp.onnx model.onnx
python3 - <<'PY'
import numpy as np
import gguf
np.savez_compressed("arrays.npz", x=np.arange(12, dtype=np.float32).reshape(3, 4), n=np.arange(5, dtype=np.int64))
w = gguf.GGUFWriter("model.gguf", "llama")
w.add_tensor("blk.0.attn_q.weight", np.ones((8, 8), np.float32))
w.add_tensor("blk.0.ffn_norm.weight", np.ones(8, np.float16))
w.write_header_to_file()
w.write_kv_data_to_file()
w.write_tensors_to_file()
w.close()
PY
