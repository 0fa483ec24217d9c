/*
 * schedule_registry.c — every pipeline schedule ptdp knows, one row each,
 * and the one place their names are written.
 *
 *   row:  name · generator · placement · layout · what it does (caps)
 *         · the counts it needs (check) · bubble formula · what a stage
 *         keeps (in_flight, deferred) · how its timing grows (line)
 *         · what it refuses and why
 *
 *          ┌ validate.c ── may this run?           (check, refuses, caps)
 *   row ───┼ train/pp.c ── build it, lay it out     (generate, placement, layout)
 *          ├ plan/ ─────── price it                 (in_flight, deferred, line)
 *          └ cli/ ──────── name it, draw it, print its formula (name, help, bubble)
 *
 * Nobody else compares a schedule's name: `--schedule NAME` is looked up
 * once (ptdp_schedule_find), and from then on a run carries its row.  A
 * schedule written elsewhere (a test, a lesson) joins with
 * ptdp_schedule_register and is validated, trained, drawn and planned the
 * same way.
 *
 * The bubbles, with p stages, m micro-batches, v chunks a stage, uniform
 * stages and free links (F = B = W for the split backwards):
 *
 *   gpipe, 1f1b        (p - 1) / (m + p - 1)
 *   interleaved        (p - 1) / (v m + p - 1)
 *   zb-h1, dualpipev   (p - 1) / (3m + p - 1)
 *   dualpipe           (p - 2) / (3m + p - 2)     m: both directions
 */
#include "ptdp/schedule.h"

#include <stdio.h>
#include <string.h>

#include "ptdp/error.h"
#include "parallel/schedule_impl.h"

/* ---- the counts each schedule needs ------------------------------------------ */

/* Interleaved: pp >= 2, m a multiple of pp (micro-batches round the ring
 * in groups of p). */
static int check_ring_chunks(const ptdp_schedule_entry *e, int pp, int micro_batches, int virtual_stages,
                             char *msg, size_t msglen)
{
    (void)virtual_stages;
    if (pp < 2) {
        snprintf(msg, msglen, "--schedule %s needs --pp 2 or more: with one stage there is no "
                 "bubble to shrink", e->name);
        return PTDP_EINVAL;
    }
    if (micro_batches % pp != 0) {
        int up = (micro_batches / pp + 1) * pp;
        snprintf(msg, msglen, "--schedule %s: --micro-batches %d must be a multiple of --pp %d "
                 "(micro-batches go round the ring of stages in groups of p; try --micro-batches %d)",
                 e->name, micro_batches, pp, up);
        return PTDP_EINVAL;
    }
    return PTDP_OK;
}

/* A V: two chunks per device, m >= 2p as the reference requires. */
static int check_v(const ptdp_schedule_entry *e, int pp, int micro_batches, int virtual_stages,
                   char *msg, size_t msglen)
{
    if (virtual_stages > 2) {
        snprintf(msg, msglen, "--virtual-stages %d: the %s schedule holds two chunks per device, "
                 "stages r and 2p-1-r (leave --virtual-stages out)", virtual_stages, e->name);
        return PTDP_EINVAL;
    }
    if (pp < 2) {
        snprintf(msg, msglen, "--schedule %s needs --pp 2 or more: --pp counts its devices, "
                 "the model is cut into 2 x --pp stages", e->name);
        return PTDP_EINVAL;
    }
    if (micro_batches < 2 * pp) {
        snprintf(msg, msglen, "--schedule %s: --micro-batches %d is fewer than 2 x --pp = %d "
                 "(its steady state of forward-and-backward pairs starts after the first device "
                 "has forwarded 2p micro-batches; try --micro-batches %d)",
                 e->name, micro_batches, 2 * pp, 2 * pp);
        return PTDP_EINVAL;
    }
    return PTDP_OK;
}

/* DualPipe: p devices holding two copies, half the micro-batches each way;
 * p and m even, m >= 2p, as the reference asserts. */
