/*
 * schedule.h — a pipeline schedule is data: one ordered list of actions per stage.
 *
 * With pp stages and m micro-batches, stage s runs its list top to bottom:
 *
 *   stage 1 of 4, 1F1B, m = 4                          (ptdp_schedule_print)
 *     F0<-0  F0  F0->2  F1<-0  F1  F1->2  F2<-0  F2  B0<-2  F2->2  B0  F3<-0 …
 *     (Fk<-s: receive micro-batch k's activation from stage s; Fk->s: send it)
 *
 *   FORWARD(mb)        run the stage's layers forward on micro-batch mb
 *   BACKWARD(mb)       run them backward; mb's activations may then be freed
 *   SEND_FORWARD(mb)   mb's output activation       -> stage s+1
 *   RECV_FORWARD(mb)   mb's input activation        <- stage s-1
 *   SEND_BACKWARD(mb)  gradient of mb's input       -> stage s-1
 *   RECV_BACKWARD(mb)  gradient of mb's output      <- stage s+1
 *   OPTIMIZER_STEP     once, last (a data-parallel gradient all-reduce goes
 *                      right before it: once per step, not per micro-batch)
 *   BACKWARD_INPUT(mb) zero-bubble schedules split BACKWARD: "B", the
 *   BACKWARD_WEIGHT(mb) gradient of the input, then later "W", the weights'
 *
 * With v model chunks per stage (interleaved 1F1B) every action also names
 * its chunk: F3.1 is micro-batch 3 through the stage's chunk 1.
 *
 * A generator (GPipe, 1F1B, …) is a small function that appends a stage's
 * compute (F, B, or B and W); one pass then places the sends, the receives
 * and the optimizer step; an executor runs any list with one switch
 * statement; the validator proves a list correct and deadlock-free under
 * blocking rendezvous send/recv; the timing simulation measures its bubble
 * in virtual time:
 *
 *   bubble = idle / makespan = (p - 1) / (m + p - 1)   (uniform stages, free links)
 *
 * Nothing here knows about models, tensors or devices.  An executor on
 * stage `me` is one loop:
 *
 *   for (int i = 0; i < s->stage[me].count; i++) {
 *       const ptdp_action *a = &s->stage[me].actions[i];
 *       switch (a->kind) {
 *       case PTDP_ACT_FORWARD:      rc = stage_forward(a->mb);                    break;
 *       case PTDP_ACT_SEND_FORWARD: rc = ptdp_send(pp, act[a->mb], n, PTDP_REAL,
 *                                                  a->peer, TAG_ACTIVATION);      break;
 *       …
 *
 * A message is named by its micro-batch, its direction and (with chunks)
 * the boundary between model chunks it crosses; the executor tags it so.
 */
#ifndef PTDP_SCHEDULE_H
#define PTDP_SCHEDULE_H

#include <stdio.h>

#include "pp_layout.h"
#include "svg.h"

typedef enum {
    PTDP_ACT_FORWARD = 0,
    PTDP_ACT_BACKWARD,
    PTDP_ACT_SEND_FORWARD,
    PTDP_ACT_RECV_FORWARD,
    PTDP_ACT_SEND_BACKWARD,
    PTDP_ACT_RECV_BACKWARD,
    PTDP_ACT_OPTIMIZER_STEP,
    /* Zero-bubble schedules split BACKWARD in two (Qi et al. 2024):        */
    PTDP_ACT_BACKWARD_INPUT,   /* "B": the gradient of the stage input only,
                                  which the previous stage waits for; keeps
                                  what the weight gradients need            */
    PTDP_ACT_BACKWARD_WEIGHT,  /* "W": the weight gradients from what B
                                  kept; nobody waits for it, so it can fill
                                  a bubble                                  */
    PTDP_ACT_KIND_COUNT
} ptdp_action_kind;

typedef struct {
    ptdp_action_kind kind;
    int mb;      /* micro-batch 0..m-1; -1 for OPTIMIZER_STEP               */
    int peer;    /* the stage a send goes to / a recv comes from; -1 if none */
    int chunk;   /* which of this stage's model chunks (0..v-1; always 0
                    without interleaving).  Stage s's chunk c holds the
                    model's chunk c*p + s of p*v round the ring, or in a V
                    s and 2p-1-s (ptdp_chunk_global).                       */
    int pair;    /* 1 on a FORWARD whose stage runs it overlapped with the
                    BACKWARD right after it (DualPipeV's F&B pairs): the pair
                    starts once both inputs are in, takes F + B of compute,
                    and both outputs leave at its end.  0 otherwise.         */
} ptdp_action;

