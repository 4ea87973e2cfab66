//! Test inputs shared by the device harness and the host tests.

/// An Ed25519 test case: public key, signature, message.
pub struct Vector {
    /// Its name in the source.
    pub name: &'static str,
    /// The signer's public key.
    pub key: [u8; 32],
    /// The signature.
    pub sig: [u8; 64],
    /// The signed message.
    pub msg: &'static [u8],
}

/// Hex text to bytes at compile time (a bad digit or length stops the build).
const fn hex<const N: usize>(s: &str) -> [u8; N] {
    const fn digit(c: u8) -> u8 {
        match c {
            b'0'..=b'9' => c - b'0',
            b'a'..=b'f' => c - b'a' + 10,
            _ => panic!("not a lower-case hex digit"),
        }
    }
    let b = s.as_bytes();
    assert!(b.len() == 2 * N, "hex text of the wrong length");
    let mut out = [0u8; N];
    let mut i = 0;
    while i < N {
        out[i] = digit(b[2 * i]) << 4 | digit(b[2 * i + 1]);
        i += 1;
    }
    out
}

const MSG_ABC: [u8; 64] = hex("ddaf35a193617abacc417349ae20413112e6fa4e89a97ea20a9eeee64b55d39a2192992a274fc1a836ba3c23a3feebbd454d4423643ce80e2a9ac94fa54ca49f");

/// RFC 8032 section 7.1: TEST 1, 2, 3 and SHA(abc) (the short messages).
pub static RFC8032: [Vector; 4] = [
    Vector {
        name: "RFC 8032 7.1 TEST 1",
        key: hex("d75a980182b10ab7d54bfed3c964073a0ee172f3daa62325af021a68f707511a"),
        sig: hex("e5564300c360ac729086e2cc806e828a84877f1eb8e5d974d873e065224901555fb8821590a33bacc61e39701cf9b46bd25bf5f0595bbe24655141438e7a100b"),
        msg: b"",
    },
    Vector {
        name: "RFC 8032 7.1 TEST 2",
        key: hex("3d4017c3e843895a92b70aa74d1b7ebc9c982ccf2ec4968cc0cd55f12af4660c"),
        sig: hex("92a009a9f0d4cab8720e820b5f642540a2b27b5416503f8fb3762223ebdb69da085ac1e43e15996e458f3613d0f11d8c387b2eaeb4302aeeb00d291612bb0c00"),
        msg: &[0x72],
    },
    Vector {
        name: "RFC 8032 7.1 TEST 3",
        key: hex("fc51cd8e6218a1a38da47ed00230f0580816ed13ba3303ac5deb911548908025"),
        sig: hex("6291d657deec24024827e69c3abe01a30ce548a284743a445e3680d7db5ac3ac18ff9b538d16f290ae67f760984dc6594a7c15e9716ed28dc027beceea1ec40a"),
        msg: &[0xaf, 0x82],
    },
    Vector {
        name: "RFC 8032 7.1 TEST SHA(abc)",
        key: hex("ec172b93ad5e563bf4932c70e1245034c35467ef2efd4d64ebf819683467e2bf"),
        sig: hex("dc2a4459e7369633a52b1bf277839a00201009a3efbf3ecb69bea2186c26b58909351fc9ac90b3ecfdfbc7c66431e0303dca179c138ac17ad9bef1177331a704"),
        msg: &MSG_ABC,
    },
];

/// The example model file whose first [`DEVICE_MSG_LEN`] bytes the device
/// check verifies (a signed update's message is its head and the block's
/// directory prefix: about this size for the example model).
pub static MODEL: &[u8] = include_bytes!("../../../spec/examples/digits-mlp.kiln");
/// Bytes of the device check's message.
pub const DEVICE_MSG_LEN: usize = 1024;
/// Where the device check cuts its message into three pieces (as
/// `UpdateCheck` passes the signed bytes: before the signature, after it,
/// the block's prefix).
pub const DEVICE_CUTS: [usize; 2] = [44, 300];
/// The device check's key: RFC 8032 TEST 1's (secret key 9d61b19d...7f60).
pub const DEVICE_KEY: [u8; 32] = RFC8032[0].key;
/// That key's signature over `MODEL[..DEVICE_MSG_LEN]` (made with Python's
/// `cryptography` package, OpenSSL's Ed25519).
pub const DEVICE_SIG: [u8; 64] = hex("b2ebcede8600455df473c442901a5d2b60b08ca0ab8b7cfe7742ab3677ebfaac934852cb739aee118f3cd1b2d2a0e7cd501a4e9e7cba12dcea39fbac1c235009");
