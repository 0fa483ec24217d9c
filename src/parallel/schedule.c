/*
 * schedule.c — the generators (GPipe, 1F1B, interleaved 1F1B, ZB-H1,
 * DualPipeV, DualPipe): each stage's compute, in order.  What else each
 * schedule is — its name, counts, formulas, what it refuses — is its row
 * in the registry (schedule_registry.c).
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
 * A generator lists the compute only: which forward and backward each stage
 * runs, in its order.  The sends and receives, and the optimizer step, are
 * added afterwards by one pass (schedule_comms.c), whose placement is part
 * of the registry's data (schedule_registry.c: each schedule's row): GPipe and 1F1B put each message next to its
 * compute with the even/odd rule, the schedules with chunks or split
 * backwards in the order the messages are sent.  So the compute orders
 * below are the whole of each schedule's idea:
 *
 *   GPipe, p = 2, m = 2   stage 0  F0 F1 B1 B0      stage 1  F0 F1 B1 B0
 *   1F1B,  p = 2, m = 2   stage 0  F0 F1 B0 B1      stage 1  F0 B0 F1 B1
 */
#include "ptdp/schedule.h"

#include <stdlib.h>
#include <string.h>

#include "ptdp/error.h"
#include "parallel/schedule_impl.h"

/* ---- GPipe --------------------------------------------------------------------- */

void ptdp_schedule_gpipe(ptdp_schedule *s)
{
    const int p = s->pp, m = s->micro_batches;
    for (int st = 0; st < p; st++) {
        for (int mb = 0; mb < m; mb++)
            ptdp_schedule_push(s, st, PTDP_ACT_FORWARD, mb);
        for (int mb = m - 1; mb >= 0; mb--)
            ptdp_schedule_push(s, st, PTDP_ACT_BACKWARD, mb);
    }
}

/* ---- 1F1B ---------------------------------------------------------------------- */

void ptdp_schedule_1f1b(ptdp_schedule *s)
{
    const int p = s->pp, m = s->micro_batches;
    for (int st = 0; st < p; st++) {
        const int warmup = p - st - 1 < m ? p - st - 1 : m;

        /* Warm-up: fill the pipe below this stage. */
        for (int mb = 0; mb < warmup; mb++)
            ptdp_schedule_push(s, st, PTDP_ACT_FORWARD, mb);
        /* Steady state: forward mb warm-up + k, then backward mb k. */
        for (int k = 0; k < m - warmup; k++) {
            ptdp_schedule_push(s, st, PTDP_ACT_FORWARD, warmup + k);
            ptdp_schedule_push(s, st, PTDP_ACT_BACKWARD, k);
        }
        /* Cool-down: the backwards of the warm-up micro-batches. */
        for (int b = m - warmup; b < m; b++)
            ptdp_schedule_push(s, st, PTDP_ACT_BACKWARD, b);
    }
}

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
 * through all p v chunks.  That longer warm-up is the extra memory.
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
}

/* ---- DualPipeV ------------------------------------------------------------------- */

/*
 * DualPipeV (DeepSeek 2025, deepseek-ai/DualPipe's dualpipev.py): DualPipe
 * "cut in half".  p devices, the model in 2p stages; device r holds stage r
 * (its chunk 0) and stage 2p - 1 - r (its chunk 1), so a micro-batch goes
 * down the devices through the chunks 0 and comes back up through the
 * chunks 1; device 0 reads the data and computes the loss:
 *
 *   device 0   [stage 0] ───────────────────────────▶ ... [stage 7] → loss
 *   device 1      [stage 1] ──────────────────▶    [stage 6]
 *   device 2         [stage 2] ────────▶     [stage 5]                p = 4
 *   device 3            [stage 3] ─(no message)─▶ [stage 4]
 *
 * Device r runs eight phases (Fc: a forward of chunk c, Bc a whole
 * backward, Bc' a zero-bubble backward whose W goes to a first-in first-out
 * queue, W the oldest owed; "Fc Bc'" an overlapped pair: the forward of one
 * micro-batch beside the backward of another, one's communication under
 * the other's compute):
 *
 *   1  2(p - r - 1) x  F0                     fill chunk 0's pipe
 *   2  r + 1 x         F0 F1                  both chunks start
 *   3  p - r - 1 x     B1' W F1               first backwards, W at once
 *   4  m - 2p + r + 1 x (F0 B1) (F1 B0)       steady: two pairs per round
 *   5  p - r - 1 x     B1 (F1 B0)
 *   6  r + 1 x         B1 B0                  the second half zero-bubble
 *   7  p - r - 1 x     W B0'
 *   8  r + 1 x         W                      the W still owed
 *
 * Phase 4 needs m >= 2p (ptdp_schedule_check).  Each micro-batch goes
 * through each chunk in order, F, then B (and W).  With F = B = W (a pair
 * takes F + B: only communication hides under a pair's compute) each device
 * idles 2(p - 1) of 6m + 2(p - 1): the published (p - 1)(F&B + B - 3W), B
 * a whole backward, and bubble = (p - 1) / (3m + p - 1), ZB-H1's on half the
 * devices, holding 1x the parameters.
 */