/* Where a stage's chunks lie (RING, V, DUAL) is the pipeline's layout,
 * pp_layout.h: a schedule's pp, virtual_stages and layout make one
 * (ptdp_schedule_layout), and the chunk functions below read it. */

typedef struct {
    int          count;      /* actions in the list                          */
    int          capacity;   /* room allocated (7mv + 1 covers any schedule)  */
    ptdp_action *actions;    /* actions[0 .. count-1], run in this order      */
} ptdp_stage_actions;

typedef struct ptdp_schedule_entry ptdp_schedule_entry;

typedef struct {
    char                name[32];      /* the registry row's name, or a
                                          hand-written list's                 */
    int                 pp;            /* pipeline stages                    */
    int                 micro_batches; /* m                                  */
    int                 virtual_stages;/* v: model chunks per stage (1, or
                                          more for the interleaved schedule) */
    ptdp_stage_actions *stage;         /* stage[s] for s = 0 .. pp-1          */
    int                 overflow;      /* set if a push went past capacity or
                                          to a stage that does not exist     */
    ptdp_chunk_layout   layout;        /* where the chunks sit (RING unless
                                          the registry says otherwise)       */
    const ptdp_schedule_entry *entry;  /* the registry row it was built from
                                          (its formulas), or NULL: a list
                                          written by hand                    */
} ptdp_schedule;

/* The pipeline layout of s: its shape, pp and virtual_stages as one value. */
ptdp_pp_layout ptdp_schedule_layout(const ptdp_schedule *s);

/* A generator appends every stage's compute (FORWARD, BACKWARD,
 * BACKWARD_INPUT, BACKWARD_WEIGHT) with ptdp_schedule_push: the order in
 * which the stage runs them, nothing else. */
typedef void (*ptdp_schedule_generator)(ptdp_schedule *s);

/* Where the placing pass (ptdp_schedule_place_comms) puts the messages.
 * Every receive comes before the compute that needs it, every send after
 * the compute that makes it; the placements differ in how they order
 * messages that meet between two computes. */
typedef enum {
    /* Each message right next to its compute (a compute's receive just
     * before it, its send just after).  Where two neighbours would each
     * send before receiving what the other sends (an exchange: 1F1B's
     * steady state), the even stage sends first and the odd one receives
     * first: GPipe and 1F1B, as Megatron-LM orders them. */
    PTDP_PLACE_EVEN_ODD = 0,
    /* The same with every send first, exchanges included: the
     * counter-example, which deadlocks 1F1B for pp >= 2, m >= 2. */
    PTDP_PLACE_SEND_FIRST,
    /* Every stage meets its messages in one global order, the time each is
     * sent when the compute is played: any compute order that can run, with
     * chunks round a ring or split backwards (interleaved, ZB-H1). */
    PTDP_PLACE_BY_SEND_TIME,
} ptdp_placement;

/* ---- the registry: one row per schedule ----------------------------------------
 *
 * Everything ptdp knows about a schedule beyond its generator is in its row:
 * the counts it needs, the layout of its chunks, what it can run with and
 * why not, its bubble formula, what a stage keeps (the planner's activation
 * profile), how its timing grows.  Validation, `ptdp train`, `ptdp schedule`,
 * `ptdp plan`, the figures and the reports read these fields and never
 * compare names; a name is looked up once, where a command line is parsed
 * (ptdp_schedule_find).  Adding a schedule = a generator and a row, in the
 * registry (schedule_registry.c) or from anywhere with ptdp_schedule_register. */

/* What a schedule does, one bit each (ptdp_schedule_entry.caps). */
#define PTDP_SCHED_CHUNKS         (1u << 0)  /* takes --virtual-stages v > 1: v
                                                chunks a stage round the ring     */
#define PTDP_SCHED_SPLIT_BACKWARD (1u << 1)  /* a backward runs as B, and its W
                                                later (a W phase)                 */
