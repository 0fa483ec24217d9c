/*
 * check.c — lesson 10: is your ZeRO-3 right, small, and faster overlapped?
 *
 * The model: L units of y = tanh(x W^T + b) (H = 6 wide, 42 parameters a
 * unit, which N = 4 ranks cannot split evenly), a squared-error loss
 * averaged over a batch of B = 12 rows, plain SGD.  The reference is the
 * same arithmetic on one "device" (this host, the whole batch, the whole
 * model).  For (N, L, M) = (2, 3, 2), (3, 4, 1), (4, 5, 2) — N ranks, L
 * units, M micro-batches a step — 2 steps each, your lesson_micro_batch
 * and then your lesson_micro_batch_overlap run, and the check asks:
 *
 *   0. first, on 4 ranks, blanks 1 to 3 alone: does lesson_gather give
 *      every rank the whole unit, and lesson_reduce_scatter +
 *      lesson_add_grad my shard of the summed gradient (twice: two
 *      micro-batches' worth), for (N-1)/N of the unit's bytes?
 *   1. at every use: are unit u's parameters there (z->unit[u].w), their
 *      gather waited for, and every element right?  If not: which shards
 *      are wrong, and what that means (lesson_unit_forward/_backward here);
 *   2. the gradient shards after each step: my shard of the gradient one
 *      device computes, to 1e-10 in double — and the loss; the overlapped
 *      run's parameters equal to the blocking run's to the bit;
 *   3. every started collective waited for, every unit's buffers freed;
 *   4. memory, from the device's arena: the peak of "params" is my shards
 *      plus one unit (two when the next is prefetched), not the model;
 *      "grads" the same;
 *   5. bytes: 3 (N-1)/N S per micro-batch (S = the model's bytes): two
 *      all-gathers and one reduce-scatter of every unit;
 *   6. overlapped only: while a unit computes, the next unit's gather is
 *      in flight, and in the backward the previous unit's reduce-scatter
 *      too — and the virtual step (profile dgx-a100) is shorter than the
 *      blocking one.
 *   7. then blank 8 alone, HSDP's two-stage sum: check_hsdp.c.
 *
 * The toy's units are tiny, so each unit's forward is charged FWD_S and its
 * backward BWD_S of virtual compute (a real layer's time on an A100): a
 * gather of it costs what dgx-a100's links charge, (N-1)(3 µs + bytes/β).
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "check_hsdp.h"
#include "lesson.h"
#include "tutorial.h"

#include "ptdp/clock.h"
#include "ptdp/error.h"

enum { H = 6, NUMEL = H * H + H, B = 12, STEPS = 2, MAX_N = 4 };
static const double LR = 0.5, FWD_S = 10e-6, BWD_S = 20e-6, TOL = 1e-10;

/* --------------------------------------------------- the toy's arithmetic */

static double input_x(int s, int row, int k) { return sin(0.7 * row + 1.3 * k + 0.5 * s); }
static double target_t(int s, int row, int j) { return 0.5 * cos(0.3 * row - 0.9 * j + s); }
static double init_w(int u, int i) { return 0.4 * sin(1.0 + 0.37 * i + 2.1 * u); }

/* y[r] = tanh(W x[r] + b), W row-major H x H then b: w[0 .. NUMEL). */
static void unit_fwd(const ptdp_real *w, const ptdp_real *x, ptdp_real *y, int rows)
{
    for (int r = 0; r < rows; r++)
        for (int j = 0; j < H; j++) {
            double z = w[H * H + j];
            for (int k = 0; k < H; k++)
                z += w[j * H + k] * x[r * H + k];
            y[r * H + j] = tanh(z);
        }
}

/* g += dL/dw; dx = dL/dx, from dy = dL/dy. */
static void unit_bwd(const ptdp_real *w, const ptdp_real *x, const ptdp_real *y, const ptdp_real *dy,
                     ptdp_real *dx, ptdp_real *g, int rows)
{
    for (int r = 0; r < rows; r++) {
        for (int k = 0; k < H; k++)
            dx[r * H + k] = 0;
        for (int j = 0; j < H; j++) {
            double dz = dy[r * H + j] * (1.0 - y[r * H + j] * y[r * H + j]);
            for (int k = 0; k < H; k++) {
                g[j * H + k] += dz * x[r * H + k];
                dx[r * H + k] += dz * w[j * H + k];
            }
            g[H * H + j] += dz;
        }
    }
}

/* The loss of rows [row0, row0 + rows) of step s (summed, over B), and dy. */
static double loss_and_dy(int s, int row0, int rows, const ptdp_real *y, ptdp_real *dy)
{
    double sum = 0;
    for (int r = 0; r < rows; r++)
        for (int j = 0; j < H; j++) {
            double d = y[r * H + j] - target_t(s, row0 + r, j);
            sum += 0.5 * d * d / B;
            dy[r * H + j] = d / B;
        }
    return sum;
}

/* ------------------------------------------------------ the reference */

typedef struct {
    int L;
    ptdp_real w[STEPS + 1][LESSON_MAX_UNITS][NUMEL];   /* the parameters step s uses; [STEPS] final */
    ptdp_real g[STEPS][LESSON_MAX_UNITS][NUMEL];       /* step s's gradient */
    double loss[STEPS];
} reference;

static void run_reference(int L, reference *ref)
{
    static ptdp_real act[LESSON_MAX_UNITS + 1][B * H], dy[B * H], dx[B * H];
    ref->L = L;
    for (int u = 0; u < L; u++)
        for (int i = 0; i < NUMEL; i++)
            ref->w[0][u][i] = init_w(u, i);
    for (int s = 0; s < STEPS; s++) {
        for (int r = 0; r < B; r++)
            for (int k = 0; k < H; k++)
                act[0][r * H + k] = input_x(s, r, k);
        for (int u = 0; u < L; u++)
            unit_fwd(ref->w[s][u], act[u], act[u + 1], B);
        ref->loss[s] = loss_and_dy(s, 0, B, act[L], dy);
        memset(ref->g[s], 0, sizeof ref->g[s]);
        for (int u = L - 1; u >= 0; u--) {
            unit_bwd(ref->w[s][u], act[u], act[u + 1], dy, dx, ref->g[s][u], B);
            memcpy(dy, dx, sizeof dy);
        }
        for (int u = 0; u < L; u++)
            for (int i = 0; i < NUMEL; i++)
                ref->w[s + 1][u][i] = ref->w[s][u][i] - LR * ref->g[s][u][i];
    }
}

