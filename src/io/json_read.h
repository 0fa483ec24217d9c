/*
 * json_read.h — a small, strict JSON reader for untrusted text (private to the library).
 *
 * The safetensors header is JSON written by someone else, so it is read with
 * a cursor the caller drives: the caller knows the grammar it expects and
 * asks for the next piece — a string, an integer, a '{' — and the reader
 * either hands it over and moves past it, or fails with a message naming the
 * byte where the text went wrong.  No tree is built; only strings allocate.
 *
 *     {"w":{"dtype":"F32","shape":[2,3],"data_offsets":[0,24]}}
 *      ^cursor      ptdp_json_key → "w"; ptdp_json_expect '{'; ptdp_json_key → "dtype" …
 *
 * The subset accepted is what the format needs, no more:
 *
 *   - whitespace: space, tab, newline, carriage return (RFC 8259);
 *   - strings: well-formed UTF-8 (no overlong forms, no surrogates, nothing
 *     above U+10FFFF), no raw control characters, the escapes \" \\ \/ \b
 *     \f \n \r \t and \uXXXX, a surrogate pair \uD83D\uDE00 decoding to one
 *     code point — but never \u0000, which would cut a C string short;
 *   - numbers: non-negative integers that fit in 64 bits, without sign,
 *     leading zero, fraction or exponent (shapes and byte offsets);
 *   - arrays of such integers, and objects, whose members the caller walks.
 *
 * true, false, null, negative and fractional numbers are not needed, so they
 * are not accepted.  Why so strict?  Two readers that disagree about one
 * file see two different checkpoints: a lenient reader that takes a
 * trailing comma, a NUL inside a name or a byte that is not UTF-8 accepts
 * files that the reference reader (and PyTorch) refuse.  Refusing everything
 * outside the standard keeps ptdp's view and theirs the same.
 *
 * Every failure is PTDP_ECORRUPT (PTDP_ENOMEM if a string cannot be
 * allocated) with a message "<source>: bad <kind> at byte <n>: <what>".
 */
#ifndef PTDP_JSON_READ_H
#define PTDP_JSON_READ_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

typedef struct {
    const unsigned char *start, *p, *end;   /* the text; p is the cursor    */
    const char *source;                     /* the file, for messages       */
    const char *kind;                       /* what the text is: "header JSON" */
    char *msg;                              /* where failures are described */
    size_t msglen;
} ptdp_json;

/* Well-formed UTF-8, as the JSON standard requires of every string. */
bool ptdp_utf8_valid(const unsigned char *s, size_t n);

/* A cursor at the start of `len` bytes of text. */
void ptdp_json_init(ptdp_json *j, const unsigned char *text, size_t len, const char *source,
                    const char *kind, char *msg, size_t msglen);

/* Fail at the cursor: PTDP_ECORRUPT, "<source>: bad <kind> at byte <n>: <what>". */
int ptdp_json_error(ptdp_json *j, const char *what);

/* The next byte after whitespace, or -1 at the end of the text; not consumed. */
int ptdp_json_peek(ptdp_json *j);

/* After whitespace: consume `c` if it comes next (true), else leave the cursor. */
bool ptdp_json_accept(ptdp_json *j, char c);

/* After whitespace: `c` must come next (it is consumed), else fail with `what`. */
int ptdp_json_expect(ptdp_json *j, char c, const char *what);

/* A string, decoded to UTF-8 in a fresh malloc'd, NUL-terminated buffer
 * (*out, its length *len); the caller frees it. */
int ptdp_json_string(ptdp_json *j, char **out, size_t *len);

/* A non-negative integer. */
int ptdp_json_uint(ptdp_json *j, uint64_t *out);

/* [u, u, …] with at most `max` elements (else fail with `too_many`). */
int ptdp_json_uint_array(ptdp_json *j, uint64_t *vals, int max, int *count,
                         const char *too_many);

/* Walking an object:
 *
 *     int rc = ptdp_json_expect(j, '{', "expected an object");
 *     bool more = rc == 0 && !ptdp_json_accept(j, '}');    (where {} is allowed)
 *     while (rc == 0 && more) {
 *         if ((rc = ptdp_json_key(j, &key, &len)) != 0) break;      "name" :
 *         rc = <read the value>;
 *         free(key);
 *         if (rc == 0) rc = ptdp_json_next(j, '}', &more, "expected ',' or '}'");
 *     }
 *
 * ptdp_json_key reads a member's name and its ':' (on failure nothing is
 * left to free); ptdp_json_next reads what follows a member or an element:
 * ',' (*more = true) or the closing `close` (*more = false), else fails. */
int ptdp_json_key(ptdp_json *j, char **key, size_t *len);
int ptdp_json_next(ptdp_json *j, char close, bool *more, const char *what);

/* Only whitespace may remain (a safetensors header is padded with spaces). */
int ptdp_json_end(ptdp_json *j, const char *what);

#endif
