/*
 * schedule.c — pipeline schedules as lists of actions: GPipe and 1F1B.
 *
 * p stages, m micro-batches.  Time flows right; each row is one stage
 * (the picture `ptdp schedule --pp 4 --micro-batches 4` draws, t_f = t_b):
 *
 *   GPipe (Huang et al. 2019): all forwards, then all backwards
 *     stage 0  F0 F1 F2 F3 .  .  .  .  .  .  B3 B2 B1 B0
 *     stage 3  .  .  .  F0 F1 F2 F3 B3 B2 B1 B0 .  .  .
 *     a stage holds the activations of all m micro-batches at once.
 *
 *   1F1B, PipeDream-Flush (Narayanan et al. 2021; Megatron-LM's schedule):
 *     stage s runs  warm-up:   min(p - s - 1, m) forwards
 *                   steady:    one forward, one backward, … (m - warm-up times)
 *                   cool-down: the backwards still owed
 *     stage 0  F0 F1 F2 F3 .  .  .  B0 .  B1 .  B2 .  B3
 *     stage 3  .  .  .  F0 B0 F1 B1 F2 B2 F3 B3 .  .  .
 *     a stage holds at most min(p - s, m) micro-batches of activations.
 *
 * Both idle (p - 1)(t_f + t_b) per stage out of (m + p - 1)(t_f + t_b):
 * bubble = (p - 1) / (m + p - 1).  1F1B wins on memory, not on time.
 *
 * GPipe's backwards run in reverse micro-batch order, as in the paper's
 * figure: the last stage starts with the micro-batch it has just finished
 * forwarding, so the backward pass is a stack (last in, first out) and the
 * freshest activations are consumed first.  Same order would time the same.
 *
 * Deadlock freedom.  send and recv are blocking with rendezvous semantics: a
 * send returns only once the receiver is at the matching recv.  In 1F1B's
 * steady state two neighbours want to exchange at the same moment:
 *
 *     stage i  :  F5 | send F5 -> i+1 | recv B2 <- i+1 | B2
 *     stage i+1:  B2 | send B2 -> i   | recv F5 <- i   | F5
 *
 * If both send first, each waits for the other to receive: a cycle, a hang
 * (`ptdp_schedule_1f1b_naive` builds exactly that).  The even/odd rule: in an
 * exchange with a neighbour, an even stage sends first and an odd stage
 * receives first.  Neighbours differ in parity, so the two first calls always
 * pair up, then the two second calls:
 *
 *     stage 2 (even):  send F5 -> 3  ---.    .--> recv B2 <- 3
 *                                        |    |
 *     stage 3 (odd) :  recv F5 <- 2  <--'    '--- send B2 -> 2
 *
 * No two neighbours ever both send first, so no cycle of blocking calls can
 * form; ptdp_schedule_validate proves it for a given list by simulation.
 */
#include "ptdp/schedule.h"

#include <stdlib.h>
#include <string.h>

#include "ptdp/error.h"

/* ---- the data: allocate, push ----------------------------------------------- */

int ptdp_schedule_alloc(const char *name, int pp, int micro_batches, ptdp_schedule **out)
{
    return ptdp_schedule_alloc_v(name, pp, micro_batches, 1, out);
}

int ptdp_schedule_alloc_v(const char *name, int pp, int micro_batches, int virtual_stages,
                          ptdp_schedule **out)
{
    *out = NULL;
    if (pp < 1 || micro_batches < 1 || virtual_stages < 1 || name == NULL)
        return PTDP_EINVAL;
    ptdp_schedule *s = calloc(1, sizeof *s);
    if (s == NULL)
        return PTDP_ENOMEM;
    snprintf(s->name, sizeof s->name, "%s", name);
    s->pp = pp;
    s->micro_batches = micro_batches;
    s->virtual_stages = virtual_stages;
    s->stage = calloc((size_t)pp, sizeof *s->stage);
    if (s->stage == NULL) {
        ptdp_schedule_destroy(s);
        return PTDP_ENOMEM;
    }
    /* Per micro-batch and chunk a stage does at most F, B (or B and W) and
     * four sends/recvs, plus one optimizer step: 7mv + 1 fits every valid
     * schedule. */
    for (int st = 0; st < pp; st++) {
        s->stage[st].capacity = 7 * micro_batches * virtual_stages + 1;
        s->stage[st].actions = calloc((size_t)s->stage[st].capacity, sizeof(ptdp_action));
        if (s->stage[st].actions == NULL) {
            ptdp_schedule_destroy(s);
            return PTDP_ENOMEM;
        }
    }
    *out = s;
    return PTDP_OK;
}