typedef struct {
    ptdp_schedule *s;
    int st;                 /* the device whose list this is                          */
    int half;               /* its place in the phases: st (a V), min(st, p-1-st) (DualPipe) */
    int halves, m_half;     /* devices and micro-batches the phases count: p and m (a V),
                               p/2 and m/2 (DualPipe)                                */
    int flip;               /* phase c runs chunk c ^ flip (DualPipe's second half: 1) */
    int f[2], b[2];         /* the next micro-batch each chunk forwards / backwards   */
    int *owed;              /* the W queue: chunk * m + micro-batch, oldest first      */
    int head, tail;
} dualpipev_rank;

static void dpv_forward(dualpipev_rank *r, int phase)
{
    const int c = phase ^ r->flip;
    ptdp_schedule_push_chunk(r->s, r->st, PTDP_ACT_FORWARD, r->f[c]++, c);
}

/* A backward of phase's chunk: whole, or (zero-bubble) B now and its W queued. */
static void dpv_backward(dualpipev_rank *r, int phase, int zero_bubble)
{
    const int c = phase ^ r->flip;
    const int mb = r->b[c]++;
    if (!zero_bubble) {
        ptdp_schedule_push_chunk(r->s, r->st, PTDP_ACT_BACKWARD, mb, c);
        return;
    }
    ptdp_schedule_push_chunk(r->s, r->st, PTDP_ACT_BACKWARD_INPUT, mb, c);
    r->owed[r->tail++] = c * r->s->micro_batches + mb;
}

/* An overlapped pair: a forward of chunk cf beside a whole backward of cb. */
static void dpv_pair(dualpipev_rank *r, int cf, int cb)
{
    dpv_forward(r, cf);
    ptdp_stage_actions *list = &r->s->stage[r->st];
    if (list->count > 0)
        list->actions[list->count - 1].pair = 1;
    dpv_backward(r, cb, 0);
}

static void dpv_weight(dualpipev_rank *r)
{
    const int m = r->s->micro_batches;
    if (r->head == r->tail) {       /* a W with none owed: the phases are wrong */
        r->s->overflow = 1;
        return;
    }
    const int w = r->owed[r->head++];
    ptdp_schedule_push_chunk(r->s, r->st, PTDP_ACT_BACKWARD_WEIGHT, w % m, w / m);
}

/* Phase 6: r + 1 rounds of B1 B0, the second half of them zero-bubble (an
 * odd rank turns it on before a round's B1, an even one before its B0). */
static void dpv_drain(dualpipev_rank *r, int rounds)
{
    int zero_bubble = 0;
    for (int i = 0; i < rounds; i++) {
        if (i == rounds / 2 && r->half % 2 == 1)
            zero_bubble = 1;
        dpv_backward(r, 1, zero_bubble);
        if (i == rounds / 2 && r->half % 2 == 0)
            zero_bubble = 1;
        dpv_backward(r, 0, zero_bubble);
    }
}

/* One device's eight phases (the table above), counted in r->halves
 * devices and r->m_half micro-batches per chunk. */
static void dpv_phases(dualpipev_rank *r)
{
    const int p = r->halves, m = r->m_half;
    const int before = p - r->half - 1, after = r->half + 1;   /* ranks below and up to this one */
    for (int i = 0; i < 2 * before; i++)             /* 1: nF0 */
        dpv_forward(r, 0);
    for (int i = 0; i < after; i++) {                /* 2: nF0F1 */
        dpv_forward(r, 0);
        dpv_forward(r, 1);
    }
    for (int i = 0; i < before; i++) {               /* 3: nB1W1F1 */
        dpv_backward(r, 1, 1);
        dpv_weight(r);
        dpv_forward(r, 1);
    }
    for (int i = 0; i < m - 2 * p + r->half + 1; i++) {   /* 4: n(F0 B1)(F1 B0) */
        if (i == 0 && r->half == p - 1) {            /* the tip's first: not overlapped, */
            dpv_forward(r, 0);                       /* F0 needs no gradient to start    */
            dpv_backward(r, 1, 0);
        } else {
            dpv_pair(r, 0, 1);
        }
        dpv_pair(r, 1, 0);
    }
    for (int i = 0; i < before; i++) {               /* 5: nB1(F1 B0) */
        dpv_backward(r, 1, 0);
        dpv_pair(r, 1, 0);
    }
    dpv_drain(r, after);                             /* 6: nB1B0 */
    for (int i = 0; i < before; i++) {               /* 7: nWB0 */
        dpv_weight(r);
        dpv_backward(r, 0, 1);
    }
    for (int i = 0; i < after; i++)                  /* 8: nW */
        dpv_weight(r);
    if (r->head != r->tail)
        r->s->overflow = 1;
}

