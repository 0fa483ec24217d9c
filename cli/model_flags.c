/*
 * model_flags.c — one table of the model's flags, and the readers over it.
 *
 *     flag         field of ptdp_model_config   smallest
 *     --d-in       d_in                          1
 *     --hidden     hidden                        1
 *     --ffn        ffn                           1
 *     --layers     layers                        1
 *     --classes    classes                       2   (softmax over one class learns nothing)
 *
 * The largest values come from the command (ptdp_model_flag_limits), since
 * what is reasonable differs: `ptdp train` takes what an arena can hold,
 * `ptdp bench train` keeps to what a benchmark run can finish.
 */
#include "model_flags.h"

#include <stddef.h>
#include <string.h>

static const struct {
    const char *name;
    int smallest;
} flags[] = {
    { "--d-in", 1 }, { "--hidden", 1 }, { "--ffn", 1 }, { "--layers", 1 }, { "--classes", 2 },
};
#define NFLAGS (int)(sizeof flags / sizeof flags[0])

/* Index of the current argument in flags[], or -1. */
static int which(const ptdp_args *a)
{
    for (int i = 0; i < NFLAGS; i++)
        if (ptdp_args_is(a, flags[i].name))
            return i;
    return -1;
}

bool ptdp_model_flag_is(const ptdp_args *a)
{
    return which(a) >= 0;
}

int ptdp_model_flag_read(ptdp_args *a, const ptdp_model_flag_limits *max, ptdp_model_config *m)
{
    /* in the order of flags[] */
    int *field[] = { &m->d_in, &m->hidden, &m->ffn, &m->layers, &m->classes };
    const int largest[] = { max->d_in, max->hidden, max->ffn, max->layers, max->classes };
    int i = which(a);
    if (i < 0)
        return ptdp_args_unknown(a);
    return ptdp_args_int(a, flags[i].smallest, largest[i], field[i]);
}

void ptdp_model_flags_finish(ptdp_model_config *m)
{
    if (m->ffn == 0)
        m->ffn = 4 * m->hidden;
}

void ptdp_model_flags_help(FILE *f, const ptdp_model_config *d)
{
    char ffn[16] = "4*hidden";
    if (d->ffn != 0)
        snprintf(ffn, sizeof ffn, "%d", d->ffn);
    fprintf(f, "  --d-in N --hidden N --ffn N --layers N --classes N   (default %d, %d, %s, %d, %d)\n",
            d->d_in, d->hidden, ffn, d->layers, d->classes);
}
