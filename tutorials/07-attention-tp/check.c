/*
 * check.c — lesson 07: is your tensor-parallel attention the one-device one?
 *
 * A GPT block's attention and the token embedding in front of it, small:
 * C = 16, nh = 4 heads of hd = 4, B = 3 sequences of T = 4 tokens (R = 12
 * rows), V = 50 tokens padded by the library's ptdp_gpt_pad_vocab(V, 8, tp):
 * 56 rows at tp 1, 64 at tp 2 and 4.  One device computes everything
 * densely on the host (ptdp's ops), then your functions run on tp = 1, 2
 * and 4 devices, one part after the other:
 *
 *   blank 1  lesson_qkv_shard      each rank's c_attn rows and bias entries,
 *                                  row for row; no communication
 *   blank 2  lesson_proj_forward   inside the attention (x c_attn_r^T + b_r,
 *                                  the rank's heads, c_proj): every rank's
 *                                  out equal to one device's; one all-reduce
 *   blank 3  lesson_embedding_forward  x = wte[token] on every rank; one
 *                                  all-reduce
 *   blanks 4, 5  lesson_proj_backward, lesson_qkv_backward  from random
 *                                  dout and dqkv: every rank's gradients
 *                                  (its slice of dy, dW, db; dx whole) equal
 *                                  one device's ptdp_linear_backward; none
 *                                  in c_proj's backward, one all-reduce in
 *                                  c_attn's
 *
 * to 1e-10 in double (libptdp_f64).  Mistakes are made to show: each
 * shard and each rank's table sits between rows of NaN, so a read outside
 * it poisons the result; every output starts as 1000, so a row never
 * written stands out; and a wrong lookup is run again with only one rank's
 * table filled (row j holding 10000 + j) to see what each rank added for
 * each token, and to name the mistake.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_gqa.h"
#include "lesson.h"
#include "tutorial.h"

#include "ptdp/error.h"
#include "ptdp/gpt.h"
#include "ptdp/ops.h"
#include "ptdp/rng.h"
#include "ptdp/comm.h"

enum {
    C = 16, NH = 4, HD = C / NH, T = 4, BATCH = 3, R = BATCH * T,
    V = 50, VOCAB_MULTIPLE = 8, VMAX = 64, MAX_TP = 4,
    SHARD_GUARD = 4,        /* rows of NaN around each c_attn shard       */
};
static const int TPS[] = { 1, 2, 4 };
enum { NTPS = sizeof TPS / sizeof TPS[0] };
/* Tokens on both sides of every rank boundary (16, 32, 48 at tp 4), the
 * first and the last (0, 49). */
static const int64_t TOKENS[R] = { 16, 3, 49, 32, 0, 47, 31, 15, 33, 48, 8, 20 };
static const double TOL = 1e-10;
static const ptdp_real UNWRITTEN = 1000;   /* every output starts as this */
static const double MARK = 10000;          /* row j of a marked table holds MARK + j */

/* ----------------------------------------------------- one device */

typedef struct {
    ptdp_real W[3 * C * C], b[3 * C];      /* c_attn [3C, C], [1, 3C] */
    ptdp_real P[C * C], pb[C];             /* c_proj [C, C], [1, C]   */
    ptdp_real wte[VMAX * C];               /* row g: the same at every tp (counter-based) */
    ptdp_real x[R * C];                    /* wte[token]: the embedding */
    ptdp_real out[R * C];                  /* the attention's output    */
} dense_t;

static void fill(ptdp_real *v, size_t n, const char *stream, double scale)
{
    uint64_t key = ptdp_rng_key(7, stream);
    for (size_t i = 0; i < n; i++)
        v[i] = (ptdp_real)(scale * ptdp_rng_normal(key, i));
}

static ptdp_tensor T2(ptdp_real *data, int rows, int cols)
{
    return ptdp_tensor_wrap(data, rows, cols);
}

static void dense_compute(dense_t *d)
{
    fill(d->W, 3 * C * C, "c_attn.weight", 0.5);
    fill(d->b, 3 * C, "c_attn.bias", 0.5);
    fill(d->P, C * C, "c_proj.weight", 0.5);
    fill(d->pb, C, "c_proj.bias", 0.5);
    fill(d->wte, VMAX * C, "wte", 1.0);
    for (int i = 0; i < R; i++)
        memcpy(&d->x[i * C], &d->wte[TOKENS[i] * C], C * sizeof(ptdp_real));
    static ptdp_real qkv[R * 3 * C], y[R * C], probs[BATCH * NH * T * T];
    ptdp_tensor b = T2(d->b, 1, 3 * C), pb = T2(d->pb, 1, C);
    ptdp_linear_forward(T2(qkv, R, 3 * C), T2(d->x, R, C), T2(d->W, 3 * C, C), &b);
    ptdp_attention_forward(T2(y, R, C), probs, T2(qkv, R, 3 * C), T, NH, HD, NULL, NULL);
    ptdp_linear_forward(T2(d->out, R, C), T2(y, R, C), T2(d->P, C, C), &pb);
}

/* --------------------------------------------------------- helpers */

static unsigned long long collective_calls(const ptdp_comm_stats *s)
{
    unsigned long long n = 0;
    for (int k = 0; k < PTDP_COLL_COUNT; k++)
        n += s->calls[k];
    return n;
}

/* Counts of one call on one device. */
typedef struct {
    unsigned long long calls, reduces;
    double bytes;
} comm_count;

