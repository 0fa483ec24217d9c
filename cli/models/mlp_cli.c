/*
 * mlp_cli.c — the MLP on the command line: its flags, its help, and what
 * `ptdp train` prints and reports about it (model_flags.h).
 *
 *     flag        field     smallest   largest (train, bench)
 *     --d-in      d_in      1          2^20, 2^16
 *     --classes   classes   2          2^22, 2^16   (softmax over one class learns nothing)
 *
 *   header   model d_in 6, hidden 8, ffn 16, 2 blocks, 5 classes; batch …
 *   report   "model": {"name": "mlp", "d_in": 6, "hidden": 8, …, "classes": 5}
 */
#include "../model_flags.h"

#include "ptdp/mlp.h"

static const ptdp_model_flag mlp_flags[] = {
    { "--d-in", PTDP_MLP_OWN(d_in), 1, { 1 << 20, 1 << 16 }, false },
    { "--classes", PTDP_MLP_OWN(classes), 2, { 1 << 22, 1 << 16 }, false },
};

static ptdp_model_config mlp_defaults(void)
{
    return ptdp_train_defaults().model;
}

static void mlp_help(FILE *out, const ptdp_model_config *d)
{
    ptdp_model_config own = ptdp_model_of(d) == &ptdp_mlp_ops ? *d : mlp_defaults();
    fprintf(out, "  --d-in N --classes N            the MLP (default %d, %d)\n", ptdp_mlp(&own)->d_in,
            ptdp_mlp(&own)->classes);
}

static void mlp_describe(const ptdp_train_config *c, int mb, const char *data_name)
{
    const ptdp_model_config *m = &c->model;
    (void)data_name;
    printf("\n  model d_in %d, hidden %d, ffn %d, %d blocks, %d classes; batch %d, %d micro-batch%s of %d\n",
           ptdp_mlp(m)->d_in, m->hidden, m->ffn, m->layers, ptdp_mlp(m)->classes, c->batch, c->micro_batches,
           c->micro_batches == 1 ? "" : "es", mb);
}

static void mlp_report_keys(FILE *f, const ptdp_train_config *c)
{
    const ptdp_model_config *m = &c->model;
    fprintf(f, ", \"d_in\": %d, \"hidden\": %d, \"ffn\": %d, \"layers\": %d, \"classes\": %d", ptdp_mlp(m)->d_in,
            m->hidden,
            m->ffn, m->layers, ptdp_mlp(m)->classes);
}

static void mlp_samples(const ptdp_model_config *m, bool *tokens, int *x_cols, int *y_cols)
{
    *tokens = false;
    *x_cols = ptdp_mlp(m)->d_in;
    *y_cols = 0;
}

/* `ptdp bench train`'s MLP: wide enough that the GEMMs dominate. */
static void mlp_bench_defaults(ptdp_model_config *m, int *batch)
{
    *m = PTDP_MLP_CONFIG(.ops = m->ops, .d_in = 1024, .hidden = 1024, .ffn = 4096, .layers = 4, .classes = 10);
    *batch = 64;
}

static void mlp_bench_describe(FILE *f, const ptdp_model_config *m)
{
    fprintf(f, "mlp, d_in %d, hidden %d, ffn %d, %d blocks, %d classes", ptdp_mlp(m)->d_in, m->hidden, m->ffn,
            m->layers, ptdp_mlp(m)->classes);
}

const ptdp_model_cli ptdp_mlp_cli = {
    .ops = &ptdp_mlp_ops,
    .flags = mlp_flags,
    .nflags = (int)(sizeof mlp_flags / sizeof mlp_flags[0]),
    .defaults = mlp_defaults,
    .help = mlp_help,
    .describe = mlp_describe,
    .report_keys = mlp_report_keys,
    .samples = mlp_samples,
    .bench_defaults = mlp_bench_defaults,
    .bench_describe = mlp_bench_describe,
    .bench_gemm_target = 1.08,
    .bench_torch_target = 0.8,
};
