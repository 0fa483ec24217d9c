/*
 * json_read.c — a small, strict JSON reader for untrusted text.
 *
 * The pieces of a recursive-descent parser, without a grammar: the caller
 * (safetensors_open.c) knows the grammar and drives the cursor through it
 * (see json_read.h); each function here reads one piece and moves past it:
 *
 *     {"shape" : [2, 3]}
 *     ^ expect '{'
 *      ^^^^^^^^^ key: string, then ':'
 *                ^^^^^^ uint_array: '[' uint { ',' uint } ']'
 *                      ^ next: ',' (more members) or '}' (done)
 *
 * The order of the file is the order of the checks: UTF-8 (a string's bytes
 * are validated before they are decoded), then the cursor's moves, then the
 * values — strings with their escapes, integers, arrays of integers — and
 * last the walk through an object.  Every length is checked against the
 * bytes really present before a byte is read.
 */
#include "io/json_read.h"

#include "ptdp/error.h"

#include <stdio.h>
#include <stdlib.h>

/* ------------------------------------------------------------------------ */
/* UTF-8                                                                     */
/* ------------------------------------------------------------------------ */

/* Each code point is one of
 *
 *     0xxxxxxx                                   U+0000..U+007F
 *     110xxxxx 10xxxxxx                          U+0080..U+07FF
 *     1110xxxx 10xxxxxx 10xxxxxx                 U+0800..U+FFFF
 *     11110xxx 10xxxxxx 10xxxxxx 10xxxxxx        U+10000..U+10FFFF
 *
 * using the shortest form (no overlong encodings), and never a UTF-16
 * surrogate U+D800..U+DFFF.  Both rules narrow only the second byte's range,
 * which is why the table below is about `lo` and `hi`. */
bool ptdp_utf8_valid(const unsigned char *s, size_t n)
{
    size_t i = 0;
    while (i < n) {
        unsigned c = s[i];
        size_t len;
        unsigned lo = 0x80, hi = 0xBF;   /* allowed range of the 2nd byte */
        if (c < 0x80) { i++; continue; }
        else if (c >= 0xC2 && c <= 0xDF) len = 2;
        else if (c >= 0xE0 && c <= 0xEF) {
            len = 3;
            if (c == 0xE0) lo = 0xA0;          /* overlong */
            if (c == 0xED) hi = 0x9F;          /* surrogates */
        } else if (c >= 0xF0 && c <= 0xF4) {
            len = 4;
            if (c == 0xF0) lo = 0x90;          /* overlong */
            if (c == 0xF4) hi = 0x8F;          /* beyond U+10FFFF */
        } else return false;
        if (n - i < len || s[i + 1] < lo || s[i + 1] > hi) return false;
        for (size_t k = 2; k < len; k++)
            if (s[i + k] < 0x80 || s[i + k] > 0xBF) return false;
        i += len;
    }
    return true;
}

/* ------------------------------------------------------------------------ */
/* The cursor                                                                */
/* ------------------------------------------------------------------------ */

void ptdp_json_init(ptdp_json *j, const unsigned char *text, size_t len, const char *source,
                    const char *kind, char *msg, size_t msglen)
{
    *j = (ptdp_json){text, text, text + len, source, kind, msg, msglen};
}

int ptdp_json_error(ptdp_json *j, const char *what)
{
    if (j->msg && j->msglen > 0)
        snprintf(j->msg, j->msglen, "%s: bad %s at byte %zu: %s", j->source, j->kind,
                 (size_t)(j->p - j->start), what);
    return PTDP_ECORRUPT;
}

static void skip_ws(ptdp_json *j)
{
    while (j->p < j->end && (*j->p == ' ' || *j->p == '\t' || *j->p == '\n' || *j->p == '\r'))
        j->p++;
}

int ptdp_json_peek(ptdp_json *j)
{
    skip_ws(j);
    return j->p < j->end ? *j->p : -1;
}

bool ptdp_json_accept(ptdp_json *j, char c)
{
    if (ptdp_json_peek(j) != (unsigned char)c) return false;
    j->p++;
    return true;
}