static void count_begin(const ptdp_device *dev, comm_count *c)
{
    c->calls = collective_calls(&dev->stats);
    c->reduces = dev->stats.calls[PTDP_COLL_ALL_REDUCE];
    c->bytes = dev->stats.bytes_sent[PTDP_COLL_ALL_REDUCE];
}

static void count_end(const ptdp_device *dev, comm_count *c)
{
    c->calls = collective_calls(&dev->stats) - c->calls;
    c->reduces = dev->stats.calls[PTDP_COLL_ALL_REDUCE] - c->reduces;
    c->bytes = dev->stats.bytes_sent[PTDP_COLL_ALL_REDUCE] - c->bytes;
}

/* A device tensor of rows x cols, filled with v. */
static int device_tensor(ptdp_device *dev, ptdp_tensor *t, const char *name, int rows, int cols,
                         ptdp_real v)
{
    int rc = ptdp_tensor_alloc(dev, t, name, PTDP_MEM_OTHER, rows, cols);
    if (rc == 0)
        ptdp_tensor_fill(*t, v);
    return rc;
}

/* |got - want|, and infinity for a NaN: a NaN is never "close". */
static double diff(double got, double want)
{
    double e = fabs(got - want);
    return e == e ? e : INFINITY;
}

/* "0–7, 16–23, never written ×8": a list of row numbers (-1 = still 1000,
 * -2 = anything else) as runs. */
static void format_rows(const int *idx, int n, char *buf, size_t len)
{
    size_t at = 0;
    buf[0] = '\0';
    for (int i = 0; i < n && at + 40 < len;) {
        int j = i + 1;
        if (idx[i] >= 0)
            while (j < n && idx[j] == idx[j - 1] + 1)
                j++;
        else
            while (j < n && idx[j] == idx[i])
                j++;
        const char *sep = at ? ", " : "";
        if (idx[i] == -1)
            at += (size_t)snprintf(buf + at, len - at, "%snever written \xc3\x97%d", sep, j - i);
        else if (idx[i] == -2)
            at += (size_t)snprintf(buf + at, len - at, "%sno row of it \xc3\x97%d", sep, j - i);
        else if (j - i == 1)
            at += (size_t)snprintf(buf + at, len - at, "%s%d", sep, idx[i]);
        else
            at += (size_t)snprintf(buf + at, len - at, "%s%d\xe2\x80\x93%d", sep, idx[i], idx[j - 1]);
        i = j;
    }
}

/* ============================================ blank 1: the c_attn shard */

typedef struct {
    int tp;
    const dense_t *dense;
    /* per rank: its shard with SHARD_GUARD rows (entries) of NaN each side */
    ptdp_real w[MAX_TP][(3 * C + 2 * SHARD_GUARD) * C];
    ptdp_real b[MAX_TP][3 * C + 2 * SHARD_GUARD];
    comm_count comm[MAX_TP];
} shard_run;

static int shard_device(ptdp_device *dev, void *arg)
{
    shard_run *x = arg;
    const int r = dev->rank, n = C / x->tp, G = SHARD_GUARD;
    ptdp_tensor W, b, wbuf, bbuf;
    int rc;
    if ((rc = device_tensor(dev, &W, "c_attn.weight", 3 * C, C, 0)) ||
        (rc = device_tensor(dev, &b, "c_attn.bias", 1, 3 * C, 0)) ||
        (rc = device_tensor(dev, &wbuf, "w_local+guard", 3 * n + 2 * G, C, NAN)) ||
        (rc = device_tensor(dev, &bbuf, "b_local+guard", 1, 3 * n + 2 * G, NAN)))
        return rc;
    memcpy(W.data, x->dense->W, sizeof x->dense->W);
    memcpy(b.data, x->dense->b, sizeof x->dense->b);
    ptdp_tensor w_local = ptdp_tensor_rows(wbuf, G, 3 * n), b_local = ptdp_tensor_cols(bbuf, G, 3 * n);
    ptdp_tensor_fill(w_local, UNWRITTEN);
    ptdp_tensor_fill(b_local, UNWRITTEN);

    count_begin(dev, &x->comm[r]);
    if ((rc = lesson_qkv_shard(dev->world, NH, W, b, w_local, b_local)) != 0)
        return rc;
    count_end(dev, &x->comm[r]);
    memcpy(x->w[r], wbuf.data, ptdp_tensor_numel(wbuf) * sizeof(ptdp_real));
    memcpy(x->b[r], bbuf.data, ptdp_tensor_numel(bbuf) * sizeof(ptdp_real));
    return PTDP_OK;
}

/* Which row of the whole (rows x cols, row-major) the `cols` values at v
 * are: its index, -1 if all are still UNWRITTEN, -2 if none matches. */
static int which_row(const ptdp_real *v, const ptdp_real *whole, int rows, int cols)
{
    bool unwritten = true;
    for (int j = 0; j < cols; j++)
        unwritten = unwritten && v[j] == UNWRITTEN;
    if (unwritten)
        return -1;
    for (int i = 0; i < rows; i++)
        if (memcmp(v, whole + (size_t)i * cols, (size_t)cols * sizeof *v) == 0)
            return i;
    return -2;
}

static bool all_nan(const ptdp_real *v, int n)
{
    for (int i = 0; i < n; i++)
        if (!isnan(v[i]))
            return false;
    return true;
}

/* got[i] (rank r's local row or entry i, as a whole index) against the
 * right ones: WRONG with what it holds, and a note naming the pattern. */
