/*
 * plan_compare.c — `ptdp plan --zero 3 --compare-zero`: the best layout
 * priced again under ZeRO-3 and each of its options, side by side.
 *
 * The layout stays the one the search chose (dp, tp, pp, b, M, the
 * schedule), so each row differs from ZeRO-3's by its option alone:
 *
 *   ZeRO-3   every state sharded over the DP group of N ranks
 *   HSDP     sharded over shard groups of N' (--shard-group, or one node's
 *            DP ranks), each shard all-reduced over the dp / N' replicas
 *   hpZ      the backward's gathers from secondary pieces inside the node
 *   qwZ      the forward's gathers as INT8, a scale a block
 *   qgZ      the gradient's sum as two all-to-alls of 4-bit codes (or 8)
 *   ZeRO++   qwZ + hpZ + qgZ, the paper's three together
 *
 * Each row prints, per device and step, the bytes of each collective inside
 * a node and across nodes, their time, what leaves a node (the paper's
 * count, in M = the stage's parameter bytes a micro-batch), the memory per
 * GPU (hpZ's secondary copy, HSDP's larger shards) and the step time with
 * its speed-up over ZeRO-3.  The numbers are the planner's own
 * (plan_time.c, plan_memory.c, src/parallel/shard_price.c), so a row that
 * ptdp train runs matches its report (tests/test_plan_zero3.c).  ZeRO++'s
 * three together are priced by formula (ptdp train does not run qwZ beside
 * hpZ), and so is qgZ under bf16 (which ptdp train refuses it); a row
 * whose option the layout cannot take
 * (a group inside one node, shard groups that do not divide dp) says why.
 *
 * Why a flag of `ptdp plan` rather than a command of its own: the question
 * is "which option for this model on this cluster", so it takes the same
 * request, the same validation and the layout the search picks.
 */
#include "plan_print.h"

#include <string.h>

#include "ptdp/arena.h"
#include "ptdp/error.h"
#include "ptdp/json.h"

#define QWZ_BLOCK_DEFAULT 2048   /* ptdp train's --zero-quant-block */

/* One row: its options, and whether ptdp train runs it. */
typedef struct {
    const char *name, *what;
    bool hsdp;                   /* HSDP's row: shard_group 0 = no node group */
    int shard_group;
    bool hpz;
    int qwz, qgz;
    bool formula;
} zero3_option;

/* A row priced: its request's numbers, or why the layout cannot take it. */
typedef struct {
    zero3_option opt;
    bool ok;
    char why[256];
    ptdp_plan_memory mem;
    ptdp_plan_time time;
} zero3_row;

/* The layout's DP ranks in one node: HSDP's default shard group. */
static int node_ranks(const ptdp_plan_request *rq, const ptdp_plan_layout *l)
{
    const int gpn = rq->profile->gpus_per_node;
    return gpn > 0 && gpn % l->tp == 0 ? gpn / l->tp : 0;
}

static int options_of(const plan_options *o, const ptdp_plan_layout *l, zero3_option *out)
{
    const int qwz = o->quant_block > 0 ? o->quant_block : QWZ_BLOCK_DEFAULT;
    const int qgz = o->qgz_bits > 0 ? o->qgz_bits : 4;
    const int shard = o->rq.shard_group > 0 ? o->rq.shard_group : node_ranks(&o->rq, l);
    const zero3_option all[] = {
        { "ZeRO-3", "full sharding", false, 0, false, 0, 0, false },
        { "HSDP", "shard groups", true, shard, false, 0, 0, false },
        { "hpZ", "node's pieces", false, 0, true, 0, 0, false },
        { "qwZ", "INT8 weights", false, 0, false, qwz, 0, false },
        { "qgZ", "quantized grads", false, 0, false, 0, qgz, o->rq.bf16 },   /* train refuses it under bf16 */
        { "ZeRO++", "qwZ+hpZ+qgZ", false, 0, true, qwz, qgz, true },
    };
    const int n = (int)(sizeof all / sizeof all[0]);
    memcpy(out, all, sizeof all);
    return n;
}