#define PTDP_SCHED_PAIRS          (1u << 2)  /* overlapped F&B pairs, whose
                                                all-to-alls --no-pair-overlap
                                                times apart (pair.h)              */
#define PTDP_SCHED_TOKEN_SLICES   (1u << 3)  /* runs TeraPipe's token slices as
                                                its micro-batches (pp.h)          */
#define PTDP_SCHED_PLANNED        (1u << 4)  /* `ptdp plan` tries it unasked      */

/* Features a schedule may refuse (ptdp_schedule_refuses). */
typedef enum {
    PTDP_FEATURE_BF16 = 0,    /* --precision bf16 */
    PTDP_FEATURE_ZERO3,       /* --zero 3         */
    PTDP_FEATURE_OVERLAP,     /* --overlap        */
    PTDP_FEATURE_COUNT
} ptdp_schedule_feature;

struct ptdp_schedule_entry {
    const char             *name;           /* --schedule NAME                   */
    const char             *summary;        /* one line (ptdp schedule --help)   */
    const char             *help;           /* ptdp train --help's words after the
                                               name, or NULL                      */
    ptdp_schedule_generator generate;
    ptdp_placement          placement;      /* where its messages go          */
    ptdp_chunk_layout       layout;         /* where a stage's chunks lie     */
    unsigned                caps;           /* PTDP_SCHED_* bits               */
    /* Optional (NULL: any pp, m >= 1, v as caps allow): the counts it needs,
     * 0 or PTDP_EINVAL with the reason naming --pp, --micro-batches,
     * --virtual-stages and what would work. */
    int  (*check)(const ptdp_schedule_entry *e, int pp, int micro_batches, int virtual_stages,
                  char *msg, size_t msglen);
    /* The bubble with uniform stages and free links (F = B = W where the
     * backward splits), and the formula in words. */
    double (*bubble)(int pp, int micro_batches, int virtual_stages);
    const char *bubble_words;
    /* The activation profile, for the planner: micro-batches (chunk-micro-
     * batches) whose activations stage `stage` holds at its peak, of its
     * chunk `chunk` (-1: of all its chunks), and (with a W phase) the most
     * whose W is owed at once — closed forms of ptdp_schedule_peak_in_flight
     * and _peak_deferred.  NULL: the planner walks the generated list
     * (schedule.h's own counts). */
    int  (*in_flight)(int pp, int micro_batches, int virtual_stages, int stage, int chunk);
    int  (*deferred)(int pp, int micro_batches, int stage);
    /* Its timing is a straight line in m past a warm-up: from m1 on, each
     * m2 - m1 more micro-batches add the same time (the planner plays m1
     * and m2 and extends the line, plan_time.c).  NULL: play it out. */
    void (*line)(int pp, int virtual_stages, int *m1, int *m2);
    /* What it cannot run with, in a clause after "FLAG with --schedule
     * NAME: " (why, and what to use); NULL: nothing of its own — the rules
     * of a W phase and of several chunks a stage still apply
     * (ptdp_schedule_refuses). */
    const char *refuses[PTDP_FEATURE_COUNT];
};

/* The generators: compute only. */
void ptdp_schedule_gpipe(ptdp_schedule *s);
void ptdp_schedule_1f1b(ptdp_schedule *s);
/* Interleaved 1F1B (Narayanan et al. 2021): each stage holds v =
 * s->virtual_stages model chunks and runs Megatron-LM's order; m must be a
 * multiple of p (ptdp_schedule_check says so). */
void ptdp_schedule_interleaved(ptdp_schedule *s);
/* ZB-H1 (Qi et al. 2024): 1F1B's order with every backward split into B
 * and W, the W passes deferred into the bubbles. */
void ptdp_schedule_zb_h1(ptdp_schedule *s);
/* DualPipeV (DeepSeek's DualPipe "cut in half"): p devices, the model cut
 * into 2p stages laid out as a V (PTDP_CHUNKS_V), stage s running chunk 0
 * (model stage s) and chunk 1 (model stage 2p - 1 - s) in the reference
 * implementation's eight phases: forwards of chunk 0, then of both, zero-
 * bubble backwards of chunk 1, the steady state of forward-and-backward
 * pairs (a forward of one chunk beside a backward of the other, the pair
 * whose compute hides the other's communication), then the drain with W
 * deferred.  m >= 2p (ptdp_schedule_check says so). */