/* --------------------------------------------------------- your run */

typedef enum {
    SEEN_NOTHING = 0,
    SEEN_NEXT_NOT_STARTED,   /* while unit u computed, the next unit was not gathered at all */
    SEEN_NEXT_WAITED,        /* …it was gathered, and already waited for                     */
    SEEN_REDUCE_WAITED,      /* while unit u's backward ran, unit u + 1's reduce-scatter was not in flight */
} overlap_seen;

typedef struct {
    int N, L, M;
    bool overlap;
    const reference *ref;
    /* per rank */
    size_t shard_elems[MAX_N];           /* Σ len over the units */
    size_t peak_params[MAX_N], peak_grads[MAX_N];   /* the largest over the steps */
    size_t end_params[MAX_N], end_grads[MAX_N];     /* in use after the last step */
    double bytes[MAX_N];                 /* sent during the steps */
    double time[MAX_N];                  /* virtual time of the steps */
    double hidden[MAX_N];                /* communication never waited for */
    double loss_sum[STEPS][MAX_N];
    int bad_step[MAX_N], bad_unit[MAX_N];     /* first wrong gradient element, or bad_step -1 */
    long bad_elem[MAX_N];
    double bad_got[MAX_N], bad_want[MAX_N];
    bool all_over_n[MAX_N];              /* every wrong element is the right one / N */
    double max_diff;
    char leaked[MAX_N][96];              /* a unit's buffer left at the end of a step */
    overlap_seen seen[MAX_N];
    int seen_unit[MAX_N];
    int kept_unit[MAX_N], kept_at[MAX_N];   /* unit kept gathered after its forward, seen at forward of … */
    int fwd_units[MAX_N];                /* the most units gathered at once at a forward */
    ptdp_real final_w[LESSON_MAX_UNITS][NUMEL];   /* every rank writes its shards */
} zero3_run;

struct lesson_model {
    zero3_run *x;
    int rank, step, row0, rows;
    int next_fwd, next_bwd;              /* the unit the model expects next */
    ptdp_real *act[LESSON_MAX_UNITS + 1];   /* act[0] the input, act[u + 1] unit u's output ("acts") */
    ptdp_real *dy;                       /* the gradient at the output of the unit to go back through */
};

/* Equal to the reference, up to the order of sums (1e-10 in double). */
static bool same(double got, double want) { return fabs(got - want) <= TOL * fmax(1.0, fabs(want)); }

/* Unit u's buffer against the truth: which shards differ, as "1, 3" and a
 * bit mask. */
static unsigned wrong_shards(const zero3_run *x, const ptdp_real *w, const ptdp_real *truth, char *list, size_t len)
{
    unsigned mask = 0;
    size_t n = 0;
    list[0] = '\0';
    for (int k = 0; k < x->N; k++) {
        size_t off, cl;
        ptdp_share(NUMEL, x->N, k, &off, &cl);
        bool differ = false;
        for (size_t i = off; i < off + cl; i++)
            differ = differ || !same(w[i], truth[i]);
        if (differ) {
            mask |= 1u << k;
            n += (size_t)snprintf(list + n, len - n, "%s%d", n ? ", " : "", k);
        }
    }
    return mask;
}

/* Does every shard begin right and go wrong before its end — each rank
 * copied a part of its shard (bytes counted as elements)? */
static bool short_copy(const zero3_run *x, const ptdp_real *w, const ptdp_real *truth)
{
    for (int k = 0; k < x->N; k++) {
        size_t off, cl, p = 0;
        ptdp_share(NUMEL, x->N, k, &off, &cl);
        while (p < cl && same(w[off + p], truth[off + p]))
            p++;
        if (p == 0 || p == cl)
            return false;
    }
    return true;
}

/* Are unit u's parameters there, waited for and right, as `what` (forward
 * or backward) is about to use them? */