/* The request of one option (the others off) on the layout. */
static ptdp_plan_request request_of(const plan_options *o, const zero3_option *z)
{
    ptdp_plan_request rq = o->rq;
    rq.shard_group = z->shard_group;
    rq.zero_hpz = z->hpz;
    rq.zero_qwz = z->qwz;
    rq.zero_qgz = z->qgz;
    return rq;
}

/* Each of a row's options alone must be a run ptdp train takes on the
 * layout (its rules: ptdp_plan_layout_check); qgZ has none of its own. */
static bool row_valid(const plan_options *o, const ptdp_plan_layout *l, const zero3_option *z, char *why, size_t len)
{
    const zero3_option parts[] = {
        { .shard_group = z->shard_group }, { .hpz = z->hpz }, { .qwz = z->qwz },
    };
    if (z->hsdp && z->shard_group == 0) {
        snprintf(why, len, "a node of --profile %s holds no whole TP group of --tp %d", o->rq.profile->name, l->tp);
        return false;
    }
    for (size_t i = 0; i < sizeof parts / sizeof parts[0]; i++) {
        const ptdp_plan_request rq = request_of(o, &parts[i]);
        if (ptdp_plan_layout_check(&rq, l, why, len) != 0)
            return false;
    }
    if (z->shard_group >= l->dp && z->shard_group > 0) {
        snprintf(why, len, "one node holds all %d DP ranks: its shard group is the DP group", l->dp);
        return false;
    }
    return true;
}

static int rows_of(const plan_options *o, const ptdp_plan_candidate *c, zero3_row *rows)
{
    zero3_option opts[8];
    const int n = options_of(o, &c->layout, opts);
    for (int i = 0; i < n; i++) {
        zero3_row *r = &rows[i];
        memset(r, 0, sizeof *r);
        r->opt = opts[i];
        r->ok = row_valid(o, &c->layout, &opts[i], r->why, sizeof r->why);
        const ptdp_plan_request rq = request_of(o, &opts[i]);
        if (r->ok && (ptdp_plan_memory_of(&rq, &c->layout, &r->mem) != 0 ||
                      ptdp_plan_time_of(&rq, &c->layout, &r->time) != 0)) {
            snprintf(r->why, sizeof r->why, "the planner cannot price it");
            r->ok = false;
        }
    }
    return n;
}

/* ------------------------------------------------------------- the table */

static void print_link(FILE *f, const char *who, const char *coll, const ptdp_plan_link *k, double M)
{
    char a[32], b[32], d[32];
    fprintf(f, "  %-7s %-16s %11s %11s %10.4g %11s %7.3f M\n", who, coll, ptdp_format_bytes(k->intra, a, sizeof a),
            ptdp_format_bytes(k->cross, b, sizeof b), k->s, ptdp_format_bytes(k->node, d, sizeof d),
            M > 0 ? k->node / M : 0);
}

static void print_row(FILE *f, const zero3_row *r, double base_step, const ptdp_plan_layout *l, double store)
{
    const ptdp_plan_zero3 *z = &r->time.zero3;
    const double M = l->micro_batches * z->psi * store;   /* the paper's M, a micro-batch */
    if (!r->ok) {
        fprintf(f, "  %-7s %s: not priced — %s\n\n", r->opt.name, r->opt.what, r->why);
        return;
    }
    ptdp_plan_link all = { 0 };
    const ptdp_plan_link *parts[4] = { &z->gather_f, &z->gather_b, &z->reduce, &z->replicas };
    static const char *const names[4] = { "forward gather", "backward gather", "gradient sum", "replicas' sum" };
    for (int i = 0; i < 4; i++) {
        if (i == 3 && parts[i]->s == 0)
            continue;
        print_link(f, i == 0 ? r->opt.name : "", names[i], parts[i], M);
        all.intra += parts[i]->intra;
        all.cross += parts[i]->cross;
        all.s += parts[i]->s;
        all.node += parts[i]->node;
    }
    print_link(f, "", "all", &all, M);
    char m[32], p[32];
    fprintf(f, "  %-7s %s%s: memory/GPU %s (params %s), step %.4g s, %.2fx ZeRO-3's speed\n\n", "",
            r->opt.what, r->opt.formula ? " (formula: ptdp train does not run it)" : "",
            ptdp_format_bytes(r->mem.total, m, sizeof m), ptdp_format_bytes(r->mem.params, p, sizeof p),
            r->time.step_s, r->time.step_s > 0 ? base_step / r->time.step_s : 0);
}