void ptdp_schedule_dualpipev(ptdp_schedule *s);
/* DualPipe (DeepSeek-V3): p devices (p even), two copies of a model of p
 * stages laid out in opposite directions (PTDP_CHUNKS_DUAL), half the m
 * micro-batches (m even, m >= 2p) entering at each end.  Device r runs
 * the same eight phases as DualPipeV's device min(r, p - 1 - r) of p/2 on
 * m/2 micro-batches, its "own direction" (away from its end of the
 * pipeline) first: chunk 0 for r < p/2, chunk 1 for the others. */
void ptdp_schedule_dualpipe(ptdp_schedule *s);
/* A counter-example, not in the registry: ptdp_schedule_1f1b placed with
 * PTDP_PLACE_SEND_FIRST ("1f1b-naive": `ptdp schedule --naive`). */

/* The rows: the built-in ones in order (1f1b first: the default), then
 * those registered.  _at: NULL past the last. */
int  ptdp_schedule_count(void);
const ptdp_schedule_entry *ptdp_schedule_at(int i);
const ptdp_schedule_entry *ptdp_schedule_find(const char *name);   /* NULL if unknown */
/* The default row (1f1b), for a config whose schedule is NULL. */
const ptdp_schedule_entry *ptdp_schedule_default(void);
/* The first row with every bit of `caps` (e.g. PTDP_SCHED_TOKEN_SLICES:
 * the one --token-slices implies), or NULL. */
const ptdp_schedule_entry *ptdp_schedule_first_with(unsigned caps);
/* Add a row (a schedule defined outside the registry: a test, a lesson).
 * Its name must be new and short (under 32 characters), with a generator.
 * Not thread-safe: register before any run starts.  0, or PTDP_EINVAL
 * (a bad or taken name, no generator, the table full). */
int  ptdp_schedule_register(const ptdp_schedule_entry *e);
/* The built-in rows, for code that picks one on purpose (a figure that
 * draws GPipe beside 1F1B, the counter-example below). */
extern const ptdp_schedule_entry ptdp_schedule_row_gpipe, ptdp_schedule_row_1f1b,
    ptdp_schedule_row_interleaved, ptdp_schedule_row_zb_h1, ptdp_schedule_row_dualpipev,
    ptdp_schedule_row_dualpipe;
/* A counter-example, not in the registry: 1F1B placed with
 * PTDP_PLACE_SEND_FIRST (`ptdp schedule --naive`), which deadlocks. */
extern const ptdp_schedule_entry ptdp_schedule_row_1f1b_naive;

/* Can e's schedule be built for pp stages, m micro-batches and v virtual
 * stages?  0, or PTDP_EINVAL with the reason and what would work in msg,
 * naming the flags (--schedule, --pp, --micro-batches, --virtual-stages).
 * _check by name: unknown names too. */
int  ptdp_schedule_check_row(const ptdp_schedule_entry *e, int pp, int micro_batches, int virtual_stages,
                             char *msg, size_t msglen);
int  ptdp_schedule_check(const char *name, int pp, int micro_batches, int virtual_stages,
                         char *msg, size_t msglen);
/* The --virtual-stages flag as a command line gives it (1: not given)
 * against e, the one rule of `ptdp train`, `ptdp schedule` and `ptdp
 * plan`: more than 1 only for a schedule with chunks round a ring — a V
 * or two copies hold two chunks a device whatever the flag says (the
 * library's v of such a schedule is that 2, which check_row takes), one
 * chunk a stage takes none.  0, or PTDP_EINVAL with the message. */
int  ptdp_schedule_check_flag_v(const ptdp_schedule_entry *e, int virtual_stages, char *msg, size_t msglen);
/* Whether e, with v chunks a stage, refuses feature f: its row's reason,
 * else a W phase's (a unit's gradient is final before W adds to it), else
 * several chunks a stage's (one chunk's units are in use at a time).  0,
 * or PTDP_EINVAL with the message ("--precision bf16 with --schedule …: …")
 * in msg (which may be NULL: the answer alone). */
int  ptdp_schedule_refuses(const ptdp_schedule_entry *e, ptdp_schedule_feature f, int virtual_stages,
                           char *msg, size_t msglen);
