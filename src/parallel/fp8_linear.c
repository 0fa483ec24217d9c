/*
 * fp8_linear.c — a GEMM's operands quantized as one device would quantize
 * them (the idea, the table of splits and the picture are in fp8_linear.h).
 *
 * For one role of one call, n members (a layer: 1; a group of experts:
 * one per expert), in the order the steps must run:
 *
 *     each member's tiles' amaxes                       local
 *     one scale:  max-reduce the n amaxes over TP       if the role is split there
 *                 then over CP                          if it is an activation
 *     scales      amax / max (a delayed recipe: the max of its history)
 *     cast        dst = value(cast(x / s)) · s          a transient the GEMM reads
 *
 * A tiled recipe needs no reduction: ptdp_fp8_split_check has refused any
 * split that would put one tile on two ranks, so a rank's tiles are whole
 * and are the tiles one device would cut.
 */
#include "parallel/fp8_linear_impl.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ptdp/counters.h"
#include "ptdp/device.h"
#include "ptdp/error.h"
#include "runtime/device_impl.h"

struct ptdp_fp8_linear {
    ptdp_fp8_settings s;
    ptdp_comm *tp;                /* TP: a weight's shards (ZeRO-3's FP8 gather) */
    ptdp_comm *rows;              /* CP: other positions of the same sequence  */
    ptdp_comm *replicas;          /* DP: delayed's step amaxes                  */
    const ptdp_param *params;     /* the device's weights: a history's index    */
    int nparams;
    ptdp_fp8_history *hist;       /* [nparams][ROLES] (host), slots in the arena */
    ptdp_real *slots;             /* [nparams][ROLES][H]                        */
    ptdp_real *step_amax;         /* [nparams][ROLES]: this step's max, -1 unused */
    bool *held;                   /* [nparams]: its values are its dequantized
                                     FP8 ones already (ptdp_fp8_linear_hold)  */
};

static const ptdp_fp8_format *format_of(const ptdp_fp8_linear *f, ptdp_fp8_role role)
{
    if (role != PTDP_FP8_DY)
        return &ptdp_fp8_e4m3;                              /* X and W: precision */
    return f->s.grad != NULL ? f->s.grad : &ptdp_fp8_e5m2;   /* dY: range, unless chosen */
}

/* ------------------------------------------------------------- set-up */

static int delayed_state(ptdp_device *dev, ptdp_fp8_linear *f)
{
    const int H = f->s.history > 0 ? f->s.history : PTDP_FP8_HISTORY_DEFAULT;
    const size_t n = (size_t)f->nparams * PTDP_FP8_ROLES;
    char msg[256];
    int rc = ptdp_arena_alloc(dev->arena, (n * (size_t)H + n) * sizeof(ptdp_real), PTDP_MEM_OPTIM,
                              "optim.fp8_amax_history", (void **)&f->slots, msg, sizeof msg);
    if (rc != 0)
        return ptdp_fail(dev, rc, "%s", msg);
    f->step_amax = f->slots + n * (size_t)H;
    if ((f->hist = calloc(n > 0 ? n : 1, sizeof *f->hist)) == NULL)
        return ptdp_fail(dev, PTDP_ENOMEM, "host out of memory for the FP8 amax histories");
    for (size_t i = 0; i < n; i++) {
        ptdp_fp8_history_init(&f->hist[i], f->slots + i * (size_t)H, H);
        f->step_amax[i] = -1;
    }
    return PTDP_OK;
}

int ptdp_fp8_linear_create(ptdp_device *dev, const ptdp_fp8_settings *s, const ptdp_model *m, ptdp_comm *tp,
                           ptdp_comm *rows, ptdp_comm *replicas, ptdp_fp8_linear **out)
{
    *out = NULL;
    ptdp_fp8_linear *f = calloc(1, sizeof *f);
    if (f == NULL)
        return ptdp_fail(dev, PTDP_ENOMEM, "host out of memory for the FP8 settings");
    *f = (ptdp_fp8_linear){ .s = *s, .tp = tp, .rows = rows, .replicas = replicas, .params = m->params,
                            .nparams = m->nparams };
    int rc = s->recipe->uses_history ? delayed_state(dev, f) : PTDP_OK;
    if (rc == 0 && (f->held = calloc((size_t)(m->nparams > 0 ? m->nparams : 1), sizeof *f->held)) == NULL)
        rc = ptdp_fail(dev, PTDP_ENOMEM, "host out of memory for the FP8 settings");
    if (rc != 0) {
        ptdp_fp8_linear_destroy(dev, f);
        return rc;
    }
    *out = f;
    return PTDP_OK;
}

