"""Type stubs for the native module (``kiln._kiln``); use the ``kiln`` package instead."""

from typing import Any, Callable, Dict, List, Optional, Tuple

MODEL_TYPE: str
MODEL_HASH: int
PAD_KEY: str

class KilnError(ValueError):
    """A rejected input: the rule's ``code``, absolute ``offset`` and ``rule`` id."""

    code: str
    offset: int
    rule: str
    description: str

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

_Row = Tuple[Optional[str], int, Tuple[int, ...], int, int, Optional[str], int, Optional[Tuple[int, int, int, int, Optional[int]]]]
_Spec = Tuple[str, int, Tuple[int, ...], Any, Optional[str], int, Optional[Tuple[int, int, str, Optional[str]]]]

def default_cap() -> int: ...
def validate(data: Any, type_text: Optional[str] = None, framed: bool = False, count_cap: int = ..., byte_cap: int = ...) -> None: ...
def inspect(data: Any) -> Tuple[Optional[Dict[str, str]], int, int, List[_Row]]: ...
def load_arrays(data: Any, dtypes: Tuple[Any, ...]) -> Tuple[Optional[Dict[str, str]], Dict[str, Any]]: ...
def make_array(data: Any, code: int, shape: List[int], offset: int, byte_len: int, dtypes: Tuple[Any, ...]) -> Any: ...
def save(tensors: List[_Spec], metadata: List[Tuple[str, str]], path: Optional[str] = None, align: int = 4096, sort: bool = True) -> Optional[bytes]: ...
def decode(data: Any, type_text: str, dtypes: Tuple[Any, ...], framed: bool = False, count_cap: int = ..., byte_cap: int = ...) -> Any: ...
def encode(value: Any, type_text: str, tensor_specs: Callable[[Any], Tuple[bool, List[_Spec]]], framed: bool = False) -> bytes: ...