static bool judge_shard(const char *what, const char *tensor, int tp, int r, const int *got)
{
    const int n = C / tp, hl = NH / tp;
    int want[3 * C];
    for (int i = 0; i < 3 * n; i++)
        want[i] = (i / n) * C + r * n + i % n;
    if (memcmp(got, want, (size_t)(3 * n) * sizeof *got) == 0)
        return true;
    char g[256], w[256];
    format_rows(got, 3 * n, g, sizeof g);
    format_rows(want, 3 * n, w, sizeof w);
    const char *unit = strstr(tensor, "bias") ? "entries" : "rows";
    tutorial_wrong("%s: rank %d's %s shard holds %s: %s.\nIt should hold %s %s: the q, k and v %s of heads "
                   "%d\xe2\x80\x93%d.", what, r, tensor, unit, g, unit, w, unit, r * hl, (r + 1) * hl - 1);
    bool contiguous = true, q_only = true;
    int written = 0;
    for (int i = 0; i < 3 * n; i++) {
        contiguous = contiguous && got[i] == r * 3 * n + i;
        q_only = q_only && (i < n ? got[i] == want[i] : got[i] == -1);
        written += got[i] != -1;
    }
    if (written == 0)
        tutorial_note("You wrote none of it: %s is never copied.  It is sharded like its rows: entry "
                      "b C + r n + i for\nb = 0, 1, 2 (q, k, v) and i < n = C/tp = %d — copy it in the same loop "
                      "(blank 1).", tensor, n);
    else if (contiguous)
        tutorial_note("You took %d consecutive %s, [%d, %d).  But %s is three blocks of C = %d: all the q, then "
                      "all the k,\nthen all the v; a rank's heads have n = C/tp = %d in EACH block: "
                      "[b C + r n, b C + (r+1) n) for b = 0, 1, 2.", 3 * n,
                      strstr(tensor, "bias") ? "entries" : "rows", r * 3 * n, (r + 1) * 3 * n, tensor, C, n);
    else if (q_only)
        tutorial_note("Only the q %s: the k and v of your heads (blocks 1 and 2 of %s) are missing.\nA head "
                      "needs its own q, k AND v to attend with no communication.",
                      strstr(tensor, "bias") ? "entries" : "rows", tensor);
    else if (written < 3 * n)
        tutorial_note("You filled %d of the shard's %d %s: the shape is n = %d per block, (nh/tp) x hd = %d x %d "
                      "— each head has hd %s in each of q, k, v, not one.", written, 3 * n,
                      strstr(tensor, "bias") ? "entries" : "rows", n, hl, HD,
                      strstr(tensor, "bias") ? "entries" : "rows");
    else
        tutorial_note("Rank r's heads are [r nh/tp, (r+1) nh/tp); their %s in block b (q, k, v) are "
                      "[b C + r n, b C + (r+1) n), n = C/tp = %d.", strstr(tensor, "bias") ? "entries" : "rows", n);
    return false;
}

static bool check_shard(int tp, const dense_t *dense)
{
    char what[32];
    snprintf(what, sizeof what, "tp %d, blank 1", tp);
    shard_run *x = calloc(1, sizeof *x);
    if (x == NULL)
        return false;
    x->tp = tp;
    x->dense = dense;
    bool ok = tutorial_launch(what, tp, shard_device, x) == 0;
    const int n = C / tp, G = SHARD_GUARD;
    for (int r = 0; ok && r < tp; r++) {
        const ptdp_real *w = x->w[r], *b = x->b[r];
        if (!all_nan(w, G * C) || !all_nan(w + (G + 3 * n) * C, G * C) || !all_nan(b, G) ||
            !all_nan(b + G + 3 * n, G)) {
            tutorial_wrong("%s: rank %d wrote outside its shard: w_local is %d x %d and b_local 1 x %d — "
                           "write only inside them.", what, r, 3 * n, C, 3 * n);
            ok = false;
            break;
        }
        int got[3 * C];
        for (int i = 0; i < 3 * n; i++)
            got[i] = which_row(w + (size_t)(G + i) * C, dense->W, 3 * C, C);
        if (!(ok = judge_shard(what, "c_attn.weight", tp, r, got)))
            break;
        for (int i = 0; i < 3 * n; i++)
            got[i] = which_row(b + G + i, dense->b, 3 * C, 1);
        if (!(ok = judge_shard(what, "c_attn.bias", tp, r, got)))
            break;
        if (x->comm[r].calls != 0) {
            tutorial_wrong("%s: rank %d made %llu collective call%s in lesson_qkv_shard.", what, r,
                           x->comm[r].calls, x->comm[r].calls == 1 ? "" : "s");
            tutorial_note("A shard needs no communication: every rank has the whole tensor and copies its rows.");
            ok = false;
        }
    }
    if (ok)
        tutorial_ok("tp %d, blank 1: each rank's c_attn shard is the q, k and v rows of its %d head%s "
                    "(3 x %d of %d rows), no communication", tp, NH / tp, NH / tp == 1 ? "" : "s", n, 3 * C);
    free(x);
    return ok;
}

/* ===================================== blank 2: the attention, c_proj */

typedef struct {
    int tp;
    const dense_t *dense;
    ptdp_real out[MAX_TP][R * C];
    comm_count comm[MAX_TP];
} attn_run;

