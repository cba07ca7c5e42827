#!/usr/bin/env python3
"""Split a GGUF into N shards the way llama.cpp's gguf-split lays them out,
to test wisp's loading of split models (written from the format: every shard
is a whole GGUF; shard 1 carries the input's metadata, each shard carries
split.no (u16, 0-based), split.count (u16) and split.tensors.count (i32);
tensor offsets are relative to each shard's own data section).

usage: gguf_split.py IN.gguf OUT_PREFIX N [--no-tensors-first] [--hostile KIND]
writes OUT_PREFIX-00001-of-0000N.gguf ... and prints their paths.
--no-tensors-first: shard 1 holds only the metadata (gguf-split's
--no-tensor-first-split), the tensors go to shards 2..N.
KIND makes a broken set for the refusal tests:
  count       shard 2 says split.count = N + 1
  dup-tensor  shard 1's last tensor is also in shard 2 (counts kept consistent)
  total       every shard says split.tensors.count = the real total + 1
  metadata    shard 2 also carries general.name
"""
import struct
import sys

U8, I8, U16, I16, U32, I32, F32, BOOL, STRING, ARRAY, U64, I64, F64 = range(13)
SCALAR = {U8: 1, I8: 1, U16: 2, I16: 2, U32: 4, I32: 4, F32: 4, BOOL: 1, U64: 8, I64: 8, F64: 8}
# bytes per block and elements per block of the ggml types the shared models use
TYPE_BLOCK = {0: (4, 1), 1: (2, 1), 2: (18, 32), 3: (20, 32), 6: (22, 32), 7: (24, 32), 8: (34, 32),
              10: (84, 256), 11: (110, 256), 12: (144, 256), 13: (176, 256), 14: (210, 256),
              20: (18, 32), 30: (2, 1)}


class Reader:
    def __init__(self, data):
        self.data, self.pos = data, 0

    def take(self, n):
        if self.pos + n > len(self.data):
            sys.exit("gguf_split: input is truncated")
        b = self.data[self.pos:self.pos + n]
        self.pos += n
        return b

    def u32(self): return struct.unpack('<I', self.take(4))[0]
    def u64(self): return struct.unpack('<Q', self.take(8))[0]
    def string(self): return self.take(self.u64())

    def value(self, t):
        """The raw bytes of a value of type t (as they are written after the type)."""
        start = self.pos
        if t == STRING:
            self.string()
        elif t == ARRAY:
            et, n = self.u32(), self.u64()
            for _ in range(n):
                self.value(et) if et in (STRING, ARRAY) else self.take(SCALAR[et])
        else:
            self.take(SCALAR[t])
        return self.data[start:self.pos]


def parse(data):
    r = Reader(data)
    if r.take(4) != b'GGUF':
        sys.exit('gguf_split: not a GGUF file')
    version, n_tensors, n_kv = r.u32(), r.u64(), r.u64()
    kvs = []
    alignment = 32
    for _ in range(n_kv):
        key = r.string()
        t = r.u32()
        raw = r.value(t)
        if key == b'general.alignment':
            alignment = struct.unpack('<I', raw)[0]
        kvs.append((key, t, raw))
    infos = []
    for _ in range(n_tensors):
        name = r.string()
        nd = r.u32()
        ne = [r.u64() for _ in range(nd)]
        typ, off = r.u32(), r.u64()
        infos.append((name, ne, typ, off))
    data_start = (r.pos + alignment - 1) // alignment * alignment
    tensors = []
    for name, ne, typ, off in infos:
        bb, be = TYPE_BLOCK[typ]
        n = 1
        for e in ne:
            n *= e
        nbytes = n // be * bb
        tensors.append((name, ne, typ, data[data_start + off:data_start + off + nbytes]))
    return version, kvs, alignment, tensors


def kv_bytes(key, t, raw):
    return struct.pack('<Q', len(key)) + key + struct.pack('<I', t) + raw


def write_shard(path, version, kvs, alignment, tensors):
    head = b'GGUF' + struct.pack('<IQQ', version, len(tensors), len(kvs))
    head += b''.join(kv_bytes(*kv) for kv in kvs)
    offset, blobs = 0, []
    for name, ne, typ, blob in tensors:
        head += struct.pack('<Q', len(name)) + name + struct.pack('<I', len(ne))
        head += b''.join(struct.pack('<Q', e) for e in ne) + struct.pack('<IQ', typ, offset)
        pad = (-len(blob)) % alignment
        blobs.append(blob + b'\0' * pad)
        offset += len(blob) + pad
    head += b'\0' * ((-len(head)) % alignment)
    with open(path, 'wb') as f:
        f.write(head)
        for b in blobs:
            f.write(b)


def main():
    args = sys.argv[1:]
    hostile = None
    empty_first = '--no-tensors-first' in args
    if empty_first:
        args.remove('--no-tensors-first')
    if '--hostile' in args:
        i = args.index('--hostile')
        hostile = args[i + 1]
        del args[i:i + 2]
    if len(args) != 3 or hostile not in (None, 'count', 'dup-tensor', 'total', 'metadata'):
        sys.exit(__doc__)
    src, prefix, n = args[0], args[1], int(args[2])
    version, kvs, alignment, tensors = parse(open(src, 'rb').read())
    if not 2 <= n <= len(tensors):
        sys.exit('gguf_split: N must be in 2..%d' % len(tensors))
    kvs = [kv for kv in kvs if not kv[0].startswith(b'split.')]
    first = 1 if empty_first else 0  # the shards that hold tensors: first..n-1
    parts = [[] for _ in range(first)] + [tensors[len(tensors) * k // (n - first):len(tensors) * (k + 1) // (n - first)]
                                          for k in range(n - first)]
    if hostile == 'dup-tensor':
        parts[1] = [parts[first][-1]] + parts[1] if first == 0 else parts[1] + [parts[1][0]]
    total = sum(len(p) for p in parts) + (hostile == 'total')
    for k in range(n):
        count = n + 1 if hostile == 'count' and k == 1 else n
        split = [(b'split.no', U16, struct.pack('<H', k)), (b'split.count', U16, struct.pack('<H', count)),
                 (b'split.tensors.count', I32, struct.pack('<i', total))]
        own = list(kvs) if k == 0 else [kv for kv in kvs if kv[0] == b'general.alignment']
        if hostile == 'metadata' and k == 1:
            own.append((b'general.name', STRING, struct.pack('<Q', 5) + b'extra'))
        path = '%s-%05d-of-%05d.gguf' % (prefix, k + 1, n)
        write_shard(path, version, own + split, alignment, parts[k])
        print(path)


main()