void ptdp_schedule_destroy(ptdp_schedule *s)
{
    if (s == NULL)
        return;
    if (s->stage != NULL)
        for (int st = 0; st < s->pp; st++)
            free(s->stage[st].actions);
    free(s->stage);
    free(s);
}

/* Activations flow to stage+1, gradients to stage-1. */
int ptdp_action_peer(ptdp_action_kind kind, int stage)
{
    switch (kind) {
    case PTDP_ACT_SEND_FORWARD:
    case PTDP_ACT_RECV_BACKWARD: return stage + 1;
    case PTDP_ACT_RECV_FORWARD:
    case PTDP_ACT_SEND_BACKWARD: return stage - 1;
    default:                     return -1;
    }
}

/* ---- model chunks ------------------------------------------------------------ */

int ptdp_chunk_global(const ptdp_schedule *s, int stage, int chunk)
{
    return chunk * s->pp + stage;
}

int ptdp_chunk_is_first(const ptdp_schedule *s, int stage, int chunk)
{
    return ptdp_chunk_global(s, stage, chunk) == 0;
}

int ptdp_chunk_is_last(const ptdp_schedule *s, int stage, int chunk)
{
    return ptdp_chunk_global(s, stage, chunk) == s->pp * s->virtual_stages - 1;
}

/* Activations go from piece g to piece g + 1, gradients from g to g - 1.
 * Without interleaving (v = 1) that is stage s +- 1, even past the ends
 * (the validator names such an action); with it, pieces wrap round the
 * ring of stages, and off the model's ends there is nobody (-1). */
void ptdp_action_route(const ptdp_schedule *s, ptdp_action_kind kind, int stage, int chunk,
                       int *peer_stage, int *peer_chunk)
{
    int step = 0;
    switch (kind) {
    case PTDP_ACT_SEND_FORWARD:
    case PTDP_ACT_RECV_BACKWARD: step = +1; break;
    case PTDP_ACT_RECV_FORWARD:
    case PTDP_ACT_SEND_BACKWARD: step = -1; break;
    default:                     break;
    }
    *peer_stage = *peer_chunk = -1;
    if (step == 0)
        return;
    if (s->virtual_stages == 1) {
        *peer_stage = stage + step;
        *peer_chunk = 0;
        return;
    }
    int g = ptdp_chunk_global(s, stage, chunk) + step;
    if (g < 0 || g >= s->pp * s->virtual_stages)
        return;
    *peer_stage = g % s->pp;
    *peer_chunk = g / s->pp;
}

/* Generators stay readable as plain lists of pushes: a push past capacity
 * only marks the schedule (like ferror on a FILE), and
 * ptdp_schedule_generate reports it once the generator returns. */
void ptdp_schedule_push_chunk(ptdp_schedule *s, int stage, ptdp_action_kind kind, int mb, int chunk)
{
    if (stage < 0 || stage >= s->pp || s->stage[stage].count == s->stage[stage].capacity) {
        s->overflow = 1;
        return;
    }
    int peer, peer_chunk;
    ptdp_action_route(s, kind, stage, chunk, &peer, &peer_chunk);
    ptdp_stage_actions *list = &s->stage[stage];
    list->actions[list->count++] = (ptdp_action){
        .kind  = kind,
        .mb    = kind == PTDP_ACT_OPTIMIZER_STEP ? -1 : mb,
        .peer  = peer,
        .chunk = kind == PTDP_ACT_OPTIMIZER_STEP ? 0 : chunk,
    };
}

void ptdp_schedule_push(ptdp_schedule *s, int stage, ptdp_action_kind kind, int mb)
{
    ptdp_schedule_push_chunk(s, stage, kind, mb, 0);
}

/* ---- GPipe --------------------------------------------------------------------- */