static int attn_device(ptdp_device *dev, void *arg)
{
    attn_run *x = arg;
    const dense_t *d = x->dense;
    const int r = dev->rank, n = C / x->tp, hl = NH / x->tp;
    ptdp_comm *tp = dev->world;
    ptdp_tensor in, W, b, P, pb, w_local, b_local, out, P_local;
    lesson_attn_work work;
    int rc;
    if ((rc = device_tensor(dev, &in, "x", R, C, 0)) || (rc = device_tensor(dev, &W, "c_attn.weight", 3 * C, C, 0)) ||
        (rc = device_tensor(dev, &b, "c_attn.bias", 1, 3 * C, 0)) ||
        (rc = device_tensor(dev, &P, "c_proj.weight", C, C, 0)) ||
        (rc = device_tensor(dev, &pb, "c_proj.bias", 1, C, 0)) ||
        (rc = device_tensor(dev, &w_local, "c_attn.weight local", 3 * n, C, 0)) ||
        (rc = device_tensor(dev, &b_local, "c_attn.bias local", 1, 3 * n, 0)) ||
        (rc = device_tensor(dev, &out, "out", R, C, UNWRITTEN)) ||
        (rc = device_tensor(dev, &work.qkv_local, "qkv local", R, 3 * n, 0)) ||
        (rc = device_tensor(dev, &work.y_local, "y local", R, n, 0)))
        return rc;
    if ((work.probs = ptdp_alloc(dev, (size_t)BATCH * hl * T * T * sizeof(ptdp_real), PTDP_MEM_OTHER,
                                 "probs")) == NULL)
        return PTDP_ENOMEM;
    memcpy(in.data, d->x, sizeof d->x);
    memcpy(W.data, d->W, sizeof d->W);
    memcpy(b.data, d->b, sizeof d->b);
    memcpy(P.data, d->P, sizeof d->P);
    memcpy(pb.data, d->pb, sizeof d->pb);
    if ((rc = lesson_qkv_shard(tp, NH, W, b, w_local, b_local)) != 0 ||   /* right: blank 1 passed */
        (rc = lesson_proj_shard(tp, P, &P_local)) != 0)
        return rc;
    count_begin(dev, &x->comm[r]);
    if ((rc = lesson_attention_forward(tp, NH, T, out, in, w_local, b_local, P_local, pb, &work)) != 0)
        return rc;
    count_end(dev, &x->comm[r]);
    memcpy(x->out[r], out.data, sizeof x->out[r]);
    return PTDP_OK;
}

static bool check_attention(int tp, const dense_t *d)
{
    char what[32];
    snprintf(what, sizeof what, "tp %d, blank 2", tp);
    attn_run *x = calloc(1, sizeof *x);
    if (x == NULL)
        return false;
    x->tp = tp;
    x->dense = d;
    bool ok = tutorial_launch(what, tp, attn_device, x) == 0;
    for (int r = 0; ok && r < tp; r++) {
        const ptdp_real *o = x->out[r];
        int at = -1, unwritten = 0;
        double worst = 0;
        bool bias_every_rank = tp > 1;
        for (int i = 0; i < R * C; i++) {
            double e = diff(o[i], d->out[i]);
            if (e > worst) {
                worst = e;
                at = i;
            }
            unwritten += o[i] == UNWRITTEN;
            bias_every_rank = bias_every_rank && diff(o[i], d->out[i] + (tp - 1) * d->pb[i % C]) <= 1e-9;
        }
        if (worst <= TOL)
            continue;
        ok = false;
        tutorial_wrong("%s: rank %d's out[%d][%d] is %.6g; one device's is %.6g.", what, r, at / C, at % C,
                       (double)o[at], (double)d->out[at]);
        if (unwritten > 0)
            tutorial_note("%d of its %d numbers were never written (still %g): out arrives holding anything; "
                          "c_proj must overwrite all of it.", unwritten, R * C, (double)UNWRITTEN);
        else if (bias_every_rank)
            tutorial_note("out is off by exactly (tp - 1) * b: the bias was added on every rank before the "
                          "sum (blank 2).\nAdd it once, after the all-reduce.");
        else if (tp > 1 && x->comm[r].reduces == 0)
            tutorial_note("rank %d made no all-reduce: its out is only its own heads' term y_r P_r^T (+ b).\n"
                          "c_proj's output is the sum of every rank's term: one all-reduce (g), then b.", r);
        else
            tutorial_note("c_proj's output is the sum over ranks of y_r P_r^T (P_r: my heads' columns), "
                          "plus b once.");
    }
    if (ok && tp > 1) {
        double S = (double)R * C * sizeof(ptdp_real);
        for (int r = 0; ok && r < tp; r++) {
            const comm_count *c = &x->comm[r];
            if (c->calls == 1 && c->reduces == 1)
                continue;
            ok = false;
            tutorial_wrong("%s: rank %d made %llu collective call%s in the attention (%llu all-reduce%s).", what, r,
                           c->calls, c->calls == 1 ? "" : "s", c->reduces, c->reduces == 1 ? "" : "s");
            tutorial_note("The attention needs exactly one all-reduce of R x C = %d x %d reals (%.0f B), in "
                          "c_proj: c_attn and the heads are local.", R, C, S);
        }
        if (ok)
            tutorial_ok("tp %d, blank 2: every rank's attention output equals one device's; one all-reduce "
                        "of %d x %d, each rank sent %.0f B = 2(tp-1)/tp x %.0f B", tp, R, C, x->comm[0].bytes, S);
    } else if (ok) {
        tutorial_ok("tp 1, blank 2: the attention output equals one device's");
    }
    free(x);
    return ok;
}

/* =================================== blank 3: the vocab-parallel lookup */

typedef struct {
    int tp;
    int marked;               /* -1: the real table; k: only rank k's table, marked */
    const dense_t *dense;
    ptdp_real x[MAX_TP][R * C];
    comm_count comm[MAX_TP];
} emb_run;

/* V_pad, rows per rank, and the rows of NaN (or marks) on each side of a
 * rank's table: V_pad, so that any token minus any rank's first row
 * still lands inside the buffer. */