void ptdp_fp8_linear_destroy(ptdp_device *dev, ptdp_fp8_linear *f)
{
    if (f == NULL)
        return;
    ptdp_arena_free(dev->arena, f->slots);
    free(f->hist);
    free(f->held);
    free(f);
}

const ptdp_fp8_settings *ptdp_fp8_linear_settings(const ptdp_fp8_linear *f)
{
    return &f->s;
}

/* A weight's entry in the tables, or -1 for one not of the device's model. */
static int slot_of(const ptdp_fp8_linear *f, const ptdp_param *w, ptdp_fp8_role role)
{
    const ptrdiff_t i = w - f->params;
    return i >= 0 && i < f->nparams ? (int)i * PTDP_FP8_ROLES + (int)role : -1;
}

ptdp_fp8_history *ptdp_fp8_linear_history(ptdp_fp8_linear *f, const ptdp_param *w, ptdp_fp8_role role)
{
    const int k = f != NULL && f->hist != NULL ? slot_of(f, w, role) : -1;
    return k >= 0 ? &f->hist[k] : NULL;
}

/* --------------------------------------------------------- quantizing */

/* Does w hold its dequantized FP8 values already (gathered as codes)? */
static bool held(const ptdp_fp8_linear *f, const ptdp_param *w)
{
    const ptrdiff_t i = w - f->params;
    return i >= 0 && i < f->nparams && f->held[i];
}

/* Is this role of a layer whose weight is w split over TP? */
static bool split_over_tp(const ptdp_param *w, ptdp_fp8_role role)
{
    switch (role) {
    case PTDP_FP8_W:  return w->shard != PTDP_SHARD_NONE;
    case PTDP_FP8_X:  return w->shard == PTDP_SHARD_COLS;   /* row-parallel: x_r        */
    case PTDP_FP8_DY: return w->shard == PTDP_SHARD_ROWS;   /* column-parallel: dy_r    */
    default:          return false;
    }
}

static int tiling_of(ptdp_device *dev, const ptdp_fp8_linear *f, ptdp_fp8_role role, ptdp_tensor x,
                     ptdp_fp8_tiling *t)
{
    const ptdp_fp8_recipe *r = f->s.recipe;
    const int *tile = role == PTDP_FP8_W ? r->weight_tile : r->act_tile;
    char msg[200];
    if (ptdp_fp8_tiling_init(t, r, x.rows, x.cols, tile[0], tile[1], msg, sizeof msg) != 0)
        return ptdp_fail(dev, PTDP_EINVAL, "--fp8 %s: %s", r->name, msg);
    return PTDP_OK;
}

/* One scale per member (tensorwise, delayed) from the n local amaxes:
 * reduced where the tensors are split, then each member's scale from its
 * amax (or its history's) and the step's max kept for the history — but
 * not a held weight's, whose amax was of its true values (the gather's). */
static int reduced_scales(ptdp_fp8_linear *f, ptdp_fp8_role role, ptdp_comm *tp, int n, const ptdp_param *const *w,
                          ptdp_real *amax, ptdp_real *scale)
{
    int rc = PTDP_OK;
    if (n > 0 && tp != NULL && ptdp_comm_size(tp) > 1 && split_over_tp(w[0], role))
        rc = ptdp_all_reduce(tp, amax, amax, (size_t)n, PTDP_REAL, PTDP_MAX);
    if (rc == 0 && n > 0 && role != PTDP_FP8_W && f->rows != NULL && ptdp_comm_size(f->rows) > 1)
        rc = ptdp_all_reduce(f->rows, amax, amax, (size_t)n, PTDP_REAL, PTDP_MAX);
    for (int i = 0; rc == 0 && i < n; i++) {
        const int k = f->hist != NULL ? slot_of(f, w[i], role) : -1;
        ptdp_fp8_scales(f->s.recipe, format_of(f, role), &amax[i], 1, k >= 0 ? &f->hist[k] : NULL, &scale[i]);
        if (k >= 0 && amax[i] > f->step_amax[k] && !(role == PTDP_FP8_W && held(f, w[i])))
            f->step_amax[k] = amax[i];
    }
    return rc;
}

