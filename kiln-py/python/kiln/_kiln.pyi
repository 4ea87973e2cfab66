"""Type stubs for the native module (``kiln._kiln``); use the ``kiln`` package instead."""

from typing import Any, Callable, Dict, List, Optional, Tuple

# PyO3 classes: not subclassable (final), built by __new__.
from typing_extensions import Self, final

MODEL_TYPE: str
MODEL_HASH: int
DIGESTS_TYPE: str
DIGESTS_HASH: int
SHARD_HASH: int
MANIFEST_HASH: int
PAD_KEY: str

class KilnError(ValueError):
    """A rejected input: the rule's ``code``, absolute ``offset`` and ``rule`` id;
    ``file`` the shard at fault in a sharded model and ``tensor`` the tensor at fault."""

    code: str
    offset: int
    rule: str
    description: str
    file: Optional[str]
    tensor: Optional[str]
    #: Set by ``kiln.open``: the foreign format the file is (``"safetensors"``, ``"gguf"``, ...), or None.
    foreign: Optional[str]

class ConvertError(ValueError):
    """An input ``kiln.convert`` cannot convert (the CLI's message; ``offset``
    where the reader stopped, ``rule``/``code`` where it has them)."""

    offset: Optional[int]
    rule: Optional[str]
    code: Optional[str]

class TypeTextError(ValueError):
    """Type text that is not canonical Kiln type text."""

    code: str
    offset: int
    rule: str
    description: str

@final
class Some:
    """The present value of an ``opt<opt<T>>``."""

    value: Any
    def __new__(cls, value: Any) -> Self: ...

_ManifestRow = Tuple[str, int, int, List[int], int, Optional[str], int, Optional[Tuple[int, int, int, str, Optional[str]]]]
_Row = Tuple[Optional[str], int, Tuple[int, ...], int, int, Optional[str], int, Optional[Tuple[int, int, int, int, Optional[int]]]]
_Spec = Tuple[str, int, Tuple[int, ...], Any, Optional[str], int, Optional[Tuple[int, int, str, Optional[str]]]]

@final
class Sharded:
    """A checked manifest; its shards are looked for in the manifest's folder."""

    def __new__(cls, path: str, data: Any) -> Self: ...
    def metadata(self) -> Dict[str, str]: ...
    def model_id(self) -> bytes: ...
    def shards(self) -> List[Tuple[str, int]]: ...
    def table(self) -> List[_ManifestRow]: ...
    def resolve(self, index: int) -> Optional[str]: ...
    def check(self, index: int, data: Optional[Any], verify: bool = False) -> Tuple[int, int, List[_Row]]: ...

def default_cap() -> int: ...
def kind(data: Any) -> Optional[str]: ...
def foreign(path: str, data: Any) -> Optional[Tuple[str, str]]: ...
def dtype_table() -> List[Tuple[int, str, Optional[str]]]: ...
def convert(
    src: str,
    dst: str,
    *,
    max_shard_size: Optional[str] = None,
    to: Optional[str] = None,
    from_format: Optional[str] = None,
    fsync: bool = True,
) -> Tuple[str, int, int, List[str]]: ...
def parse_size(text: str) -> int: ...
def onnx_requirements(
    graph: bytes,
) -> Tuple[str, List[str], List[Tuple[str, str, int, int, bool, bool]], List[Tuple[str, str]]]: ...
def onnx_pair(
    graph: bytes,
    recorded: Optional[str],
    tables: Dict[str, Dict[str, Tuple[int, Tuple[int, ...], int, int]]],
) -> None: ...
def onnx_dtypes() -> List[Tuple[int, str]]: ...
def onnx_with_inline(graph: bytes, data: Dict[str, bytes]) -> bytes: ...
def onnx_reads_data() -> Tuple[List[Tuple[str, List[int]]], int, int, List[str]]: ...
def validate(data: Any, type_text: Optional[str] = None, framed: bool = False, count_cap: int = ..., byte_cap: int = ..., verify: bool = True) -> Tuple[str, bool]: ...
def verify_signed(data: Any, public_key: bytes, target: Optional[str] = None, newer_than: Optional[int] = None) -> Tuple[int, str, bytes]: ...
def inspect(data: Any, verify: bool = False) -> Tuple[Optional[Dict[str, str]], int, int, List[_Row]]: ...
def load_arrays(data: Any, dtypes: Tuple[Any, ...], verify: bool = False) -> Tuple[Optional[Dict[str, str]], Dict[str, Any]]: ...
def make_array(data: Any, code: int, shape: List[int], offset: int, byte_len: int, dtypes: Tuple[Any, ...]) -> Any: ...
def save(tensors: List[_Spec], metadata: List[Tuple[str, str]], path: Optional[str] = None, align: int = 4096, sort: bool = True, digests: bool = True, max_shard_size: Optional[int] = None, stream_min: int = ...) -> Optional[bytes]: ...
def decode(data: Any, type_text: str, dtypes: Tuple[Any, ...], framed: bool = False, count_cap: int = ..., byte_cap: int = ...) -> Any: ...
def encode(value: Any, type_text: str, tensor_specs: Callable[[Any], Tuple[bool, List[_Spec]]], framed: bool = False) -> bytes: ...