int ptdp_json_expect(ptdp_json *j, char c, const char *what)
{
    return ptdp_json_accept(j, c) ? 0 : ptdp_json_error(j, what);
}

/* ------------------------------------------------------------------------ */
/* Strings                                                                   */
/* ------------------------------------------------------------------------ */

/* The four hex digits of a \u escape. */
static int hex4(ptdp_json *j, unsigned *out)
{
    unsigned v = 0;
    if (j->end - j->p < 4) return ptdp_json_error(j, "truncated \\u escape");
    for (int i = 0; i < 4; i++) {
        unsigned c = *j->p++, d;
        if (c >= '0' && c <= '9') d = c - '0';
        else if (c >= 'a' && c <= 'f') d = c - 'a' + 10;
        else if (c >= 'A' && c <= 'F') d = c - 'A' + 10;
        else return ptdp_json_error(j, "bad hex digit in \\u escape");
        v = v * 16 + d;
    }
    *out = v;
    return 0;
}

/* The code point of a \u escape (its "\u" already read).  Code points above
 * U+FFFF are written as a UTF-16 surrogate pair, high half then low half:
 *
 *     \uD83D\uDE00  →  0x10000 + (0xD83D − 0xD800)·2¹⁰ + (0xDE00 − 0xDC00) = U+1F600
 *
 * and half a pair is not a character. */
static int unicode_escape(ptdp_json *j, unsigned *out)
{
    unsigned cp = 0, lo = 0;
    int rc = hex4(j, &cp);
    if (rc != 0) return rc;
    if (cp >= 0xDC00 && cp <= 0xDFFF) return ptdp_json_error(j, "lone low surrogate");
    if (cp >= 0xD800 && cp <= 0xDBFF) {
        if (j->end - j->p < 2 || j->p[0] != '\\' || j->p[1] != 'u')
            return ptdp_json_error(j, "high surrogate without its low half");
        j->p += 2;
        if ((rc = hex4(j, &lo)) != 0) return rc;
        if (lo < 0xDC00 || lo > 0xDFFF) return ptdp_json_error(j, "bad surrogate pair");
        cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
    }
    if (cp == 0) return ptdp_json_error(j, "NUL character (\\u0000) in string");
    *out = cp;
    return 0;
}