static int vocab_padded(int tp) { return ptdp_gpt_pad_vocab(V, VOCAB_MULTIPLE, tp); }

static int emb_device(ptdp_device *dev, void *arg)
{
    emb_run *x = arg;
    const int r = dev->rank, Vp = vocab_padded(x->tp), Vl = Vp / x->tp, G = Vp;
    ptdp_tensor buf, xt;
    int rc;
    if ((rc = device_tensor(dev, &buf, "wte local+guard", Vl + 2 * G, C, NAN)) ||
        (rc = device_tensor(dev, &xt, "x", R, C, UNWRITTEN)))
        return rc;
    for (int j = -G; j < Vl + G; j++) {
        ptdp_real *row = ptdp_at(buf, G + j, 0);
        for (int c = 0; c < C; c++)
            if (x->marked < 0)
                row[c] = j >= 0 && j < Vl ? x->dense->wte[(r * Vl + j) * C + c] : NAN;
            else
                row[c] = r == x->marked ? (ptdp_real)(MARK + j) : 0;
    }
    count_begin(dev, &x->comm[r]);
    if ((rc = lesson_embedding_forward(dev->world, xt, ptdp_tensor_rows(buf, G, Vl), TOKENS)) != 0)
        return rc;
    count_end(dev, &x->comm[r]);
    memcpy(x->x[r], xt.data, sizeof x->x[r]);
    return PTDP_OK;
}

/* A wrong lookup: run again with one rank's table marked at a time, and
 * name the first (token, rank) whose part is not what it should be. */
static void diagnose_lookup(int tp, const dense_t *d, const char *what)
{
    const int Vp = vocab_padded(tp), Vl = Vp / tp, G = Vp;
    static double part[MAX_TP][R];   /* what rank k added for token i */
    for (int k = 0; k < tp; k++) {
        emb_run *x = calloc(1, sizeof *x);
        if (x == NULL)
            return;
        x->tp = tp;
        x->marked = k;
        x->dense = d;
        int rc = tutorial_launch(what, tp, emb_device, x);
        for (int i = 0; i < R; i++)
            part[k][i] = x->x[k][i * C];
        free(x);
        if (rc != 0)
            return;
    }
    for (int i = 0; i < R; i++) {
        const int t = (int)TOKENS[i];
        for (int k = 0; k < tp; k++) {
            const int row0 = k * Vl, local = t - row0;
            const bool owner = local >= 0 && local < Vl;
            const double want = owner ? MARK + local : 0, c = part[k][i];
            if (c == want)
                continue;
            double j_real = c - MARK;
            bool read = fabs(j_real - round(j_real)) < 1e-9 && j_real >= -G && j_real < Vl + G;
            int j = read ? (int)round(j_real) : 0;
            if (read && j == t && row0 != 0)
                tutorial_note("Rank %d used the token itself as the local row: for token %d it read its row %d%s.\n"
                              "Its row 0 is the table's row r V_pad/tp = %d: the local row is %d - %d = %d.", k, t, j,
                              j >= Vl ? ", outside its table" : "", row0, t, row0, local);
            else if (read && !owner && (j < 0 || j >= Vl))
                tutorial_note("Rank %d read outside its table for token %d: %d - %d = %d (it holds the table's "
                              "rows %d..%d, local rows 0..%d).\n%s", k, t, t, row0, j, row0, row0 + Vl - 1, Vl - 1,
                              j == Vl || j == -1
                                  ? "That is one row past its end: off by one.  The test is 0 <= local < V_pad/tp."
                                  : "A token outside [r V_pad/tp, (r+1) V_pad/tp) is another rank's: check "
                                    "0 <= local < V_pad/tp and write zeros instead.");
            else if (read && owner && (j == local + 1 || j == local - 1))
                tutorial_note("Rank %d read its row %d for token %d; the right one is %d - %d = %d: off by one.", k, j,
                              t, t, row0, local);
            else if (read && !owner)
                tutorial_note("Rank %d added its row %d for token %d, which is not in its rows %d..%d: it must "
                              "write zeros for another rank's token.", k, j, t, row0, row0 + Vl - 1);
            else if (read)
                tutorial_note("Rank %d read its row %d for token %d; the right one is %d - %d = %d.", k, j, t, t,
                              row0, local);
            else if (c == 0)
                tutorial_note("Rank %d holds token %d (its rows %d..%d, local row %d) but added zeros for it%s", k, t,
                              row0, row0 + Vl - 1, local,
                              local == 0 || local == Vl - 1
                                  ? ": its first or last row fails the range test, off by one.  The test is "
                                    "0 <= local < V_pad/tp."
                                  : ".");
            else if (c == UNWRITTEN)
                tutorial_note("The row of token %d was never written (still %g) while rank %d's table alone was "
                              "filled.", t, (double)UNWRITTEN, k);
            else
                tutorial_note("With only rank %d's table filled (row j holding %g + j), token %d got %g; "
                              "expected %g.", k, MARK, t, c, want);
            return;
        }
    }
    tutorial_note("With one rank's table filled at a time every rank adds the right row: "
                  "is x overwritten everywhere, and summed once?");
}

