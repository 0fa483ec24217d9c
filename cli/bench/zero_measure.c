/*
 * zero_measure.c — one ZeRO stage measured by ptdp_train, for `ptdp bench
 * zero` (bench_zero.c) and the figure zero_memory (figure_zero_memory.c).
 *
 * What a device keeps between steps is what its arena holds after set-up:
 * a run with no step shows it (the peaks of params, grads and optim at
 * rest).  A run of S steps shows the peaks in training, whose excess over
 * the rest lives only for a moment; a run with --overlap, where the stage
 * allows it, shows the step with the communication under the compute:
 *
 *   --steps 0     at rest    params ██  grads ██  optim ████      = the formula
 *   --steps S     peak       params ██░░░░  grads ██░░  optim ████  + transient
 *   --overlap     the virtual step, the communication hidden, the prefetched units
 *
 * The formula (ptdp_zero_state_bytes, zero.h) divides by N; the chunks
 * (ptdp_share, one cut per unit under ZeRO-3, per DP bucket under ZeRO-1)
 * may hold an element more or less, so a device is checked within an
 * element per cut and the sum over the N devices exactly.  The DP bytes per step are 2(N-1)/N S, (M+1)(N-1)/N S
 * or 3M(N-1)/N S, plus the gradient norm's all-reduce of one number.
 *
 * A precision is data (ptdp_zero_precision): this build's float, and in
 * the float build bf16 mixed precision (2 + 2 + 12 bytes: the runs take
 * --precision bf16, mixed.h), whose DP bytes are half of float's — every
 * store it moves is bf16.  ptdp-f64 has no bf16 run: its bf16 column is
 * the formula only.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "bench.h"
#include "ptdp/error.h"
#include "ptdp/train.h"
#include "ptdp/zero.h"

/* ---- the precisions of the table ------------------------------------------ */

/* float: this build's ptdp_real; AdamW's two moments in it. */
static const ptdp_zero_precision precisions[] = {
    { PTDP_REAL_NAME, sizeof(ptdp_real), sizeof(ptdp_real), 2 * sizeof(ptdp_real), true },
#ifdef PTDP_DOUBLE
    { "bf16", 2, 2, 12, false },       /* bf16 weights and gradients, fp32 master weights, m, v */
#else
    { "bf16", 2, 2, 12, true },        /* --precision bf16 (mixed.h) */
#endif
};
enum { NPRECISIONS = sizeof precisions / sizeof precisions[0] };

const ptdp_zero_precision *ptdp_zero_precision_of(const char *name)
{
    for (int i = 0; i < NPRECISIONS; i++)
        if (strcmp(precisions[i].name, name) == 0)
            return &precisions[i];
    return NULL;
}

/* ---- measuring one stage ---------------------------------------------------- */

static double group_sent(const ptdp_comm_stats *s, const char *name)
{
    for (int g = 0; g < s->ngroups; g++)
        if (strcmp(s->group[g].name, name) == 0)
            return s->group[g].sent;
    return 0;
}

/* One ptdp_train run of cfg: each device's arena, its DP bytes per step
 * (mean over devices), the last step's virtual time, the communication
 * hidden per step (--overlap). */
typedef struct {
    ptdp_mem_stats mem[PTDP_MAX_DEVICES];
    double dp_sent, step_s, hidden_s, psi;
} one_run;

static int run_once(const ptdp_train_config *cfg, const ptdp_launch_opts *base, one_run *out, char *msg,
                    size_t msglen)
{
    ptdp_train_result res;
    ptdp_launch_result lr;
    memset(&res, 0, sizeof res);
    memset(&lr, 0, sizeof lr);
    ptdp_launch_opts o = *base;
    o.result = &lr;
    int err = ptdp_train(cfg, &o, NULL, NULL, &res, msg, msglen);
    if (err == 0) {
        const int n = lr.world_size;
        out->dp_sent = out->hidden_s = 0;
        for (int d = 0; d < n; d++) {
            out->mem[d] = lr.devices[d].mem;
            out->dp_sent += group_sent(&lr.devices[d].comm, "dp");
            out->hidden_s += lr.devices[d].clock.hidden_s;
        }
        const double steps = cfg->steps > 0 ? cfg->steps : 1;
        out->dp_sent /= n * steps;
        out->hidden_s /= n * steps;
        out->step_s = res.completed > 0 ? res.log[res.completed - 1].virtual_s : 0;
        out->psi = res.param_elements != NULL ? (double)res.param_elements[0] : 0;
    } else if (lr.message[0] != '\0') {
        snprintf(msg, msglen, "%s", lr.message);
    }
    ptdp_train_result_free(&res);
    ptdp_launch_result_free(&lr);
    return err;
}

