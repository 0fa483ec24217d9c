/*
 * moe_settings.c — what a mixture of experts accepts, for every model that
 * has one (moe.h's flags), checked before any work: the settings alone,
 * then against a run's layout.
 *
 *   settings   1 <= top-k <= E;  every >= 1;  the capacity factor and the
 *              balance weight finite numbers >= 0;  tp divides an
 *              expert's width (each expert split like the dense FFN);
 *              some block a mixture: every <= layers (block l is one when
 *              (l + 1) mod every = 0, the first l = every - 1), or the
 *              flags would train a dense model and call it a mixture
 *   layout     E a multiple of --ep (each EP rank E/ep experts); --ep
 *              needs experts; not yet: a capacity under CP (an expert's
 *              slots are a sequence's first choices in position order, and
 *              CP splits the positions), SP, token slices; a bias
 *              update with bf16, ZeRO-3 or DualPipe's two copies
 *
 * Each refusal names the flag and what would work, in the same words for
 * every model but the one each gives (how it splits an expert, what it
 * is when dense).
 *
 * And what a checkpoint records of a mixture beyond its shapes, the
 * settings that change the math (model.h's ptdp_meta_setting): the
 * capacity factor and the balance weight, which a resumed run takes from
 * the file unless their flags are typed.
 */
#include <math.h>
#include <stdio.h>
#include <string.h>

#include "parallel/moe_impl.h"
#include "ptdp/error.h"

/* Group-limited routing's settings (moe_groups.c): E in G groups of E/G,
 * the M best of them, each giving its top floor(k/M) to its score — and
 * the M groups must hold the k choices. */
static int groups_check(const ptdp_moe_settings *s, char *msg, size_t n)
{
    const int E = s->experts, k = s->top_k, G = s->groups > 0 ? s->groups : 1;
    const int M = s->group_top_k > 0 ? s->group_top_k : 1;
    const char *bad = "--moe-group-top-k";
    char why[160];
    if (s->groups < 0 || s->groups > E || E % G != 0) {
        bad = "--moe-groups";
        snprintf(why, sizeof why, "the groups must divide the experts (E/G consecutive experts a group)");
    } else if (s->group_top_k < 0 || M > G)
        snprintf(why, sizeof why, "the group top-k must be at most the groups");
    else if (k / M < 1)
        snprintf(why, sizeof why, "a group's score sums its top floor(top-k / group top-k) = 0 experts: "
                                  "the group top-k must be at most the top-k");
    else if (k / M > E / G)
        snprintf(why, sizeof why, "a group's score sums its top floor(top-k / group top-k) = %d experts, "
                                  "more than the %d a group holds", k / M, E / G);
    else if ((long)M * (E / G) < k)
        snprintf(why, sizeof why, "the %d chosen groups hold %d experts, fewer than the top-k", M, M * (E / G));
    else
        return PTDP_OK;
    snprintf(msg, n, "%s: --moe-groups %d --moe-group-top-k %d with --moe-experts %d --moe-top-k %d: %s", bad, G, M,
             E, k, why);
    return PTDP_EINVAL;
}

