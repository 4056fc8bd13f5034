"""A GGUF holding a model's first LAYERS blocks, byte for byte (the embedding, the final norm, the tokenizer and every
other field copied; `<arch>.block_count` set to LAYERS). The whole SmolLM2 GGUF (98 MB) is over what travels to a lent
GPU machine (64 MiB with the checkout); its first 5 of 30 layers are 41 MB. Usage: python truncate_gguf.py IN OUT LAYERS"""
import sys
import gguf

def truncate(src:str, dst:str, layers:int):
    reader = gguf.GGUFReader(src)
    arch = reader.get_field(gguf.Keys.General.ARCHITECTURE).contents()
    writer = gguf.GGUFWriter(dst, arch, endianess=reader.endianess)
    count = f"{arch}.block_count"
    for field in reader.fields.values():
        if field.name == gguf.Keys.General.ARCHITECTURE or field.name.startswith("GGUF."): continue   # the writer's own
        kind = field.types[0]
        sub = field.types[-1] if kind == gguf.GGUFValueType.ARRAY else None
        value = layers if field.name == count else field.contents()
        writer.add_key_value(field.name, value, kind, sub_type=sub)
    keep = [t for t in reader.tensors if not t.name.startswith("blk.") or int(t.name.split(".")[1]) < layers]
    for t in keep: writer.add_tensor_info(t.name, t.data.shape, t.data.dtype, t.data.nbytes, t.tensor_type)
    writer.write_header_to_file(); writer.write_kv_data_to_file(); writer.write_ti_data_to_file()
    for t in keep: writer.write_tensor_data(t.data, tensor_endianess=reader.endianess)
    writer.close()
    return len(keep)

if __name__ == "__main__":
    src, dst, layers = sys.argv[1], sys.argv[2], int(sys.argv[3])
    print(f"{truncate(src, dst, layers)} tensors written to {dst}")
