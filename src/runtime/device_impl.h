/*
 * device_impl.h — the device calls for the library only (private to src/).
 *
 * Which device the calling thread plays is set once, as the device starts
 * (comm/launch.c, for every backend): the shape-error handler and the
 * trace read it back.  And a tensor about to be written in full can skip
 * the arena's clearing.
 *
 *   launch ──ptdp_device_set_current(dev)──▶ thread-local ──ptdp_device_current()──▶ error, trace
 */

#ifndef PTDP_RUNTIME_DEVICE_IMPL_H
#define PTDP_RUNTIME_DEVICE_IMPL_H

#include "ptdp/device.h"

/* The device this thread plays, or NULL outside a device function: for the
 * rare call that has no device to hand (a NULL communicator, a tensor view
 * out of range) and must still fail the right one, with a message. */
ptdp_device *ptdp_device_current(void);

/* Set by the launcher as a device's thread starts (and NULL as it ends). */
void ptdp_device_set_current(ptdp_device *dev);
int  ptdp_tensor_alloc_uninit(struct ptdp_device *dev, ptdp_tensor *t, const char *name,
                              ptdp_mem_category cat, int rows, int cols);

/* What a linear layer's m x k by k x n product charges, in flops at the
 * device's peak: ptdp_gemm_cost_flops, or on a device computing in FP8
 * (dev->fp8) ptdp_fp8_gemm_cost_flops with the `quantized` elements of the
 * operands it quantizes (clock.h). */
double ptdp_linear_cost_flops(const ptdp_device *dev, double m, double n, double k, double quantized);

#endif
