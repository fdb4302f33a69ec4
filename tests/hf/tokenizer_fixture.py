"""A Hugging Face directory with its own tokenizer.json, for the tools' --text path (docs/hf.md).

Copies a model directory (config.json, model.safetensors) to OUT and writes OUT/tokenizer.json: a
byte-level BPE (the GPT-2 flavour: ByteLevel pre-tokenizer, no merges) whose vocabulary is the
byte-level symbols of 'a'..'z', space and newline (ids 0..27, within the fixtures' vocab_size 61),
plus OUT/text.txt (a lowercase text) and OUT/ids.txt: the ids of that text worked out here from
the byte-to-symbol table alone, so `--text OUT/text.txt` must give exactly `--tokens OUT/ids.txt`.
Usage: tokenizer_fixture.py MODEL_DIR OUT
"""
import json
import shutil
import sys


def byte_symbols():
    # GPT-2's bytes_to_unicode: printable bytes map to themselves, the rest to U+0100 upwards
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(0xA1, 0xAC + 1)) + list(range(0xAE, 0xFF + 1))
    table, extra = {}, 0
    for b in range(256):
        if b in printable:
            table[b] = chr(b)
        else:
            table[b] = chr(256 + extra)
            extra += 1
    return table


def main(src, out):
    shutil.rmtree(out, ignore_errors=True)
    shutil.copytree(src, out)
    sym = byte_symbols()
    alphabet = [ord(c) for c in "abcdefghijklmnopqrstuvwxyz"] + [ord(" "), ord("\n")]
    vocab = {sym[b]: i for i, b in enumerate(alphabet)}
    tok = {
        "version": "1.0",
        "normalizer": None,
        "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
        "model": {"type": "BPE", "vocab": vocab, "merges": []},
        "added_tokens": [],
    }
    with open(out + "/tokenizer.json", "w") as f:
        json.dump(tok, f)
    words = "the quick brown fox jumps over the lazy dog while seven wizards quietly hex a jumbo vat".split()
    text = "\n".join(" ".join(words[(i * 3) % len(words):] + words[:(i * 3) % len(words)]) for i in range(4)) + "\n"
    with open(out + "/text.txt", "w") as f:
        f.write(text)
    ids = [vocab[sym[b]] for b in text.encode()]
    with open(out + "/ids.txt", "w") as f:
        f.write(" ".join(map(str, ids)) + "\n")
    print("tokenizer fixture", out, len(ids), "ids")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
