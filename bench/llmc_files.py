#!/usr/bin/env python3
"""llmc_files.py — the files llm.c's CPU trainer reads, with random numbers, so that
bench/gpt2.sh can time train_gpt2.c without downloading anything.

    llmc_files.py DIR [--vocab 50257] [--max-seq-len 1024] [--layers 12] [--heads 12]
                      [--hidden 768] [--batch 4] [--seq-len 64] [--steps 20] [--seed 1]
    llmc_files.py --check DIR      read the files back and print their header fields

train_gpt2.c's main() opens, relative to its working directory:

    gpt2_124M.bin    the model: a header of 256 int32
                       [0] 20240326 (magic)  [1] 3 (version: float32 parameters)
                       [2] maxT  [3] V  [4] L  [5] NH  [6] C  [7] Vp (V padded up to 128)
                     then the parameters as float32, in llm.c's order:
                       wte Vp C, wpe maxT C, ln1w L C, ln1b L C, qkvw L 3C C, qkvb L 3C,
                       attprojw L C C, attprojb L C, ln2w L C, ln2b L C,
                       fcw L 4C C, fcb L 4C, fcprojw L C 4C, fcprojb L C, lnfw C, lnfb C
    dev/data/tinyshakespeare/tiny_shakespeare_{train,val}.bin
                     tokens: a header of 256 int32
                       [0] 20240520 (magic)  [1] 1 (version)  [2] the number of tokens
                     then the tokens as uint16 (each < V)
    gpt2_tokenizer.bin   optional: without it train_gpt2.c prints a warning and,
                     when it samples, token ids instead of text; not written here

The numbers: weights N(0, 0.02^2) (GPT-2's init), LayerNorm weights 1, biases 0;
tokens uniform in [0, V).  With numpy, drawn whole; without it, a block of 65536
normal numbers drawn with `random` and repeated (the speed of a step does not
depend on the values, only on their being ordinary floats).

The train file holds enough batches of B x T tokens for --steps steps (llm.c
shuffles them), the val file the 5 batches its validation reads.
"""
import argparse
import os
import random
import struct
import sys

MODEL_MAGIC, MODEL_VERSION = 20240326, 3
TOKENS_MAGIC, TOKENS_VERSION = 20240520, 1
HEADER_INTS = 256
TRAIN = "dev/data/tinyshakespeare/tiny_shakespeare_train.bin"
VAL = "dev/data/tinyshakespeare/tiny_shakespeare_val.bin"
VAL_BATCHES = 5   # train_gpt2.c's val_num_batches

try:
    import numpy
except ImportError:
    numpy = None


