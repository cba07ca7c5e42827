"""A minimal GGUF reader for the test-only references: metadata and F32/F16/BF16
tensors as numpy arrays (shape reversed from GGUF's ne, so a 2-D weight is
(out, in) as PyTorch holds it). Written from the GGUF facts in
../shared/docs/formats.md; not part of the product."""
import struct

import numpy as np

_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
_DTYPES = {0: np.float32, 1: np.float16}


class Reader:
    def __init__(self, path):
        self.buf = open(path, "rb").read()
        self.pos = 0
        if self.buf[:4] != b"GGUF":
            raise ValueError(f"{path}: not a GGUF file")
        self.pos = 4
        self.version, n_tensors, n_kv = self._take("<IQQ")
        self.meta = {}
        for _ in range(n_kv):
            key = self._string()
            (vtype,) = self._take("<I")
            self.meta[key] = self._value(vtype)
        infos = []
        for _ in range(n_tensors):
            name = self._string()
            (n_dims,) = self._take("<I")
            ne = self._take("<" + "Q" * n_dims)
            gtype, offset = self._take("<IQ")
            infos.append((name, ne, gtype, offset))
        align = int(self.meta.get("general.alignment", 32))
        data_start = (self.pos + align - 1) // align * align
        self.tensors = {}
        for name, ne, gtype, offset in infos:
            self.tensors[name] = (ne, gtype, data_start + offset)

    def _take(self, fmt):
        size = struct.calcsize(fmt)
        vals = struct.unpack_from(fmt, self.buf, self.pos)
        self.pos += size
        return vals

    def _string(self):
        (n,) = self._take("<Q")
        s = self.buf[self.pos:self.pos + n].decode("utf-8")
        self.pos += n
        return s

    def _value(self, vtype):
        if vtype == 8:
            return self._string()
        if vtype == 9:
            etype, count = self._take("<IQ")
            return [self._value(etype) for _ in range(count)]
        return self._take(_SCALARS[vtype])[0]

    def tensor(self, name):
        """The tensor as float64, shape reversed from ne (outermost first)."""
        ne, gtype, off = self.tensors[name]
        n = int(np.prod(ne))
        if gtype in _DTYPES:
            arr = np.frombuffer(self.buf, dtype=_DTYPES[gtype], count=n, offset=off)
        elif gtype == 30:  # BF16: the high half of an F32
            raw = np.frombuffer(self.buf, dtype=np.uint16, count=n, offset=off).astype(np.uint32) << 16
            arr = raw.view(np.float32)
        else:
            raise ValueError(f"{name}: type {gtype} is not supported by this reference reader")
        return arr.astype(np.float64).reshape(tuple(reversed(ne)))