static int whole_scales(ptdp_device *dev, ptdp_fp8_linear *f, ptdp_fp8_role role, ptdp_comm *tp, int n,
                        const ptdp_param *const *w, const ptdp_tensor *src, ptdp_real *amax, ptdp_real *scale)
{
    int rc = PTDP_OK;
    for (int i = 0; i < n && rc == 0; i++) {
        ptdp_fp8_tiling t;
        if ((rc = tiling_of(dev, f, role, src[i], &t)) == 0)
            ptdp_fp8_amax(&t, src[i], &amax[i]);
    }
    return rc == 0 ? reduced_scales(f, role, tp, n, w, amax, scale) : rc;
}

/* A tiled member: its own tiles' amaxes and scales, nothing shared. */
static int tiled_member(ptdp_device *dev, ptdp_fp8_linear *f, ptdp_fp8_role role, ptdp_tensor x, ptdp_tensor dq)
{
    ptdp_fp8_tiling t;
    int rc = tiling_of(dev, f, role, x, &t);
    if (rc != 0)
        return rc;
    const int tiles = ptdp_fp8_tile_count(&t);
    ptdp_tensor s;
    if ((rc = ptdp_tensor_alloc_uninit(dev, &s, "acts.fp8_scales", PTDP_MEM_ACTS, 2, tiles)) != 0)
        return rc;
    ptdp_real *amax = ptdp_at(s, 0, 0), *scale = ptdp_at(s, 1, 0);
    ptdp_fp8_amax(&t, x, amax);
    ptdp_fp8_scales(f->s.recipe, format_of(f, role), amax, tiles, NULL, scale);
    ptdp_fp8_cast(format_of(f, role), &t, x, scale, NULL, dq);
    ptdp_tensor_free(dev, &s);
    return PTDP_OK;
}

static int alloc_copies(ptdp_device *dev, int n, const ptdp_tensor *src, ptdp_tensor *dst)
{
    for (int i = 0; i < n; i++)
        dst[i] = (ptdp_tensor){ 0 };
    for (int i = 0; i < n; i++) {
        int rc = ptdp_tensor_alloc_uninit(dev, &dst[i], "acts.fp8", PTDP_MEM_ACTS, src[i].rows, src[i].cols);
        if (rc != 0) {
            ptdp_fp8_linear_release(dev, i, dst);
            return rc;
        }
    }
    return PTDP_OK;
}

/* Weights: each must be a linear layer's W (model.h), the set ZeRO-3's FP8
 * gather quantizes too; a held one is copied as it is.  1 if every member
 * was held (nothing left to do), 0 if some are not, or an error. */
static int held_weights(ptdp_device *dev, ptdp_fp8_linear *f, ptdp_fp8_role role, int n, const ptdp_param *const *w,
                        const ptdp_tensor *src, ptdp_tensor *dst)
{
    if (role != PTDP_FP8_W)
        return 0;
    int count = 0;
    for (int i = 0; i < n; i++) {
        if (!w[i]->linear_weight)
            return ptdp_fail(dev, PTDP_EINVAL, "--fp8: %s is quantized as a linear layer's weight but its model did "
                             "not declare it one (ptdp_model_linear_weight)", w[i]->name);
        if (held(f, w[i])) {
            ptdp_tensor_copy(dst[i], src[i]);
            count++;
        }
    }
    return n > 0 && count == n ? 1 : 0;
}

