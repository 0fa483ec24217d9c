/*
 * json.h — numbers in the JSON ptdp writes, always valid JSON.
 *
 * JSON has no NaN and no infinity: printf's "nan" or "-inf" in a report
 * makes the whole file unreadable (Python's json module refuses it).  Every
 * number ptdp writes into a log, a report or a trace goes through
 * ptdp_json_number, which writes a non-finite value as null — "no number
 * here" — and every finite double with 17 significant digits, enough to
 * read back the same bits.
 *
 *     fprintf(f, "{\"loss\": %s}\n", ptdp_json_number(loss, buf));
 *         loss = 2.5   {"loss": 2.5}
 *         loss = NaN   {"loss": null}
 */
#ifndef PTDP_JSON_H
#define PTDP_JSON_H

#include <stdio.h>

#define PTDP_JSON_NUMBER_MAX 32

/* x as a JSON value in buf (PTDP_JSON_NUMBER_MAX bytes): "%.17g", or "null"
 * when x is NaN or infinite.  Returns buf. */
const char *ptdp_json_number(double x, char buf[PTDP_JSON_NUMBER_MAX]);

/* text as a JSON string, quotes included: " and \ escaped, control
 * characters as \u00XX; other bytes (UTF-8) as they are. */
void ptdp_json_write_string(FILE *f, const char *text);

#endif