void ptdp_schedule_gpipe(ptdp_schedule *s)
{
    const int p = s->pp, m = s->micro_batches;
    for (int st = 0; st < p; st++) {
        const int first = st == 0, last = st == p - 1;
        for (int mb = 0; mb < m; mb++) {
            if (!first) ptdp_schedule_push(s, st, PTDP_ACT_RECV_FORWARD, mb);
            ptdp_schedule_push(s, st, PTDP_ACT_FORWARD, mb);
            if (!last)  ptdp_schedule_push(s, st, PTDP_ACT_SEND_FORWARD, mb);
        }
        for (int mb = m - 1; mb >= 0; mb--) {
            if (!last)  ptdp_schedule_push(s, st, PTDP_ACT_RECV_BACKWARD, mb);
            ptdp_schedule_push(s, st, PTDP_ACT_BACKWARD, mb);
            if (!first) ptdp_schedule_push(s, st, PTDP_ACT_SEND_BACKWARD, mb);
        }
        ptdp_schedule_push(s, st, PTDP_ACT_OPTIMIZER_STEP, -1);
    }
}

/* ---- 1F1B ---------------------------------------------------------------------- */

typedef enum { EVEN_SENDS_FIRST, ALWAYS_SEND_FIRST } exchange_order;

/* A send and a recv with the same neighbour, issued back to back. */
static void exchange(ptdp_schedule *s, int st, exchange_order order,
                     ptdp_action_kind send, int send_mb,
                     ptdp_action_kind recv, int recv_mb)
{
    if (order == ALWAYS_SEND_FIRST || st % 2 == 0) {
        ptdp_schedule_push(s, st, send, send_mb);
        ptdp_schedule_push(s, st, recv, recv_mb);
    } else {
        ptdp_schedule_push(s, st, recv, recv_mb);
        ptdp_schedule_push(s, st, send, send_mb);
    }
}

static void one_f_one_b(ptdp_schedule *s, exchange_order order)
{
    const int p = s->pp, m = s->micro_batches;
    for (int st = 0; st < p; st++) {
        const int first = st == 0, last = st == p - 1;
        const int warmup = p - st - 1 < m ? p - st - 1 : m;
        const int steady = m - warmup;

        /* Warm-up: fill the pipe below this stage. */
        for (int mb = 0; mb < warmup; mb++) {
            if (!first) ptdp_schedule_push(s, st, PTDP_ACT_RECV_FORWARD, mb);
            ptdp_schedule_push(s, st, PTDP_ACT_FORWARD, mb);
            if (!last)  ptdp_schedule_push(s, st, PTDP_ACT_SEND_FORWARD, mb);
        }
        if (steady > 0 && !first)
            ptdp_schedule_push(s, st, PTDP_ACT_RECV_FORWARD, warmup);

        /* Steady state: forward mb f = warm-up + k, then backward mb k. */
        for (int k = 0; k < steady; k++) {
            const int f = warmup + k, b = k;
            ptdp_schedule_push(s, st, PTDP_ACT_FORWARD, f);
            if (!last)
                exchange(s, st, order, PTDP_ACT_SEND_FORWARD, f, PTDP_ACT_RECV_BACKWARD, b);
            ptdp_schedule_push(s, st, PTDP_ACT_BACKWARD, b);
            if (first)
                continue;
            if (k == steady - 1)
                ptdp_schedule_push(s, st, PTDP_ACT_SEND_BACKWARD, b);
            else
                exchange(s, st, order, PTDP_ACT_SEND_BACKWARD, b, PTDP_ACT_RECV_FORWARD, f + 1);
        }

        /* Cool-down: the backwards of the warm-up micro-batches. */
        for (int b = steady; b < m; b++) {
            if (!last)  ptdp_schedule_push(s, st, PTDP_ACT_RECV_BACKWARD, b);
            ptdp_schedule_push(s, st, PTDP_ACT_BACKWARD, b);
            if (!first) ptdp_schedule_push(s, st, PTDP_ACT_SEND_BACKWARD, b);
        }
        ptdp_schedule_push(s, st, PTDP_ACT_OPTIMIZER_STEP, -1);
    }
}

void ptdp_schedule_1f1b(ptdp_schedule *s)       { one_f_one_b(s, EVEN_SENDS_FIRST); }
void ptdp_schedule_1f1b_naive(ptdp_schedule *s) { one_f_one_b(s, ALWAYS_SEND_FIRST); }