static bool check_embedding(int tp, const dense_t *d)
{
    char what[32];
    snprintf(what, sizeof what, "tp %d, blank 3", tp);
    const int Vp = vocab_padded(tp), Vl = Vp / tp;
    emb_run *x = calloc(1, sizeof *x);
    if (x == NULL)
        return false;
    x->tp = tp;
    x->marked = -1;
    x->dense = d;
    bool ok = tutorial_launch(what, tp, emb_device, x) == 0;
    for (int r = 0; ok && r < tp; r++) {
        const ptdp_real *o = x->x[r];
        int at = -1;
        double worst = 0;
        bool not_zeroed = tp > 1;
        for (int i = 0; i < R * C; i++) {
            double e = diff(o[i], d->x[i]);
            if (e > worst) {
                worst = e;
                at = i;
            }
            if (e > TOL)
                not_zeroed = not_zeroed && diff(o[i], d->x[i] + (tp - 1) * UNWRITTEN) <= 1e-9;
        }
        if (worst <= TOL)
            continue;
        ok = false;
        int i = at / C;
        tutorial_wrong("%s: rank %d's x[%d][%d] (token %d) is %.6g; wte[%d][%d] is %.6g.", what, r, i, at % C,
                       (int)TOKENS[i], (double)o[at], (int)TOKENS[i], at % C, (double)d->x[at]);
        if (tp > 1 && x->comm[r].reduces == 0)
            tutorial_note("rank %d made no all-reduce: its x holds only the tokens in its rows %d..%d, zeros "
                          "for the others.\nOne all-reduce adds, for each token, the one rank that holds it.", r,
                          r * Vl, (r + 1) * Vl - 1);
        else if (not_zeroed)
            tutorial_note("x is off by exactly (tp-1) x %g = %g in the rows of tokens other ranks hold: rows not "
                          "zeroed.\nx arrives holding anything (here %g); a rank must write zeros for a token it "
                          "does not hold, or the all-reduce adds the other ranks' garbage.", (double)UNWRITTEN,
                          (tp - 1) * (double)UNWRITTEN, (double)UNWRITTEN);
        else
            diagnose_lookup(tp, d, what);
    }
    if (ok && tp > 1) {
        double S = (double)R * C * sizeof(ptdp_real);
        for (int r = 0; ok && r < tp; r++) {
            const comm_count *c = &x->comm[r];
            if (c->calls == 1 && c->reduces == 1)
                continue;
            ok = false;
            tutorial_wrong("%s: rank %d made %llu collective call%s in the lookup (%llu all-reduce%s).", what, r,
                           c->calls, c->calls == 1 ? "" : "s", c->reduces, c->reduces == 1 ? "" : "s");
            tutorial_note("The lookup needs exactly one all-reduce of R x C = %d x %d reals (%.0f B), after every "
                          "row is written.", R, C, S);
        }
    }
    if (ok)
        tutorial_ok("tp %d, blank 3: x = wte[token] on every rank; V = %d padded to %d, %d rows per rank%s", tp, V,
                    Vp, Vl, tp > 1 ? ", one all-reduce" : "");
    free(x);
    return ok;
}

/* =================================== blanks 4 and 5: the attention's backward */

typedef struct {
    ptdp_real y[R * C], dout[R * C], dqkv[R * 3 * C];   /* c_proj's input, the arriving gradients */
    ptdp_real dy[R * C], dP[C * C], dpb[C];             /* one device's c_proj backward */
    ptdp_real dx[R * C], dW[3 * C * C], db[3 * C];      /* one device's c_attn backward */
} dense_bwd;

typedef struct {
    int tp;
    const dense_t *dense;
    const dense_bwd *bwd;
    ptdp_real dy[MAX_TP][R * C], dP[MAX_TP][C * C], dpb[MAX_TP][C];
    ptdp_real dx[MAX_TP][R * C], dW[MAX_TP][3 * C * C], db[MAX_TP][3 * C];
    ptdp_real partial[MAX_TP][R * C];                   /* my heads' term of dx alone */
    comm_count proj[MAX_TP], qkv[MAX_TP];
} bwd_run;

static void dense_backward(const dense_t *d, dense_bwd *g)
{
    fill(g->y, R * C, "y", 1.0);
    fill(g->dout, R * C, "dout", 1.0);
    fill(g->dqkv, R * 3 * C, "dqkv", 1.0);
    memset(g->dP, 0, sizeof g->dP);
    memset(g->dpb, 0, sizeof g->dpb);
    memset(g->dW, 0, sizeof g->dW);
    memset(g->db, 0, sizeof g->db);
    ptdp_tensor dy = T2(g->dy, R, C), dpb = T2(g->dpb, 1, C), dx = T2(g->dx, R, C), db = T2(g->db, 1, 3 * C);
    ptdp_linear_backward(&dy, T2(g->dP, C, C), &dpb, T2((ptdp_real *)g->dout, R, C), T2(g->y, R, C),
                         T2((ptdp_real *)d->P, C, C), false);
    ptdp_linear_backward(&dx, T2(g->dW, 3 * C, C), &db, T2(g->dqkv, R, 3 * C), T2((ptdp_real *)d->x, R, C),
                         T2((ptdp_real *)d->W, 3 * C, C), false);
}

/* Column j of my heads' q | k | v (0 <= j < 3n) in the whole 3C. */
static int qkv_col(int j, int n, int r) { return (j / n) * C + r * n + j % n; }

