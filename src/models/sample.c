/*
 * sample.c — generating text with any trained model of tokens, one token
 * at a time, through what its table says of sampling (model.h's
 * ptdp_model_sampling): its positions T, its vocabulary V, the logits of a
 * forward.  No model's name is asked.
 *
 *   context = the last T tokens so far (a longer prompt keeps its end)
 *   logits  = the model's forward on the context, at its last position
 *   next    = argmax(logits)                        temperature 0: greedy
 *           | a draw from softmax(logits / temperature) over the top k
 *   append next, repeat
 *
 * The context is padded on the right to T positions: attention is causal,
 * so what follows the last real token cannot change the logits there.  The
 * columns after the V real tokens (a padded vocabulary's) are never real
 * tokens and are never drawn.  The draws are counter-based —
 * uniform(seed, "sample", k) for the k-th token — so a seed always gives
 * the same text.
 *
 * Scoring the built-in sums (gpt_data.c: the text every model of tokens
 * reads by default) asks every held-out question and counts the exact
 * answers:
 *
 *   "07+35="  ──greedy, 3 tokens──►  "042"   right
 *   "61+59="  ──────────────────────► "110"   wrong (120)
 *
 * the share of right answers among sums the model never saw: its accuracy.
 */
#include "ptdp/sample.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ptdp/error.h"
#include "ptdp/gpt.h"
#include "ptdp/models.h"
#include "ptdp/rng.h"

/* The index of the next token from one row of logits (V real tokens). */
static int64_t choose(const ptdp_real *logits, int V, const ptdp_sample_opts *o, uint64_t key, int k,
                      double *prob)
{
    int best = 0;
    for (int v = 1; v < V; v++)
        if (logits[v] > logits[best])
            best = v;
    if (o->temperature <= 0)
        return best;
    /* the k largest logits (all when top_k is 0 or >= V), by threshold */
    double cut = -INFINITY;
    if (o->top_k > 0 && o->top_k < V) {
        int above = 0;
        double lo = logits[best];
        /* the top_k-th largest value: lower the cut one distinct value at a time */
        while (above < o->top_k) {
            double next = -INFINITY;
            for (int v = 0; v < V; v++)
                if (logits[v] < lo && logits[v] > next)
                    next = logits[v];
            above = 0;
            for (int v = 0; v < V; v++)
                above += logits[v] >= lo;
            if (above >= o->top_k || next == -INFINITY)
                break;
            lo = next;
        }
        cut = lo;
    }
    double sum = 0, max = logits[best];
    for (int v = 0; v < V; v++)
        if (logits[v] >= cut) {
            prob[v] = exp((logits[v] - max) / o->temperature);
            sum += prob[v];
        } else {
            prob[v] = 0;
        }
    double u = ptdp_rng_uniform(key, (uint64_t)k) * sum, acc = 0;
    for (int v = 0; v < V; v++) {
        acc += prob[v];
        if (prob[v] > 0 && u < acc)
            return v;
    }
    return best;
}

bool ptdp_model_can_sample(const ptdp_model_ops *ops)
{
    return ops != NULL && ops->sampling != NULL && ops->caps.sequences && ops->positions != NULL;
}

const char *ptdp_sample_models(char *buf, size_t len, const char *sep)
{
    size_t n = 0;
    if (len > 0)
        buf[0] = '\0';
    for (int k = 0; k < ptdp_model_count() && n < len; k++)
        if (ptdp_model_can_sample(ptdp_model_at(k)))
            n += (size_t)snprintf(buf + n, len - n, "%s%s", n ? sep : "", ptdp_model_at(k)->name);
    return buf;
}

/* The model whole on this device, and samplable: 0, or the device failed
 * with the reason. */
static int whole_here(ptdp_device *dev, const ptdp_model *m)
{
    if (!ptdp_model_can_sample(m->ops)) {
        char names[128];
        return ptdp_fail(dev, PTDP_EINVAL, "%s cannot be sampled: its table says nothing of sampling (these "
                         "can: %s)", m->ops->caps.title, ptdp_sample_models(names, sizeof names, ", "));
    }
    if (!m->first_stage || !m->last_stage || m->mesh->tp != 1 || m->mesh->cp != 1)
        return ptdp_fail(dev, PTDP_EINVAL, "generation runs a whole model on one device (one stage, tp 1, cp 1)");
    return PTDP_OK;
}

int ptdp_sample_generate(ptdp_device *dev, ptdp_model *m, int64_t *ids, int len, int n,
                         const ptdp_sample_opts *o)
{
    int rc = whole_here(dev, m);
    if (rc != 0)
        return rc;
    const ptdp_model_sampling *s = m->ops->sampling;
    const int T = ptdp_model_positions(&m->cfg), V = s->vocab(&m->cfg);
    if (len < 1)
        return ptdp_fail(dev, PTDP_EINVAL, "generation needs at least one token to start from");
    int64_t *ctx = ptdp_alloc(dev, (size_t)T * sizeof *ctx, PTDP_MEM_OTHER, "sample.context");
    double *prob = ptdp_alloc(dev, (size_t)V * sizeof *prob, PTDP_MEM_OTHER, "sample.prob");
    if (ctx == NULL || prob == NULL) {
        ptdp_free(dev, ctx);
        ptdp_free(dev, prob);
        return PTDP_ENOMEM;
    }
    const uint64_t key = ptdp_rng_key(o->seed, "sample");
    for (int k = 0; k < n && rc == 0; k++) {
        int used = len < T ? len : T;
        memset(ctx, 0, (size_t)T * sizeof *ctx);
        memcpy(ctx, ids + (len - used), (size_t)used * sizeof *ctx);
        ptdp_acts acts;
        ptdp_batch b = { .first = 0, .rows = 1, .tokens = ctx, .labels = NULL };
        rc = ptdp_model_forward(dev, m, &acts, &b, (ptdp_tensor){ 0 }, 0, false, NULL);
        if (rc == 0) {
            const ptdp_tensor z = s->logits(&acts);
            ids[len++] = choose(ptdp_at(z, used - 1, 0), V, o, key, k, prob);
        }
        ptdp_acts_free(dev, m, &acts);
    }
    ptdp_free(dev, ctx);
    ptdp_free(dev, prob);
    return rc;
}

int ptdp_sample_score_sums(ptdp_device *dev, ptdp_model *m, int *right, int *asked)
{
    *right = *asked = 0;
    int rc = whole_here(dev, m);
    if (rc != 0)
        return rc;
    if (m->ops->sampling->vocab(&m->cfg) <= '=')
        return ptdp_fail(dev, PTDP_EINVAL, "the model does not know the tokens of a sum (digits, + and =)");
    const ptdp_sample_opts greedy = { 0 };
    int64_t ids[6 + 3];
    for (int a = 0; a < 100; a++)
        for (int b = 0; b < 100 && rc == PTDP_OK; b++) {
            if (!ptdp_gpt_sum_held_out(a, b))
                continue;
            char q[7], answer[3];
            ptdp_gpt_sum_prompt(a, b, q);
            for (int i = 0; i < 6; i++)
                ids[i] = (unsigned char)q[i];
            rc = ptdp_sample_generate(dev, m, ids, 6, 3, &greedy);
            for (int i = 0; i < 3; i++)
                answer[i] = (char)ids[6 + i];
            *right += rc == PTDP_OK && ptdp_gpt_sum_correct(a, b, answer);
            *asked += 1;
        }
    return rc;
}