/* ---- interleaved 1F1B ------------------------------------------------------------ */

/*
 * Megatron-LM's interleaved schedule (Narayanan et al. 2021, section 2.2.2).
 * Stage s holds v chunks; its k-th forward (k = 0 .. m v - 1) runs
 *
 *   chunk (k / p) mod v  on micro-batch (k / (p v)) p + k mod p
 *
 * that is, p micro-batches through chunk 0, the same p through chunk 1, …,
 * then the next p.  The k-th backward walks the chunks the other way,
 * chunk v - 1 - (k / p) mod v.  Groups of p are why m must be a multiple of
 * p: a group of fewer would leave a stage waiting for a micro-batch that
 * never comes round the ring in time.
 *
 * Warm-up: before its first backward, stage s runs
 *
 *   (p - s - 1) * 2 + (v - 1) * p   forwards  (at most m v)
 *
 * — 1F1B's p - s - 1, doubled because a chunk's backward costs a chunk's
 * forward twice over, plus one whole round of the ring for each extra
 * chunk: the first backward cannot start before micro-batch 0 has been
 * through all p v pieces.  That longer warm-up is the extra memory.
 *
 * Each forward or backward is 1/v of a stage's, so the fill and drain shrink
 * by v while the work stays m (t_f + t_b):
 *
 *   bubble = (p - 1) / (v m + p - 1)
 */
static int interleaved_chunk_f(const ptdp_schedule *s, int k) { return (k / s->pp) % s->virtual_stages; }
static int interleaved_chunk_b(const ptdp_schedule *s, int k)
{
    return s->virtual_stages - 1 - interleaved_chunk_f(s, k);
}
static int interleaved_mb(const ptdp_schedule *s, int k)
{
    const int p = s->pp;
    return (k / (p * s->virtual_stages)) * p + k % p;
}

void ptdp_schedule_interleaved(ptdp_schedule *s)
{
    const int p = s->pp, total = s->micro_batches * s->virtual_stages;
    for (int st = 0; st < p; st++) {
        int warmup = (p - st - 1) * 2 + (s->virtual_stages - 1) * p;
        if (warmup > total)
            warmup = total;
        for (int k = 0; k < warmup; k++)
            ptdp_schedule_push_chunk(s, st, PTDP_ACT_FORWARD, interleaved_mb(s, k), interleaved_chunk_f(s, k));
        for (int k = 0; k < total - warmup; k++) {      /* steady: 1F1B */
            int f = warmup + k;
            ptdp_schedule_push_chunk(s, st, PTDP_ACT_FORWARD, interleaved_mb(s, f), interleaved_chunk_f(s, f));
            ptdp_schedule_push_chunk(s, st, PTDP_ACT_BACKWARD, interleaved_mb(s, k), interleaved_chunk_b(s, k));
        }
        for (int k = total - warmup; k < total; k++)    /* cool-down */
            ptdp_schedule_push_chunk(s, st, PTDP_ACT_BACKWARD, interleaved_mb(s, k), interleaved_chunk_b(s, k));
    }
    if (ptdp_schedule_add_comms(s) != PTDP_OK)
        s->overflow = 1;
}

/* ---- ZB-H1 --------------------------------------------------------------------- */

/*
 * Zero bubble, handcrafted schedule 1 (Qi et al. 2024, figure 3).  A
 * backward is two passes: B, the gradient of the stage's input, which the
 * stage before waits for; and W, the gradients of its weights, which only
 * the optimizer step waits for.  Keep 1F1B's order of F and B — and so its
 * warm-up and its activation limit of p - s micro-batches — and put the W
 * passes where 1F1B idles:
 *
 *   steady state   stage s keeps s W passes owed: after each B, if more are
 *                  owed, run the oldest W.  The stages nearer the end, which
 *                  B reaches first, run their W at once; the B chain runs
 *                  back through the pipeline at F + B per stage.
 *   cool-down      one W after each B but the last: it fills the gap while
 *                  the next gradient comes back.
 *   end            the W passes still owed.
 *
 *   p = 4, m = 6, F = B = W = 1 (ptdp schedule --schedule zb-h1 draws it)
 *     stage 0  F0 F1 F2 F3 .  .  B0 F4 B1 F5 B2 W0 B3 W1 B4 W2 B5 W3 W4 W5
 *     stage 3  .  .  .  F0 B0 W0 F1 B1 W1 F2 B2 W2 …
 *
 * With F = B = W and m >= p the makespan is m (F + B + W) + (p - 1)(F + B - W):
 *
 *   bubble = (p - 1) / (3m + p - 1)
 *
 * a third of 1F1B's (p - 1) / (m + p - 1) with t_b = 2 t_f, at the same
 * activation peak; the deferred W passes hold their inputs a little longer.
 */