static int check_dual(const ptdp_schedule_entry *e, int pp, int micro_batches, int virtual_stages,
                      char *msg, size_t msglen)
{
    if (virtual_stages > 2) {
        snprintf(msg, msglen, "--virtual-stages %d: the %s schedule holds two chunks per device, "
                 "stage r of one copy and stage p-1-r of the other (leave --virtual-stages out)",
                 virtual_stages, e->name);
        return PTDP_EINVAL;
    }
    if (pp < 2 || pp % 2 != 0) {
        snprintf(msg, msglen, "--schedule %s needs an even --pp of 2 or more (not %d): device r pairs "
                 "with device p-1-r, the two holding the same two stages (try --pp %d)",
                 e->name, pp, pp < 2 ? 2 : pp + 1);
        return PTDP_EINVAL;
    }
    if (micro_batches % 2 != 0 || micro_batches < 2 * pp) {
        int up = micro_batches < 2 * pp ? 2 * pp : micro_batches + 1;
        snprintf(msg, msglen, "--schedule %s: --micro-batches %d must be even and at least 2 x --pp = %d "
                 "(half of them enter at each end, and each half's steady state of forward-and-backward "
                 "pairs starts after its first device has forwarded p of them; try --micro-batches %d)",
                 e->name, micro_batches, 2 * pp, up);
        return PTDP_EINVAL;
    }
    return PTDP_OK;
}

/* ---- the bubbles (schedule.c derives each) --------------------------------------- */

static double bubble_plain(int p, int m, int v)
{
    (void)v;
    return ptdp_bubble_formula(p, m);
}

static double bubble_interleaved(int p, int m, int v)
{
    return (double)(p - 1) / ((double)v * m + p - 1);
}

static double bubble_zero(int p, int m, int v)        /* F = B = W (dualpipev: a pair F + B) */
{
    (void)v;
    return (double)(p - 1) / (3.0 * m + p - 1);
}

static double bubble_dual(int p, int m, int v)        /* F = B = W, a pair F + B; m both ways */
{
    (void)v;
    return (double)(p - 2) / (3.0 * m + p - 2);
}

double ptdp_bubble_formula(int pp, int micro_batches)
{
    return (double)(pp - 1) / (double)(micro_batches + pp - 1);
}

/* ---- what a stage keeps: closed forms of the lists' own counts --------------- */

/* GPipe: every micro-batch is forwarded before the first backward. */
static int in_flight_all(int p, int m, int v, int stage, int chunk)
{
    (void)p, (void)v, (void)stage, (void)chunk;
    return m;
}

/* 1F1B and ZB-H1: the warm-up's p - s - 1 forwards and the steady state's one. */
static int in_flight_1f1b(int p, int m, int v, int stage, int chunk)
{
    (void)v, (void)chunk;
    return p - stage < m ? p - stage : m;
}

/* Interleaved: Megatron's warm-up, 2 (p - s - 1) + (v - 1) p, plus one;
 * of them chunk c's, as its order takes p micro-batches of chunk 0, p of
 * chunk 1, …: how many of the first n forwards run chunk c. */
static int in_flight_interleaved(int p, int m, int v, int stage, int chunk)
{
    long total = 2L * (p - stage - 1) + (long)(v - 1) * p + 1;
    const int n = total < (long)v * m ? (int)total : v * m;
    if (chunk < 0)
        return n;
    const int groups = n / p, rem = n % p;
    return (groups / v + (chunk < groups % v ? 1 : 0)) * p + (chunk == groups % v ? rem : 0);
}

/* ZB-H1: W runs late on the early stages, so stage s owes up to s + 1 of
 * them once m covers the pipe: max(1, min(m, s + 1 - max(0, p - 1 - m))). */
static int deferred_zb_h1(int p, int m, int stage)
{
    int short_by = p - 1 - m > 0 ? p - 1 - m : 0, n = stage + 1 - short_by;
    n = n < m ? n : m;
    return n > 1 ? n : 1;
}

/* ---- how the timing grows: a straight line past the warm-up ------------------ */

static void line_ring(int p, int v, int *m1, int *m2)   /* interleaved: groups of p */
{
    *m1 = 2 * p;
    *m2 = *m1 + (v > 1 ? p : 1);
}

static void line_pairs(int p, int v, int *m1, int *m2)   /* DualPipe's rounds of pairs settle by 4p */
{
    (void)v;
    *m1 = 4 * p;
    *m2 = *m1 + 2;
}

/* ---- the rows ---------------------------------------------------------------- */

/* A V's and DualPipe's two chunks a device: what they cannot run with. */
#define TWO_CHUNKS_OVERLAP "a device's two chunks finish their last backwards at different times and only one " \
                           "chunk's gradients form the buffer's prefix; leave --overlap out"