int ptdp_moe_check(const ptdp_moe_settings *s, int ffn, int layers, int tp, const char *split, char *msg, size_t n)
{
#define BAD(...) do { snprintf(msg, n, __VA_ARGS__); return PTDP_EINVAL; } while (0)
    if (s->experts < 0) BAD("--moe-experts %d: must be 0 (dense) or more", s->experts);
    if (s->experts == 0)
        return PTDP_OK;
    if (s->every < 1) BAD("--moe-every %d: must be at least 1", s->every);
    if (s->dense_first < 0) BAD("--moe-dense-first %d: must be 0 or more (the first blocks kept dense)", s->dense_first);
    if (s->shared < 0 || s->shared > 1 << 12)
        BAD("--moe-shared-experts %d: must be between 0 (none) and 4096", s->shared);
    if (s->ffn < 0) BAD("--moe-ffn %d: must be at least 1 (0: --ffn)", s->ffn);
    if (s->top_k < 1 || s->top_k > s->experts)
        BAD("--moe-top-k %d: must be between 1 and --moe-experts %d", s->top_k, s->experts);
    if (!(s->capacity >= 0) || !isfinite(s->capacity))
        BAD("--moe-capacity-factor %g: must be above 0 (omit it: dropless)", s->capacity);
    if (!(s->aux_loss >= 0) || !isfinite(s->aux_loss))
        BAD("--moe-aux-loss %g: must be 0 or more", s->aux_loss);
    if (s->score != PTDP_MOE_SOFTMAX && s->score != PTDP_MOE_SIGMOID)
        BAD("--moe-score %d: must be softmax (0) or sigmoid (1)", s->score);
    if (!(s->route_scale >= 0) || !isfinite(s->route_scale))
        BAD("--moe-route-scale %g: must be above 0", s->route_scale);
    if (!(s->bias_update >= 0) || !isfinite(s->bias_update))
        BAD("--moe-bias-update %g: must be 0 or more", s->bias_update);
    if (!(s->z_loss >= 0) || !isfinite(s->z_loss))
        BAD("--moe-z-loss %g: must be 0 or more (0: no z-loss)", s->z_loss);
    if (s->score == PTDP_MOE_SOFTMAX && s->route_scale != 0 && s->route_scale != 1)
        BAD("--moe-route-scale %g scales sigmoid gates: give --moe-score sigmoid (softmax gates sum to 1)",
            s->route_scale);
    if (s->score == PTDP_MOE_SOFTMAX && s->bias_update != 0)
        BAD("--moe-bias-update %g moves the expert bias of a sigmoid router: give --moe-score sigmoid",
            s->bias_update);
    if (groups_check(s, msg, n) != 0)
        return PTDP_EINVAL;
    if (layers >= 1 && s->dense_first > 0 && s->dense_first + s->every > layers)   /* no l >= K with (l-K+1) mod n = 0 */
        BAD("--moe-dense-first %d --moe-every %d: no block of --layers %d would be a mixture of experts (blocks 0 .. "
            "%d stay dense, and block l after them is one when (l - %d + 1) mod %d = 0: the first is block %d): give "
            "--layers %d or more, or a smaller --moe-dense-first", s->dense_first, s->every, layers,
            s->dense_first - 1, s->dense_first, s->every, s->dense_first + s->every - 1, s->dense_first + s->every);
    if (layers >= 1 && s->every > layers)   /* no l < layers with (l + 1) mod every = 0 */
        BAD("--moe-experts %d --moe-every %d: no block of --layers %d would be a mixture of experts (block l, "
            "from 0, is one when (l + 1) mod %d = 0: the first is block %d): give --moe-every %d or less, or "
            "--layers %d or more", s->experts, s->every, layers, s->every, s->every - 1, layers, s->every);
    if (tp > 1 && ptdp_moe_ffn(s, ffn) % tp != 0)
        BAD("--moe-ffn %d must divide by --tp %d: %s", ptdp_moe_ffn(s, ffn), tp, split);
#undef BAD
    return PTDP_OK;
}

/* A checkpoint saved before these keys were recorded ran what the flags'
 * defaults were then: dropless, alpha = 0.01.  These stay what a missing
 * key means whatever the defaults become.  The sigmoid router's two are
 * written by a sigmoid router's files alone (a file without moe_score ran
 * softmax), so a softmax file is what it was.  The groups' two are read
 * from every file and written only when not 1 (unless_absent, model.h):
 * a file without them ran one group, and files without groups stay what
 * they were; so is the z-loss's weight (written when not 0). */
static const struct {
    const char *key, *flag;
    double absent;
} recorded[] = {
    { "moe_capacity_factor", "--moe-capacity-factor", 0.0 },
    { "moe_aux_loss", "--moe-aux-loss", 0.01 },
    { "moe_route_scale", "--moe-route-scale", 1.0 },
    { "moe_bias_update", "--moe-bias-update", 0.0 },
    { "moe_groups", "--moe-groups", 1.0 },
    { "moe_group_top_k", "--moe-group-top-k", 1.0 },
    { "moe_z_loss", "--moe-z-loss", 0.0 },
};

int ptdp_moe_shape_metadata(const ptdp_moe_settings *s, const char **keys, char (*values)[32], const char **flags,
                            int max)
{
    int n = 0;
    if (s->experts > 0 && s->score != PTDP_MOE_SOFTMAX && n < max) {
        keys[n] = "moe_score";
        flags[n] = "--moe-score";
        snprintf(values[n++], 32, "%d", s->score);
    }
    if (s->experts > 0 && s->dense_first > 0 && n < max) {   /* which blocks hold experts: a shape */
        keys[n] = "moe_dense_first";
        flags[n] = "--moe-dense-first";
        snprintf(values[n++], 32, "%d", s->dense_first);
    }
    if (s->experts > 0 && s->shared > 0 && n < max) {   /* the shared experts' width: a shape */
        keys[n] = "moe_shared_experts";
        flags[n] = "--moe-shared-experts";
        snprintf(values[n++], 32, "%d", s->shared);
    }
    return n;
}

int ptdp_moe_settings_metadata(const ptdp_moe_settings *s, ptdp_meta_setting *out, int max)
{
    const double value[] = { s->capacity, s->aux_loss, s->route_scale > 0 ? s->route_scale : 1.0, s->bias_update,
                             s->groups > 0 ? s->groups : 1, s->group_top_k > 0 ? s->group_top_k : 1, s->z_loss };
    const bool sigmoid = s->score == PTDP_MOE_SIGMOID;
    int n = 0;
    for (int k = 0; s->experts > 0 && k < 7 && n < max; k++) {
        if ((k == 2 || k == 3) && !sigmoid)
            continue;   /* a sigmoid router's alone */
        out[n] = (ptdp_meta_setting){ .key = recorded[k].key, .flag = recorded[k].flag,
                                      .unless_absent = k >= 4 };   /* groups, z-loss: written when used */
        snprintf(out[n].value, sizeof out[n].value, PTDP_META_REAL_FMT, value[k]);
        snprintf(out[n].absent, sizeof out[n].absent, PTDP_META_REAL_FMT, recorded[k].absent);
        n++;
    }
    return n;
}

