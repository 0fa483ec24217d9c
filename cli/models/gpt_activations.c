/*
 * gpt_activations.c — `ptdp bench activations`: Korthikanti et al.'s table
 * of activation memory per transformer layer ("Reducing Activation
 * Recomputation in Large Transformer Models", 2022, table 2), in ptdp's
 * own terms and measured by the arena.
 *
 * The paper counts what one layer keeps for its backward, in bytes, with
 * s positions, b sequences, h hidden, a heads, t the tensor-parallel size,
 * 16-bit activations and 1-byte dropout masks:
 *
 *   no parallelism          sbh (34 + 5as/h)
 *   tensor parallel         sbh (10 + 24/t + 5as/(ht))
 *   + sequence parallel     sbh (34/t + 5as/(ht))
 *   tensor + selective      sbh (10 + 24/t)
 *   tensor + SP + selective sbh 34/t
 *   full recomputation      2sbh
 *
 * ptdp's block keeps, per token, e bytes for each element of
 *
 *   x, x2               the two LayerNorms' inputs            2h   (region rows)
 *   ln1, ln2            their outputs, the column layers' in  2h   (region rows)
 *   qkv, y              attention's q k v and its output      4h/t
 *   fc, gelu            the MLP's two F-wide tensors          2F/t
 *   mean, 1/std x 2     the LayerNorms' statistics, a real    4 r bytes (region rows;
 *                       each (float under bf16)               r = 4, or 8 in ptdp-f64)
 *
 * and per sequence the probabilities a (s^2)/t (none under selective
 * recomputation), so with F = 4h and e the bytes of an element (4 in float,
 * 2 under --precision bf16; 8 in ptdp-f64):
 *
 *   tensor parallel      sbh (4e + 12e/t + e as/(ht)) + 4r sb
 *   + SP                 sbh (16e/t + e as/(ht)) + 4r sb/t       (region rows = s/t)
 *   full recomputation   e sbh: the block's input alone
 *
 * The differences from the paper are three: ptdp keeps no dropout masks
 * (its masks are counter-based, drawn again in the backward: the paper's
 * sbh of each of two residual masks and as^2 b of the attention mask), no
 * separate dropout output of the probabilities (the paper's 2as^2 b), and
 * does keep the LayerNorms' statistics (O(sb), which the paper leaves out).
 *
 * Measured: a block's bytes are the arena's activation peak with two blocks
 * minus with one (pp 1, one micro-batch, one step): everything else at the
 * peak — the embedding's output, the head, the backward's scratch, the one
 * block a full recomputation rebuilds — is the same in both runs.
 *
 *     peak(L = 2) ──┐
 *                   ├── one block's kept bytes ══ the formula  (exit 1 if not)
 *     peak(L = 1) ──┘
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "../args.h"
#include "../model_flags.h"
#include "gpt_activations.h"
#include "ptdp/error.h"
#include "ptdp/gpt.h"
#include "ptdp/models.h"
#include "ptdp/train.h"

/* ---- the table's rows ---------------------------------------------------------- */

typedef struct {
    const char *name;
    bool tp, sp, selective, full;
    const char *paper;              /* its bytes per layer, as published */
    const char *why;                /* ptdp's against it, in a sentence  */
} row;

