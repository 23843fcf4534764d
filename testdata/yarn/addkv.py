#!/usr/bin/python3
"""addkv.py: copy a GGUF, adding or replacing metadata values.

    GGUF_PY=$LLAMA/gguf-py /usr/bin/python3 addkv.py IN.gguf OUT.gguf KEY=TYPE:VALUE ...

TYPE is str, f32 or u32. The tensors are copied unchanged, in order, with
llama.cpp's gguf-py (reader and writer).
"""
import os
import sys

if os.environ.get("GGUF_PY"):
    sys.path.insert(0, os.environ["GGUF_PY"])
import gguf  # noqa: E402


def main():
    src, dst, *pairs = sys.argv[1:]
    r = gguf.GGUFReader(src)
    arch = r.fields["general.architecture"].contents()
    w = gguf.GGUFWriter(dst, arch)
    extra = {}
    for p in pairs:
        k, tv = p.split("=", 1)
        t, v = tv.split(":", 1)
        extra[k] = (t, v)
    for name, f in r.fields.items():
        if name.startswith("GGUF.") or name == "general.architecture" or name in extra:
            continue
        vt = f.types[0]
        if vt == gguf.GGUFValueType.ARRAY:
            w.add_key_value(name, f.contents(), vt, sub_type=f.types[-1])
        else:
            w.add_key_value(name, f.contents(), vt)
    for k, (t, v) in extra.items():
        if t == "str":
            w.add_string(k, v)
        elif t == "f32":
            w.add_float32(k, float(v))
        elif t == "u32":
            w.add_uint32(k, int(v))
        else:
            sys.exit(f"addkv.py: unknown type {t}")
    for t in r.tensors:
        w.add_tensor(t.name, t.data, raw_shape=list(reversed([int(x) for x in t.shape])), raw_dtype=t.tensor_type)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()


if __name__ == "__main__":
    main()