static int check_params(ptdp_device *dev, lesson_zero3 *z, int u, const char *what)
{
    struct lesson_model *m = z->model;
    zero3_run *x = m->x;
    const lesson_unit *unit = &z->unit[u];
    const int blank = x->overlap ? (what[0] == 'f' ? 6 : 7) : (what[0] == 'f' ? 4 : 5);
    if (unit->w == NULL) {
        int other = -1;
        for (int v = 0; v < z->nunits && other < 0; v++)
            if (v != u && z->unit[v].w != NULL)
                other = v;
        if (other >= 0)
            return tutorial_device_wrong(dev, "rank %d: unit %d's %s starts and its parameters are not there "
                "(z->unit[%d].w is NULL); unit %d's are, %s.\n%s", m->rank, u, what, u, other,
                z->unit[other].gather.active ? "on their way" : "gathered",
                what[0] == 'f' ? (other < u ? "That unit's forward is over: you gathered the PREVIOUS unit.  The forward "
                                               "walks the units from the first\nto the last: the next unit is u + 1 (blank 6)."
                                             : "Gather each unit before its forward uses it (blank 4 or 6).")
                               : (other > u ? "That unit's backward is over: you gathered the PREVIOUS unit.  The backward "
                                               "walks the units from the\nlast to the first: the next unit is u - 1 (blank 7)."
                                             : "Gather each unit before its backward uses it (blank 5 or 7)."));
        return tutorial_device_wrong(dev, "rank %d: unit %d's %s starts and its parameters are not there "
            "(z->unit[%d].w is NULL).\nA unit exists on a rank only as its shard: all-gather it (lesson_gather) "
            "before its %s%s (blank %d).", m->rank, u, what, u, what,
            x->overlap ? (what[0] == 'f' ? "; overlapped, it was prefetched while unit u - 1 computed"
                                         : "; overlapped, it was prefetched while unit u + 1's backward ran")
                       : "", blank);
    }
    if (unit->gather.active)
        return tutorial_device_wrong(dev, "rank %d: unit %d's %s uses its parameters while their all-gather is "
            "still in flight\n(z->unit[%d].gather was started and not waited for).  On a GPU the buffer would "
            "still be filling\n(ptdp fills it with NaN until the wait): ptdp_wait(&z->unit[u].gather) before the "
            "unit is used (blank %d).", m->rank, u, what, u, blank);
    const ptdp_real *truth = x->ref->w[m->step][u];
    char list[64];
    unsigned bad = wrong_shards(x, unit->w, truth, list, sizeof list);
    if (bad == 0)
        return PTDP_OK;
    size_t off, len;
    ptdp_share(NUMEL, x->N, m->rank, &off, &len);
    unsigned all = (1u << x->N) - 1;
    const char *why;
    if (bad == all && short_copy(x, unit->w, truth))
        why = "Every shard begins right and stops after its first element or so: a copy of len BYTES, not\n"
              "len elements.  memcpy counts bytes: copy x->len * sizeof(ptdp_real) of your w_shard to\n"
              "w + off (blank 1).";
    else if (bad == (all & ~1u))
        why = "Shard 0 is right and every other rank's is not: each rank's own shard must sit at its\n"
              "offset inside the buffer, w + off, not at its start — the in-place all-gather sends rank k's\n"
              "shard from w + off on rank k (blank 1).";
    else if (bad == all)
        why = "No shard is right: the in-place all-gather (PTDP_IN_PLACE) sends each rank's shard from its\n"
              "own place in that rank's buffer, so first copy your w_shard to w + off (blank 1).";
    else
        why = "Your shard comes from z->unit[u].w_shard (len elements), at w + off; the all-gather\n"
              "of numel elements in place brings the others (blank 1).";
    long first = -1;
    for (size_t i = 0; i < NUMEL && first < 0; i++)
        if (!same(unit->w[i], truth[i]))
            first = (long)i;
    return tutorial_device_wrong(dev, "rank %d, step %d: unit %d's gathered parameters are wrong in shard%s %s "
        "(rank k's own shard is shard k;\nrank %d's is [%zu, %zu)): element %ld is %.10g, the parameter is %.10g.\n%s",
        m->rank, m->step + 1, u, strchr(list, ',') ? "s" : "", list, m->rank, off, off + len, first,
        (double)unit->w[first], (double)truth[first], why);
}

static void note_kept(lesson_zero3 *z, int u)
{
    struct lesson_model *m = z->model;
    int held = 0;
    for (int v = 0; v < z->nunits; v++)
        held += z->unit[v].w != NULL;
    if (held > m->x->fwd_units[m->rank])
        m->x->fwd_units[m->rank] = held;
    for (int v = 0; v < u; v++)
        if (z->unit[v].w != NULL && m->x->kept_unit[m->rank] < 0) {
            m->x->kept_unit[m->rank] = v;
            m->x->kept_at[m->rank] = u;
        }
}

static void see(lesson_zero3 *z, overlap_seen what, int u)
{
    struct lesson_model *m = z->model;
    if (m->x->seen[m->rank] == SEEN_NOTHING) {
        m->x->seen[m->rank] = what;
        m->x->seen_unit[m->rank] = u;
    }
}

int lesson_unit_forward(ptdp_device *dev, lesson_zero3 *z, int u)
{
    struct lesson_model *m = z->model;
    zero3_run *x = m->x;
    double wall = ptdp_wall_now();
    if (u != m->next_fwd)
        return tutorial_device_wrong(dev, "rank %d: the forward ran unit %d where unit %d was next: the forward "
                                     "goes through units 0, 1, …, L - 1 in order.", m->rank, u, m->next_fwd);
    int rc = check_params(dev, z, u, "forward");
    if (rc != 0)
        return rc;
    note_kept(z, u);
    if (x->overlap && u + 1 < z->nunits) {
        const lesson_unit *next = &z->unit[u + 1];
        if (next->w == NULL)
            see(z, SEEN_NEXT_NOT_STARTED, u);
        else if (!next->gather.active)
            see(z, SEEN_NEXT_WAITED, u);
    }
    m->act[u + 1] = ptdp_alloc(dev, (size_t)m->rows * H * sizeof(ptdp_real), PTDP_MEM_ACTS, "toy.act");
    if (m->act[u + 1] == NULL)
        return PTDP_ENOMEM;
    unit_fwd(z->unit[u].w, m->act[u], m->act[u + 1], m->rows);
    if (u == z->nunits - 1) {
        if ((m->dy = ptdp_alloc(dev, (size_t)m->rows * H * sizeof(ptdp_real), PTDP_MEM_ACTS, "toy.dy")) == NULL)
            return PTDP_ENOMEM;
        x->loss_sum[m->step][m->rank] += loss_and_dy(m->step, m->row0, m->rows, m->act[u + 1], m->dy);
    }
    m->next_fwd++;
    ptdp_compute_seconds(dev, "unit forward", FWD_S, wall);
    return PTDP_OK;
}

int lesson_unit_backward(ptdp_device *dev, lesson_zero3 *z, int u)
{
    struct lesson_model *m = z->model;
    zero3_run *x = m->x;
    double wall = ptdp_wall_now();
    if (m->next_fwd != z->nunits || u != m->next_bwd)
        return tutorial_device_wrong(dev, "rank %d: the backward ran unit %d where %s: the backward goes through "
                                     "units L - 1, …, 1, 0 in order, after the whole forward.", m->rank, u,
                                     m->next_fwd != z->nunits ? "the forward was not finished" : "another unit was next");
    int rc = check_params(dev, z, u, "backward");
    if (rc != 0)
        return rc;
    if (z->unit[u].g == NULL)
        return tutorial_device_wrong(dev, "rank %d: unit %d's backward has nowhere to put its gradient "
                                     "(z->unit[%d].g is NULL): lesson_grad_buffer(dev, z, u) first.", m->rank, u, u);
    if (x->overlap) {
        if (u > 0 && z->unit[u - 1].w == NULL)
            see(z, SEEN_NEXT_NOT_STARTED, u);
        else if (u > 0 && !z->unit[u - 1].gather.active)
            see(z, SEEN_NEXT_WAITED, u);
        else if (u + 1 < z->nunits && !z->unit[u + 1].reduce.active)
            see(z, SEEN_REDUCE_WAITED, u);
    }
    ptdp_real *dx = ptdp_alloc(dev, (size_t)m->rows * H * sizeof(ptdp_real), PTDP_MEM_ACTS, "toy.dx");
    if (dx == NULL)
        return PTDP_ENOMEM;
    unit_bwd(z->unit[u].w, m->act[u], m->act[u + 1], m->dy, dx, z->unit[u].g, m->rows);
    ptdp_free(dev, m->dy);
    ptdp_free(dev, m->act[u + 1]);
    m->act[u + 1] = NULL;
    m->dy = dx;
    m->next_bwd--;
    ptdp_compute_seconds(dev, "unit backward", BWD_S, wall);
    return PTDP_OK;
}