int ptdp_fp8_linear_quantize(ptdp_device *dev, ptdp_fp8_linear *f, ptdp_fp8_role role, ptdp_comm *tp, int n,
                             const ptdp_param *const *w, const ptdp_tensor *src, ptdp_tensor *dst)
{
    int rc = alloc_copies(dev, n, src, dst);
    if (rc != 0)
        return rc;
    if ((rc = held_weights(dev, f, role, n, w, src, dst)) != 0) {   /* all held (1), or an error */
        if (rc < 0)
            ptdp_fp8_linear_release(dev, n, dst);
        return rc < 0 ? rc : PTDP_OK;
    }
    if (f->s.recipe->whole_tensor) {
        ptdp_tensor s;
        if ((rc = ptdp_tensor_alloc_uninit(dev, &s, "acts.fp8_scales", PTDP_MEM_ACTS, 2, n > 0 ? n : 1)) == 0) {
            rc = whole_scales(dev, f, role, tp, n, w, src, ptdp_at(s, 0, 0), ptdp_at(s, 1, 0));
            for (int i = 0; rc == 0 && i < n; i++) {
                ptdp_fp8_tiling t;
                if (role == PTDP_FP8_W && held(f, w[i]))
                    continue;   /* copied already */
                if ((rc = tiling_of(dev, f, role, src[i], &t)) == 0)
                    ptdp_fp8_cast(format_of(f, role), &t, src[i], ptdp_at(s, 1, i), NULL, dst[i]);
            }
            ptdp_tensor_free(dev, &s);
        }
    } else {
        for (int i = 0; rc == 0 && i < n; i++)
            if (!(role == PTDP_FP8_W && held(f, w[i])))
                rc = tiled_member(dev, f, role, src[i], dst[i]);
    }
    if (rc != 0)
        ptdp_fp8_linear_release(dev, n, dst);
    return rc;
}

void ptdp_fp8_linear_release(ptdp_device *dev, int n, ptdp_tensor *dst)
{
    for (int i = n - 1; i >= 0; i--)   /* last allocated, first freed */
        ptdp_tensor_free(dev, &dst[i]);
}

/* ------------------------------------------- weights gathered as codes */

int ptdp_fp8_linear_weight_tiling(ptdp_device *dev, const ptdp_fp8_linear *f, const ptdp_param *w,
                                  ptdp_fp8_tiling *t)
{
    return tiling_of(dev, f, PTDP_FP8_W, w->w, t);
}

/* As quantize would take them: one scale a weight reduced over TP where a
 * weight is split (a replicated one's amax is the same on every TP rank,
 * so reducing it too changes nothing), its history's, the step's amax
 * kept; or each tile's own. */
int ptdp_fp8_linear_weight_scales(ptdp_device *dev, ptdp_fp8_linear *f, int n, const ptdp_param *const *w,
                                  ptdp_real *amax, ptdp_real *scale)
{
    const ptdp_fp8_recipe *r = f->s.recipe;
    if (!r->whole_tensor) {
        int tiles = 0;
        for (int i = 0; i < n; i++) {
            ptdp_fp8_tiling t;
            int rc = tiling_of(dev, f, PTDP_FP8_W, w[i]->w, &t);
            if (rc != 0)
                return rc;
            tiles += ptdp_fp8_tile_count(&t);
        }
        ptdp_fp8_scales(r, format_of(f, PTDP_FP8_W), amax, tiles, NULL, scale);
        return PTDP_OK;
    }
    bool split = false;
    for (int i = 0; i < n; i++)
        split = split || split_over_tp(w[i], PTDP_FP8_W);
    int rc = PTDP_OK;
    if (split && f->tp != NULL && ptdp_comm_size(f->tp) > 1)
        rc = ptdp_all_reduce(f->tp, amax, amax, (size_t)n, PTDP_REAL, PTDP_MAX);
    for (int i = 0; rc == 0 && i < n; i++) {
        const int k = f->hist != NULL ? slot_of(f, w[i], PTDP_FP8_W) : -1;
        ptdp_fp8_scales(r, format_of(f, PTDP_FP8_W), &amax[i], 1, k >= 0 ? &f->hist[k] : NULL, &scale[i]);
        if (k >= 0 && amax[i] > f->step_amax[k])
            f->step_amax[k] = amax[i];
    }
    return rc;
}