/* A code point as 1..4 bytes of UTF-8 (the table above ptdp_utf8_valid). */
static size_t put_utf8(char *s, unsigned cp)
{
    if (cp < 0x80) {
        s[0] = (char)cp;
        return 1;
    }
    if (cp < 0x800) {
        s[0] = (char)(0xC0 | (cp >> 6));
        s[1] = (char)(0x80 | (cp & 0x3F));
        return 2;
    }
    if (cp < 0x10000) {
        s[0] = (char)(0xE0 | (cp >> 12));
        s[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
        s[2] = (char)(0x80 | (cp & 0x3F));
        return 3;
    }
    s[0] = (char)(0xF0 | (cp >> 18));
    s[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
    s[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
    s[3] = (char)(0x80 | (cp & 0x3F));
    return 4;
}

/* First find the closing quote (skipping escaped characters) and validate
 * the UTF-8 in between, then decode.  The decoded form is never longer than
 * the literal (an escape of 2, 6 or 12 bytes yields at most 4), so one
 * allocation of the literal's size suffices. */
int ptdp_json_string(ptdp_json *j, char **out, size_t *len)
{
    if (ptdp_json_expect(j, '"', "expected a string") != 0) return PTDP_ECORRUPT;
    const unsigned char *q = j->p;
    while (q < j->end && *q != '"') q += (*q == '\\' && j->end - q > 1) ? 2 : 1;
    if (q >= j->end) return ptdp_json_error(j, "unterminated string");
    if (!ptdp_utf8_valid(j->p, (size_t)(q - j->p)))
        return ptdp_json_error(j, "string is not valid UTF-8");

    char *s = malloc((size_t)(q - j->p) + 1);
    if (!s) {
        if (j->msg && j->msglen > 0)
            snprintf(j->msg, j->msglen, "%s: out of host memory", j->source);
        return PTDP_ENOMEM;
    }
    size_t n = 0;
    int rc = 0;
    while (rc == 0 && *j->p != '"') {
        unsigned c = *j->p++, cp = 0;
        if (c < 0x20) { j->p--; rc = ptdp_json_error(j, "control character in string"); break; }
        if (c != '\\') { s[n++] = (char)c; continue; }
        c = *j->p++;
        switch (c) {
        case '"': case '\\': case '/': s[n++] = (char)c; break;
        case 'b': s[n++] = '\b'; break;
        case 'f': s[n++] = '\f'; break;
        case 'n': s[n++] = '\n'; break;
        case 'r': s[n++] = '\r'; break;
        case 't': s[n++] = '\t'; break;
        case 'u':
            if ((rc = unicode_escape(j, &cp)) == 0) n += put_utf8(s + n, cp);
            break;
        default: j->p--; rc = ptdp_json_error(j, "unknown escape in string");
        }
    }
    if (rc != 0) { free(s); return rc; }
    j->p++;   /* the closing quote */
    s[n] = '\0';
    *out = s;
    *len = n;
    return 0;
}

/* ------------------------------------------------------------------------ */
/* Numbers and arrays of them                                                */
/* ------------------------------------------------------------------------ */

/* JSON's integer grammar (no leading zeros, and here no sign); fractions,
 * exponents and anything beyond 2⁶⁴ − 1 are refused.  v·10 + d fits in 64
 * bits exactly when v ≤ (UINT64_MAX − d) / 10. */
int ptdp_json_uint(ptdp_json *j, uint64_t *out)
{
    skip_ws(j);
    const unsigned char *first = j->p;
    uint64_t v = 0;
    while (j->p < j->end && *j->p >= '0' && *j->p <= '9') {
        unsigned d = (unsigned)(*j->p - '0');
        if (v > (UINT64_MAX - d) / 10) return ptdp_json_error(j, "number too large");
        v = v * 10 + d;
        j->p++;
    }
    if (j->p == first) return ptdp_json_error(j, "expected a non-negative integer");
    if (*first == '0' && j->p - first > 1) return ptdp_json_error(j, "number with a leading zero");
    if (j->p < j->end && (*j->p == '.' || *j->p == 'e' || *j->p == 'E'))
        return ptdp_json_error(j, "expected an integer, found a fraction or exponent");
    *out = v;
    return 0;
}

int ptdp_json_uint_array(ptdp_json *j, uint64_t *vals, int max, int *count,
                         const char *too_many)
{
    *count = 0;
    int rc = ptdp_json_expect(j, '[', "expected '['");
    bool more = rc == 0 && !ptdp_json_accept(j, ']');
    while (rc == 0 && more) {
        if (*count == max) return ptdp_json_error(j, too_many);
        rc = ptdp_json_uint(j, &vals[(*count)++]);
        if (rc == 0) rc = ptdp_json_next(j, ']', &more, "expected ',' or ']' in array");
    }
    return rc;
}

/* ------------------------------------------------------------------------ */
/* Objects                                                                   */
/* ------------------------------------------------------------------------ */

int ptdp_json_key(ptdp_json *j, char **key, size_t *len)
{
    int rc = ptdp_json_string(j, key, len);
    if (rc != 0) return rc;
    if ((rc = ptdp_json_expect(j, ':', "expected ':'")) != 0) {
        free(*key);
        *key = NULL;
    }
    return rc;
}

/* A ',' must be followed by another member or element: "[1,]" fails there,
 * when the caller asks for it, as the standard wants. */
int ptdp_json_next(ptdp_json *j, char close, bool *more, const char *what)
{
    *more = ptdp_json_accept(j, ',');
    return *more ? 0 : ptdp_json_expect(j, close, what);
}

int ptdp_json_end(ptdp_json *j, const char *what)
{
    skip_ws(j);
    return j->p == j->end ? 0 : ptdp_json_error(j, what);
}
