"""Zero-copy views of numpy arrays, CPU torch tensors and buffer-protocol
objects: the address, element count and dlcp dtype of their memory.

Nothing is ever copied: an argument that is not contiguous, not on the
CPU, read-only where it must be written, or of a type dlcp cannot reduce
is refused with a ValueError/TypeError naming the problem.
"""

import numpy as np

_NUMPY_DTYPES = {np.dtype(np.float32): "float32",
                 np.dtype(np.float16): "float16",
                 np.dtype(np.int32): "int32",
                 np.dtype(np.int64): "int64"}
_TORCH_DTYPES = {"torch.float32": "float32", "torch.float16": "float16",
                 "torch.bfloat16": "bfloat16", "torch.int32": "int32",
                 "torch.int64": "int64"}


class View:
    """The memory of one argument: address, element count, dlcp dtype, and
    the object itself (kept alive while the library borrows it)."""

    __slots__ = ("ptr", "count", "dtype", "owner")

    def __init__(self, ptr, count, dtype, owner):
        self.ptr, self.count, self.dtype, self.owner = ptr, count, dtype, owner


def _is_torch_tensor(x):
    return type(x).__module__.startswith("torch") and hasattr(x, "data_ptr")


def view(x, what, writable):
    """Returns the View of |x|; |what| names the argument in errors."""
    if _is_torch_tensor(x):
        dtype = _TORCH_DTYPES.get(str(x.dtype))
        if dtype is None:
            raise TypeError(f"{what}: dtype {x.dtype} is not one dlcp "
                            f"reduces ({', '.join(_TORCH_DTYPES)})")
        if x.device.type != "cpu":
            raise ValueError(f"{what}: tensor is on {x.device}; dlcp takes "
                             "CPU tensors")
        if not x.is_contiguous():
            raise ValueError(f"{what}: tensor is not contiguous (dlcp does "
                             "not copy; call .contiguous() first)")
        return View(x.data_ptr(), x.numel(), dtype, x)
    arr = x if isinstance(x, np.ndarray) else np.asarray(memoryview(x))
    dtype = _NUMPY_DTYPES.get(arr.dtype)
    if dtype is None:
        raise TypeError(f"{what}: dtype {arr.dtype} is not one dlcp "
                        f"reduces (float32, float16, int32, int64)")
    if not arr.flags.c_contiguous:
        raise ValueError(f"{what}: array is not C-contiguous (dlcp does not "
                         "copy; use np.ascontiguousarray first)")
    if writable and not arr.flags.writeable:
        raise ValueError(f"{what}: array is read-only")
    return View(arr.ctypes.data, arr.size, dtype, arr)
