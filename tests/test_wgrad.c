/*
 * test_wgrad.c — a split backward (B, then W) adds the bits of the unsplit one.
 *
 *   unsplit:  F0 BACKWARD0 F1 BACKWARD1               → gradient g
 *   split:    F0 B0 F1 B1 W0 W1                       → gradient g', B0's
 *             copies of dY and X waiting in the arena  ("zb.wgrad")
 *
 * g' == g bit for bit, because W runs the same BLAS call on bit-identical
 * copies of the same operands, and every gradient receives its
 * contributions in the same order (W0's before W1's; a one-stage GPT's
 * tied wte gets the head's product, then the lookups', in W both).  For
 * the MLP and the GPT, with dropout, under TP (and the GPT under SP), and
 * a GPT of experts: its router's and experts' weights go through the same
 * linear op, so their dW waits for W too — untouched after B.
 *
 * The bytes W waits on are a formula: per linear layer and micro-batch
 * rows x (in + out) reals (this shard's in and out); the arena's "acts"
 * hold exactly those between B and W, and nothing after W.
 */
#include <stdlib.h>
#include <string.h>

#include "gpt_shape.h"
#include "harness.h"
#include "ptdp/gpt.h"
#include "ptdp/mesh.h"
#include "ptdp/mlp.h"
#include "ptdp/models.h"
#include "ptdp/wgrad.h"

static const harness_tcase wgrad_tests = { .name = "wgrad", .timeout_s = 60 };

typedef struct {
    bool gpt;
    int tp;
    bool sp;
    double dropout;
    bool recompute;
    int experts;      /* a mixture of experts in every block (0: dense) */
} split_case;

static ptdp_model_config config_of(const split_case *k)
{
    ptdp_model_config c;
    if (k->gpt) {
        /* the built-in sums' 62 tokens */
        c = gpt_of((gpt_shape){ .layers = 2, .hidden = 32, .ffn = 64, .heads = 8, .seq_len = 8, .vocab = 62 }, 0);
        ptdp_gpt(&c)->moe_experts = k->experts;
        ptdp_gpt(&c)->moe_top_k = 2;
    } else {
        memset(&c, 0, sizeof c);
        c.ops = &ptdp_mlp_ops;
        ptdp_mlp(&c)->d_in = 12;
        c.hidden = 16;
        c.ffn = 32;
        c.layers = 2;
        ptdp_mlp(&c)->classes = 8;
    }
    return c;
}

/* Elements of the mixtures' weight gradients (the routers', the experts'
 * c_fc and c_proj weights; not their biases, whose sums stay in B) that
 * are not zero. */
static size_t mixture_weights_moved(const ptdp_model *m)
{
    size_t moved = 0;
    for (int i = 0; i < m->nparams; i++) {
        const ptdp_param *p = &m->params[i];
        if (p->is_bias || (strstr(p->name, ".experts.") == NULL && strstr(p->name, ".router.") == NULL))
            continue;
        for (size_t e = 0; e < ptdp_tensor_numel(p->g); e++)
            moved += m->flat_g[p->offset + e] != 0;
    }
    return moved;
}

/* Forward micro-batch k of 2 (3 rows each), keeping its batch. */
static int forward(ptdp_device *dev, ptdp_model *m, ptdp_batch *b, ptdp_acts *acts, int k, bool recompute)
{
    b->first = 3 * k;
    b->rows = 3;
    int rc = ptdp_batch_load(dev, m, b);
    return rc != 0 ? rc : ptdp_model_forward(dev, m, acts, b, (ptdp_tensor){ 0 }, 0, recompute, NULL);
}

