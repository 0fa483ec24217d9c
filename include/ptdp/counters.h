/*
 * counters.h — a run's statistics through one channel: whoever counts
 * something publishes it by name once, the devices fill it, the run's
 * table merges it, and the reports read it by name.
 *
 *   set-up (the host, before any device)
 *     the model (model.h's publish)   "aux_loss", "moe_load", …  ─┐
 *     expert parallelism (ep.h)       "ep_bytes", …               ─┼─► ptdp_counters: name, kind,
 *     …                                                            ─┘   shape, flags → an offset
 *   the run (every device d, its own ptdp_counts)                        in a row of its kind
 *     ptdp_count(counts, "moe_load", i, x) ──► d's row of the step │ d's row of the run
 *   each step, once every device finished it (run_table.c)
 *     the step's value = sum over the devices that count  (÷ B: a mean per sample)
 *   after the run (train.h's result, read by name)
 *     --log  one key per step counter:    "aux_loss": 0.0125, "moe_load": [[…], …]
 *     --report, the summary:  what each publisher's reader makes of them
 *
 *   rows       step 0: [ device 0 | device 1 | … ]   each [ aux_loss | moe_load … ]
 *              step 1: [ device 0 | device 1 | … ]
 *              run:    [ device 0 | device 1 | … ]   each [ ep_bytes | expert_elements ]
 *
 * Two kinds, by what a number is a number of:
 *   PTDP_COUNT_STEP    a step: every device adds its share into its row of
 *                      the step, and the step's value is the sum over the
 *                      devices (a balance loss, the tokens each expert took)
 *   PTDP_COUNT_DEVICE  a device, over the whole run: set at set-up or added
 *                      to during it, kept per device (the bytes its
 *                      all-to-alls sent, its experts' parameters)
 *
 * Each device writes only its own rows, so the rows of a run in processes
 * (MPI) merge by OR (launch.h's ptdp_host_merge) like the rest of the table.
 * Numbers are doubles: a count of rows or bytes stays exact up to 2^53, so
 * its sum does not depend on the order of the adds.
 *
 * Who counts: every device, or TP rank 0 alone for what every TP rank
 * sees alike (PTDP_COUNT_TP_ONCE: the tokens a router sends, as the loss
 * is counted once); a step's sum of a loss reads as a mean per sample
 * (PTDP_COUNT_PER_SAMPLE).
 *
 * The names are the --log and --report keys users read: a public contract
 * (add, never rename).  Why core/: the publishers and fillers live in
 * every layer above it — models/, parallel/ (ep.c, pp.c), train/ — and the
 * device (runtime/, device.h) carries each device's ptdp_counts, so the
 * channel must sit below them all; it needs nothing but the C library.
 */
#ifndef PTDP_COUNTERS_H
#define PTDP_COUNTERS_H

#include <stdbool.h>

#define PTDP_COUNTERS_MAX 16
#define PTDP_COUNTER_NAME_MAX 32

typedef enum {
    PTDP_COUNT_STEP = 0,      /* a value per step: the sum over the devices  */
    PTDP_COUNT_DEVICE,        /* a value per device, for the whole run       */
    PTDP_COUNT_NKINDS
} ptdp_count_kind;

/* What a counter's numbers look like as JSON: a number, a list of dim[0]
 * numbers, or dim[0] lists of dim[1] (one row per MoE block, say). */
typedef struct {
    int ndim;                 /* 0, 1 or 2                                   */
    int dim[2];               /* the numbers are dim[0] x dim[1]             */
} ptdp_count_shape;

#define PTDP_COUNT_NUMBER ((ptdp_count_shape){ 0, { 1, 1 } })
#define PTDP_COUNT_LIST(n) ((ptdp_count_shape){ 1, { (n), 1 } })
#define PTDP_COUNT_TABLE(rows, cols) ((ptdp_count_shape){ 2, { (rows), (cols) } })

/* Who counts, and how a step's sum reads. */
enum {
    PTDP_COUNT_TP_ONCE = 1u << 0,     /* every TP rank sees the same (the same
                                         tokens, the same router): only TP rank
                                         0 counts, so each is counted once     */
    PTDP_COUNT_PER_SAMPLE = 1u << 1   /* a step's sum reads divided by the
                                         global batch: a mean per sample (as the
                                         loss is)                            */
};

typedef struct {
    char name[PTDP_COUNTER_NAME_MAX];   /* the key: "aux_loss", "ep_bytes"   */
    ptdp_count_kind kind;
    ptdp_count_shape shape;
    unsigned flags;                     /* PTDP_COUNT_TP_ONCE, _PER_SAMPLE   */
    int offset, len;                    /* its numbers in a row of its kind  */
} ptdp_counter;

/* The run's counters, in the order they were published. */
typedef struct {
    int n;
    ptdp_counter c[PTDP_COUNTERS_MAX];
    int len[PTDP_COUNT_NKINDS];         /* numbers in a row of each kind     */
    char refused[PTDP_COUNTER_NAME_MAX];/* the first name refused, for the
                                           message                          */
} ptdp_counters;

/* One device's way in: its rows, where ptdp_count adds.  The trainer
 * points row[PTDP_COUNT_STEP] at the step being taken. */
typedef struct ptdp_counts {
    const ptdp_counters *reg;
    double *row[PTDP_COUNT_NKINDS];     /* NULL: that kind is not counted now */
    bool tp_lead;                       /* TP rank 0 (PTDP_COUNT_TP_ONCE)     */
} ptdp_counts;

/* ---- set-up: publish ---- */
/* An empty registry. */
void ptdp_counters_init(ptdp_counters *reg);
/* Publish the counter `name` (at set-up, on the host).  0; or PTDP_EINVAL
 * (the name noted in reg->refused) for a name published already or too
 * long, a shape with no numbers, or more than PTDP_COUNTERS_MAX counters. */
int  ptdp_counters_publish(ptdp_counters *reg, const char *name, ptdp_count_kind kind, ptdp_count_shape shape,
                           unsigned flags);
/* The counter called `name`, or NULL when nobody published it. */
const ptdp_counter *ptdp_counters_find(const ptdp_counters *reg, const char *name);

/* ---- the run: count ---- */
/* Add x to number i of counter `name` in this device's row of its kind.
 * Nothing happens without a channel (counts NULL: a forward outside a
 * training run), for a name nobody published, for a kind not counted now,
 * or on a TP rank other than 0 for a PTDP_COUNT_TP_ONCE counter. */
void ptdp_count(ptdp_counts *counts, const char *name, int i, double x);
/* The same place found once: this device's numbers of counter `name`
 * (its len of them) to add into, or NULL where ptdp_count would do
 * nothing. */
double *ptdp_counts_of(ptdp_counts *counts, const char *name);

/* ---- after: read ---- */
/* Counter `name`'s numbers in `row`, a row of kind `kind` (a device's, or
 * a step's sum), or NULL when nobody published such a counter or row is
 * NULL. */
const double *ptdp_counters_in(const ptdp_counters *reg, const char *name, ptdp_count_kind kind, const double *row);

#endif