/* A started collective's result is not there before its ptdp_wait: ptdp
 * fills it with NaN until then (comm.h), so a gradient shard added too
 * early leaves NaN in the shard. */
static int check_read_before_wait(ptdp_device *dev, const lesson_zero3 *z, int mb)
{
    for (int u = 0; u < z->nunits; u++) {
        const lesson_unit *unit = &z->unit[u];
        for (size_t i = 0; i < unit->len; i++)
            if (isnan(unit->g_shard[i]))
                return tutorial_device_wrong(dev, "rank %d: after micro-batch %d, unit %d's gradient shard is NaN "
                    "at element %zu: its shard of the\nreduce-scatter was added before its ptdp_wait.  Until the "
                    "wait the result is not there (on a GPU\nthe collective is still writing it; ptdp fills it with "
                    "NaN): ptdp_wait(&z->unit[u + 1].reduce), then lesson_add_grad (blank 7).",
                    dev->rank, mb + 1, u, i);
    }
    return PTDP_OK;
}

/* After a step: my gradient shards against the reference. */
static void compare_grads(zero3_run *x, lesson_zero3 *z, int r, int s)
{
    if (x->bad_step[r] >= 0)
        return;
    bool over_n = true;
    for (int u = 0; u < z->nunits; u++) {
        const lesson_unit *unit = &z->unit[u];
        for (size_t i = 0; i < unit->len; i++) {
            double got = unit->g_shard[i], want = x->ref->g[s][u][unit->off + i], d = fabs(got - want);
            if (d > x->max_diff)
                x->max_diff = d;
            if (same(got, want))
                continue;
            if (!same(got, want / x->N))
                over_n = false;
            if (x->bad_step[r] < 0) {
                x->bad_step[r] = s;
                x->bad_unit[r] = u;
                x->bad_elem[r] = (long)(unit->off + i);
                x->bad_got[r] = got;
                x->bad_want[r] = want;
            }
        }
    }
    x->all_over_n[r] = x->bad_step[r] >= 0 && over_n;
}

static void after_step(zero3_run *x, lesson_zero3 *z, int r)
{
    for (int u = 0; u < z->nunits; u++) {
        lesson_unit *unit = &z->unit[u];
        if (x->leaked[r][0] == '\0' && (unit->w != NULL || unit->g != NULL))
            snprintf(x->leaked[r], sizeof x->leaked[r], "unit %d's %s", u,
                     unit->w != NULL ? "gathered parameters (z->unit[u].w)" : "gradient buffer (z->unit[u].g)");
    }
}

static int zero3_device(ptdp_device *dev, void *arg)
{
    zero3_run *x = arg;
    const int r = dev->rank, L = x->L;
    struct lesson_model m = { .x = x, .rank = r };
    lesson_zero3 z = { .dp = dev->world, .nunits = L, .model = &m };
    int rc = PTDP_OK;
    x->bad_step[r] = -1;
    x->kept_unit[r] = -1;
    for (int u = 0; u < L; u++) {
        lesson_unit *unit = &z.unit[u];
        unit->numel = NUMEL;
        ptdp_share(NUMEL, x->N, r, &unit->off, &unit->len);
        unit->w_shard = ptdp_alloc(dev, unit->len * sizeof(ptdp_real), PTDP_MEM_PARAMS, "w_shard");
        unit->g_shard = ptdp_alloc(dev, unit->len * sizeof(ptdp_real), PTDP_MEM_GRADS, "g_shard");
        if (unit->w_shard == NULL || unit->g_shard == NULL)
            return PTDP_ENOMEM;
        memcpy(unit->w_shard, x->ref->w[0][u] + unit->off, unit->len * sizeof(ptdp_real));
        x->shard_elems[r] += unit->len;
    }
    size_t roff, rlen;
    ptdp_share(B, x->N, r, &roff, &rlen);
    for (int s = 0; s < STEPS && rc == 0; s++) {
        if ((rc = ptdp_barrier(dev->world)) != 0)
            break;
        ptdp_arena_reset_peaks(dev->arena);
        double t0 = dev->clock.now, sent0 = dev->stats.total_sent, hidden0 = dev->clock.hidden_s;
        m.step = s;
        for (int mb = 0; mb < x->M && rc == 0; mb++) {
            size_t moff, mlen;
            ptdp_share(rlen, x->M, mb, &moff, &mlen);
            m.row0 = (int)(roff + moff);
            m.rows = (int)mlen;
            m.next_fwd = 0;
            m.next_bwd = L - 1;
            if ((m.act[0] = ptdp_alloc(dev, (mlen ? mlen : 1) * H * sizeof(ptdp_real), PTDP_MEM_ACTS, "toy.x")) == NULL)
                return PTDP_ENOMEM;
            for (int i = 0; i < m.rows; i++)
                for (int k = 0; k < H; k++)
                    m.act[0][i * H + k] = input_x(s, m.row0 + i, k);
            rc = x->overlap ? lesson_micro_batch_overlap(dev, &z) : lesson_micro_batch(dev, &z);
            for (int u = 0; u < L && rc == 0; u++)
                if (z.unit[u].gather.active || z.unit[u].reduce.active)
                    rc = tutorial_device_wrong(dev, "rank %d: after micro-batch %d, unit %d's %s was started and "
                        "never waited for.\nEvery ptdp_*_start needs its ptdp_wait before the micro-batch ends: "
                        "until then the compute\nstream has not waited for the collective's end, and its result may "
                        "not be used (blank %d%s).", r, mb + 1, u, z.unit[u].reduce.active ? "reduce-scatter" : "all-gather",
                        z.unit[u].reduce.active ? 7 : 6, z.unit[u].reduce.active ? ": unit 0's reduce-scatter, the backward's last, too, after the loop" : "");
            if (rc == 0 && x->overlap)
                rc = check_read_before_wait(dev, &z, mb);
            if (rc == 0 && m.next_bwd != -1)
                rc = tutorial_device_wrong(dev, "rank %d: lesson_micro_batch%s returned before the backward of "
                                           "unit %d: a micro-batch goes forward through every unit, then back.",
                                           r, x->overlap ? "_overlap" : "", m.next_fwd < L ? m.next_fwd : m.next_bwd);
            for (int u = 0; u <= L; u++) {
                ptdp_free(dev, m.act[u]);
                m.act[u] = NULL;
            }
            ptdp_free(dev, m.dy);
            m.dy = NULL;
        }
        if (rc != 0)
            break;
        after_step(x, &z, r);
        ptdp_mem_stats ms;
        ptdp_arena_stats(dev->arena, &ms);
        if (ms.peak[PTDP_MEM_PARAMS] > x->peak_params[r])
            x->peak_params[r] = ms.peak[PTDP_MEM_PARAMS];
        if (ms.peak[PTDP_MEM_GRADS] > x->peak_grads[r])
            x->peak_grads[r] = ms.peak[PTDP_MEM_GRADS];
        x->end_params[r] = ms.current[PTDP_MEM_PARAMS];
        x->end_grads[r] = ms.current[PTDP_MEM_GRADS];
        x->time[r] += dev->clock.now - t0;
        x->bytes[r] += dev->stats.total_sent - sent0;
        x->hidden[r] += dev->clock.hidden_s - hidden0;
        compare_grads(x, &z, r, s);
        for (int u = 0; u < L; u++) {                 /* SGD on my shards */
            lesson_unit *unit = &z.unit[u];
            for (size_t i = 0; i < unit->len; i++) {
                unit->w_shard[i] -= LR * unit->g_shard[i];
                unit->g_shard[i] = 0;
            }
        }
    }
    for (int u = 0; u < L; u++) {
        lesson_unit *unit = &z.unit[u];
        if (rc == 0)
            memcpy(x->final_w[u] + unit->off, unit->w_shard, unit->len * sizeof(ptdp_real));
        ptdp_free(dev, unit->w);
        ptdp_free(dev, unit->g);
        ptdp_free(dev, unit->w_shard);
        ptdp_free(dev, unit->g_shard);
    }
    return rc;
}

