# m.kiln (the example model file) and m.v1.kiln, release 1 of it signed for board-a with
# key.pem (which the block then replaces by a key of its own).
cp spec/examples/digits-mlp.model.kiln m.kiln
openssl genpkey -algorithm ed25519 -out key.pem
kiln sign --key key.pem --version 1 --target board-a --align 1 m.kiln -o m.v1.kiln