static int split_device(ptdp_device *dev, void *arg)
{
    const split_case *k = arg;
    ptdp_model_config cfg = config_of(k);
    ptdp_mesh mesh;
    ptdp_model m;
    DEVICE_TRY(ptdp_mesh_init(dev, 1, k->tp, 1, &mesh));
    mesh.sp = k->sp;
    DEVICE_TRY(ptdp_model_init(dev, &m, &cfg, &mesh, NULL, 5, k->dropout));
    const double scale = 1.0 / (6.0 * m.label_cols);
    ptdp_batch b[2] = { 0 };
    ptdp_acts acts[2];

    /* unsplit: F0 BACKWARD0 F1 BACKWARD1 */
    for (int i = 0; i < 2; i++) {
        DEVICE_TRY(forward(dev, &m, &b[i], &acts[i], i, k->recompute));
        DEVICE_TRY(ptdp_model_backward(dev, &m, &acts[i], NULL, scale, NULL));
        ptdp_batch_free(dev, &b[i]);
    }
    ptdp_real *want = malloc(m.numel * sizeof *want);
    DEVICE_CHECK(dev, want != NULL, "host memory");
    memcpy(want, m.flat_g, m.numel * sizeof *want);
    memset(m.flat_g, 0, m.numel * sizeof *m.flat_g);

    /* split: F0 B0 F1 B1 W0 W1, the bytes held for W counted */
    ptdp_mem_stats ms;
    ptdp_arena_stats(dev->arena, &ms);
    size_t acts0 = ms.current[PTDP_MEM_ACTS];
    size_t held = 0, peak = 0;
    ptdp_wgrad w[2];
    for (int i = 0; i < 2; i++) {
        DEVICE_TRY(forward(dev, &m, &b[i], &acts[i], i, k->recompute));
        w[i].held = &held;
        w[i].peak = &peak;
        DEVICE_TRY(ptdp_model_backward_input(dev, &m, &acts[i], NULL, scale, NULL, &w[i]));
        ptdp_batch_free(dev, &b[i]);
    }
    ptdp_arena_stats(dev->arena, &ms);
    DEVICE_CHECK(dev, ms.current[PTDP_MEM_ACTS] - acts0 == w[0].bytes + w[1].bytes,
                 "acts %zu after two B, W holds %zu + %zu", ms.current[PTDP_MEM_ACTS] - acts0, w[0].bytes,
                 w[1].bytes);
    DEVICE_CHECK(dev, held == w[0].bytes + w[1].bytes && peak == held, "held %zu peak %zu", held, peak);
    if (k->experts > 0)
        DEVICE_CHECK(dev, mixture_weights_moved(&m) == 0,
                     "after B %zu elements of the routers' and experts' weight gradients moved: their dW ran in "
                     "B, not in W", mixture_weights_moved(&m));
    if (!k->gpt) {
        /* per linear layer rows x (in + out): in, fc1, fc2 (this shard's ffn), out */
        const ptdp_mlp *p = ptdp_mlp_of(&m);
        size_t one = ptdp_wgrad_linear_bytes(3, ptdp_mlp(&cfg)->d_in, cfg.hidden) +
                     (size_t)cfg.layers * 2 * ptdp_wgrad_linear_bytes(3, cfg.hidden, p->ffn_local) +
                     ptdp_wgrad_linear_bytes(3, cfg.hidden, p->classes_local);
        DEVICE_CHECK(dev, w[0].bytes == one && w[1].bytes == one, "W holds %zu, formula %zu", w[0].bytes, one);
    }
    for (int i = 0; i < 2; i++)
        DEVICE_TRY(ptdp_model_backward_weight(dev, &m, &w[i]));
    if (k->experts > 0)
        DEVICE_CHECK(dev, mixture_weights_moved(&m) > 0, "W left the mixtures' weight gradients zero");
    ptdp_arena_stats(dev->arena, &ms);
    DEVICE_CHECK(dev, ms.current[PTDP_MEM_ACTS] == acts0 && held == 0, "acts %zu after W, %zu held",
                 ms.current[PTDP_MEM_ACTS], held);

    size_t differ = 0, first = 0;
    for (size_t e = 0; e < m.numel; e++)
        if (memcmp(&want[e], &m.flat_g[e], sizeof want[e]) != 0 && differ++ == 0)
            first = e;
    bool moved = false;
    for (size_t e = 0; e < m.numel; e++)
        moved |= want[e] != 0;
    free(want);
    DEVICE_CHECK(dev, moved, "the unsplit backward left the gradient zero");
    DEVICE_CHECK(dev, differ == 0, "%zu of %zu gradient elements differ, the first at %zu", differ, m.numel, first);
    ptdp_model_free(dev, &m);
    ptdp_mesh_free(&mesh);
    return 0;
}

