/*
 * floor_shapes.c — `ptdp bench floor --shapes`: the step's own products,
 * each at its own shape, with nothing around them.
 *
 * The floor (bench_floor.c) prices every flop of a step at the speed of one
 * square 2048^3 sgemm.  No step reaches it, and part of the reason is not
 * ptdp's: the step's products are not square.  GPT-2's at T 64 have
 * B T = 256 rows; attention's are T x hd by hd x T for every head; the
 * head's dW sums over only those 256 rows.  OpenBLAS runs such thin
 * products slower than the square one, whoever calls it.  This file
 * measures by how much, so that a step's distance from the floor splits in
 * two: what the shapes cost, and what everything else costs.
 *
 *   1. record   one forward + backward of the model on one device of N
 *               BLAS threads, every product logged as it runs (ptdp_gemm_log,
 *               ops.h): shape, transposes, alpha, beta.  Attention is the
 *               whole T x T matrix, whose Q K^T and P V the floor counts.
 *   2. group    equal shapes together:
 *
 *                 256 x 2304 x 768  NN   12 calls     (c_attn, 12 layers)
 *                 256 x 768 x 2304  NT   12 calls     (its dX)
 *                  64 x 64 x 64     NT  576 calls     (Q K^T, every head)
 *                 ...
 *
 *   3. time     each shape alone, on operands of its own: one untimed call,
 *               then its calls back to back, the best of --reps (the
 *               machine at its fastest, as the floor's own speeds are).
 *               Each round also times the square product once, so the
 *               square and the shapes are measured over the same minutes
 *               (a shared VM's speed drifts); the floor keeps the square's
 *               best of these and of its own.
 *
 *     own shapes = Σ over shapes of its calls' best time
 *     the shapes' floor = own shapes + AdamW's bytes / the copy bandwidth
 *
 * floor ≤ the shapes' floor ≤ a step.  A step's time over the shapes' floor
 * is what its other work costs (norms, softmax, GELU, the loss, copies,
 * AdamW beyond the copy's speed); the shapes' floor over the floor is what
 * the shapes cost.  The recorded flops must equal the floor's count (the
 * model's planning table); the table prints both, and each shape's time
 * and speed, the slowest first.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "bench.h"
#include "ptdp/device.h"
#include "ptdp/error.h"
#include "ptdp/launch.h"
#include "ptdp/mesh.h"
#include "ptdp/model.h"
#include "ptdp/models.h"
#include "ptdp/ops.h"

/* One shape and how many calls of it a step makes. */
typedef struct {
    ptdp_gemm_shape g;
    int calls;
} shape_count;

typedef struct {
    const ptdp_model_config *model;
    int batch, reps;
    ptdp_floor_shapes *out;
} shapes_run;

/* ---- 1. record: one forward + backward, its products logged ------------- */

static int record_step(ptdp_device *dev, const shapes_run *s, ptdp_gemm_log *log)
{
    ptdp_mesh mesh;
    ptdp_model m;
    memset(&m, 0, sizeof m);
    int rc = ptdp_mesh_init(dev, 1, 1, 1, &mesh);
    if (rc != 0)
        return rc;
    if ((rc = ptdp_model_init(dev, &m, s->model, &mesh, NULL, 1, 0.0)) == 0) {
        m.attention_tiled = false;   /* the whole T x T matrix: the floor's count */
        ptdp_batch batch = { .first = 0, .rows = s->batch };
        ptdp_acts acts;
        if ((rc = ptdp_batch_load(dev, &m, &batch)) == 0) {
            ptdp_gemm_log_start(log);
            rc = ptdp_model_forward(dev, &m, &acts, &batch, (ptdp_tensor){ 0 }, 0, false, NULL);
            if (rc == 0)
                rc = ptdp_model_backward(dev, &m, &acts, NULL, 1.0, NULL);
            ptdp_gemm_log_stop();
            ptdp_batch_free(dev, &batch);
        }
    }
    if (m.ops != NULL)
        ptdp_model_free(dev, &m);
    ptdp_mesh_free(&mesh);
    if (rc == 0 && log->overflow)
        rc = ptdp_fail(dev, PTDP_ENOMEM, "host out of memory recording the step's products");
    return rc;
}

/* ---- 2. group equal shapes ------------------------------------------------ */

/* Shapes in a fixed order; alpha does not change a product's speed, beta 0
 * or not does (C read or not), so two calls are one shape when all but
 * alpha and beta's value agree. */
static int shape_cmp(const void *pa, const void *pb)
{
    const ptdp_gemm_shape *a = pa, *b = pb;
    int ka[] = { a->m, a->n, a->k, a->trans_a, a->trans_b, a->beta != 0 };
    int kb[] = { b->m, b->n, b->k, b->trans_a, b->trans_b, b->beta != 0 };
    for (int i = 0; i < 6; i++)
        if (ka[i] != kb[i])
            return ka[i] < kb[i] ? -1 : 1;
    return 0;
}

/* Sorts log's calls and writes each distinct shape once with its count
 * into out (room for log->n).  Returns how many. */
static int group_shapes(ptdp_gemm_log *log, shape_count *out)
{
    qsort(log->calls, (size_t)log->n, sizeof *log->calls, shape_cmp);
    int n = 0;
    for (int i = 0; i < log->n; i++) {
        if (n > 0 && shape_cmp(&out[n - 1].g, &log->calls[i]) == 0) {
            out[n - 1].calls++;
            continue;
        }
        out[n++] = (shape_count){ .g = log->calls[i], .calls = 1 };
    }
    return n;
}

