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

void ptdp_json_write_string(FILE *f, const char *text)
{
    fputc('"', f);
    for (const unsigned char *p = (const unsigned char *)text; *p; p++) {
        if (*p == '"' || *p == '\\')
            fprintf(f, "\\%c", *p);
        else if (*p < 0x20)
            fprintf(f, "\\u%04x", *p);
        else
            fputc(*p, f);
    }
    fputc('"', f);
}
