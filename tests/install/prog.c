/*
 * prog.c — a student's own program against an installed ptdp.
 *
 *   cc prog.c $(pkg-config --cflags --libs ptdp) -o prog && ./prog
 *
 * Four devices each hold their rank; one all-reduce (sum) leaves every
 * device with 0 + 1 + 2 + 3 = 6, and each sent 2(N-1)/N of the vector's
 * bytes.  Exit 0 when both hold, 1 otherwise.
 */
#include <stdio.h>

#include "ptdp/ptdp.h"

static int hello(ptdp_device *dev, void *arg)
{
    (void)arg;
    ptdp_real x[4] = { (ptdp_real)dev->rank, 0, 0, 0 };
    int rc = ptdp_all_reduce(dev->world, x, x, 4, PTDP_REAL, PTDP_SUM);
    if (rc == 0 && x[0] != 6)
        return ptdp_fail(dev, PTDP_ECHECK, "device %d holds %g, not 6", dev->rank, (double)x[0]);
    return rc;
}

int main(void)
{
    ptdp_launch_result res;
    ptdp_launch_opts opts = { .result = &res };
    int rc = ptdp_launch(4, hello, NULL, &opts);
    if (rc != 0) {
        fprintf(stderr, "prog: %s\n", res.message);
        ptdp_launch_result_free(&res);
        return 1;
    }
    double sent = res.devices[0].comm.total_sent, want = 2.0 * 3 / 4 * 4 * sizeof(ptdp_real);
    printf("ptdp (%s): every device holds 6; device 0 sent %.0f B (2(N-1)/N S = %.0f B)\n",
           PTDP_REAL_NAME, sent, want);
    ptdp_launch_result_free(&res);
    return sent == want ? 0 : 1;
}
