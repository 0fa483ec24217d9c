/*
 * error.h — status codes shared by every ptdp module.
 *
 * Functions return an int: 0 (PTDP_OK) on success, a negative PTDP_E… code
 * on failure.  The human-readable story of a failure lives in the device's
 * error message (ptdp_fail in device.h), never in exit() or abort() calls:
 * only the CLI decides how a process ends.
 */
#ifndef PTDP_ERROR_H
#define PTDP_ERROR_H

enum {
    PTDP_OK        =  0,
    PTDP_EINVAL    = -1,  /* a bad argument: sizes, ranks, names            */
    PTDP_ENOMEM    = -2,  /* a device arena (or the host) ran out of memory */
    PTDP_EABORTED  = -3,  /* another device failed; this one stopped        */
    PTDP_ETIMEDOUT = -4,  /* the watchdog fired: a group never completed    */
    PTDP_EMISMATCH = -5,  /* devices of a group called different collectives */
    PTDP_EIO       = -6,  /* a file could not be read or written            */
    PTDP_ECORRUPT  = -7,  /* a file is truncated, corrupt or of wrong shape  */
    PTDP_ECHECK    = -8,  /* an equivalence check exceeded its tolerance    */
    PTDP_EUSER     = -9,  /* user code returned a failure of its own        */
    PTDP_ENONFINITE = -10 /* a loss or gradient norm is NaN or infinite, or
                             the norm far above its start (train.h): diverged */
};

/* A short constant name for a code, e.g. "out of memory". */
const char *ptdp_strerror(int code);

/* Shape preconditions of the tensor views and the numerical ops: a view out
 * of range, operands that do not fit, a label outside the classes.  Inside
 * a device the device fails with the message, naming the function and the
 * shapes (the runtime installs the handler that does it), and the op does
 * nothing; outside a device the program stops with the message, as
 * assert() would.
 *
 *     if (!PTDP_REQUIRE(r0 >= 0 && r0 + n <= t.rows, "rows [%d, %d) of %d", r0, r0 + n, t.rows))
 *         return empty;                                                            */
#define PTDP_REQUIRE(cond, ...) ((cond) ? 1 : (ptdp_shape_error(__func__, __VA_ARGS__), 0))
void ptdp_shape_error(const char *func, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

#endif