static const row rows[] = {
    { "no parallelism", false, false, false, false, "sbh(34 + 5as/h)",
      "34 = 16 h-wide tensors x 2 bytes + 2 dropout masks of 1 byte; 5as/h = the probabilities (2), "
      "their dropout mask (1) and output (2): ptdp keeps the same 16 tensors at e bytes, the probabilities "
      "once, no mask, and the LayerNorms' statistics (4r sb)" },
    { "tensor parallel", true, false, false, false, "sbh(10 + 24/t + 5as/(ht))",
      "10 = the LayerNorms' inputs and outputs (4 x 2) + 2 masks, all replicated on the t ranks; ptdp's 4e "
      "is the same four tensors without the masks, 12e/t the split ones (the paper's 24/t at e = 2)" },
    { "tensor + sequence parallel", true, true, false, false, "sbh(34/t + 5as/(ht))",
      "everything divided by t: the LayerNorms' inputs, outputs (the column layers keep only the rank's "
      "shard and gather it again in the backward) and statistics live on the rank's s/t positions" },
    { "tensor + selective", true, false, true, false, "sbh(10 + 24/t)",
      "the attention core is recomputed in the backward, so the T x T probabilities are not kept: the "
      "tensor-parallel row without its as/(ht) term" },
    { "tensor + SP + selective", true, true, true, false, "sbh(34/t)",
      "the sequence-parallel row without the probabilities: ptdp's 16e/t against the paper's 34/t "
      "(16 x 2 bytes + 2 masks)" },
    { "full recomputation", true, false, false, true, "2sbh",
      "each block keeps its input alone, e bytes an element (the paper's 2 is bf16's e); the block "
      "recomputed in the backward is on top once, not per block" },
};
enum { NROWS = sizeof rows / sizeof rows[0] };

/* ---- ptdp's formula -------------------------------------------------------------- */

/* sbh (A + B/t) + P as^2 b/t + S sb: one row's coefficients in bytes, e
 * bytes an element, f = F/h (4 in the paper). */
typedef struct {
    double A, B, P, S;      /* S is per token; under SP it is divided by t already */
} coeffs;

static coeffs coeffs_of(const row *r, double e, double f, int t, double stat)
{
    coeffs c = { 0 };
    if (r->full) {
        c.A = e;                                   /* the block's input, all its rows */
        return c;
    }
    const double full = 4 * e, split = (4 + 2 * f) * e;   /* x x2 ln1 ln2; qkv y fc gelu */
    c.A = r->sp ? 0 : full;
    c.B = r->sp ? full + split : split;
    c.P = r->selective ? 0 : e;
    c.S = r->sp ? 4 * stat / t : 4 * stat;   /* two LayerNorms' mean and 1/std */
    return c;
}

static double coeffs_bytes(const coeffs *c, double s, double b, double h, double a, int t)
{
    return s * b * h * (c->A + c->B / t) + c->P * a * s * s * b / t + c->S * s * b;
}

static void coeffs_words(const coeffs *c, const row *r, int t, char *buf, size_t n)
{
    if (r->full) {
        snprintf(buf, n, "%gsbh", c->A);
        return;
    }
    char terms[96] = "", probs[48] = "";
    if (!r->tp)                                  /* t = 1: one number */
        snprintf(terms, sizeof terms, "%g", c->A + c->B);
    else if (c->A > 0)
        snprintf(terms, sizeof terms, "%g + %g/t", c->A, c->B);
    else
        snprintf(terms, sizeof terms, "%g/t", c->B);
    if (c->P > 0)
        snprintf(probs, sizeof probs, r->tp ? " + %gas/(ht)" : " + %gas/h", c->P);
    snprintf(buf, n, "sbh(%s%s) + %gsb%s", terms, probs, r->sp ? c->S * t : c->S, r->sp ? "/t" : "");
}

/* ---- measuring: the arena's activation peak ------------------------------------------ */

typedef struct {
    ptdp_model_config model;        /* the default GPT on its built-in corpus */
    int batch;
    bool bf16;
} setup;

static int acts_peak(const setup *su, const row *r, int tp, int layers, double *peak, char *msg, size_t msglen)
{
    ptdp_train_config c = ptdp_train_defaults();
    c.model = su->model;
    c.model.layers = layers;
    ptdp_gpt(&c.model)->vocab_padded =
        ptdp_gpt_pad_vocab(ptdp_gpt(&c.model)->vocab, ptdp_gpt(&c.model)->vocab_multiple, tp);
    c.tp = tp;
    c.batch = su->batch;
    c.micro_batches = 1;
    c.steps = 1;
    c.sp = r->sp;
    c.recompute = r->full;
    c.recompute_core = r->selective;
    c.bf16 = su->bf16;
    ptdp_train_result res;
    ptdp_launch_result lr;
    memset(&res, 0, sizeof res);
    memset(&lr, 0, sizeof lr);
    ptdp_launch_opts o = { .result = &lr };
    int err = ptdp_train(&c, &o, NULL, NULL, &res, msg, msglen);
    if (err == 0)
        *peak = (double)res.peak_acts[0];
    else if (lr.message[0] != '\0')
        snprintf(msg, msglen, "%s", lr.message);
    ptdp_train_result_free(&res);
    ptdp_launch_result_free(&lr);
    return err;
}

