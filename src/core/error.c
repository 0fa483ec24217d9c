/*
 * error.c — names for the status codes of error.h.
 *
 * A status code says *what kind* of failure happened; the device's error
 * message (ptdp_fail) says the rest.  These names are what a message prints
 * when it has nothing better, e.g. "ptdp: out of memory".
 */
#include "ptdp/error.h"

#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include "core/error_impl.h"

const char *ptdp_strerror(int code)
{
    switch (code) {
    case PTDP_OK:        return "success";
    case PTDP_EINVAL:    return "invalid argument";
    case PTDP_ENOMEM:    return "out of memory";
    case PTDP_EABORTED:  return "aborted because another device failed";
    case PTDP_ETIMEDOUT: return "timed out (watchdog)";
    case PTDP_EMISMATCH: return "mismatched collective calls";
    case PTDP_EIO:       return "input/output error";
    case PTDP_ECORRUPT:  return "corrupt or truncated file";
    case PTDP_ECHECK:    return "equivalence check failed";
    case PTDP_EUSER:     return "user code failed";
    case PTDP_ENONFINITE: return "training diverged";
    default:             return "unknown error";
    }
}

/* Who hears of a shape error: the runtime's handler fails the calling
 * device; without one (a program that uses the ops outside any device)
 * the message goes to stderr and the program stops. */
static _Atomic(ptdp_shape_handler) shape_handler;

void ptdp_set_shape_handler(ptdp_shape_handler h)
{
    atomic_store(&shape_handler, h);
}

void ptdp_shape_error(const char *func, const char *fmt, ...)
{
    char what[384], msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(what, sizeof what, fmt, ap);
    va_end(ap);
    snprintf(msg, sizeof msg, "%s: %s", func, what);
    ptdp_shape_handler h = atomic_load(&shape_handler);
    if (h != NULL) {
        h(msg);
        return;
    }
    fprintf(stderr, "ptdp: %s\n", msg);
    abort();
}
