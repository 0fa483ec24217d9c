/*
 * html.c — a self-contained page: markup, numbers by key, pictures, data (html.h).
 *
 * A page ptdp writes is one file that opens from disk with nothing else:
 *
 *   <!DOCTYPE html><html><head> <style>…</style> </head><body>
 *     <h1>…</h1>   text and tables, each number <span data-key="k">…</span>
 *     <svg>…</svg> pictures inline (svg.h)
 *     <script type="application/json" id="ptdp-data">{ the command's JSON }</script>
 *     <script> a few lines that make the pictures answer the mouse </script>
 *   </body></html>
 *
 * Two places where text could break out of where it belongs:
 *
 *   in the markup       "a<b"        ──► "a&lt;b"                 (entities)
 *   in a <script>       "</script>"  ──► "\u003c/script\u003e"    (JSON escapes)
 *
 * A <script> element ends at the first "</script" whatever the JavaScript
 * around it, so the data's < > & are written as JSON's \u escapes, which
 * read back the same; JSON outside its strings has no such characters.
 */
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ptdp/error.h"
#include "ptdp/file.h"
#include "ptdp/html.h"

/* ---- the buffer, as svg.c's ------------------------------------------------- */

static int reserve(ptdp_html *h, size_t more)
{
    if (h->status)
        return h->status;
    if (h->closed)
        return h->status = PTDP_EINVAL;    /* nothing after </html> */
    if (h->len + more + 1 <= h->cap)
        return 0;
    size_t cap = h->cap ? h->cap : 8192;
    while (cap < h->len + more + 1)
        cap *= 2;
    char *p = realloc(h->buf, cap);
    if (p == NULL)
        return h->status = PTDP_ENOMEM;
    h->buf = p;
    h->cap = cap;
    return 0;
}

static void append(ptdp_html *h, const char *text, size_t n)
{
    if (reserve(h, n) != 0)
        return;
    memcpy(h->buf + h->len, text, n);
    h->len += n;
    h->buf[h->len] = '\0';
}

void ptdp_html_raw(ptdp_html *h, const char *markup)
{
    append(h, markup, strlen(markup));
}

static void escape(ptdp_html *h, const char *text)
{
    for (const char *p = text; *p; p++) {
        switch (*p) {
        case '&':  ptdp_html_raw(h, "&amp;");  break;
        case '<':  ptdp_html_raw(h, "&lt;");   break;
        case '>':  ptdp_html_raw(h, "&gt;");   break;
        case '"':  ptdp_html_raw(h, "&quot;"); break;
        case '\'': ptdp_html_raw(h, "&#39;");  break;
        default:   append(h, p, 1);            break;
        }
    }
}

void ptdp_html_text(ptdp_html *h, const char *fmt, ...)
{
    va_list ap, again;
    va_start(ap, fmt);
    va_copy(again, ap);
    int n = vsnprintf(NULL, 0, fmt, ap);
    char *text = n >= 0 ? malloc((size_t)n + 1) : NULL;
    if (text != NULL) {
        vsnprintf(text, (size_t)n + 1, fmt, again);
        escape(h, text);
        free(text);
    } else if (h->status == 0) {
        h->status = PTDP_ENOMEM;
    }
    va_end(again);
    va_end(ap);
}

/* ---- the page ---------------------------------------------------------------- */

static const char style[] =
    "<style>\n"
    "body{font-family:Helvetica,Arial,sans-serif;margin:1.5em;color:#222;max-width:1400px}\n"
    "h1{font-size:1.4em}h2{font-size:1.15em;margin-top:1.6em}\n"
    "table{border-collapse:collapse;margin:.5em 0}\n"
    "td,th{border:1px solid #ccc;padding:2px 8px;text-align:right}\n"
    "th{background:#f2f2f2}td.l,th.l{text-align:left}\n"
    ".note{color:#555;font-size:.9em}\n"
    "svg{display:block;margin:.5em 0;max-width:100%;height:auto}\n"
    ".dim{opacity:.18}\n"
    "</style>\n";

int ptdp_html_begin(ptdp_html *h, const char *title)
{
    memset(h, 0, sizeof *h);
    ptdp_html_raw(h, "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<title>");
    escape(h, title);
    ptdp_html_raw(h, "</title>\n");
    ptdp_html_raw(h, style);
    ptdp_html_raw(h, "</head>\n<body>\n<h1>");
    escape(h, title);
    ptdp_html_raw(h, "</h1>\n");
    return h->status;
}

/* The shortest of %.15g, %.16g, %.17g that reads back x itself. */
static void shortest(double x, char *buf, size_t len)
{
    for (int digits = 15; digits <= 17; digits++) {
        snprintf(buf, len, "%.*g", digits, x);
        if (strtod(buf, NULL) == x)
            return;
    }
}

void ptdp_html_number(ptdp_html *h, const char *key, double x, int digits)
{
    char text[64];
    if (!isfinite(x))
        snprintf(text, sizeof text, "null");
    else if (digits > 0)
        snprintf(text, sizeof text, "%.*g", digits > 17 ? 17 : digits, x);
    else
        shortest(x, text, sizeof text);
    ptdp_html_raw(h, "<span data-key=\"");
    escape(h, key);
    if (digits > 0 && isfinite(x)) {
        char d[32];
        snprintf(d, sizeof d, "\" data-round=\"%d", digits > 17 ? 17 : digits);
        ptdp_html_raw(h, d);
    }
    ptdp_html_raw(h, "\">");
    ptdp_html_raw(h, text);
    ptdp_html_raw(h, "</span>");
}