void ptdp_schedule_dualpipev(ptdp_schedule *s)
{
    const int p = s->pp, m = s->micro_batches;
    int *owed = malloc(2 * (size_t)m * sizeof *owed);
    if (owed == NULL || s->virtual_stages != 2 || s->layout != PTDP_CHUNKS_V || m < 2 * p) {
        s->overflow = 1;            /* reported by ptdp_schedule_generate */
        free(owed);
        return;
    }
    for (int st = 0; st < p; st++) {
        dualpipev_rank r = { .s = s, .st = st, .half = st, .halves = p, .m_half = m, .owed = owed };
        dpv_phases(&r);
    }
    free(owed);
}

/* ---- DualPipe -------------------------------------------------------------------- */

/*
 * DualPipe (DeepSeek-V3, deepseek-ai/DualPipe's dualpipe.py): p devices
 * (p even), two copies of a model of p stages running in opposite
 * directions (PTDP_CHUNKS_DUAL).  Device r holds stage r of the down copy
 * (chunk 0) and stage p - 1 - r of the up copy (chunk 1); micro-batches
 * 0 .. m/2 - 1 enter at device 0 and go down, m/2 .. m - 1 enter at device
 * p - 1 and go up, so each direction's warm-up and drain run while the
 * other direction computes:
 *
 *   device 0   [d0] ───▶ ...                  ... [u3] → loss (up copy)
 *   device 1      [d1] ───▶              ◀─── [u2]
 *   device 2      [d2] ───▶              ◀─── [u1]              p = 4
 *   device 3   [d3] → loss (down copy)   data ─▶ [u0]
 *
 * Fold the pipeline at its middle and it is DualPipeV: device r and
 * device p - 1 - r play DualPipeV's device h = min(r, p - 1 - r) of p/2,
 * on m/2 micro-batches per chunk, each in its own direction — "phase 0"
 * is the copy that flows away from its end of the pipeline (chunk 0 for
 * r < p/2, chunk 1 for the others), "phase 1" the copy flowing back.  The
 * reference writes exactly that: phase ^= is_in_second_half.  The middle
 * devices p/2 - 1 and p/2 exchange across the fold what DualPipeV's tip
 * hands to itself; mirrored devices run in step, so the message arrives
 * when the hand-over would.
 *
 * So with F = B = W (a pair F + B, B a whole backward 2) each device works
 * 2 chunks x m/2 micro-batches x 3 = 3m and idles DualPipeV's 2(p/2 - 1) =
 * p - 2, the published (PP/2 - 1)(F&B + B - 3W) = (p/2 - 1)(3 + 2 - 3):
 *
 *   bubble = (p - 2) / (3m + p - 2)      m: all the micro-batches, both copies
 *
 * — the same as DualPipeV on p/2 devices with m/2 micro-batches, at 2x the
 * parameters (two copies of a stage on every device).  Refused unless p and
 * m are even and m >= 2p (ptdp_schedule_check).
 */
void ptdp_schedule_dualpipe(ptdp_schedule *s)
{
    const int p = s->pp, m = s->micro_batches;
    int *owed = malloc(2 * (size_t)m * sizeof *owed);
    if (owed == NULL || s->virtual_stages != 2 || s->layout != PTDP_CHUNKS_DUAL || p % 2 != 0 ||
        m % 2 != 0 || m < 2 * p) {
        s->overflow = 1;            /* reported by ptdp_schedule_generate */
        free(owed);
        return;
    }
    for (int st = 0; st < p; st++) {
        dualpipev_rank r = {
            .s = s, .st = st, .half = st < p / 2 ? st : p - 1 - st, .halves = p / 2, .m_half = m / 2,
            .flip = st >= p / 2, .f = { 0, m / 2 }, .b = { 0, m / 2 }, .owed = owed,
        };
        dpv_phases(&r);
    }
    free(owed);
}