int ptdp_zero_measure_stage(const ptdp_train_config *base, const ptdp_launch_opts *opts,
                            const ptdp_zero_precision *prec, int stage, ptdp_zero_measure *out,
                            char *msg, size_t msglen)
{
    memset(out, 0, sizeof *out);
    if (!prec->measured) {
        snprintf(msg, msglen, "no training mode runs in %s in this build: its column is the formula only",
                 prec->name);
        return PTDP_EINVAL;
    }
    ptdp_train_config c = *base;
    c.zero = stage;
    c.overlap = false;
    c.bf16 = strcmp(prec->name, "bf16") == 0;
    out->stage = stage;
    out->dp = c.dp;
    out->micro_batches = c.micro_batches;
    out->steps = c.steps;
    out->prec = *prec;

    static one_run rest, train, ovl;   /* large: PTDP_MAX_DEVICES arenas each */
    ptdp_train_config c0 = c;
    c0.steps = 0;
    int err;
    if ((err = run_once(&c0, opts, &rest, msg, msglen)) != 0 || (err = run_once(&c, opts, &train, msg, msglen)) != 0)
        return err;
    out->psi = train.psi;
    const ptdp_zero_stage *row = ptdp_zero_stage_of(stage);
    if (row->buckets && row->shards_optim) {   /* shards cut per DP bucket; buckets close before overflowing:
                                                  two in a row hold more than one's capacity */
        double cap = floor(c.bucket_mb * 1024 * 1024 / sizeof(ptdp_real));
        out->cuts = 2 * ceil(out->psi / (cap > 0 ? cap : 1)) + 1;
    }
    out->formula = ptdp_zero_state_bytes(stage, out->psi, c.dp, prec->bw, prec->bg, prec->bo);
    for (int d = 0; d < c.dp; d++) {
        out->rest[d] = rest.mem[d];
        out->peak[d] = train.mem[d];
    }
    out->dp_sent = train.dp_sent;
    out->dp_formula = ptdp_zero_dp_bytes_per_step(stage, (size_t)out->psi, c.dp, c.micro_batches);   /* the row's passes */
    out->dp_formula *= prec->bg / sizeof(ptdp_real);   /* the formulas count ptdp_real; a bf16 store moves 2 bytes */
    out->step_s = train.step_s;

    /* --overlap, where the stage allows it (ptdp_train_validate says why not) */
    c.overlap = true;
    if (ptdp_train_validate(&c, out->overlap_note, sizeof out->overlap_note) != 0) {
        out->overlap_step_s = -1;
        return PTDP_OK;
    }
    if ((err = run_once(&c, opts, &ovl, msg, msglen)) != 0)
        return err;
    out->overlap_step_s = ovl.step_s;
    out->overlap_hidden_s = ovl.hidden_s;
    out->overlap_peak_params = (double)ovl.mem[0].peak[PTDP_MEM_PARAMS];
    return PTDP_OK;
}

/* The persistent states on every device against the formula.  Chunks are
 * cut by ptdp_share, a unit at a time under ZeRO-3 and a DP bucket at a
 * time under ZeRO-1, so a device's share can differ from Ψ/N by an element
 * per cut; over the N devices the shares add up to the whole exactly.  So:
 * every device within one element of each unit (at most layers + 3 of
 * them) or bucket (m->cuts), and the sum over devices exact. */
bool ptdp_zero_states_match(const ptdp_zero_measure *m, int layers, char *why, size_t n)
{
    static const ptdp_mem_category cats[3] = { PTDP_MEM_PARAMS, PTDP_MEM_GRADS, PTDP_MEM_OPTIM };
    const double want[3] = { m->formula.params, m->formula.grads, m->formula.optim };
    const double per[3] = { m->prec.bw, m->prec.bg, m->prec.bo };
    for (int i = 0; i < 3; i++) {
        double sum = 0;
        for (int d = 0; d < m->dp; d++) {
            double got = (double)m->rest[d].peak[cats[i]];
            sum += got;
            if (fabs(got - want[i]) > per[i] * (layers + 3 + m->cuts)) {
                snprintf(why, n, "--zero %d, device %d: %s at rest %.0f B, the formula says %.0f B", m->stage, d,
                         ptdp_mem_category_name(cats[i]), got, want[i]);
                return false;
            }
        }
        if (fabs(sum - m->dp * want[i]) > 0.5) {
            snprintf(why, n, "--zero %d: %s at rest %.0f B over the %d devices, the formula says %d x %.0f B",
                     m->stage, ptdp_mem_category_name(cats[i]), sum, m->dp, m->dp, want[i]);
            return false;
        }
    }
    return true;
}

/* The DP bytes per step against the formula: the gradient norm's
 * all-reduce of one number adds a few bytes under ZeRO. */
bool ptdp_zero_bytes_match(const ptdp_zero_measure *m)
{
    return fabs(m->dp_sent - m->dp_formula) <= 64;
}