void ptdp_html_scaled(ptdp_html *h, const char *key, double x, double scale, int digits)
{
    if (!(scale > 0) || !isfinite(scale) || digits < 1) {
        if (h->status == 0)
            h->status = PTDP_EINVAL;
        return;
    }
    char text[64], s[40];
    const double v = x / scale;
    if (!isfinite(v))
        snprintf(text, sizeof text, "null");
    else
        snprintf(text, sizeof text, "%.*g", digits > 17 ? 17 : digits, v);
    shortest(scale, s, sizeof s);
    ptdp_html_raw(h, "<span data-key=\"");
    escape(h, key);
    ptdp_html_raw(h, "\" data-scale=\"");
    ptdp_html_raw(h, s);
    snprintf(s, sizeof s, "\" data-round=\"%d\">", digits > 17 ? 17 : digits);
    ptdp_html_raw(h, s);
    ptdp_html_raw(h, text);
    ptdp_html_raw(h, "</span>");
}

void ptdp_html_string(ptdp_html *h, const char *key, const char *text)
{
    ptdp_html_raw(h, "<span data-key=\"");
    escape(h, key);
    ptdp_html_raw(h, "\">");
    escape(h, text);
    ptdp_html_raw(h, "</span>");
}

void ptdp_html_svg(ptdp_html *h, const ptdp_svg *svg)
{
    if (svg->status != 0 || !svg->closed || svg->buf == NULL) {
        if (h->status == 0)
            h->status = svg->status ? svg->status : PTDP_EINVAL;
        return;
    }
    append(h, svg->buf, svg->len);
}

void ptdp_html_data(ptdp_html *h, const char *json, size_t len)
{
    ptdp_html_data_as(h, "ptdp-data", json, len);
}

void ptdp_html_data_as(ptdp_html *h, const char *id, const char *json, size_t len)
{
    ptdp_html_raw(h, "<script type=\"application/json\" id=\"");
    escape(h, id);
    ptdp_html_raw(h, "\">\n");
    size_t run = 0;   /* characters copied as they are, waiting */
    for (size_t i = 0; i < len; i++) {
        const char *esc = json[i] == '<' ? "\\u003c" : json[i] == '>' ? "\\u003e" : json[i] == '&' ? "\\u0026"
                        : NULL;
        if (esc == NULL) {
            run++;
            continue;
        }
        append(h, json + i - run, run);
        run = 0;
        ptdp_html_raw(h, esc);
    }
    append(h, json + len - run, run);
    ptdp_html_raw(h, "</script>\n");
}

void ptdp_html_script(ptdp_html *h, const char *js)
{
    if (strstr(js, "</") != NULL) {
        if (h->status == 0)
            h->status = PTDP_EINVAL;
        return;
    }
    ptdp_html_raw(h, "<script>\n");
    ptdp_html_raw(h, js);
    ptdp_html_raw(h, "\n</script>\n");
}

int ptdp_html_end(ptdp_html *h)
{
    ptdp_html_raw(h, "</body>\n</html>\n");
    if (h->status == 0)
        h->closed = 1;
    return h->status;
}

/* All or nothing (file.h): a reader never sees half a page. */
int ptdp_html_save(const ptdp_html *h, const char *path, char *msg, size_t msglen)
{
    if (h == NULL || path == NULL || h->status != 0 || !h->closed) {
        snprintf(msg, msglen, "%s: the page is not complete (%s)", path ? path : "(no path)",
                 h && h->status ? ptdp_strerror(h->status) : "ptdp_html_end was not called");
        return PTDP_EINVAL;
    }
    return ptdp_write_file_atomic(path, h->buf, h->len, msg, msglen);
}

void ptdp_html_free(ptdp_html *h)
{
    free(h->buf);
    memset(h, 0, sizeof *h);
}

void ptdp_html_row_number(ptdp_html *h, const char *name, const char *key, double x, int digits)
{
    ptdp_html_raw(h, "<tr><th class=\"l\">");
    ptdp_html_text(h, "%s", name);
    ptdp_html_raw(h, "</th><td>");
    ptdp_html_number(h, key, x, digits);
    ptdp_html_raw(h, "</td></tr>\n");
}

void ptdp_html_row_string(ptdp_html *h, const char *name, const char *key, const char *text)
{
    ptdp_html_raw(h, "<tr><th class=\"l\">");
    ptdp_html_text(h, "%s", name);
    ptdp_html_raw(h, "</th><td>");
    ptdp_html_string(h, key, text);
    ptdp_html_raw(h, "</td></tr>\n");
}

int ptdp_html_finish(ptdp_html *h, int rc, const char *path, char *msg, size_t msglen)
{
    if (rc == PTDP_OK)
        rc = ptdp_html_end(h);
    if (rc != PTDP_OK)
        snprintf(msg, msglen, "%s: making the page failed (%s)", path, ptdp_strerror(rc));
    else
        rc = ptdp_html_save(h, path, msg, msglen);
    ptdp_html_free(h);
    return rc;
}
