/*
 * error_impl.h — where a shape error goes, set by the runtime (private to
 * src/).
 *
 *   PTDP_CHECK_SHAPE fails ──▶ ptdp_shape_error ──▶ the handler
 *                                                   (runtime/device.c: the
 *                                                   calling device's error)
 *
 * core/ sits below the devices, so it cannot name one: the runtime
 * installs the handler that can.
 */

#ifndef PTDP_CORE_ERROR_IMPL_H
#define PTDP_CORE_ERROR_IMPL_H

#include "ptdp/error.h"

typedef void (*ptdp_shape_handler)(const char *msg);
void ptdp_set_shape_handler(ptdp_shape_handler h);

#endif