/* ------------------------------------------------- blanks 1 to 3 alone */

/* Rank r's made-up gradient of the pieces test: element i. */
static double range_grad(int r, size_t i) { return 0.01 * (r + 1) * (double)(i + 1) + sin((double)i); }

/* One unit on x->N ranks: lesson_gather (blocking), then twice
 * lesson_reduce_scatter + lesson_add_grad of a known gradient per rank
 * (two micro-batches' worth). */
static int ranges_device(ptdp_device *dev, void *arg)
{
    zero3_run *x = arg;
    const int r = dev->rank, N = x->N;
    struct lesson_model m = { .x = x, .rank = r };
    lesson_zero3 z = { .dp = dev->world, .nunits = 1, .model = &m };
    lesson_unit *unit = &z.unit[0];
    unit->numel = NUMEL;
    ptdp_share(NUMEL, N, r, &unit->off, &unit->len);
    unit->w_shard = ptdp_alloc(dev, unit->len * sizeof(ptdp_real), PTDP_MEM_PARAMS, "w_shard");
    unit->g_shard = ptdp_alloc(dev, unit->len * sizeof(ptdp_real), PTDP_MEM_GRADS, "g_shard");
    if (unit->w_shard == NULL || unit->g_shard == NULL)
        return PTDP_ENOMEM;
    memcpy(unit->w_shard, x->ref->w[0][0] + unit->off, unit->len * sizeof(ptdp_real));

    int rc = lesson_gather(dev, &z, 0, false);
    if (rc != 0)
        return rc;
    if (unit->w == NULL)
        return tutorial_device_wrong(dev, "rank %d: after lesson_gather(dev, z, 0, false), z->unit[0].w is NULL: "
                                     "the gathered unit goes into a fresh buffer x->w (blank 1).", r);
    if (unit->gather.active)
        return tutorial_device_wrong(dev, "rank %d: lesson_gather with start false STARTED its all-gather: "
                                     "blocking means ptdp_all_gather, which returns with the data (blank 1).", r);
    if ((rc = check_params(dev, &z, 0, "gather")) != 0)
        return rc;
    lesson_release(dev, &z, 0);

    size_t count = 0;
    for (int mb = 0; mb < 2; mb++) {
        if ((rc = lesson_grad_buffer(dev, &z, 0)) != 0)
            return rc;
        for (size_t i = 0; i < NUMEL; i++)
            unit->g[i] = range_grad(r, i);
        double sent0 = dev->stats.total_sent;
        if ((rc = lesson_reduce_scatter(dev, &z, 0, false)) != 0)
            return rc;
        double sent = dev->stats.total_sent - sent0, want = (double)(N - 1) / N * NUMEL * sizeof(ptdp_real);
        x->bytes[r] = sent;
        if (unit->reduce.active)
            return tutorial_device_wrong(dev, "rank %d: lesson_reduce_scatter with start false STARTED its "
                                         "collective: blocking means ptdp_reduce_scatter (blank 2).", r);
        if (unit->g == NULL)
            return tutorial_device_wrong(dev, "rank %d: lesson_reduce_scatter left z->unit[0].g NULL: the "
                                         "reduce-scatter works in place, and lesson_add_grad frees g (blanks 2, 3).", r);
        if ((rc = lesson_add_grad(dev, &z, 0)) != 0)
            return rc;
        if (unit->g != NULL)
            return tutorial_device_wrong(dev, "rank %d: after lesson_add_grad, z->unit[0].g is still there: "
                                         "free it and set it to NULL once its shard is added (blank 3).", r);
        count++;
        for (size_t i = 0; i < unit->len; i++) {
            double sum = 0, got = unit->g_shard[i];
            for (int k = 0; k < N; k++)
                sum += range_grad(k, unit->off + i);
            double want_shard = (double)count * sum;
            if (same(got, want_shard))
                continue;
            const char *why;
            if (same(got, want_shard / N))
                why = "That is 1/N of it: you AVERAGED over the ranks.  Each rank's gradient is already\n"
                      "divided by the whole batch B (the model's backward does it), so the ranks' pieces must\n"
                      "be SUMMED: PTDP_SUM (blank 2).";
            else if (count == 2 && same(got, sum))
                why = "That is the second micro-batch's alone: g_shard sums the step's micro-batches,\n"
                      "so ADD into it (+=), do not overwrite it (blank 3).";
            else if (r > 0)
                why = "Rank 0's shard starts at element 0 and yours does not: after an in-place\n"
                      "reduce-scatter, your shard of the sum sits at g + off — add g[off + i], not g[i] (blank 3).";
            else
                why = "After the reduce-scatter (PTDP_SUM, in place, numel elements) your shard of the sum\n"
                      "is g[off .. off + len): add it into g_shard (blanks 2, 3).";
            return tutorial_device_wrong(dev, "rank %d: after %zu micro-batch%s of lesson_reduce_scatter + "
                                         "lesson_add_grad, g_shard[%zu] (element %zu of the unit) is %.10g; "
                                         "the sum over the %d ranks%s is %.10g.\n%s", r, count,
                                         count == 1 ? "" : "es", i, unit->off + i, got, N,
                                         count == 1 ? "" : ", added up over both", want_shard, why);
        }
        /* With shards of unequal length a rank's share of the ring varies by a
         * shard; the mean over the ranks is exactly (N-1)/N (verdict_bytes). */
        if (sent > 1.5 * want) {
            char b1[32], b2[32], b3[32];
            return tutorial_device_wrong(dev, "rank %d: lesson_reduce_scatter sent %s; a reduce-scatter of "
                "the unit's %s sends about (N-1)/N of them, %s.%s", r, ptdp_format_bytes(sent, b1, sizeof b1),
                ptdp_format_bytes((double)NUMEL * sizeof(ptdp_real), b2, sizeof b2),
                ptdp_format_bytes(want, b3, sizeof b3),
                sent > 1.8 * want
                    ? "\nThat is twice as much: an ALL-REDUCE, which gives every rank the whole sum when you keep\n"
                      "only your shard of it.  A reduce-scatter gives exactly that shard, for half the bytes (blank 2)."
                    : "");
        }
    }
    ptdp_free(dev, unit->w_shard);
    ptdp_free(dev, unit->g_shard);
    return PTDP_OK;
}

