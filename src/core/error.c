/*
 * error.c — names for the status codes of error.h.
 *
 * A status code says *what kind* of failure happened; the device's error
 * message (ptdp_fail) says the rest.  These names are what a message prints
 * when it has nothing better, e.g. "ptdp: out of memory".
 */
#include "ptdp/error.h"

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
    default:             return "unknown error";
    }
}
