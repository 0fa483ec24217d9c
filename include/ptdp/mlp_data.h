/*
 * mlp_data.h — the MLP's data: a synthetic classification task, a pure
 * function of (seed, i).
 *
 *   x_i ~ N(0, 1)^d_in             (stream "data.x", element i*d_in + j)
 *   y_i = argmax_c (x_i T)_c       T ~ N(0,1)^(d_in x C), stream "data.teacher"
 *
 * Step s uses samples [s B, (s+1) B).  Any device can produce any slice of
 * any batch alone, so a DP rank generates only its shard and a resumed run
 * continues at exactly the right samples.  Labels are computed in double
 * from the double draws, so the float and double builds see the same labels.
 */
#ifndef PTDP_MLP_DATA_H
#define PTDP_MLP_DATA_H

#include <stdint.h>

#include "tensor.h"

struct ptdp_device;

typedef struct {
    uint64_t seed;
    int d_in, classes;
    double *teacher;      /* d_in x C, in the device arena ("other") */
    double *scores;       /* C scratch scores                         */
} ptdp_mlp_data;

int  ptdp_mlp_data_init(struct ptdp_device *dev, ptdp_mlp_data *d, uint64_t seed, int d_in, int classes);
void ptdp_mlp_data_free(struct ptdp_device *dev, ptdp_mlp_data *d);
/* Samples [first, first + rows): x (rows x d_in, may have data NULL) and labels (may be NULL). */
void ptdp_mlp_data_batch(ptdp_mlp_data *d, int64_t first, int rows, ptdp_tensor x, int64_t *labels);

#endif