static bool check_ranges(void)
{
    static reference ref;
    run_reference(1, &ref);
    int rc;
    zero3_run *x = calloc(1, sizeof *x);
    const char *what = "lesson_gather, lesson_reduce_scatter, lesson_add_grad on 4 ranks";
    if (x == NULL) {
        tutorial_wrong("%s: host out of memory", what);
        return false;
    }
    *x = (zero3_run){ .N = 4, .L = 1, .M = 1, .ref = &ref };
    rc = tutorial_launch(what, x->N, ranges_device, x);
    free(x);
    if (rc == 0)
        tutorial_ok("%s: every rank's gathered unit right; my shard of the summed gradient, twice", what);
    return rc == 0;
}

/* ------------------------------------------------------------- verdicts */

static double fmt_us(double s) { return s * 1e6; }

/* 2, 3: the gradients, the loss, the final parameters. */
static bool verdict_values(const zero3_run *x, const char *what)
{
    for (int r = 0; r < x->N; r++) {
        if (x->bad_step[r] < 0)
            continue;
        tutorial_wrong("%s: after step %d, rank %d's gradient shard is wrong: unit %d's element %ld is %.10g, "
                       "one device's gradient is %.10g.", what, x->bad_step[r] + 1, r, x->bad_unit[r],
                       x->bad_elem[r], x->bad_got[r], x->bad_want[r]);
        if (x->all_over_n[r])
            tutorial_note("Every wrong element is exactly 1/%d of the right one: you averaged over the ranks.  The\n"
                          "model's backward already divides by the whole batch B, so the ranks' gradients must be\n"
                          "SUMMED (PTDP_SUM in the reduce-scatter, blank 2), not averaged.", x->N);
        else if (r > 0 && x->bad_step[0] < 0)
            tutorial_note("Rank 0's shards are right and rank %d's are not: after an in-place reduce-scatter, your\n"
                          "shard of the sum sits at its own offset, g + off — add g[off + i] into g_shard[i], not\n"
                          "g[i] (blank 3).", r);
        else
            tutorial_note("g_shard must become, over the step's micro-batches, the SUM of my shard of every\n"
                          "micro-batch's reduce-scattered gradient: += g[off + i] after each (blanks 2, 3).");
        return false;
    }
    for (int s = 0; s < STEPS; s++) {
        double sum = 0;
        for (int r = 0; r < x->N; r++)
            sum += x->loss_sum[s][r];
        if (!same(sum, x->ref->loss[s])) {
            tutorial_wrong("%s: the loss of step %d is %.12g; one device's is %.12g.", what, s + 1, sum,
                           x->ref->loss[s]);
            return false;
        }
    }
    return true;
}

/* 3: every buffer freed (every collective waited for: zero3_device). */
static bool verdict_tidy(const zero3_run *x, const char *what)
{
    for (int r = 0; r < x->N; r++)
        if (x->leaked[r][0]) {
            tutorial_wrong("%s: on rank %d, %s was still allocated after the step.", what, r, x->leaked[r]);
            tutorial_note("A unit's gathered parameters are freed after each use (lesson_release), its\n"
                          "gradient buffer after its shard is added (lesson_add_grad).");
            return false;
        }
    return true;
}