const ptdp_schedule_entry ptdp_schedule_row_1f1b = {
    .name = "1f1b", .summary = "warm-up, one forward one backward, cool-down (PipeDream-Flush)",
    .generate = ptdp_schedule_1f1b, .placement = PTDP_PLACE_EVEN_ODD, .layout = PTDP_CHUNKS_RING,
    .caps = PTDP_SCHED_PLANNED,
    .bubble = bubble_plain, .bubble_words = "(p-1)/(m+p-1)",
    .in_flight = in_flight_1f1b, .line = line_ring,
};

const ptdp_schedule_entry ptdp_schedule_row_gpipe = {
    .name = "gpipe", .summary = "all forwards, then all backwards (GPipe)",
    .generate = ptdp_schedule_gpipe, .placement = PTDP_PLACE_EVEN_ODD, .layout = PTDP_CHUNKS_RING,
    .caps = PTDP_SCHED_PLANNED | PTDP_SCHED_TOKEN_SLICES,
    .bubble = bubble_plain, .bubble_words = "(p-1)/(m+p-1)",
    .in_flight = in_flight_all, .line = line_ring,
};

const ptdp_schedule_entry ptdp_schedule_row_interleaved = {
    .name = "interleaved", .summary = "1F1B over v model chunks per stage (Megatron-LM, --virtual-stages)",
    .generate = ptdp_schedule_interleaved, .placement = PTDP_PLACE_BY_SEND_TIME, .layout = PTDP_CHUNKS_RING,
    .caps = PTDP_SCHED_PLANNED | PTDP_SCHED_CHUNKS, .check = check_ring_chunks,
    .bubble = bubble_interleaved, .bubble_words = "(p-1)/(v*m+p-1)",
    .in_flight = in_flight_interleaved, .line = line_ring,
};

const ptdp_schedule_entry ptdp_schedule_row_zb_h1 = {
    .name = "zb-h1", .summary = "1F1B with the weight gradients deferred into the bubbles (zero bubble H1)",
    .help = "(the backward split in B and W, W filling the bubble)",
    .generate = ptdp_schedule_zb_h1, .placement = PTDP_PLACE_BY_SEND_TIME, .layout = PTDP_CHUNKS_RING,
    .caps = PTDP_SCHED_PLANNED | PTDP_SCHED_SPLIT_BACKWARD,
    .bubble = bubble_zero, .bubble_words = "(p-1)/(3m+p-1)",
    .in_flight = in_flight_1f1b, .deferred = deferred_zb_h1, .line = line_ring,
};

const ptdp_schedule_entry ptdp_schedule_row_dualpipev = {
    .name = "dualpipev", .summary = "2p stages as a V on p devices, forward-and-backward pairs (DualPipeV)",
    .help = "(2 x --pp stages as a V: stage s holds s and 2pp-1-s; m >= 2 pp)",
    .generate = ptdp_schedule_dualpipev, .placement = PTDP_PLACE_BY_SEND_TIME, .layout = PTDP_CHUNKS_V,
    .caps = PTDP_SCHED_SPLIT_BACKWARD | PTDP_SCHED_PAIRS, .check = check_v,
    .bubble = bubble_zero, .bubble_words = "(p-1)/(3m+p-1)",
    .line = line_pairs,
    .refuses = {
        [PTDP_FEATURE_BF16] = "bf16 parameters are widened one model chunk's units at a time, and its V gives each "
                              "stage two chunks (and W adds after the rounding, as in zb-h1); use --schedule 1f1b or "
                              "gpipe",
        [PTDP_FEATURE_ZERO3] = "ZeRO-3 gathers one model chunk's units per device, and its V gives each stage two "
                               "chunks; use --zero 2 (or --schedule 1f1b)",
        [PTDP_FEATURE_OVERLAP] = TWO_CHUNKS_OVERLAP,
    },
};

