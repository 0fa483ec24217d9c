"""llama_reference.py — the step-1 loss of ptdp's llama, computed again in
plain Python (no numpy, no torch) the way Meta's llama3 `model.py`
computes it, from the tensors ptdp saved under Meta's names:

    h      = tok_embeddings[tokens]
    layer: h = h + wo attn(rope(wq n1), rope(wk n1), wv n1),  n1 = rmsnorm(h) attention_norm
           h = h + w2 (silu(w1 n2) * w3 n2),                  n2 = rmsnorm(h) ffn_norm
    logits = output (rmsnorm(h) norm);  loss = mean cross-entropy(logits, y)

    rmsnorm(x) = x / sqrt(mean(x^2) + eps)
    rope: Meta's view_as_complex pairs (2i, 2i+1) of each head, times
          exp(1j p theta^(-2i/d))    (precompute_freqs_cis, apply_rotary_emb)
    attn: causal softmax(q k^T / sqrt(d)) v; repeat_kv: query head h reads
          kv head h // (H / K)

    llama_reference.py INIT.safetensors DATA.safetensors EPS THETA LOSS

exits 1 unless the loss agrees with LOSS (ptdp's) to 1e-9 relative.
"""
import json
import math
import struct
import sys


def load(path):
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        head = json.loads(f.read(n))
        body = f.read()
    out = {}
    for name, t in head.items():
        if name == "__metadata__":
            continue
        a, b = t["data_offsets"]
        fmt = {"F64": "d", "F32": "f", "I64": "q"}[t["dtype"]]
        vals = struct.unpack("<%d%s" % ((b - a) // struct.calcsize(fmt), fmt), body[a:b])
        out[name] = (t["shape"], list(vals))
    return head.get("__metadata__", {}), out


def matrix(w):
    shape, v = w
    rows, cols = (shape[0], shape[1]) if len(shape) == 2 else (1, shape[0])
    return [v[r * cols:(r + 1) * cols] for r in range(rows)]


def linear(x, w):                       # x W^T, rows of x
    return [[sum(a * b for a, b in zip(row, wr)) for wr in w] for row in x]


def rmsnorm(x, w, eps):
    return [[v / math.sqrt(sum(u * u for u in row) / len(row) + eps) * g for v, g in zip(row, w[0])] for row in x]


def rope(row, heads, d, p, theta):      # in place on `heads` heads of width d
    for h in range(heads):
        for i in range(d // 2):
            a = p * theta ** (-2.0 * i / d)
            x0, x1 = row[h * d + 2 * i], row[h * d + 2 * i + 1]
            row[h * d + 2 * i] = x0 * math.cos(a) - x1 * math.sin(a)
            row[h * d + 2 * i + 1] = x0 * math.sin(a) + x1 * math.cos(a)


def attention(q, k, v, H, K, d):
    T, y = len(q), [[0.0] * (H * d) for _ in q]
    for h in range(H):
        kh = h // (H // K)
        for t in range(T):
            s = [sum(q[t][h * d + e] * k[u][kh * d + e] for e in range(d)) / math.sqrt(d) for u in range(t + 1)]
            m = max(s)
            p = [math.exp(x - m) for x in s]
            z = sum(p)
            for e in range(d):
                y[t][h * d + e] = sum(p[u] / z * v[u][kh * d + e] for u in range(t + 1))
    return y


def sequence_loss(w, meta, tokens, labels, eps, theta):
    C, L = int(meta["dim"]), int(meta["n_layers"])
    H, K = int(meta["n_heads"]), int(meta["n_kv_heads"])
    d = C // H
    emb = matrix(w["tok_embeddings.weight"])
    h = [list(emb[t]) for t in tokens]
    for i in range(L):
        W = lambda n: matrix(w["layers.%d.%s" % (i, n)])
        n1 = rmsnorm(h, W("attention_norm.weight"), eps)
        q, k, v = linear(n1, W("attention.wq.weight")), linear(n1, W("attention.wk.weight")), \
            linear(n1, W("attention.wv.weight"))
        for p in range(len(tokens)):
            rope(q[p], H, d, p, theta)
            rope(k[p], K, d, p, theta)
        o = linear(attention(q, k, v, H, K, d), W("attention.wo.weight"))
        h = [[a + b for a, b in zip(r, s)] for r, s in zip(h, o)]
        n2 = rmsnorm(h, W("ffn_norm.weight"), eps)
        a, b = linear(n2, W("feed_forward.w1.weight")), linear(n2, W("feed_forward.w3.weight"))
        g = [[x / (1 + math.exp(-x)) * y for x, y in zip(ra, rb)] for ra, rb in zip(a, b)]
        f = linear(g, W("feed_forward.w2.weight"))
        h = [[x + y for x, y in zip(r, s)] for r, s in zip(h, f)]
    logits = linear(rmsnorm(h, matrix(w["norm.weight"]), eps), matrix(w["output.weight"]))
    loss = 0.0
    for z, y in zip(logits, labels):
        m = max(z)
        loss += m + math.log(sum(math.exp(x - m) for x in z)) - z[y]
    return loss


def main():
    init, data, eps, theta, want = sys.argv[1], sys.argv[2], float(sys.argv[3]), float(sys.argv[4]), float(sys.argv[5])
    meta, w = load(init)
    _, batch = load(data)
    (steps, B, T), x = batch["x"]
    _, y = batch["y"]
    total = sum(sequence_loss(w, meta, x[b * T:(b + 1) * T], y[b * T:(b + 1) * T], eps, theta) for b in range(B))
    got = total / (B * T)
    ok = abs(got - want) <= 1e-9 * abs(want)
    print("llama_reference: step-1 loss %.15g, ptdp's %.15g: %s" % (got, want, "agree" if ok else "DIFFER"))
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
