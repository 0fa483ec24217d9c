/*
 * device.c — the services a device's code uses: fail, allocate, compute.
 *
 *   ptdp_fail(dev, code, "…")     format the message; the waiting layer
 *                                 records the first failure of the world
 *                                 and wakes every device (wait.h)
 *   ptdp_alloc / ptdp_tensor_alloc   from the device's arena; an
 *                                 out-of-memory names the tensor and fails
 *                                 the device
 *   ptdp_compute(dev, name, flops)   the virtual clock moves by flops / peak,
 *                                 and the trace records what ran
 *
 * Every module above (comm, nn, models, parallel, train) reaches the device
 * only through these, so a device could be a thread, a process or a GPU.
 */
#include "ptdp/device.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ptdp/error.h"
#include "ptdp/trace.h"
#include "runtime/wait.h"
#include "core/arena_impl.h"
#include "core/error_impl.h"
#include "runtime/device_impl.h"

/* ------------------------------------------------------------ failure */

int ptdp_fail(ptdp_device *dev, int code, const char *fmt, ...)
{
    char msg[PTDP_MSG_MAX];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    return ptdp_world_fail(dev, code, msg);
}

bool ptdp_aborted(const ptdp_device *dev)
{
    return ptdp_world_aborted(dev->w);
}

/* One device per thread: C11's thread-local storage, no lock needed. */
static _Thread_local ptdp_device *current_device;

ptdp_device *ptdp_device_current(void)
{
    return current_device;
}

/* A shape error (error.h) inside a device fails that device; outside any
 * device it stops the program, as assert() would. */
static void fail_current(const char *msg)
{
    if (current_device != NULL) {
        ptdp_fail(current_device, PTDP_EINVAL, "%s", msg);
        return;
    }
    fprintf(stderr, "ptdp: %s\n", msg);
    abort();
}

void ptdp_device_set_current(ptdp_device *dev)
{
    current_device = dev;
    ptdp_set_shape_handler(fail_current);
}

/* ------------------------------------------------------------ memory */

static void *alloc(ptdp_device *dev, size_t bytes, ptdp_mem_category cat, const char *name, bool zero)
{
    void *p = NULL;
    char msg[PTDP_MSG_MAX];
    int rc = zero ? ptdp_arena_alloc(dev->arena, bytes, cat, name, &p, msg, sizeof msg)
                  : ptdp_arena_alloc_uninit(dev->arena, bytes, cat, name, &p, msg, sizeof msg);
    if (rc != 0) {
        ptdp_fail(dev, rc, "%s", msg);
        return NULL;
    }
    return p;
}

void *ptdp_alloc(ptdp_device *dev, size_t bytes, ptdp_mem_category cat, const char *name)
{
    return alloc(dev, bytes, cat, name, true);
}

void *ptdp_alloc_uninit(ptdp_device *dev, size_t bytes, ptdp_mem_category cat, const char *name)
{
    return alloc(dev, bytes, cat, name, false);
}

void ptdp_free(ptdp_device *dev, void *p)
{
    ptdp_arena_free(dev->arena, p);
}

/* ----------------------------------------------------------- compute */

void ptdp_compute_seconds(ptdp_device *dev, const char *name, double seconds, double wall_start)
{
    double v0 = dev->clock.now;
    dev->clock.now += seconds;
    dev->clock.compute_s += seconds;
    if (dev->trace) {
        ptdp_trace_event e;
        memset(&e, 0, sizeof e);
        snprintf(e.name, sizeof e.name, "%s", name ? name : "compute");
        snprintf(e.cat, sizeof e.cat, "compute");
        e.v0 = v0;
        e.v1 = dev->clock.now;
        e.w0 = wall_start - dev->wall0;
        e.w1 = ptdp_wall_now() - dev->wall0;
        ptdp_trace_add(dev->trace, &e);
    }
}

void ptdp_compute(ptdp_device *dev, const char *name, double flops, double wall_start)
{
    double peak = ptdp_profile_peak(dev->profile, dev->bf16);
    ptdp_compute_seconds(dev, name, peak > 0 ? flops / peak : 0.0, wall_start);
}

/* Under --fp8 at the FP8 peak, with the quantization passes (clock.h). */
double ptdp_linear_cost_flops(const ptdp_device *dev, double m, double n, double k, double quantized)
{
    if (dev->fp8)
        return ptdp_fp8_gemm_cost_flops(dev->profile, dev->bf16, m, n, k, quantized);
    return ptdp_gemm_cost_flops(dev->profile, m, n, k);
}

/* Owned tensors live in the arena too. */
static int tensor_alloc(struct ptdp_device *dev, ptdp_tensor *t, const char *name,
                        ptdp_mem_category cat, int rows, int cols, bool zero)
{
    memset(t, 0, sizeof *t);
    if (name == NULL)
        name = "(unnamed)";
    if (rows < 0 || cols < 0)
        return ptdp_fail(dev, PTDP_EINVAL, "tensor '%s': bad shape %d x %d", name, rows, cols);

    size_t bytes = (size_t)rows * (size_t)cols * sizeof(ptdp_real);
    ptdp_real *data = alloc(dev, bytes, cat, name, zero);
    if (data == NULL)
        return PTDP_ENOMEM;             /* ptdp_alloc failed the device */

    t->data = data;
    t->rows = rows;
    t->cols = cols;
    t->stride = cols;
    t->owned = true;
    snprintf(t->name, sizeof t->name, "%s", name);
    return 0;
}

int ptdp_tensor_alloc(struct ptdp_device *dev, ptdp_tensor *t, const char *name,
                      ptdp_mem_category cat, int rows, int cols)
{
    return tensor_alloc(dev, t, name, cat, rows, cols, true);
}

int ptdp_tensor_alloc_uninit(struct ptdp_device *dev, ptdp_tensor *t, const char *name,
                             ptdp_mem_category cat, int rows, int cols)
{
    return tensor_alloc(dev, t, name, cat, rows, cols, false);
}

void ptdp_tensor_free(struct ptdp_device *dev, ptdp_tensor *t)
{
    if (t == NULL || !t->owned)
        return;                         /* a view owns nothing */
    ptdp_free(dev, t->data);
    memset(t, 0, sizeof *t);
}