void ptdp_fp8_linear_hold(ptdp_fp8_linear *f, const ptdp_param *w, bool held)
{
    const ptrdiff_t i = w - f->params;
    if (i >= 0 && i < f->nparams)
        f->held[i] = held;
}

/* ------------------------------------------------------------ the step */

int ptdp_fp8_linear_publish(ptdp_counters *reg)
{
    return ptdp_counters_publish(reg, "fp8_amax_bytes", PTDP_COUNT_DEVICE, PTDP_COUNT_NUMBER, 0);
}

int ptdp_fp8_linear_step(ptdp_device *dev, ptdp_fp8_linear *f)
{
    if (f == NULL || f->hist == NULL)
        return PTDP_OK;
    const size_t n = (size_t)f->nparams * PTDP_FP8_ROLES;
    int rc = PTDP_OK;
    if (n > 0 && f->replicas != NULL && ptdp_comm_size(f->replicas) > 1) {
        const int N = ptdp_comm_size(f->replicas);
        rc = ptdp_all_reduce(f->replicas, f->step_amax, f->step_amax, n, PTDP_REAL, PTDP_MAX);
        ptdp_count(dev->counts, "fp8_amax_bytes", 0, 2.0 * (N - 1) / N * (double)n * sizeof(ptdp_real));   /* ring */
    }
    for (size_t i = 0; rc == 0 && i < n; i++) {
        if (f->step_amax[i] >= 0)          /* -1: no micro-batch used it this step */
            ptdp_fp8_history_record(&f->hist[i], f->step_amax[i]);
        f->step_amax[i] = -1;
    }
    return rc;
}

/* ----------------------------------------------------------- the check */

int ptdp_fp8_split_check(const ptdp_fp8_recipe *r, const char *name, int rows, int cols, ptdp_shard shard,
                         int parts, int tp, char *msg, size_t msglen)
{
    if (r == NULL || r->whole_tensor || tp <= 1 || shard == PTDP_SHARD_NONE)
        return PTDP_OK;   /* one scale: its amax is reduced over TP instead */
    const bool by_rows = shard == PTDP_SHARD_ROWS;
    const int whole = by_rows ? rows : cols, blocks = parts > 1 ? parts : 1;
    const int share = whole / blocks / tp;
    /* along the split dimension: the weight's tile, and the activation's
     * (x of a row-parallel layer, dy of a column-parallel one: its columns) */
    const int wt = by_rows ? r->weight_tile[0] : r->weight_tile[1], at = r->act_tile[1];
    const int bad = wt > 1 && share % wt != 0 ? wt : at > 1 && share % at != 0 ? at : 0;
    if (bad == 0)
        return PTDP_OK;
    snprintf(msg, msglen,
             "--fp8 %s with --tp %d: %s (%d x %d) is split by %s, each rank %d of every %d %s, and a tile of %d "
             "along that dimension (the weight's %dx%d, the %s's %dx%d) would lie on two ranks, which no one "
             "device's scale can match: use a --tp that leaves multiples of %d, or --fp8 tensorwise or delayed "
             "(one scale, its amax max-reduced over TP)",
             r->name, tp, name, rows, cols, by_rows ? "rows" : "columns", share, whole / blocks,
             by_rows ? "rows" : "columns", bad, r->weight_tile[0], r->weight_tile[1],
             by_rows ? "output gradient" : "input", r->act_tile[0], r->act_tile[1], bad);
    return PTDP_EINVAL;
}

int ptdp_fp8_split_check_all(const ptdp_fp8_recipe *r, const ptdp_fp8_weight *w, int n, int tp, char *msg,
                             size_t msglen)
{
    for (int i = 0; i < n; i++)
        if (ptdp_fp8_split_check(r, w[i].name, w[i].rows, w[i].cols, w[i].shard, w[i].parts, tp, msg, msglen) != 0)
            return PTDP_EINVAL;
    return PTDP_OK;
}