void ptdp_schedule_zb_h1(ptdp_schedule *s)
{
    const int p = s->pp, m = s->micro_batches;
    for (int st = 0; st < p; st++) {
        const int warmup = p - st - 1 < m ? p - st - 1 : m;
        int next_w = 0;                 /* the oldest W still owed */
        for (int mb = 0; mb < warmup; mb++)
            ptdp_schedule_push(s, st, PTDP_ACT_FORWARD, mb);
        for (int k = 0; k < m - warmup; k++) {
            ptdp_schedule_push(s, st, PTDP_ACT_FORWARD, warmup + k);
            ptdp_schedule_push(s, st, PTDP_ACT_BACKWARD_INPUT, k);
            while (k + 1 - next_w > st)  /* owed W: k + 1 - next_w */
                ptdp_schedule_push(s, st, PTDP_ACT_BACKWARD_WEIGHT, next_w++);
        }
        for (int b = m - warmup; b < m; b++) {
            ptdp_schedule_push(s, st, PTDP_ACT_BACKWARD_INPUT, b);
            if (b < m - 1 && next_w <= b)
                ptdp_schedule_push(s, st, PTDP_ACT_BACKWARD_WEIGHT, next_w++);
        }
        while (next_w < m)
            ptdp_schedule_push(s, st, PTDP_ACT_BACKWARD_WEIGHT, next_w++);
    }
    if (ptdp_schedule_add_comms(s) != PTDP_OK)
        s->overflow = 1;
}

/* ---- the registry ----------------------------------------------------------- */

static const ptdp_schedule_entry registry[] = {
    { "gpipe", "all forwards, then all backwards (GPipe)",              ptdp_schedule_gpipe, 0, 0 },
    { "1f1b",  "warm-up, one forward one backward, cool-down (PipeDream-Flush)",
      ptdp_schedule_1f1b, 0, 0 },
    { "interleaved", "1F1B over v model chunks per stage (Megatron-LM, --virtual-stages)",
      ptdp_schedule_interleaved, 1, 0 },
    { "zb-h1", "1F1B with the weight gradients deferred into the bubbles (zero bubble H1)",
      ptdp_schedule_zb_h1, 0, 1 },
};

const ptdp_schedule_entry *ptdp_schedule_registry(int *count)
{
    *count = (int)(sizeof registry / sizeof registry[0]);
    return registry;
}

const ptdp_schedule_entry *ptdp_schedule_find(const char *name)
{
    for (size_t i = 0; name != NULL && i < sizeof registry / sizeof registry[0]; i++)
        if (strcmp(registry[i].name, name) == 0)
            return &registry[i];
    return NULL;
}

void ptdp_schedule_names(char *buf, size_t len)
{
    size_t n = 0;
    if (len > 0)
        buf[0] = '\0';
    for (size_t i = 0; i < sizeof registry / sizeof registry[0] && n < len; i++)
        n += (size_t)snprintf(buf + n, len - n, "%s%s", i ? ", " : "", registry[i].name);
}