static int bwd_device(ptdp_device *dev, void *arg)
{
    bwd_run *x = arg;
    const dense_t *d = x->dense;
    const dense_bwd *g = x->bwd;
    const int r = dev->rank, n = C / x->tp;
    ptdp_comm *tp = dev->world;
    ptdp_tensor W, b, P, dout, y_local, dy, dP, dpb, in, w_local, b_local, P_local, dqkv, dx, dW, db;
    int rc;
    if ((rc = device_tensor(dev, &W, "c_attn.weight", 3 * C, C, 0)) ||
        (rc = device_tensor(dev, &b, "c_attn.bias", 1, 3 * C, 0)) ||
        (rc = device_tensor(dev, &P, "c_proj.weight", C, C, 0)) ||
        (rc = device_tensor(dev, &dout, "dout", R, C, 0)) || (rc = device_tensor(dev, &y_local, "y local", R, n, 0)) ||
        (rc = device_tensor(dev, &dy, "dy local", R, n, UNWRITTEN)) ||
        (rc = device_tensor(dev, &dP, "dP local", C, n, 0)) || (rc = device_tensor(dev, &dpb, "dpb", 1, C, 0)) ||
        (rc = device_tensor(dev, &in, "x", R, C, 0)) ||
        (rc = device_tensor(dev, &w_local, "c_attn.weight local", 3 * n, C, 0)) ||
        (rc = device_tensor(dev, &b_local, "c_attn.bias local", 1, 3 * n, 0)) ||
        (rc = device_tensor(dev, &dqkv, "dqkv local", R, 3 * n, 0)) ||
        (rc = device_tensor(dev, &dx, "dx", R, C, UNWRITTEN)) ||
        (rc = device_tensor(dev, &dW, "dW local", 3 * n, C, 0)) || (rc = device_tensor(dev, &db, "db local", 1, 3 * n, 0)))
        return rc;
    memcpy(W.data, d->W, sizeof d->W);
    memcpy(b.data, d->b, sizeof d->b);
    memcpy(P.data, d->P, sizeof d->P);
    memcpy(in.data, d->x, sizeof d->x);
    memcpy(dout.data, g->dout, sizeof g->dout);
    for (int i = 0; i < R; i++)
        for (int j = 0; j < 3 * n; j++) {
            if (j < n)
                *ptdp_at(y_local, i, j) = g->y[i * C + r * n + j];
            *ptdp_at(dqkv, i, j) = g->dqkv[i * 3 * C + qkv_col(j, n, r)];
        }
    if ((rc = lesson_qkv_shard(tp, NH, W, b, w_local, b_local)) != 0 ||   /* right: blank 1 passed */
        (rc = lesson_proj_shard(tp, P, &P_local)) != 0)
        return rc;
    count_begin(dev, &x->proj[r]);
    if ((rc = lesson_proj_backward(tp, dy, dP, dpb, dout, y_local, P_local)) != 0)
        return rc;
    count_end(dev, &x->proj[r]);
    count_begin(dev, &x->qkv[r]);
    if ((rc = lesson_qkv_backward(tp, dx, dW, db, dqkv, in, w_local)) != 0)
        return rc;
    count_end(dev, &x->qkv[r]);
    ptdp_tensor part = T2(x->partial[r], R, C);
    ptdp_linear_backward(&part, T2(x->dW[r], 3 * n, C), NULL, dqkv, in, w_local, false);   /* dW[r]: scratch */
    memcpy(x->dy[r], dy.data, (size_t)R * n * sizeof(ptdp_real));
    memcpy(x->dP[r], dP.data, (size_t)C * n * sizeof(ptdp_real));
    memcpy(x->dpb[r], dpb.data, sizeof x->dpb[r]);
    memcpy(x->dx[r], dx.data, sizeof x->dx[r]);
    memcpy(x->dW[r], dW.data, (size_t)3 * n * C * sizeof(ptdp_real));
    memcpy(x->db[r], db.data, (size_t)3 * n * sizeof(ptdp_real));
    return PTDP_OK;
}

/* The largest |got - want| of n values, and where. */
static double worst_of(const ptdp_real *got, const ptdp_real *want, int n, int *at)
{
    double worst = 0;
    *at = 0;
    for (int i = 0; i < n; i++)
        if (diff(got[i], want[i]) > worst) {
            worst = diff(got[i], want[i]);
            *at = i;
        }
    return worst;
}

/* Blank 4 on rank r: dy_local, dP_local, db against one device's. */
static bool judge_proj_backward(const bwd_run *x, int r, const char *what)
{
    const dense_bwd *g = x->bwd;
    const int n = C / x->tp;
    if (x->tp > 1 && x->proj[r].calls != 0) {
        tutorial_wrong("%s: rank %d made %llu collective call%s in c_proj's backward.", what, r, x->proj[r].calls,
                       x->proj[r].calls == 1 ? "" : "s");
        tutorial_note("It needs none: dout is already whole on every rank (g's backward is the identity), "
                      "dy_r = dout P_r needs\nonly my columns, and every rank adds the same column sums of dout "
                      "into its whole bias (blank 4).");
        return false;
    }
    ptdp_real want_dy[R * C], want_dP[C * C];
    for (int i = 0; i < R; i++)
        for (int j = 0; j < n; j++)
            want_dy[i * n + j] = g->dy[i * C + r * n + j];
    for (int i = 0; i < C; i++)
        for (int j = 0; j < n; j++)
            want_dP[i * n + j] = g->dP[i * C + r * n + j];
    int at;
    if (worst_of(x->dy[r], want_dy, R * n, &at) > TOL) {
        tutorial_wrong("%s: rank %d's dy_local[%d][%d] is %.6g; one device's dy at [%d][%d] is %.6g.", what, r,
                       at / n, at % n, (double)x->dy[r][at], at / n, r * n + at % n, (double)want_dy[at]);
        tutorial_note("dy_r = dout P_r: the gradient of my heads' outputs, through my columns of c_proj (blank 4).");
        return false;
    }
    if (worst_of(x->dP[r], want_dP, C * n, &at) > TOL) {
        tutorial_wrong("%s: rank %d's c_proj.weight gradient [%d][%d] is %.6g; one device's is %.6g.", what, r,
                       at / n, at % n, (double)x->dP[r][at], (double)want_dP[at]);
        tutorial_note("dP_r += dout^T y_r: my columns of the weight see only my heads' outputs (blank 4).");
        return false;
    }
    if (worst_of(x->dpb[r], g->dpb, C, &at) > TOL) {
        bool zero = true;
        for (int i = 0; i < C; i++)
            zero = zero && x->dpb[r][i] == 0;
        tutorial_wrong("%s: rank %d's c_proj.bias gradient [%d] is %.6g; one device's is %.6g.", what, r, at,
                       (double)x->dpb[r][at], (double)g->dpb[at]);
        tutorial_note(zero ? "Nothing was added: every rank holds the whole bias, so every rank adds the column sums "
                             "of dout\n(the same on every rank: no communication) (blank 4)."
                           : "db += the column sums of dout, whole, on every rank (blank 4).");
        return false;
    }
    return true;
}