/* The names of the rows with every bit of `with` and none of `without`,
 * in registry order, joined by sep ("1f1b|gpipe|…" for a usage line). */
void ptdp_schedule_names_with(unsigned with, unsigned without, const char *sep, char *buf, size_t len);
/* An empty schedule (lists with room for any schedule), or a generated one:
 * the generator's compute, then ptdp_schedule_place_comms with `placement`
 * (create: the registry's generator and placement).  All return 0, or
 * PTDP_EINVAL (pp < 1, m < 1, v < 1, unknown name, a push past a list's
 * room, compute the pass cannot place, ptdp_schedule_check's refusals) /
 * PTDP_ENOMEM; *out is NULL on failure.  Without _v, v = 1. */
int  ptdp_schedule_alloc(const char *name, int pp, int micro_batches, ptdp_schedule **out);
int  ptdp_schedule_alloc_v(const char *name, int pp, int micro_batches, int virtual_stages,
                           ptdp_schedule **out);
int  ptdp_schedule_generate(ptdp_schedule_generator gen, ptdp_placement placement, const char *name,
                            int pp, int micro_batches, ptdp_schedule **out);
int  ptdp_schedule_create(const char *name, int pp, int micro_batches, ptdp_schedule **out);
int  ptdp_schedule_create_v(const char *name, int pp, int micro_batches, int virtual_stages,
                            ptdp_schedule **out);
/* The same from a row: checked, generated, placed (create_v is find + build). */
int  ptdp_schedule_build(const ptdp_schedule_entry *e, int pp, int micro_batches, int virtual_stages,
                         ptdp_schedule **out);
void ptdp_schedule_destroy(ptdp_schedule *s);

/* Append one action to stage `stage`; the peer follows from the kind
 * (SEND_FORWARD/RECV_BACKWARD: stage+1, RECV_FORWARD/SEND_BACKWARD: stage-1).
 * A generator pushes compute; a list written by hand (a test, a lesson)
 * may push every action, messages and OPTIMIZER_STEP included.  Past
 * capacity it sets s->overflow, which ptdp_schedule_generate reports.
 * _chunk: the same for one of the stage's model chunks (interleaving). */
void ptdp_schedule_push(ptdp_schedule *s, int stage, ptdp_action_kind kind, int mb);
void ptdp_schedule_push_chunk(ptdp_schedule *s, int stage, ptdp_action_kind kind, int mb, int chunk);

/* The placing pass.  The lists hold compute only (a generator's output);
 * it adds every send and receive where `placement` says, then one
 * OPTIMIZER_STEP at the end of every list.  0, or a negative code with the
 * reason in msg: PTDP_EINVAL if a list holds anything but compute, a
 * micro-batch or chunk out of range, chunks on a single stage (they would
 * send to themselves), more actions than a list has room for, or (by send
 * time) a dependency no order satisfies; PTDP_ENOMEM.  The lists are left
 * as they were unless it returns 0. */
int  ptdp_schedule_place_comms(ptdp_schedule *s, ptdp_placement placement, char *msg, size_t msglen);

/* Model chunks.  With v chunks per stage the model is cut into p*v chunks;
 * stage s holds chunks s, s+p, s+2p, …, so activations go round the ring
 * 0 -> 1 -> … -> p-1 -> 0 v times:
 *
 *   chunk:   0   1   2   3 | 4   5   6   7        p = 4, v = 2
 *   stage:   0   1   2   3 | 0   1   2   3
 *   chunk:   0   0   0   0 | 1   1   1   1
 *
 * ptdp_chunk_global gives the model's chunk; ptdp_action_route the stage and chunk
 * at the other end of a send or recv (peer -1 for other kinds, or for a
 * send/recv past either end of the model). */
int  ptdp_chunk_global(const ptdp_schedule *s, int stage, int chunk);
/* The inverse: where the model's chunk g sits. */
void ptdp_chunk_place(const ptdp_schedule *s, int g, int *stage, int *chunk);
/* Does the boundary after the model chunk at (stage, chunk) stay on the
 * stage (the V's tip: the chunk's output is the next chunk's input, handed
 * over without a message)?  0 for the model's last chunk. */