void ptdp_plan_print_compare(FILE *f, const plan_options *o, const ptdp_plan_candidate *c)
{
    zero3_row rows[8];
    const int n = rows_of(o, c, rows);
    const ptdp_plan_layout *l = &c->layout;
    const double store = o->rq.bf16 ? 2.0 : (double)sizeof(ptdp_real);
    const int kd = node_ranks(&o->rq, l);
    fprintf(f, "\nZeRO-3's options on layout 1 (dp %d, tp %d, pp %d, b %d, M %d; %d DP ranks a node): per device "
            "and step,\nbytes inside a node and across nodes, seconds on the links, and what leaves a node (all "
            "its\nDP ranks', in M = a micro-batch's parameter bytes S of a device, the ZeRO++ paper's count):\n\n",
            l->dp, l->tp, l->pp, l->micro_batch_size, l->micro_batches, kd > 0 ? (kd < l->dp ? kd : l->dp) : 1);
    fprintf(f, "  %-7s %-16s %11s %11s %10s %11s %9s\n", "option", "collective", "intra-node", "cross-node",
            "time s", "leaves node", "in M");
    const double base = rows[0].ok ? rows[0].time.step_s : 0;
    for (int i = 0; i < n; i++)
        print_row(f, &rows[i], base, l, store);
}

/* ------------------------------------------------------------- --json */

static void json_link(FILE *f, const char *key, const ptdp_plan_link *k)
{
    char x[4][PTDP_JSON_NUMBER_MAX];
    fprintf(f, "\"%s\": {\"intra_node_bytes\": %s, \"cross_node_bytes\": %s, \"s\": %s, \"node_bytes\": %s}", key,
            ptdp_json_number(k->intra, x[0]), ptdp_json_number(k->cross, x[1]), ptdp_json_number(k->s, x[2]),
            ptdp_json_number(k->node, x[3]));
}

void ptdp_plan_print_compare_json(FILE *f, const plan_options *o, const ptdp_plan_candidate *c)
{
    zero3_row rows[8];
    const int n = rows_of(o, c, rows);
    char x[4][PTDP_JSON_NUMBER_MAX];
    fprintf(f, "[\n");
    for (int i = 0; i < n; i++) {
        const zero3_row *r = &rows[i];
        fprintf(f, "  {\"option\": \"%s\", \"formula_only\": %s, \"priced\": %s", r->opt.name,
                r->opt.formula ? "true" : "false", r->ok ? "true" : "false");
        if (r->ok) {
            const ptdp_plan_zero3 *z = &r->time.zero3;
            fprintf(f, ", \"shard_group\": %d, \"qwz_block\": %d, \"qgz_bits\": %d, \"psi\": %s, ",
                    r->opt.shard_group, r->opt.qwz, r->opt.qgz, ptdp_json_number(z->psi, x[0]));
            json_link(f, "forward_gather", &z->gather_f);
            fprintf(f, ", ");
            json_link(f, "backward_gather", &z->gather_b);
            fprintf(f, ", ");
            json_link(f, "gradient_sum", &z->reduce);
            fprintf(f, ", ");
            json_link(f, "replicas_sum", &z->replicas);
            fprintf(f, ", \"memory_per_gpu_bytes\": %s, \"params_bytes\": %s, \"step_s\": %s",
                    ptdp_json_number(r->mem.total, x[1]), ptdp_json_number(r->mem.params, x[2]),
                    ptdp_json_number(r->time.step_s, x[3]));
        } else {
            fprintf(f, ", \"why\": ");
            ptdp_json_write_string(f, r->why);
        }
        fprintf(f, "}%s\n", i + 1 < n ? "," : "");
    }
    fprintf(f, "]");
}