static const split_case CASES[] = {
    { false, 1, false, 0.0, false, 0 }, { false, 1, false, 0.1, false, 0 }, { false, 2, false, 0.1, false, 0 },
    { false, 1, false, 0.0, true, 0 },  { true, 1, false, 0.0, false, 0 },  { true, 1, false, 0.1, false, 0 },
    { true, 2, false, 0.0, false, 0 },  { true, 2, true, 0.1, false, 0 },   { true, 1, false, 0.0, true, 0 },
    { true, 1, false, 0.0, false, 4 },  { true, 2, false, 0.1, false, 4 },  { true, 1, false, 0.0, true, 4 },
};

LOOP_TEST(wgrad_tests, test_split_backward_is_bit_identical, (int)(sizeof CASES / sizeof CASES[0]))
{
    harness_launch_ok(CASES[_i].tp, split_device, (void *)&CASES[_i], NULL, NULL);
}
END_TEST

/* ptdp_wgrad_gemm alone: recorded, it does nothing until run, then adds
 * dy^T x exactly as the immediate call does; its copies are its own. */
static int gemm_device(ptdp_device *dev, void *arg)
{
    (void)arg;
    ptdp_tensor dw1, dw2, dy, x;
    DEVICE_TRY(ptdp_tensor_alloc(dev, &dw1, "dw1", PTDP_MEM_GRADS, 4, 3));
    DEVICE_TRY(ptdp_tensor_alloc(dev, &dw2, "dw2", PTDP_MEM_GRADS, 4, 3));
    DEVICE_TRY(ptdp_tensor_alloc(dev, &dy, "dy", PTDP_MEM_OTHER, 5, 4));
    DEVICE_TRY(ptdp_tensor_alloc(dev, &x, "x", PTDP_MEM_OTHER, 5, 3));
    for (int i = 0; i < 20; i++)
        dy.data[i] = (ptdp_real)(0.1 * i - 0.7);
    for (int i = 0; i < 15; i++)
        x.data[i] = (ptdp_real)(0.3 - 0.05 * i * i);
    for (int i = 0; i < 12; i++)
        dw1.data[i] = dw2.data[i] = (ptdp_real)(0.01 * i);
    DEVICE_TRY(ptdp_wgrad_gemm(dev, NULL, dw1, dy, x, 0, "now"));
    ptdp_wgrad w;
    ptdp_wgrad_init(&w, NULL, 0);
    DEVICE_TRY(ptdp_wgrad_gemm(dev, &w, dw2, dy, x, 120, "later"));
    DEVICE_CHECK(dev, w.pending && w.n == 1 && w.bytes == ptdp_wgrad_linear_bytes(5, 3, 4), "bytes %zu", w.bytes);
    DEVICE_CHECK(dev, dw2.data[5] == (ptdp_real)0.05, "recorded, not run");
    memset(dy.data, 0, 20 * sizeof *dy.data);   /* the record keeps its own copy */
    double t0 = dev->clock.now;
    DEVICE_TRY(ptdp_wgrad_run(dev, &w));
    double want = 120 / dev->profile->peak_flops;
    DEVICE_CHECK(dev, fabs(dev->clock.now - t0 - want) <= 1e-9 * want, "W charged %g s, want %g s",
                 dev->clock.now - t0, want);
    DEVICE_CHECK(dev, memcmp(dw1.data, dw2.data, 12 * sizeof *dw1.data) == 0, "deferred != immediate");
    DEVICE_CHECK(dev, !w.pending && w.bytes == 0 && w.n == 0, "W freed its records");
    ptdp_tensor_free(dev, &dw1);
    ptdp_tensor_free(dev, &dw2);
    ptdp_tensor_free(dev, &dy);
    ptdp_tensor_free(dev, &x);
    return 0;
}

TEST(wgrad_tests, test_deferred_gemm_equals_immediate)
{
    harness_launch_ok(1, gemm_device, NULL, NULL, NULL);
}
END_TEST

int main(void)
{
    return harness_main("wgrad");
}
