/*
 * json.c — JSON numbers that stay JSON (json.h).
 */
#include "ptdp/json.h"

#include <math.h>
#include <stdio.h>

const char *ptdp_json_number(double x, char buf[PTDP_JSON_NUMBER_MAX])
{
    if (!isfinite(x))
        snprintf(buf, PTDP_JSON_NUMBER_MAX, "null");
    else
        snprintf(buf, PTDP_JSON_NUMBER_MAX, "%.17g", x);
    return buf;
}