const ptdp_schedule_entry ptdp_schedule_row_dualpipe = {
    .name = "dualpipe",
    .summary = "two copies of p stages, one per direction, forward-and-backward pairs (DualPipe)",
    .help = "(two copies of --pp stages, half the micro-batches entering at each end: stage s holds s of one "
            "and pp-1-s of the other, 2x the parameters; --pp and m even, m >= 2 pp)",
    .generate = ptdp_schedule_dualpipe, .placement = PTDP_PLACE_BY_SEND_TIME, .layout = PTDP_CHUNKS_DUAL,
    .caps = PTDP_SCHED_SPLIT_BACKWARD | PTDP_SCHED_PAIRS, .check = check_dual,
    .bubble = bubble_dual, .bubble_words = "(p-2)/(3m+p-2)",
    .line = line_pairs,
    .refuses = {
        [PTDP_FEATURE_BF16] = "bf16 parameters are widened one model chunk's units at a time, and DualPipe gives "
                              "each stage two chunks (a stage of each copy); use --schedule 1f1b or gpipe",
        [PTDP_FEATURE_ZERO3] = "ZeRO-3 gathers one model chunk's units per device, and DualPipe gives each stage two "
                               "chunks (a stage of each copy); use --zero 2 (or --schedule 1f1b)",
        [PTDP_FEATURE_OVERLAP] = TWO_CHUNKS_OVERLAP,
    },
};

const ptdp_schedule_entry ptdp_schedule_row_1f1b_naive = {
    .name = "1f1b-naive", .summary = "1F1B with every send before its receive (a counter-example: deadlocks)",
    .generate = ptdp_schedule_1f1b, .placement = PTDP_PLACE_SEND_FIRST, .layout = PTDP_CHUNKS_RING,
    .bubble = bubble_plain, .bubble_words = "(p-1)/(m+p-1)",
};

/* The built-in rows, the default first; then those registered. */
static const ptdp_schedule_entry *const builtin[] = {
    &ptdp_schedule_row_1f1b, &ptdp_schedule_row_gpipe, &ptdp_schedule_row_interleaved,
    &ptdp_schedule_row_zb_h1, &ptdp_schedule_row_dualpipev, &ptdp_schedule_row_dualpipe,
};
enum { NBUILTIN = sizeof builtin / sizeof builtin[0], NEXTRA_MAX = 16 };
static const ptdp_schedule_entry *extra[NEXTRA_MAX];
static int nextra;

int ptdp_schedule_count(void)
{
    return NBUILTIN + nextra;
}

const ptdp_schedule_entry *ptdp_schedule_at(int i)
{
    if (i < 0 || i >= NBUILTIN + nextra)
        return NULL;
    return i < NBUILTIN ? builtin[i] : extra[i - NBUILTIN];
}

const ptdp_schedule_entry *ptdp_schedule_find(const char *name)
{
    for (int i = 0; name != NULL && i < ptdp_schedule_count(); i++)
        if (strcmp(ptdp_schedule_at(i)->name, name) == 0)
            return ptdp_schedule_at(i);
    return NULL;
}

const ptdp_schedule_entry *ptdp_schedule_default(void)
{
    return builtin[0];
}

const ptdp_schedule_entry *ptdp_schedule_first_with(unsigned caps)
{
    for (int i = 0; i < ptdp_schedule_count(); i++)
        if ((ptdp_schedule_at(i)->caps & caps) == caps)
            return ptdp_schedule_at(i);
    return NULL;
}

int ptdp_schedule_register(const ptdp_schedule_entry *e)
{
    if (e == NULL || e->name == NULL || e->name[0] == '\0' || strlen(e->name) >= 32 || e->generate == NULL ||
        ptdp_schedule_find(e->name) != NULL || nextra == NEXTRA_MAX)
        return PTDP_EINVAL;
    extra[nextra++] = e;
    return PTDP_OK;
}

void ptdp_schedule_names_with(unsigned with, unsigned without, const char *sep, char *buf, size_t len)
{
    size_t n = 0;
    if (len > 0)
        buf[0] = '\0';
    for (int i = 0; i < ptdp_schedule_count() && n < len; i++) {
        const ptdp_schedule_entry *e = ptdp_schedule_at(i);
        if ((e->caps & with) == with && (e->caps & without) == 0)
            n += (size_t)snprintf(buf + n, len - n, "%s%s", n ? sep : "", e->name);
    }
}

void ptdp_schedule_names(char *buf, size_t len)
{
    ptdp_schedule_names_with(0, 0, ", ", buf, len);
}

/* A row that refuses nothing: one chunk a stage round a ring, whole backwards. */
static bool plain(const ptdp_schedule_entry *e)
{
    bool any = false;
    for (int f = 0; f < PTDP_FEATURE_COUNT; f++)
        any |= e->refuses[f] != NULL;
    return !any && e->layout == PTDP_CHUNKS_RING && !(e->caps & (PTDP_SCHED_CHUNKS | PTDP_SCHED_SPLIT_BACKWARD));
}