/* 4: the peaks of "params" and "grads". */
static bool verdict_memory(const zero3_run *x, const char *what)
{
    char b1[32], b2[32], b3[32], b4[32];
    const size_t unit_b = NUMEL * sizeof(ptdp_real), units = x->overlap ? 2 : 1;
    for (int r = 0; r < x->N; r++) {
        size_t shard = x->shard_elems[r] * sizeof(ptdp_real), want = shard + units * unit_b;
        if (x->peak_params[r] > want) {
            double extra = (double)(x->peak_params[r] - shard) / (double)unit_b;
            tutorial_wrong("%s: rank %d's parameters peaked at %s = its shards %s + %.3g units of %s; "
                           "ZeRO-3 holds its shards + %zu unit%s (%s).", what, r,
                           ptdp_format_bytes((double)x->peak_params[r], b1, sizeof b1),
                           ptdp_format_bytes((double)shard, b2, sizeof b2), extra,
                           ptdp_format_bytes((double)unit_b, b3, sizeof b3), units, units > 1 ? "s" : "",
                           ptdp_format_bytes((double)want, b4, sizeof b4));
            if (x->kept_unit[r] >= 0)
                tutorial_note("Unit %d was still gathered when unit %d's forward began, and at the last forward\n"
                              "%d of the %d units were gathered at once%s.  Free a unit's gathered parameters right\n"
                              "after its forward (lesson_release, blank %d): kept, they add up to the whole model on\n"
                              "every rank, as in plain DP (and a buffer gathered again over one still held is lost).",
                              x->kept_unit[r], x->kept_at[r], x->fwd_units[r], x->L,
                              x->fwd_units[r] == x->L ? " — the whole model" : "", x->overlap ? 6 : 4);
            else
                tutorial_note("Gather a unit only when it is about to be used (the next one, when prefetching),\n"
                              "and free it right after.");
            return false;
        }
        if (x->peak_grads[r] > want) {
            tutorial_wrong("%s: rank %d's gradients peaked at %s = its shards %s + %.3g units; ZeRO-3 needs its "
                           "shards + %zu unit%s (%s).", what, r,
                           ptdp_format_bytes((double)x->peak_grads[r], b1, sizeof b1),
                           ptdp_format_bytes((double)shard, b2, sizeof b2),
                           (double)(x->peak_grads[r] - shard) / (double)unit_b, units, units > 1 ? "s" : "",
                           ptdp_format_bytes((double)want, b4, sizeof b4));
            tutorial_note("A unit's gradient buffer lives from its backward until its shard is added to\n"
                          "g_shard (lesson_add_grad frees it)%s.", x->overlap ?
                          "; overlapped, one unit's reduce-scatter is in flight while the next\nunit's backward runs, no more" : "");
            return false;
        }
        if (x->end_params[r] > shard || x->end_grads[r] > shard) {
            bool params = x->end_params[r] > shard;
            tutorial_wrong("%s: after the last step rank %d still holds %s of %s; its shards are %s.", what, r,
                           ptdp_format_bytes((double)(params ? x->end_params[r] : x->end_grads[r]), b1, sizeof b1),
                           params ? "parameters" : "gradients", ptdp_format_bytes((double)shard, b2, sizeof b2));
            tutorial_note("Some buffer was lost: allocated again over one that was never freed.  Every gathered\n"
                          "unit is freed after its use (lesson_release), every gradient buffer once its shard is\n"
                          "added (lesson_add_grad).");
            return false;
        }
    }
    return true;
}

/* 5: 3 (N-1)/N S per micro-batch. */
static bool verdict_bytes(const zero3_run *x, const char *what, double *per_mb)
{
    char b1[32], b2[32], b3[32];
    const double S = (double)x->L * NUMEL * sizeof(ptdp_real), unit = (double)(x->N - 1) / x->N * S;
    double sent = 0;
    for (int r = 0; r < x->N; r++)
        sent += x->bytes[r];
    sent /= (double)x->N * STEPS * x->M;
    *per_mb = sent;
    if (fabs(sent - 3 * unit) <= 1e-9 * unit)
        return true;
    tutorial_wrong("%s: each rank sent %s per micro-batch; 3 (N-1)/N S = %s (S = %s: %d units of %d).", what,
                   ptdp_format_bytes(sent, b1, sizeof b1), ptdp_format_bytes(3 * unit, b2, sizeof b2),
                   ptdp_format_bytes(S, b3, sizeof b3), x->L, NUMEL);
    if (fabs(sent - 4 * unit) <= 1e-9 * unit)
        tutorial_note("That is 4 (N-1)/N S: two gathers and an ALL-REDUCE of the gradient, which sends twice a\n"
                      "reduce-scatter's bytes to give every rank the whole sum — of which you keep only your\n"
                      "shard.  A reduce-scatter gives exactly that shard (blank 2).");
    else if (sent > 3 * unit)
        tutorial_note("More than two gathers and one reduce-scatter of every unit: is some unit gathered\n"
                      "twice, or one you do not use next?");
    return false;
}

static const char *seen_text(overlap_seen s)
{
    switch (s) {
    case SEEN_NEXT_NOT_STARTED: return "the next unit's gather had not started";
    case SEEN_NEXT_WAITED:      return "the next unit's gather was already waited for";
    case SEEN_REDUCE_WAITED:    return "the previous unit's reduce-scatter was not in flight";
    default:                    return "";
    }
}