/* Blank 5 on rank r: dx, dW_local, db_local against one device's. */
static bool judge_qkv_backward(const bwd_run *x, int r, const char *what)
{
    const dense_bwd *g = x->bwd;
    const int n = C / x->tp;
    int at;
    if (worst_of(x->dx[r], g->dx, R * C, &at) > TOL) {
        tutorial_wrong("%s: rank %d's dx[%d][%d] is %.6g; one device's is %.6g.", what, r, at / C, at % C,
                       (double)x->dx[r][at], (double)g->dx[at]);
        int p;
        if (x->tp > 1 && worst_of(x->dx[r], x->partial[r], R * C, &p) <= TOL)
            tutorial_note("It is rank %d's own term dqkv_r W_r alone: x fed every rank's heads (f's forward is "
                          "the identity),\nso its gradient is the sum over ranks — f's backward is one all-reduce "
                          "of dx (blank 5).", r);
        else
            tutorial_note("dx = sum over ranks of dqkv_r W_r: my term, then one all-reduce (blank 5).");
        return false;
    }
    ptdp_real want_dW[3 * C * C], want_db[3 * C];
    for (int j = 0; j < 3 * n; j++) {
        memcpy(&want_dW[j * C], &g->dW[qkv_col(j, n, r) * C], C * sizeof(ptdp_real));
        want_db[j] = g->db[qkv_col(j, n, r)];
    }
    if (worst_of(x->dW[r], want_dW, 3 * n * C, &at) > TOL || worst_of(x->db[r], want_db, 3 * n, &at) > TOL) {
        tutorial_wrong("%s: rank %d's c_attn weight or bias gradient differs from one device's rows of its heads.",
                       what, r);
        tutorial_note("dW_r += dqkv_r^T x and db_r += the column sums of dqkv_r: my rows only, no communication "
                      "(blank 5).");
        return false;
    }
    if (x->tp > 1 && (x->qkv[r].calls != 1 || x->qkv[r].reduces != 1)) {
        tutorial_wrong("%s: rank %d made %llu collective call%s in c_attn's backward (%llu all-reduce%s).", what, r,
                       x->qkv[r].calls, x->qkv[r].calls == 1 ? "" : "s", x->qkv[r].reduces,
                       x->qkv[r].reduces == 1 ? "" : "s");
        tutorial_note("Exactly one: the all-reduce of dx (f's backward) (blank 5).");
        return false;
    }
    return true;
}

static bool check_backward(int tp, const dense_t *d, const dense_bwd *g)
{
    char what[32];
    snprintf(what, sizeof what, "tp %d, blanks 4, 5", tp);
    bwd_run *x = calloc(1, sizeof *x);
    if (x == NULL)
        return false;
    x->tp = tp;
    x->dense = d;
    x->bwd = g;
    bool ok = tutorial_launch(what, tp, bwd_device, x) == 0;
    for (int r = 0; ok && r < tp; r++)
        ok = judge_proj_backward(x, r, what) && judge_qkv_backward(x, r, what);
    if (ok)
        tutorial_ok("tp %d, blanks 4, 5: c_proj's and c_attn's gradients equal one device's; c_proj's backward "
                    "sends nothing, c_attn's %s", tp, tp > 1 ? "one all-reduce of dx (f)" : "nothing at tp 1");
    free(x);
    return ok;
}

int main(void)
{
    tutorial_begin("07", "tensor parallelism in attention: heads, c_proj, the vocab-parallel embedding");
    static dense_t dense;
    dense_compute(&dense);
    bool ok = true;
    for (int k = 0; ok && k < NTPS; k++)
        ok = check_shard(TPS[k], &dense);
    for (int k = 0; ok && k < NTPS; k++)
        ok = check_attention(TPS[k], &dense);
    for (int k = 0; ok && k < NTPS; k++)
        ok = check_embedding(TPS[k], &dense);
    static dense_bwd bwd;
    dense_backward(&dense, &bwd);
    for (int k = 0; ok && k < NTPS; k++)
        ok = check_backward(TPS[k], &dense, &bwd);
    if (ok)
        tutorial_note("per block the forward makes 2 all-reduces (attention's c_proj, the MLP's c_proj), the "
                      "backward 2 (before c_attn, before c_fc);\nthe whole GPT adds the embedding's forward and "
                      "the head's backward (ptdp train --model gpt --tp 2)");
    if (ok)
        ok = check_gqa();   /* blanks 6, 7: the llama's kv heads (check_gqa.c) */
    return tutorial_end();
}