const char *ptdp_schedule_plain_names(void)
{
    static char buf[96];
    size_t n = 0;
    int k = 0;
    buf[0] = '\0';
    for (int i = 0; i < ptdp_schedule_count() && k < 2; i++)
        if (plain(ptdp_schedule_at(i)))
            n += (size_t)snprintf(buf + n, sizeof buf - n, "%s%s", k++ ? " or " : "", ptdp_schedule_at(i)->name);
    return buf;
}

/* ---- may it run? --------------------------------------------------------------- */

/* A row without chunks takes no --virtual-stages beyond 1. */
static int one_chunk(const ptdp_schedule_entry *e, int virtual_stages, char *msg, size_t msglen)
{
    if (virtual_stages > 1 && !(e->caps & PTDP_SCHED_CHUNKS)) {
        const ptdp_schedule_entry *chunked = ptdp_schedule_first_with(PTDP_SCHED_CHUNKS);
        snprintf(msg, msglen, "--virtual-stages %d: the %s schedule runs one chunk per stage "
                 "(use --schedule %s, or --virtual-stages 1)", virtual_stages, e->name,
                 chunked != NULL ? chunked->name : "with chunks");
        return PTDP_EINVAL;
    }
    return PTDP_OK;
}

int ptdp_schedule_check_row(const ptdp_schedule_entry *e, int pp, int micro_batches, int virtual_stages,
                            char *msg, size_t msglen)
{
    if (pp < 1 || micro_batches < 1 || virtual_stages < 1) {
        snprintf(msg, msglen, "--pp %d, --micro-batches %d, --virtual-stages %d: each must be at least 1",
                 pp, micro_batches, virtual_stages);
        return PTDP_EINVAL;
    }
    if (e->check != NULL)
        return e->check(e, pp, micro_batches, virtual_stages, msg, msglen);
    return one_chunk(e, virtual_stages, msg, msglen);
}

int ptdp_schedule_check_flag_v(const ptdp_schedule_entry *e, int virtual_stages, char *msg, size_t msglen)
{
    if (virtual_stages > 1 && e->layout != PTDP_CHUNKS_RING) {   /* a V, or two copies: check_v's, check_dual's words */
        snprintf(msg, msglen, "--virtual-stages %d: the %s schedule holds two chunks per device, %s (leave "
                 "--virtual-stages out)", virtual_stages, e->name, e->layout == PTDP_CHUNKS_V ?
                 "stages r and 2p-1-r" : "stage r of one copy and stage p-1-r of the other");
        return PTDP_EINVAL;
    }
    return one_chunk(e, virtual_stages, msg, msglen);
}

int ptdp_schedule_check(const char *name, int pp, int micro_batches, int virtual_stages,
                        char *msg, size_t msglen)
{
    const ptdp_schedule_entry *e = ptdp_schedule_find(name);
    if (e == NULL) {
        char names[256];
        ptdp_schedule_names(names, sizeof names);
        snprintf(msg, msglen, "--schedule %s: unknown (valid: %s)", name ? name : "(null)", names);
        return PTDP_EINVAL;
    }
    return ptdp_schedule_check_row(e, pp, micro_batches, virtual_stages, msg, msglen);
}

/* The flag of a feature, as a message starts: "--precision bf16 with …". */
static const char *const feature_flag[PTDP_FEATURE_COUNT] = { "--precision bf16", "--zero 3", "--overlap" };

/* Why a W phase refuses each: a unit's gradient is final (rounded into
 * bf16, reduce-scattered and freed, or summed early) before W adds to it. */
static const char *const w_phase_refuses[PTDP_FEATURE_COUNT] = {
    "W adds into a unit's float gradient after the unit's backward has rounded it into the bf16 store; use "
    "--schedule 1f1b or gpipe",
    "W adds into a unit's gradient after the unit's backward has reduce-scattered and freed it; use --schedule "
    "1f1b or gpipe (or --zero 2)",
    "its split backward writes the weight gradients in W, after B, so no block's gradients are complete when its "
    "backward ends; use --schedule 1f1b or gpipe",
};