/* 6: the overlap, seen and timed. */
static bool verdict_overlap(const zero3_run *x, const zero3_run *blocking, const char *what)
{
    double t = 0, tb = 0, hidden = 0;
    for (int r = 0; r < x->N; r++) {
        t = fmax(t, x->time[r]);
        tb = fmax(tb, blocking->time[r]);
        hidden += x->hidden[r] / x->N;
    }
    t /= STEPS;
    tb /= STEPS;
    hidden /= STEPS;
    int r = 0;
    while (r < x->N - 1 && x->seen[r] == SEEN_NOTHING)
        r++;
    overlap_seen s = x->seen[r];
    int u = x->seen_unit[r];
    if (t >= tb * (1 - 1e-9)) {
        tutorial_wrong("%s: the overlapped step takes %.2f us of virtual time, the blocking one %.2f us: "
                       "nothing gained (%.2f us of communication hidden).", what, fmt_us(t), fmt_us(tb),
                       fmt_us(hidden));
        if (s == SEEN_NEXT_WAITED)
            tutorial_note("While unit %d computed on rank %d, %s: you wait right after\n"
                          "starting, so the compute stream stalls for the whole gather, as if it were blocking.\n"
                          "Start the next unit's gather BEFORE this unit computes; wait for it just before it is\n"
                          "used (blanks 6, 7).", u, r, seen_text(s));
        else if (s != SEEN_NOTHING)
            tutorial_note("While unit %d computed on rank %d, %s: nothing runs on the\n"
                          "communication stream under the compute (blanks 6, 7).", u, r, seen_text(s));
        return false;
    }
    if (s != SEEN_NOTHING) {
        bool backward = s == SEEN_REDUCE_WAITED;
        tutorial_wrong("%s: while unit %d's %s ran on rank %d, %s.", what, u,
                       backward ? "backward" : "forward or backward", r, seen_text(s));
        tutorial_note("Your step is shorter than the blocking one (%.2f us against %.2f us), but not all it\n"
                      "can hide is hidden.  %s", fmt_us(t), fmt_us(tb),
                      s == SEEN_REDUCE_WAITED
                          ? "Start unit u's reduce-scatter after its backward and wait for it\n"
                            "only after the NEXT unit's backward (u - 1), so that it runs under that compute (blank 7)."
                      : s == SEEN_NEXT_WAITED
                          ? "Wait for a gather just before its unit is used, not right after\nstarting it (blanks 6, 7)."
                          : "Start the next unit's gather before this unit computes (blanks 6, 7).");
        return false;
    }
    tutorial_ok("%s: the next unit's gather runs under each unit's compute, each reduce-scatter under the "
                "next backward", what);
    tutorial_note("virtual step (dgx-a100, a unit's forward %.0f us, backward %.0f us): blocking %.2f us, "
                  "overlapped %.2f us\n(%.0f%% shorter; %.2f us of communication hidden under compute)",
                  fmt_us(FWD_S), fmt_us(BWD_S), fmt_us(tb), fmt_us(t), 100 * (1 - t / tb), fmt_us(hidden));
    return true;
}

static zero3_run *launch(int N, int L, int M, bool overlap, const reference *ref, const char *what, int *rc)
{
    zero3_run *x = calloc(1, sizeof *x);
    if (x == NULL) {
        tutorial_wrong("%s: host out of memory", what);
        *rc = PTDP_ENOMEM;
        return NULL;
    }
    *x = (zero3_run){ .N = N, .L = L, .M = M, .overlap = overlap, .ref = ref };
    ptdp_launch_opts o = { 0 };
    o.profile = ptdp_profile_find("dgx-a100");
    *rc = tutorial_launch_opts(what, N, zero3_device, x, &o);
    return x;
}

static bool check_config(int N, int L, int M)
{
    static reference ref;
    run_reference(L, &ref);
    char what[96], what_o[96], b1[32], b2[32], b3[32], b4[32];
    snprintf(what, sizeof what, "blocking, %d ranks, %d units, %d micro-batch%s", N, L, M, M == 1 ? "" : "es");
    snprintf(what_o, sizeof what_o, "overlapped, %d ranks, %d units, %d micro-batch%s", N, L, M, M == 1 ? "" : "es");
    int rc;
    bool ok = false;
    double per_mb;
    zero3_run *b = launch(N, L, M, false, &ref, what, &rc), *o = NULL;
    if (b == NULL || rc != 0 || !verdict_values(b, what) || !verdict_tidy(b, what) || !verdict_memory(b, what) ||
        !verdict_bytes(b, what, &per_mb))
        goto done;
    size_t shard = b->shard_elems[0] * sizeof(ptdp_real);
    tutorial_ok("%s: %d SGD steps equal to one device (largest difference %.1e)", what, STEPS, b->max_diff);
    tutorial_note("rank 0's parameters peak at %s = its shards %s + one unit %s (the model: %s)",
                  ptdp_format_bytes((double)b->peak_params[0], b1, sizeof b1),
                  ptdp_format_bytes((double)shard, b2, sizeof b2),
                  ptdp_format_bytes((double)NUMEL * sizeof(ptdp_real), b3, sizeof b3),
                  ptdp_format_bytes((double)L * NUMEL * sizeof(ptdp_real), b4, sizeof b4));
    tutorial_note("bytes sent per rank and micro-batch %s = 3 (N-1)/N S (plain DP's all-reduce: 2 (N-1)/N S)",
                  ptdp_format_bytes(per_mb, b1, sizeof b1));
    o = launch(N, L, M, true, &ref, what_o, &rc);
    if (o == NULL || rc != 0 || !verdict_values(o, what_o) || !verdict_tidy(o, what_o))
        goto done;
    if (memcmp(o->final_w, b->final_w, sizeof o->final_w) != 0) {
        tutorial_wrong("%s: the parameters after %d steps differ from your blocking run's; the collectives "
                       "move the same data, started or not, so they must be the same bits.", what_o, STEPS);
        goto done;
    }
    if (!verdict_memory(o, what_o) || !verdict_bytes(o, what_o, &per_mb))
        goto done;
    tutorial_ok("%s: the blocking run's parameters to the bit; peak %s = shards + two units; %s per micro-batch",
                what_o, ptdp_format_bytes((double)o->peak_params[0], b1, sizeof b1),
                ptdp_format_bytes(per_mb, b2, sizeof b2));
    ok = verdict_overlap(o, b, what_o);
done:
    free(o);
    free(b);
    return ok;
}

int main(void)
{
    tutorial_begin("10", "ZeRO-3 and overlap: a unit gathered only while it computes");
    static const int configs[][3] = { { 2, 3, 2 }, { 3, 4, 1 }, { 4, 5, 2 } };
    if (!check_ranges())
        return tutorial_end();
    bool ok = true;
    for (size_t k = 0; ok && k < sizeof configs / sizeof configs[0]; k++)
        ok = check_config(configs[k][0], configs[k][1], configs[k][2]);
    if (ok)
        check_hsdp();   /* blank 8: HSDP's two-stage sum (check_hsdp.c) */
    return tutorial_end();
}