int  ptdp_chunk_hands_on(const ptdp_schedule *s, int stage, int chunk);
void ptdp_action_route(const ptdp_schedule *s, ptdp_action_kind kind, int stage, int chunk,
                       int *peer_stage, int *peer_chunk);
/* Is the model chunk at (stage, chunk) the model's first / last (it reads the data /
 * computes the loss)?  In a V both are on stage 0; with two copies (DUAL)
 * each copy has its own first and last, on stages 0 and p - 1. */
int  ptdp_chunk_is_first(const ptdp_schedule *s, int stage, int chunk);
int  ptdp_chunk_is_last(const ptdp_schedule *s, int stage, int chunk);
/* Does a stage's chunk run micro-batch mb?  Always, but with two copies
 * (DUAL), where chunk 0 runs micro-batches 0 .. m/2 - 1 and chunk 1 the
 * rest. */
int  ptdp_chunk_runs(const ptdp_schedule *s, int chunk, int mb);

/* The short form of an action, used by print:
 * F3, B3, F3->2 (send), F3<-0 (recv), B3->0, B3<-2, step. */
int         ptdp_action_format(const ptdp_action *a, char *buf, size_t len);

/* Every stage's list, wrapped, with a legend. */
void ptdp_schedule_print(const ptdp_schedule *s, FILE *out);

/* ---- validation: rules, then a rendezvous simulation (schedule_sim.c) ------ */

typedef struct {
    int  deadlock;        /* 1: the rendezvous simulation stalled           */
    int  stage, index;    /* the first broken rule's stage and action, or -1 */
    char message[1024];   /* the reason; for a deadlock one line per stage  */
} ptdp_schedule_verdict;

/* 0 if every micro-batch is forwarded and backwarded once per stage, every
 * local and cross-stage dependency holds, every send has its recv, the
 * optimizer step is last, and blocking rendezvous send/recv cannot deadlock.
 * Otherwise PTDP_EINVAL with the reason in *v (v may be NULL). */
int ptdp_schedule_validate(const ptdp_schedule *s, ptdp_schedule_verdict *v);

/* Micro-batches forwarded but not yet backwarded, at most, on `stage`:
 * GPipe m; 1F1B min(pp - stage, m).  Those are the activations a stage holds.
 * Interleaved: counted in chunk-micro-batches (each 1/v of a stage's).  A
 * split backward frees a micro-batch's activations at B (ZB-H1 keeps 1F1B's
 * p - stage) ... */
int ptdp_schedule_peak_in_flight(const ptdp_schedule *s, int stage);
/* ... but B keeps what its W needs (each linear layer's input and output
 * gradient) until W runs: the most micro-batches whose W is owed at once
 * (ZB-H1: stage + 1, at most m). */
int ptdp_schedule_peak_deferred(const ptdp_schedule *s, int stage);

/* ---- timing: the schedule in virtual time (schedule_sim.c) ----------------- */

typedef struct {
    double forward;    /* t_f of one FORWARD action (one micro-batch on one
                          stage, or on one chunk when interleaving)          */
    double backward;   /* t_b of one BACKWARD                                 */
    double backward_input;   /* a BACKWARD_INPUT ("B")                        */
    double backward_weight;  /* a BACKWARD_WEIGHT ("W")                       */
    double send;       /* a message arrives at t_send + send; the sender goes on */
    const double *forward_per_stage;   /* optional, pp values overriding forward  */
    const double *backward_per_stage;  /* optional, pp values overriding backward */
    double alltoall;   /* expert parallelism's all-to-alls in one F, B (or
                          B-input) action, on the communication stream.
                          Alone, the compute waits for them: F takes
                          forward + alltoall.  In an overlapped pair each
                          one's all-to-alls run under the other's compute:
                          the pair takes max(F + B, 2 alltoall).  W has
                          none.  0: no experts (the default).            */
} ptdp_schedule_costs;

typedef struct {
    double start, end;
} ptdp_action_time;

typedef struct {
    int                pp;
    double             makespan;   /* when the last stage to finish is done   */
    double             bubble;     /* sum of idle / (pp * makespan)           */
    double            *busy;       /* busy[s]: forward + backward time (with
                                      the all-to-alls it waits for)           */
    double            *idle;       /* idle[s] = makespan - busy[s]            */
    ptdp_action_time **time;       /* time[s][i] for action i of stage s      */
} ptdp_schedule_timeline;