/* Why several chunks a stage refuse each: one chunk's units at a time. */
static const char *const chunks_refuse[PTDP_FEATURE_COUNT] = {
    "bf16 parameters are widened one model chunk's units at a time; use --virtual-stages 1",
    "ZeRO-3 gathers one model chunk's units per device; use --virtual-stages 1 (or --zero 2)",
    ("a device's chunks finish their last backwards at different times and only one chunk's gradients form "
     "the buffer's prefix; use --virtual-stages 1"),
};

int ptdp_schedule_refuses(const ptdp_schedule_entry *e, ptdp_schedule_feature f, int virtual_stages,
                          char *msg, size_t msglen)
{
    if (f < 0 || f >= PTDP_FEATURE_COUNT)
        return PTDP_OK;
    if (e->refuses[f] != NULL) {
        if (msg != NULL)
            snprintf(msg, msglen, "%s with --schedule %s: %s", feature_flag[f], e->name, e->refuses[f]);
        return PTDP_EINVAL;
    }
    if (virtual_stages > 1) {
        if (msg != NULL)
            snprintf(msg, msglen, "%s with --virtual-stages %d: %s", feature_flag[f], virtual_stages,
                     chunks_refuse[f]);
        return PTDP_EINVAL;
    }
    if (e->caps & PTDP_SCHED_SPLIT_BACKWARD) {
        if (msg != NULL)
            snprintf(msg, msglen, "%s with --schedule %s: %s", feature_flag[f], e->name, w_phase_refuses[f]);
        return PTDP_EINVAL;
    }
    return PTDP_OK;
}

/* ---- build one ----------------------------------------------------------------- */

/* Generate, then place: the generator only appends compute, so whatever
 * it does, the messages and the optimizer step come from one pass. */
int ptdp_schedule_generate_v(ptdp_schedule_generator gen, ptdp_placement placement, const char *name,
                             int pp, int micro_batches, int virtual_stages, ptdp_chunk_layout layout,
                             ptdp_schedule **out)
{
    char msg[256];   /* the registry's schedules always place; others get the code */
    int rc = ptdp_schedule_alloc_v(name, pp, micro_batches, virtual_stages, out);
    if (rc != PTDP_OK)
        return rc;
    (*out)->layout = layout;
    (*out)->entry = ptdp_schedule_find(name);   /* a generator named after a row: its formulas */
    gen(*out);
    rc = (*out)->overflow ? PTDP_EINVAL : ptdp_schedule_place_comms(*out, placement, msg, sizeof msg);
    if (rc != PTDP_OK) {
        ptdp_schedule_destroy(*out);
        *out = NULL;
    }
    return rc;
}

int ptdp_schedule_generate(ptdp_schedule_generator gen, ptdp_placement placement, const char *name,
                           int pp, int micro_batches, ptdp_schedule **out)
{
    return ptdp_schedule_generate_v(gen, placement, name, pp, micro_batches, 1, PTDP_CHUNKS_RING, out);
}

int ptdp_schedule_build(const ptdp_schedule_entry *e, int pp, int micro_batches, int virtual_stages,
                        ptdp_schedule **out)
{
    char msg[256];
    *out = NULL;
    if (e == NULL || ptdp_schedule_check_row(e, pp, micro_batches, virtual_stages, msg, sizeof msg) != PTDP_OK)
        return PTDP_EINVAL;
    int rc = ptdp_schedule_generate_v(e->generate, e->placement, e->name, pp, micro_batches,
                                      e->layout != PTDP_CHUNKS_RING ? 2 : virtual_stages, e->layout, out);
    if (rc == PTDP_OK)
        (*out)->entry = e;
    return rc;
}

int ptdp_schedule_create_v(const char *name, int pp, int micro_batches, int virtual_stages,
                           ptdp_schedule **out)
{
    *out = NULL;
    const ptdp_schedule_entry *e = ptdp_schedule_find(name);
    return e == NULL ? PTDP_EINVAL : ptdp_schedule_build(e, pp, micro_batches, virtual_stages, out);
}

int ptdp_schedule_create(const char *name, int pp, int micro_batches, ptdp_schedule **out)
{
    return ptdp_schedule_create_v(name, pp, micro_batches, 1, out);
}

double ptdp_schedule_bubble_formula(const ptdp_schedule *s, const char **formula)
{
    const ptdp_schedule_entry *e = s->entry != NULL ? s->entry : ptdp_schedule_default();
    if (formula != NULL)
        *formula = e->bubble_words;
    return e->bubble(s->pp, s->micro_batches, s->virtual_stages);
}