int ptdp_schedule_check(const char *name, int pp, int micro_batches, int virtual_stages,
                        char *msg, size_t msglen)
{
    char names[128];
    const ptdp_schedule_entry *e = ptdp_schedule_find(name);
    ptdp_schedule_names(names, sizeof names);
    if (e == NULL) {
        snprintf(msg, msglen, "--schedule %s: unknown (valid: %s)", name ? name : "(null)", names);
        return PTDP_EINVAL;
    }
    if (pp < 1 || micro_batches < 1 || virtual_stages < 1) {
        snprintf(msg, msglen, "--pp %d, --micro-batches %d, --virtual-stages %d: each must be at least 1",
                 pp, micro_batches, virtual_stages);
        return PTDP_EINVAL;
    }
    if (virtual_stages > 1 && !e->chunked) {
        snprintf(msg, msglen, "--virtual-stages %d: the %s schedule runs one chunk per stage "
                 "(use --schedule interleaved, or --virtual-stages 1)", virtual_stages, name);
        return PTDP_EINVAL;
    }
    if (e->chunked && pp < 2) {
        snprintf(msg, msglen, "--schedule %s needs --pp 2 or more: with one stage there is no "
                 "bubble to shrink", name);
        return PTDP_EINVAL;
    }
    if (e->chunked && micro_batches % pp != 0) {
        int up = (micro_batches / pp + 1) * pp;
        snprintf(msg, msglen, "--schedule %s: --micro-batches %d must be a multiple of --pp %d "
                 "(micro-batches go round the ring of stages in groups of p; try --micro-batches %d)",
                 name, micro_batches, pp, up);
        return PTDP_EINVAL;
    }
    return PTDP_OK;
}

int ptdp_schedule_generate_v(ptdp_schedule_generator gen, const char *name, int pp,
                             int micro_batches, int virtual_stages, ptdp_schedule **out)
{
    int rc = ptdp_schedule_alloc_v(name, pp, micro_batches, virtual_stages, out);
    if (rc != PTDP_OK)
        return rc;
    gen(*out);
    if ((*out)->overflow) {
        ptdp_schedule_destroy(*out);
        *out = NULL;
        return PTDP_EINVAL;
    }
    return PTDP_OK;
}

int ptdp_schedule_generate(ptdp_schedule_generator gen, const char *name,
                           int pp, int micro_batches, ptdp_schedule **out)
{
    return ptdp_schedule_generate_v(gen, name, pp, micro_batches, 1, out);
}

int ptdp_schedule_create_v(const char *name, int pp, int micro_batches, int virtual_stages,
                           ptdp_schedule **out)
{
    char msg[256];
    *out = NULL;
    if (ptdp_schedule_check(name, pp, micro_batches, virtual_stages, msg, sizeof msg) != PTDP_OK)
        return PTDP_EINVAL;
    const ptdp_schedule_entry *e = ptdp_schedule_find(name);
    return ptdp_schedule_generate_v(e->generate, e->name, pp, micro_batches, virtual_stages, out);
}

int ptdp_schedule_create(const char *name, int pp, int micro_batches, ptdp_schedule **out)
{
    return ptdp_schedule_create_v(name, pp, micro_batches, 1, out);
}

/* ---- reading a schedule ------------------------------------------------------ */

int ptdp_schedule_peak_in_flight(const ptdp_schedule *s, int stage)
{
    int alive = 0, peak = 0;
    const ptdp_stage_actions *list = &s->stage[stage];
    for (int i = 0; i < list->count; i++) {
        ptdp_action_kind k = list->actions[i].kind;
        if (k == PTDP_ACT_FORWARD && ++alive > peak)
            peak = alive;
        if (k == PTDP_ACT_BACKWARD || k == PTDP_ACT_BACKWARD_INPUT)
            alive--;
    }
    return peak;
}

int ptdp_schedule_peak_deferred(const ptdp_schedule *s, int stage)
{
    int owed = 0, peak = 0;
    const ptdp_stage_actions *list = &s->stage[stage];
    for (int i = 0; i < list->count; i++) {
        if (list->actions[i].kind == PTDP_ACT_BACKWARD_INPUT && ++owed > peak)
            peak = owed;
        if (list->actions[i].kind == PTDP_ACT_BACKWARD_WEIGHT)
            owed--;
    }
    return peak;
}

double ptdp_bubble_formula(int pp, int micro_batches)
{
    return (double)(pp - 1) / (double)(micro_batches + pp - 1);
}

double ptdp_schedule_bubble_formula(const ptdp_schedule *s, const char **formula)
{
    const double p = s->pp, m = s->micro_batches, v = s->virtual_stages;
    const char *f = "(p-1)/(m+p-1)";
    double b = (p - 1) / (m + p - 1);
    if (strcmp(s->name, "interleaved") == 0) {
        f = "(p-1)/(v*m+p-1)";
        b = (p - 1) / (v * m + p - 1);
    } else if (strcmp(s->name, "zb-h1") == 0) {
        f = "(p-1)/(3m+p-1)";   /* F = B = W, m >= p */
        b = (p - 1) / (3 * m + p - 1);
    }
    if (formula != NULL)
        *formula = f;
    return b;
}