/* Validate, then play the schedule in virtual time: compute takes its cost,
 * a send is instant for the sender, a recv ends at max(now, arrival).
 * 0, PTDP_EINVAL (an invalid schedule or negative cost) or PTDP_ENOMEM. */
int  ptdp_schedule_simulate(const ptdp_schedule *s, const ptdp_schedule_costs *c,
                            ptdp_schedule_timeline **out);
void ptdp_schedule_timeline_destroy(ptdp_schedule_timeline *t);

/* The pair rule, in one place: an overlapped pair's forward takes its
 * compute f alone (its all-to-alls run under the partner's compute); its
 * backward then takes what is left of the pair, max(b, a2a - f) — b its
 * compute, a2a both halves' all-to-alls on the communication stream — so
 * the pair lasts max(f + b, a2a).  The timer above and `ptdp plan` both
 * charge a pair's backward so. */
double ptdp_pair_backward_time(double f, double b, double a2a);

/* (p - 1) / (m + p - 1): GPipe's and 1F1B's bubble with uniform stages. */
double ptdp_bubble_formula(int pp, int micro_batches);
/* The bubble a schedule should show with uniform stages: 1F1B's above;
 * interleaved (p - 1) / (v m + p - 1); ZB-H1 with F = B = W (m >= p)
 * (p - 1) / (3m + p - 1); DualPipeV on p devices with F = B = W, a pair
 * F + B, (p - 1) / (3m + p - 1): the published (p - 1)(F&B + B - 3W) of
 * idle per device (B a whole backward: 2(p - 1)) beside its 6m of work;
 * DualPipe on p devices with m micro-batches in all, (p - 2) / (3m + p - 2):
 * (p/2 - 1)(F&B + B - 3W) = p - 2 of idle beside 3m of work (each device
 * runs m/2 micro-batches through each of its two stages).  `formula` (may
 * be NULL) gets it in words. */
double ptdp_schedule_bubble_formula(const ptdp_schedule *s, const char **formula);

/* ---- drawing (schedule_draw.c); t must come from ptdp_schedule_simulate(s) - */

/* One row per stage, time to the right: F/B boxes labelled with the
 * micro-batch, idle as dots; a time axis; the bubble measured and by formula. */
int ptdp_schedule_ascii(const ptdp_schedule *s, const ptdp_schedule_timeline *t, FILE *out);

/* Where a timeline is drawn in an SVG picture (user units).  Several
 * timelines can share one time axis: axis_end is the longest makespan. */
typedef struct {
    double left;          /* x of time 0; the stage names end left of it   */
    double top;           /* y of stage 0's lane                           */
    double lane, gap;     /* a lane's height; the space between lanes      */
    double px_per_time;   /* user units (pixels) per unit of time         */
    double axis_end;      /* the time axis runs from 0 to here             */
    int max_ticks;        /* at most this many intervals on the axis       */
    int mark_micro_batches;  /* 1: each box in <g data-mb="k"> with a hover
                                title, for a page's script (html.h); 0: none */
} ptdp_schedule_frame;

/* The timeline into svg (svg.h): one grey lane per stage (grey = idle),
 * a blue box per forward and a green one per backward labelled with the
 * micro-batch, each stage's idle share and how many micro-batches it
 * keeps, and the time axis.  The one way ptdp draws a schedule: the
 * `ptdp schedule --svg` file and the course's figure both use it. */
void ptdp_schedule_draw(ptdp_svg *svg, const ptdp_schedule *s, const ptdp_schedule_timeline *t,
                        const ptdp_schedule_frame *frame);

/* The GPipe paper's figure as a standalone SVG, written atomically (temporary
 * file, fsync, rename).  0 or PTDP_EIO with the reason in msg. */
int ptdp_schedule_svg(const ptdp_schedule *s, const ptdp_schedule_timeline *t,
                      const char *path, char *msg, size_t msglen);
/* The same figure into *svg (begun here, closed, for the caller to save or
 * inline and free); mark_micro_batches as in the frame.  0 or the picture's
 * first error (svg.h). */
int ptdp_schedule_picture(const ptdp_schedule *s, const ptdp_schedule_timeline *t, int mark_micro_batches,
                          ptdp_svg *svg);

#endif