def padded_vocab(v):
    """llm.c's Vp: V rounded up to a multiple of 128 (train_gpt2.py's)."""
    return -(-v // 128) * 128


def param_shapes(v, vp, max_t, layers, c):
    """(name, elements, kind) in train_gpt2.c's order; kind: w (normal), one, zero."""
    return [("wte", vp * c, "w"), ("wpe", max_t * c, "w"),
            ("ln1w", layers * c, "one"), ("ln1b", layers * c, "zero"),
            ("qkvw", layers * 3 * c * c, "w"), ("qkvb", layers * 3 * c, "zero"),
            ("attprojw", layers * c * c, "w"), ("attprojb", layers * c, "zero"),
            ("ln2w", layers * c, "one"), ("ln2b", layers * c, "zero"),
            ("fcw", layers * 4 * c * c, "w"), ("fcb", layers * 4 * c, "zero"),
            ("fcprojw", layers * c * 4 * c, "w"), ("fcprojb", layers * c, "zero"),
            ("lnfw", c, "one"), ("lnfb", c, "zero")]


def header(*fields):
    return struct.pack("<%di" % HEADER_INTS, *(list(fields) + [0] * (HEADER_INTS - len(fields))))


def write_floats(f, n, kind, rng, block):
    """n float32 values of one kind, in chunks of at most 1 << 22."""
    done = 0
    while done < n:
        k = min(n - done, 1 << 22)
        if kind != "w":
            value = 1.0 if kind == "one" else 0.0
            f.write(struct.pack("<f", value) * k)
        elif numpy is not None:
            f.write(rng.normal(0.0, 0.02, k).astype("<f4").tobytes())
        else:
            reps = -(-k // (len(block) // 4))
            f.write((block * reps)[:4 * k])
        done += k


def write_model(path, a, rng):
    vp = padded_vocab(a.vocab)
    block = b""
    if numpy is None:
        r = random.Random(a.seed)
        block = struct.pack("<65536f", *(r.gauss(0.0, 0.02) for _ in range(65536)))
    with open(path + ".tmp", "wb") as f:
        f.write(header(MODEL_MAGIC, MODEL_VERSION, a.max_seq_len, a.vocab, a.layers, a.heads, a.hidden, vp))
        for _, n, kind in param_shapes(a.vocab, vp, a.max_seq_len, a.layers, a.hidden):
            write_floats(f, n, kind, rng, block)
    os.replace(path + ".tmp", path)


def write_tokens(path, ntok, vocab, seed):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    r = random.Random(seed)
    with open(path + ".tmp", "wb") as f:
        f.write(header(TOKENS_MAGIC, TOKENS_VERSION, ntok))
        f.write(struct.pack("<%dH" % ntok, *(r.randrange(vocab) for _ in range(ntok))))
    os.replace(path + ".tmp", path)


def check(d):
    """Read the three files back: their headers, and that their sizes agree with them."""
    with open(os.path.join(d, "gpt2_124M.bin"), "rb") as f:
        h = struct.unpack("<%di" % HEADER_INTS, f.read(4 * HEADER_INTS))
        size = os.fstat(f.fileno()).st_size
    magic, version, max_t, v, layers, heads, c, vp = h[:8]
    n = sum(k for _, k, _ in param_shapes(v, vp, max_t, layers, c))
    ok = magic == MODEL_MAGIC and version == MODEL_VERSION and vp == padded_vocab(v) and c % heads == 0 \
        and size == 4 * (HEADER_INTS + n)
    print("model magic %d version %d maxT %d V %d L %d NH %d C %d Vp %d parameters %d size %s" %
          (magic, version, max_t, v, layers, heads, c, vp, n, "ok" if size == 4 * (HEADER_INTS + n) else "WRONG"))
    for name in (TRAIN, VAL):
        with open(os.path.join(d, name), "rb") as f:
            h = struct.unpack("<%di" % HEADER_INTS, f.read(4 * HEADER_INTS))
            body = f.read()
        toks = struct.unpack("<%dH" % (len(body) // 2), body)
        good = h[0] == TOKENS_MAGIC and h[1] == TOKENS_VERSION and len(body) == 2 * h[2] and max(toks) < v
        ok = ok and good
        print("%s magic %d version %d tokens %d max token %d %s" %
              (os.path.basename(name), h[0], h[1], h[2], max(toks), "ok" if good else "WRONG"))
    return 0 if ok else 1


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("dir")
    p.add_argument("--check", action="store_true", help="read DIR's files back")
    p.add_argument("--vocab", type=int, default=50257)
    p.add_argument("--max-seq-len", type=int, default=1024)
    p.add_argument("--layers", type=int, default=12)
    p.add_argument("--heads", type=int, default=12)
    p.add_argument("--hidden", type=int, default=768)
    p.add_argument("--batch", type=int, default=4)
    p.add_argument("--seq-len", type=int, default=64)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--seed", type=int, default=1)
    a = p.parse_args()
    if a.check:
        return check(a.dir)
    for name in ("vocab", "max_seq_len", "layers", "heads", "hidden", "batch", "seq_len", "steps"):
        if getattr(a, name) < 1:
            p.error("--%s %d: must be at least 1" % (name.replace("_", "-"), getattr(a, name)))
    if a.vocab > 65536:
        p.error("--vocab %d: tokens are uint16 in llm.c's files, at most 65536" % a.vocab)
    if a.hidden % a.heads:
        p.error("--hidden %d: must be a multiple of --heads %d" % (a.hidden, a.heads))
    if a.seq_len > a.max_seq_len:
        p.error("--seq-len %d: more than --max-seq-len %d (train_gpt2.c needs T <= maxT)" %
                (a.seq_len, a.max_seq_len))
    os.makedirs(a.dir, exist_ok=True)
    rng = numpy.random.default_rng(a.seed) if numpy is not None else None
    bt = a.batch * a.seq_len
    write_model(os.path.join(a.dir, "gpt2_124M.bin"), a, rng)
    write_tokens(os.path.join(a.dir, TRAIN), (a.steps + 1) * bt + 1, a.vocab, a.seed)
    write_tokens(os.path.join(a.dir, VAL), VAL_BATCHES * bt + 1, a.vocab, a.seed + 1)
    return 0


if __name__ == "__main__":
    sys.exit(main())
