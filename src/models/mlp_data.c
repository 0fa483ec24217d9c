/*
 * mlp_data.c — the MLP's synthetic task: Gaussian inputs labelled by a random teacher.
 *
 *   x_i = (N(0,1) draws at "data.x"[i*d_in .. i*d_in + d_in))
 *   y_i = argmax_c sum_j x_ij T_jc
 *
 * A linear teacher makes a task an MLP can learn quickly, so the loss curve
 * visibly falls in a few steps of a classroom demo.
 */
#include "ptdp/mlp_data.h"

#include "ptdp/device.h"
#include "ptdp/error.h"
#include "ptdp/rng.h"

int ptdp_mlp_data_init(ptdp_device *dev, ptdp_mlp_data *d, uint64_t seed, int d_in, int classes)
{
    *d = (ptdp_mlp_data){ .seed = seed, .d_in = d_in, .classes = classes };
    d->teacher = ptdp_alloc(dev, (size_t)d_in * classes * sizeof(double), PTDP_MEM_OTHER, "data.teacher");
    d->scores = ptdp_alloc(dev, (size_t)(classes > 0 ? classes : 1) * sizeof(double), PTDP_MEM_OTHER, "data.scores");
    if (d->teacher == NULL || d->scores == NULL)
        return PTDP_ENOMEM;
    uint64_t key = ptdp_rng_key(seed, "data.teacher");
    for (size_t k = 0; k < (size_t)d_in * classes; k++)
        d->teacher[k] = ptdp_rng_normal(key, k);
    return PTDP_OK;
}

void ptdp_mlp_data_free(ptdp_device *dev, ptdp_mlp_data *d)
{
    ptdp_free(dev, d->teacher);
    ptdp_free(dev, d->scores);
    d->teacher = d->scores = NULL;
}

void ptdp_mlp_data_batch(ptdp_mlp_data *d, int64_t first, int rows, ptdp_tensor x, int64_t *labels)
{
    uint64_t key = ptdp_rng_key(d->seed, "data.x");
    for (int i = 0; i < rows; i++) {
        uint64_t base = (uint64_t)(first + i) * (uint64_t)d->d_in;
        for (int c = 0; c < d->classes; c++)
            d->scores[c] = 0;
        for (int j = 0; j < d->d_in; j++) {
            double xij = ptdp_rng_normal(key, base + (uint64_t)j);
            if (x.data != NULL)
                *ptdp_at(x, i, j) = (ptdp_real)xij;
            const double *t = d->teacher + (size_t)j * d->classes;
            for (int c = 0; c < d->classes; c++)
                d->scores[c] += xij * t[c];
        }
        if (labels == NULL)
            continue;
        int best = 0;
        for (int c = 1; c < d->classes; c++)
            if (d->scores[c] > d->scores[best])
                best = c;
        labels[i] = best;
    }
}
