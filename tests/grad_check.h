/*
 * grad_check.h — a model's gradient against central differences, every
 * parameter of a stage (the tests of the models, in double):
 *
 *   loss(w + eps e_k) - loss(w - eps e_k)
 *   ------------------------------------- = dloss/dw_k  + O(eps^2)
 *                  2 eps
 *
 * loss = loss_sum / (rows x label_cols), the mean over the batch's
 * targets; the backward is given its scale.  eps 1e-6: truncation ~ eps^2,
 * cancellation ~ 1e-16 / eps.  The error of each parameter is relative,
 * with a floor: a gradient of 1e-8 is measured to ~1e-10.
 */
#ifndef PTDP_TESTS_GRAD_CHECK_H
#define PTDP_TESTS_GRAD_CHECK_H

#include <math.h>

#include "harness.h"
#include "ptdp/mesh.h"
#include "ptdp/models.h"

typedef struct { int checked; double worst; } grad_check_result;

static inline double grad_check_loss(ptdp_device *dev, ptdp_model *m, ptdp_batch *b)
{
    ptdp_acts acts;
    ptdp_model_forward(dev, m, &acts, b, (ptdp_tensor){ 0 }, 0, false, NULL);
    double loss = acts.loss_sum / ((double)b->rows * m->label_cols);
    ptdp_acts_free(dev, m, &acts);
    return loss;
}

/* m whole on dev (one stage), b loaded: one backward, then every
 * parameter nudged both ways; the worst relative error into r. */
static inline int grad_check(ptdp_device *dev, ptdp_model *m, ptdp_batch *b, grad_check_result *r)
{
    ptdp_acts acts;
    DEVICE_TRY(ptdp_model_forward(dev, m, &acts, b, (ptdp_tensor){ 0 }, 0, false, NULL));
    DEVICE_TRY(ptdp_model_backward(dev, m, &acts, NULL, 1.0 / ((double)b->rows * m->label_cols), NULL));
    for (size_t k = 0; k < m->numel; k++) {
        ptdp_real keep = m->flat_w[k];
        const double eps = 1e-6;
        m->flat_w[k] = (ptdp_real)(keep + eps);
        double up = grad_check_loss(dev, m, b);
        m->flat_w[k] = (ptdp_real)(keep - eps);
        double down = grad_check_loss(dev, m, b);
        m->flat_w[k] = keep;
        double fd = (up - down) / (2 * eps), an = m->flat_g[k];
        double err = fabs(fd - an) / fmax(1e-3, fabs(fd) + fabs(an));
        if (err > r->worst)
            r->worst = err;
        r->checked++;
    }
    return 0;
}

/* The whole model of cfg on one device (dropout p), its weights made
 * larger (w 10 + wiggle sin k: every path carries signal), a batch of 3
 * samples from sample 11: grad_check. */
static inline int grad_check_model(ptdp_device *dev, const ptdp_model_config *cfg, double dropout, double wiggle,
                                   grad_check_result *r)
{
    ptdp_mesh mesh;
    ptdp_model m;
    DEVICE_TRY(ptdp_mesh_init(dev, 1, 1, 1, &mesh));
    DEVICE_TRY(ptdp_model_init(dev, &m, cfg, &mesh, NULL, 3, dropout));
    for (size_t k = 0; k < m.numel; k++)
        m.flat_w[k] = (ptdp_real)(m.flat_w[k] * 10 + wiggle * sin((double)k));
    ptdp_batch b = { .first = 11, .rows = 3 };
    DEVICE_TRY(ptdp_batch_load(dev, &m, &b));
    DEVICE_TRY(grad_check(dev, &m, &b, r));
    ptdp_batch_free(dev, &b);
    ptdp_model_free(dev, &m);
    ptdp_mesh_free(&mesh);
    return 0;
}

/* The test: fn (a device function calling grad_check_model with its
 * config) on one device checks more than 1000 parameters, each within
 * 1e-5. */
static inline void grad_check_expect(ptdp_device_fn fn)
{
    grad_check_result r = { 0, 0 };
    harness_launch_ok(1, fn, &r, NULL, NULL);
    ck_assert_int_gt(r.checked, 1000);
    ck_assert_msg(r.worst < 1e-5, "worst relative error %g over %d parameters", r.worst, r.checked);
}

#endif