/* ---- the command ----------------------------------------------------------------- */

static void usage(void)
{
    printf("usage: ptdp bench activations [--tp T,…] [--precision %s|bf16]\n"
           "\n"
           "Korthikanti et al. (2022), table 2: the activation bytes one transformer block keeps for its\n"
           "backward, with tensor parallelism, sequence parallelism, selective and full recomputation.\n"
           "For the default GPT (ptdp train --model gpt) each row prints ptdp's formula, its bytes, the\n"
           "arena's measurement (the activation peak with two blocks minus with one) and the paper's\n"
           "coefficients, then what differs and why.  Exits 1 if a measurement differs from its formula.\n"
           "\n"
           "  --tp T,…       the tensor-parallel sizes to tabulate, each 2..heads (default 2,4)\n"
           "  --precision P  the elements' type: %s (default) or bf16 (2 bytes, the paper's)\n",
           PTDP_REAL_NAME, PTDP_REAL_NAME);
}

static int parse(int argc, char **argv, int *tps, int *ntp, bool *bf16, int heads)
{
    ptdp_args a;
    ptdp_args_init(&a, "bench activations", argc, argv, 1);
    *ntp = 0;
    while (ptdp_args_next(&a)) {
        int rc = 0, k = 0;
        if (ptdp_args_is(&a, "--help")) { usage(); return -1; }
        else if (ptdp_args_is(&a, "--tp")) {
            size_t t[8];
            rc = ptdp_args_size_list(&a, 2, (size_t)heads, t, 8, ntp);
            for (int i = 0; rc == 0 && i < *ntp; i++)
                tps[i] = (int)t[i];
        } else if (ptdp_args_is(&a, "--precision")) {
            static const char *const names[] = { PTDP_REAL_NAME, "bf16" };
            rc = ptdp_args_enum(&a, names, 2, &k);
            *bf16 = k == 1;
#ifdef PTDP_DOUBLE
            if (rc == 0 && *bf16)
                return ptdp_usage_error("bench activations", "--precision bf16 keeps float master weights: "
                                        "run it with the float build (ptdp), not ptdp-f64");
#endif
        } else rc = ptdp_args_unknown(&a);
        if (rc != 0)
            return rc;
    }
    if (a.status != 0)
        return a.status;
    for (int i = 0; i < *ntp; i++)
        if (heads % tps[i] != 0)
            return ptdp_usage_error("bench activations", "--tp %d: the GPT's %d heads must divide by it (try "
                                    "a divisor of %d)", tps[i], heads, heads);
    if (*ntp == 0) {
        tps[0] = 2;
        tps[1] = 4;
        *ntp = 2;
    }
    return 0;
}

/* "  name   words words …" wrapped at 100 columns under the words. */
static void print_wrapped(const char *name, const char *text)
{
    int col = printf("  %-27s", name);
    const int indent = col;
    while (*text != '\0') {
        size_t w = strcspn(text, " ");
        if (col > indent && col + 1 + (int)w > 100)
            col = printf("\n%*s", indent, "") - 1;
        col += printf(" %.*s", (int)w, text);
        text += w;
        text += strspn(text, " ");
    }
    printf("\n");
}

/* A LayerNorm statistic: a real, float under bf16 (apex keeps them in float). */
static double stat_bytes(const setup *su) { return su->bf16 ? sizeof(float) : sizeof(ptdp_real); }