const char *ptdp_action_kind_name(ptdp_action_kind k)
{
    static const char *const names[PTDP_ACT_KIND_COUNT] = {
        "FORWARD", "BACKWARD", "SEND_FORWARD", "RECV_FORWARD",
        "SEND_BACKWARD", "RECV_BACKWARD", "OPTIMIZER_STEP",
        "BACKWARD_INPUT", "BACKWARD_WEIGHT",
    };
    return (unsigned)k < PTDP_ACT_KIND_COUNT ? names[k] : "?";
}

/* Chunk c > 0 of a stage is written after a dot: F3.1 is micro-batch 3's
 * forward through the stage's second chunk (ptdp_schedule_print writes the
 * .0 too when a schedule has chunks). */
static int format_action(const ptdp_action *a, char *buf, size_t len, int with_chunk)
{
    char c[16] = "";
    if (with_chunk || a->chunk > 0)
        snprintf(c, sizeof c, ".%d", a->chunk);
    switch (a->kind) {
    case PTDP_ACT_FORWARD:         return snprintf(buf, len, "F%d%s", a->mb, c);
    case PTDP_ACT_BACKWARD:        return snprintf(buf, len, "B%d%s", a->mb, c);
    case PTDP_ACT_BACKWARD_INPUT:  return snprintf(buf, len, "B%d%s", a->mb, c);
    case PTDP_ACT_BACKWARD_WEIGHT: return snprintf(buf, len, "W%d%s", a->mb, c);
    case PTDP_ACT_SEND_FORWARD:    return snprintf(buf, len, "F%d%s->%d", a->mb, c, a->peer);
    case PTDP_ACT_RECV_FORWARD:    return snprintf(buf, len, "F%d%s<-%d", a->mb, c, a->peer);
    case PTDP_ACT_SEND_BACKWARD:   return snprintf(buf, len, "B%d%s->%d", a->mb, c, a->peer);
    case PTDP_ACT_RECV_BACKWARD:   return snprintf(buf, len, "B%d%s<-%d", a->mb, c, a->peer);
    case PTDP_ACT_OPTIMIZER_STEP:  return snprintf(buf, len, "step");
    default:                       return snprintf(buf, len, "?%d", (int)a->kind);
    }
}

int ptdp_action_format(const ptdp_action *a, char *buf, size_t len)
{
    return format_action(a, buf, len, 0);
}

void ptdp_schedule_print(const ptdp_schedule *s, FILE *out)
{
    enum { PER_LINE = 10 };
    fprintf(out, "schedule %s: %d stage%s, %d micro-batch%s\n"
                 "  Fk forward, Bk backward of micro-batch k;  Fk->s send activation to stage s,\n"
                 "  Fk<-s receive it from s;  Bk->s / Bk<-s the same for its gradient;"
                 "  step = optimizer\n",
            s->name, s->pp, s->pp == 1 ? "" : "s",
            s->micro_batches, s->micro_batches == 1 ? "" : "es");
    if (s->virtual_stages > 1)
        fprintf(out, "  Fk.c: through chunk c of the stage (stage s, chunk c holds the model's piece "
                     "c*%d + s of %d)\n", s->pp, s->pp * s->virtual_stages);
    const ptdp_schedule_entry *e = ptdp_schedule_find(s->name);
    if (e != NULL && e->split_backward)
        fprintf(out, "  backward split: Bk the gradient of the stage input only, Wk the weight "
                     "gradients (deferred)\n");
    for (int st = 0; st < s->pp; st++) {
        const ptdp_stage_actions *list = &s->stage[st];
        fprintf(out, "stage %d (%d actions):", st, list->count);
        for (int i = 0; i < list->count; i++) {
            char tok[32];
            format_action(&list->actions[i], tok, sizeof tok, s->virtual_stages > 1);
            fprintf(out, "%s%-7s", i % PER_LINE == 0 ? "\n   " : " ", tok);
        }
        fputc('\n', out);
    }
}
