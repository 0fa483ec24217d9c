/*
 * html.h — one self-contained HTML page: what a command computed, readable
 * in a browser straight from disk (no network, no other file).
 *
 * A page is a growable text buffer, like a picture (svg.h): open it with a
 * title, add markup, numbers, pictures and the data in order, close it,
 * save it (atomically, file.h):
 *
 *     ptdp_html h;
 *     ptdp_html_begin(&h, "1f1b, p = 4, m = 8");    <!DOCTYPE html>…<h1>1f1b, p = 4, m = 8</h1>
 *     ptdp_html_raw(&h, "<p>bubble ");
 *     ptdp_html_number(&h, "bubble.measured", 0.2727…, 4);
 *                                   <span data-key="bubble.measured" data-round="4">0.2727</span>
 *     ptdp_html_svg(&h, &picture);                  <svg …>…</svg>, inline
 *     ptdp_html_data(&h, json, len);                <script type="application/json" id="ptdp-data">
 *     ptdp_html_script(&h, "…");                    <script>…</script>
 *     ptdp_html_end(&h);                            </body></html>
 *     ptdp_html_save(&h, "page.html", msg, sizeof msg);
 *     ptdp_html_free(&h);
 *
 * The contract that makes a page testable without a browser: the data is
 * the command's own JSON output (its --report or --json), embedded whole;
 * every number shown comes out of that JSON by a key,
 *
 *     data-key="stages.2.idle"     the JSON's ["stages"][2]["idle"]
 *     text                         the value: the shortest text that reads back the
 *                                  same double, or with data-round="N" printf's %.Ng
 *                                  (of x / S with data-scale="S": bytes in GiB)
 *
 * so a script (tests/cli/html_page.py) can read the page and check every
 * number against the JSON.  Errors are sticky, as in svg.h: one check at
 * the end (ptdp_html_end, ptdp_html_save).
 */
#ifndef PTDP_HTML_H
#define PTDP_HTML_H

#include <stddef.h>

#include "svg.h"

typedef struct {
    char  *buf;        /* the page so far, NUL-terminated                       */
    size_t len, cap;
    int    closed;     /* 1 once </html> is written                             */
    int    status;     /* 0, or the first error (PTDP_ENOMEM, PTDP_EINVAL)     */
} ptdp_html;

/* <!DOCTYPE html>, the head (charset, the title, a small style sheet), and
 * <body><h1>title</h1>.  0 or PTDP_ENOMEM. */
int  ptdp_html_begin(ptdp_html *h, const char *title);

/* The caller's own markup, as is ("<h2>", "<table>", "</p>"). */
void ptdp_html_raw(ptdp_html *h, const char *markup);

/* printf-style text, escaped: & < > " ' become entities. */
void ptdp_html_text(ptdp_html *h, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* A number the JSON holds at `key`: <span data-key="key">x</span>, x the
 * shortest of %.15g, %.16g, %.17g that reads back the same double; with
 * digits > 0, <span data-key="key" data-round="digits">%.{digits}g</span>.
 * A NaN or an infinity is "null", as in the JSON (json.h). */
void ptdp_html_number(ptdp_html *h, const char *key, double x, int digits);

/* The same in a unit: x / scale (2^30 for GiB), printf's %.{digits}g of
 * it, <span data-key="key" data-scale="scale" data-round="digits">. */
void ptdp_html_scaled(ptdp_html *h, const char *key, double x, double scale, int digits);

/* A string the JSON holds at `key`: <span data-key="key">text</span>. */
void ptdp_html_string(ptdp_html *h, const char *key, const char *text);

/* A closed picture (svg.h) inline: its text as is. */
void ptdp_html_svg(ptdp_html *h, const ptdp_svg *svg);

/* The command's JSON output, whole: <script type="application/json"
 * id="ptdp-data">…</script>, every < > & written \u003c \u003e \u0026 —
 * which JSON reads back as the same characters (they can only stand in
 * strings), so "</script>" in a name cannot end the element. */
void ptdp_html_data(ptdp_html *h, const char *json, size_t len);
/* The same under another id (a second set of data: "ptdp-log"). */
void ptdp_html_data_as(ptdp_html *h, const char *id, const char *json, size_t len);

/* A script of the page's own, as is.  One holding "</" would end its
 * element early: refused (PTDP_EINVAL). */
void ptdp_html_script(ptdp_html *h, const char *js);

/* </body></html>: 0, or the first error. */
int  ptdp_html_end(ptdp_html *h);

/* Write the closed page to `path` atomically (file.h).  0, or PTDP_EINVAL
 * (not closed, an earlier error) / PTDP_EIO with the reason in msg. */
int  ptdp_html_save(const ptdp_html *h, const char *path, char *msg, size_t msglen);

void ptdp_html_free(ptdp_html *h);

/* A table row <tr><th>name</th><td>value</td></tr>, the value shown by
 * key as ptdp_html_number / ptdp_html_string show it. */
void ptdp_html_row_number(ptdp_html *h, const char *name, const char *key, double x, int digits);
void ptdp_html_row_string(ptdp_html *h, const char *name, const char *key, const char *text);

/* The last three at once, as every page ends: with rc 0 (the page's own
 * parts went well) close it and save it to `path`; else say in msg that
 * making it failed.  The page freed either way.  0, or the first error. */
int  ptdp_html_finish(ptdp_html *h, int rc, const char *path, char *msg, size_t msglen);

#endif