/* ---- 3. time each shape alone, and the square between ------------------- */

/* A shape's operands, made once. */
typedef struct {
    ptdp_tensor a, b, c;
    double beta;
} shape_operands;

static int operands_make(ptdp_device *dev, const ptdp_gemm_shape *g, shape_operands *op)
{
    /* beta 0 overwrites C, beta 1 adds into it: beta ½ keeps the sums
     * ordinary over many calls (no overflow, no denormals) */
    op->beta = g->beta != 0 ? 0.5 : 0.0;
    int rc = ptdp_bench_gemm_operands(dev, g, &op->a, &op->b, &op->c);
    if (rc == 0)   /* untimed: the first call of a shape pays for its pages */
        ptdp_matmul(op->c, op->a, g->trans_a, op->b, g->trans_b, 1.0, op->beta);
    return rc;
}

static void operands_free(ptdp_device *dev, shape_operands *op)
{
    ptdp_tensor_free(dev, &op->c);
    ptdp_tensor_free(dev, &op->b);
    ptdp_tensor_free(dev, &op->a);
}

/* The shape's calls back to back, once; the best time kept in e. */
static void time_shape(const shape_count *sc, shape_operands *op, ptdp_floor_shape *e)
{
    const ptdp_gemm_shape *g = &sc->g;
    double t0 = ptdp_wall_now();
    for (int i = 0; i < sc->calls; i++)
        ptdp_matmul(op->c, op->a, g->trans_a, op->b, g->trans_b, 1.0, op->beta);
    double t = ptdp_wall_now() - t0;
    if (e->best_s == 0 || t < e->best_s)
        e->best_s = t;
}

/* --reps rounds, each the square product once and then every shape: a
 * shared machine's speed drifts over a minute, and this way the square
 * and the shapes each keep their best from the same minutes. */
static int time_rounds(ptdp_device *dev, const shapes_run *s, const shape_count *sc, shape_operands *op)
{
    ptdp_floor_shapes *o = s->out;
    int rc = 0;
    for (int r = 0; rc == 0 && r < s->reps; r++) {
        ptdp_progress("the step's products at their own shapes: round %d of %d", r + 1, s->reps);
        double t = 0;
        if ((rc = ptdp_bench_square_gemm(dev, 1, &t)) != 0)
            break;
        if (o->square_s == 0 || t < o->square_s)
            o->square_s = t;
        for (int i = 0; i < o->shapes; i++)
            time_shape(&sc[i], &op[i], &o->each[i]);
    }
    for (int i = 0; rc == 0 && i < o->shapes; i++)
        o->own_s += o->each[i].best_s;
    return rc;
}

static int shapes_device(ptdp_device *dev, void *arg)
{
    shapes_run *s = arg;
    ptdp_floor_shapes *o = s->out;
    ptdp_gemm_log log;
    memset(&log, 0, sizeof log);
    int rc = record_step(dev, s, &log);
    size_t room = (size_t)(log.n > 0 ? log.n : 1);
    shape_count *sc = NULL;
    shape_operands *op = NULL;
    if (rc == 0 && ((sc = malloc(room * sizeof *sc)) == NULL || (op = calloc(room, sizeof *op)) == NULL ||
                    (o->each = calloc(room, sizeof *o->each)) == NULL))
        rc = ptdp_fail(dev, PTDP_ENOMEM, "host out of memory");
    if (rc == 0) {
        o->products = log.n;
        for (int i = 0; i < log.n; i++)
            o->flops += ptdp_matmul_flops(log.calls[i].m, log.calls[i].n, log.calls[i].k);
        o->shapes = group_shapes(&log, sc);
    }
    for (int i = 0; rc == 0 && i < o->shapes; i++) {
        const ptdp_gemm_shape *g = &sc[i].g;
        o->each[i] = (ptdp_floor_shape){ .m = g->m, .n = g->n, .k = g->k, .trans_a = g->trans_a,
                                         .trans_b = g->trans_b, .beta = g->beta != 0, .calls = sc[i].calls };
        rc = operands_make(dev, g, &op[i]);
    }
    if (rc == 0)
        rc = time_rounds(dev, s, sc, op);
    for (int i = 0; op != NULL && i < o->shapes; i++)
        operands_free(dev, &op[i]);
    free(op);
    free(sc);
    free(log.calls);
    return rc;
}

int ptdp_bench_floor_shapes(const ptdp_model_config *model, int batch, int threads, int reps, size_t device_mem,
                            double watchdog_s, ptdp_floor_shapes *out, char *msg, size_t msglen)
{
    memset(out, 0, sizeof *out);
    shapes_run s = { .model = model, .batch = batch, .reps = reps, .out = out };
    ptdp_launch_result lr;
    memset(&lr, 0, sizeof lr);
    ptdp_launch_opts o = { 0 };
    o.watchdog_s = watchdog_s;
    o.blas_threads = threads;
    o.device_mem = device_mem;
    o.result = &lr;
    int rc = ptdp_launch(1, shapes_device, &s, &o);
    if (rc != 0) {
        snprintf(msg, msglen, "%s", lr.message);
        free(out->each);
        out->each = NULL;
    }
    ptdp_launch_result_free(&lr);
    return rc;
}