int ptdp_moe_from_metadata_real(ptdp_moe_settings *s, const char *key, double value)
{
    double *field[] = { &s->capacity, &s->aux_loss, &s->route_scale, &s->bias_update, NULL, NULL, &s->z_loss };
    int *whole[] = { &s->groups, &s->group_top_k };   /* recorded[4], [5]: whole numbers >= 1 */
    for (int k = 0; k < 7; k++)
        if (field[k] != NULL && strcmp(key, recorded[k].key) == 0 && value >= 0 && isfinite(value) &&
            (k != 2 || value > 0)) {
            *field[k] = value;
            return PTDP_OK;
        }
    for (int k = 4; k < 6; k++)
        if (strcmp(key, recorded[k].key) == 0 && value >= 1 && value <= 1 << 12 && value == floor(value)) {
            *whole[k - 4] = (int)value;
            return PTDP_OK;
        }
    return PTDP_EINVAL;
}

int ptdp_moe_experts_here(const ptdp_mesh *mesh, int E, int *first)
{
    ptdp_comm *ep = mesh->ep > 1 ? ptdp_mesh_group(mesh, PTDP_GROUP_EP) : NULL;
    const int N = ep != NULL ? ptdp_comm_size(ep) : 1, r = ep != NULL ? ptdp_comm_rank(ep) : 0;
    *first = r * (E / N);
    return E / N;
}

/* What --moe-bias-update does not run with yet, each for a reason: the
 * update writes the bias where the parameters live in the working
 * precision (flat_w, whole on every device), which bf16's stores and
 * master weights and ZeRO-3's shards are not; DualPipe's two copies of a
 * block each count half the micro-batches, and their loads would need the
 * mirror group's sum too.  True, with the message, for a refusal. */
static bool bias_update_refused(const ptdp_moe_settings *s, const ptdp_model_run *r, char *msg, size_t n)
{
    const char *with = r->bf16 ? "--precision bf16 (the bias lives in bf16 stores beside float master weights; "
                                 "use --precision float)"
                       : r->shards_params ? "--zero 3 (the bias lives in ZeRO-3's parameter shards; use --zero 1 "
                                            "or 2)"
                       : r->copies ? "DualPipe's two copies of the model (each copy of a block routes half the "
                                     "micro-batches; use another --schedule)"
                       : NULL;
    if (with != NULL)
        snprintf(msg, n, "--moe-bias-update %g with %s: the expert bias's update does not run there yet",
                 s->bias_update, with);
    return with != NULL;
}

int ptdp_moe_check_run(const ptdp_moe_settings *s, const ptdp_model_run *r, const char *dense, char *msg, size_t n)
{
    const int E = s->experts;
    const char *what = NULL;
    if (E == 0 && r->ep > 1) {
        snprintf(msg, n, "--ep %d spreads a mixture of experts' experts over devices, and %s: give --moe-experts E "
                 "(a multiple of %d)", r->ep, dense, r->ep);
        return PTDP_EINVAL;
    }
    const int etp = r->etp > 0 ? r->etp : r->tp;
    if (E == 0 && etp != r->tp) {
        snprintf(msg, n, "--etp %d sets a mixture of experts' own TP size, and %s: give --moe-experts E, or "
                 "leave --etp out", etp, dense);
        return PTDP_EINVAL;
    }
    if (E == 0)
        return PTDP_OK;
    if (etp != r->tp && r->fp8 != NULL) {
        snprintf(msg, n, "--etp %d with --fp8: an FP8 expert's scales are agreed over attention's TP group, "
                 "which folding no longer shares with the experts; leave --etp out (or --fp8)", etp);
        return PTDP_EINVAL;
    }
    if (r->ep > 1 && E % r->ep != 0) {
        snprintf(msg, n, "--moe-experts %d must divide by --ep %d: each EP rank holds E / ep experts (try "
                 "--moe-experts %d)", E, r->ep, (E / r->ep + 1) * r->ep);
        return PTDP_EINVAL;
    }
    if (s->bias_update > 0 && bias_update_refused(s, r, msg, n))
        return PTDP_EINVAL;
    if (r->cp > 1 && s->capacity > 0)
        what = "--cp and --moe-capacity-factor (an expert's slots are a sequence's first choices in position "
               "order, and CP splits the positions over devices; leave the capacity factor out: dropless)";
    else if (r->sp)
        what = "--sp";
    else if (r->token_slices > 1)
        what = "--token-slices (the capacity and the balance loss are per whole sequence)";
    if (what == NULL)
        return PTDP_OK;
    snprintf(msg, n, "--moe-experts %d with %s: a mixture of experts does not run there yet", E, what);
    return PTDP_EINVAL;
}