static void print_header(const setup *su, double e)
{
    const ptdp_gpt_settings *g = ptdp_gpt(&su->model);
    printf("Korthikanti et al. (2022), table 2: activation bytes one transformer block keeps, measured\n"
           "GPT as ptdp train --model gpt sets it: s = %d positions, b = %d sequences a micro-batch,\n"
           "h = %d, F = %d (%gh), a = %d heads; e = %g bytes an element (%s), LayerNorm statistics r = %g bytes\n"
           "measured: the arena's activation peak with 2 blocks minus with 1 (pp 1, one micro-batch)\n",
           g->seq_len, su->batch, su->model.hidden, su->model.ffn, (double)su->model.ffn / su->model.hidden,
           g->heads, e, su->bf16 ? "bf16" : PTDP_REAL_NAME, stat_bytes(su));
}

/* One tp's six rows; returns how many differ. */
static int table(const setup *su, int tp, double e, bool *failed)
{
    const ptdp_gpt_settings *g = ptdp_gpt(&su->model);
    const double s = g->seq_len, b = su->batch, h = su->model.hidden, a = g->heads;
    const double f = (double)su->model.ffn / su->model.hidden;
    int bad = 0;
    printf("\ntp %d\n  %-27s %-34s %10s %10s %-7s %s\n", tp, "row", "ptdp's formula", "bytes", "measured", "",
           "paper (2-byte elements, 1-byte masks)");
    for (int i = 0; i < NROWS; i++) {
        const row *r = &rows[i];
        const int t = r->tp ? tp : 1;
        const coeffs c = coeffs_of(r, e, f, t, stat_bytes(su));
        const double want = coeffs_bytes(&c, s, b, h, a, t);
        char words[128], msg[PTDP_MSG_MAX] = "";
        coeffs_words(&c, r, t, words, sizeof words);
        double p1 = 0, p2 = 0;
        if (acts_peak(su, r, t, 1, &p1, msg, sizeof msg) != 0 || acts_peak(su, r, t, 2, &p2, msg, sizeof msg) != 0) {
            printf("  %-27s %-34s %10.0f   not run: %s\n", r->name, words, want, msg);
            *failed = true;
            continue;
        }
        const double got = p2 - p1;
        const bool ok = fabs(got - want) < 0.5;
        bad += !ok;
        printf("  %-27s %-34s %10.0f %10.0f %-7s %s\n", r->name, words, want, got, ok ? "ok" : "DIFFERS", r->paper);
    }
    return bad;
}

int ptdp_gpt_bench_activations(int argc, char **argv)
{
    setup su = { .batch = ptdp_train_defaults().batch };
    unsigned char *corpus = NULL;
    char msg[PTDP_MSG_MAX];
    int tps[8], ntp = 0;
    const ptdp_model_config d = ptdp_gpt_default_config();
    int rc = parse(argc, argv, tps, &ntp, &su.bf16, ptdp_gpt(&d)->heads);
    if (rc != 0)
        return rc < 0 ? PTDP_EXIT_OK : rc;
    if (ptdp_model_cli_for(&ptdp_gpt_ops)->figure_model(&su.model, &corpus, msg, sizeof msg) != 0) {
        fprintf(stderr, "ptdp bench activations: %s\n", msg);
        return PTDP_EXIT_FAIL;
    }
    const double e = su.bf16 ? sizeof(ptdp_bf16) : sizeof(ptdp_real);
    print_header(&su, e);
    int bad = 0;
    bool failed = false;
    for (int i = 0; i < ntp; i++)
        bad += table(&su, tps[i], e, &failed);
    printf("\nwhat differs from the paper, row by row:\n");
    for (int i = 0; i < NROWS; i++)
        print_wrapped(rows[i].name, rows[i].why);
    free(corpus);
    if (bad > 0 || failed) {
        fprintf(stderr, "ptdp bench activations: %d measurement%s differ%s from the formula%s\n", bad,
                bad == 1 ? "" : "s", bad == 1 ? "s" : "", failed ? ", and a run failed" : "");
        return PTDP_EXIT_FAIL;
    }
    return PTDP_EXIT_OK;
}
