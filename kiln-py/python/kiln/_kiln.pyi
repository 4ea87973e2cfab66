"""Type stubs for the native module (``kiln._kiln``); use the ``kiln`` package instead."""

from typing import Any, Callable, Dict, List, Optional, Tuple

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

class TypeTextError(ValueError):
    """Type text that is not canonical Kiln type text."""

    code: str
    offset: int
    rule: str
    description: str

class Some:
    """The present value of an ``opt<opt<T>>``."""

    value: Any
    def __init__(self, value: Any) -> None: ...

_ManifestRow = Tuple[str, int, int, List[int], int, Optional[str], int, Optional[Tuple[int, int, int, str, Optional[str]]]]
_Row = Tuple[Optional[str], int, Tuple[int, ...], int, int, Optional[str], int, Optional[Tuple[int, int, int, int, Optional[int]]]]
_Spec = Tuple[str, int, Tuple[int, ...], Any, Optional[str], int, Optional[Tuple[int, int, str, Optional[str]]]]

class Sharded:
    """A checked manifest; its shards are looked for in the manifest's folder."""

    def __init__(self, path: str, data: Any) -> None: ...
    def metadata(self) -> Dict[str, str]: ...
    def model_id(self) -> bytes: ...
    def shards(self) -> List[Tuple[str, int]]: ...
    def table(self) -> List[_ManifestRow]: ...
    def resolve(self, index: int) -> Optional[str]: ...
    def check(self, index: int, data: Optional[Any], verify: bool = False) -> Tuple[int, int, List[_Row]]: ...

def default_cap() -> int: ...
def kind(data: Any) -> Optional[str]: ...
def dtype_table() -> List[Tuple[int, str, Optional[str]]]: ...
def validate(data: Any, type_text: Optional[str] = None, framed: bool = False, count_cap: int = ..., byte_cap: int = ..., verify: bool = True) -> None: ...
def inspect(data: Any, verify: bool = False) -> Tuple[Optional[Dict[str, str]], int, int, List[_Row]]: ...
def load_arrays(data: Any, dtypes: Tuple[Any, ...], verify: bool = False) -> Tuple[Optional[Dict[str, str]], Dict[str, Any]]: ...
def make_array(data: Any, code: int, shape: List[int], offset: int, byte_len: int, dtypes: Tuple[Any, ...]) -> Any: ...
def save(tensors: List[_Spec], metadata: List[Tuple[str, str]], path: Optional[str] = None, align: int = 4096, sort: bool = True, digests: bool = True, max_shard_size: Optional[int] = None) -> Optional[bytes]: ...
def decode(data: Any, type_text: str, dtypes: Tuple[Any, ...], framed: bool = False, count_cap: int = ..., byte_cap: int = ...) -> Any: ...
def encode(value: Any, type_text: str, tensor_specs: Callable[[Any], Tuple[bool, List[_Spec]]], framed: bool = False) -> bytes: ...
