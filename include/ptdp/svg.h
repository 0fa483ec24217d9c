/*
 * svg.h — a tiny SVG writer, so ptdp can draw its own figures.
 *
 * A picture is a growable text buffer.  Open it with a size, add shapes and
 * text in drawing order (later shapes cover earlier ones), close it, save it:
 *
 *     ptdp_svg s;
 *     ptdp_svg_begin(&s, 400, 120);                 <svg xmlns=… viewBox="0 0 400 120">
 *     ptdp_svg_rect(&s, 10, 10, 80, 30, "#3b73c4", NULL);
 *     ptdp_svg_text(&s, 50, 30, 12, PTDP_SVG_MIDDLE, "white", "F%d", 3);
 *     ptdp_svg_group_begin(&s, "legend", 0, 80);    <g id="legend" transform=…>
 *     …
 *     ptdp_svg_group_end(&s);
 *     ptdp_svg_end(&s);                             </svg>
 *     ptdp_svg_save(&s, "out.svg", msg, sizeof msg);
 *     ptdp_svg_free(&s);
 *
 * Coordinates are user units of the viewBox: x to the right, y DOWN.
 * Every string that lands in the file (text, colours, ids) is XML-escaped,
 * so a label like "a < b & c" cannot break the document.
 *
 * Errors are sticky: a drawing call that runs out of memory, or a group
 * closed that was never opened, records the first error in s->status and
 * the later calls do nothing; ptdp_svg_end and ptdp_svg_save report it.  So
 * a figure is a list of drawing calls with one check at the end.
 */
#ifndef PTDP_SVG_H
#define PTDP_SVG_H

#include <stddef.h>

typedef struct {
    char  *buf;        /* the document so far, NUL-terminated              */
    size_t len, cap;
    int    open_groups;/* <g> not yet closed                               */
    int    closed;     /* 1 once </svg> is written                         */
    int    status;     /* 0, or the first error (PTDP_ENOMEM, PTDP_EINVAL) */
} ptdp_svg;

/* How a text is placed on its (x, y): y is the baseline; x is its start,
 * middle or end.  Add PTDP_SVG_BOLD for bold. */
enum {
    PTDP_SVG_START  = 0,
    PTDP_SVG_MIDDLE = 1,
    PTDP_SVG_END    = 2,
    PTDP_SVG_BOLD   = 4
};

/* Start a width x height picture on a white background.  0 or PTDP_ENOMEM. */
int  ptdp_svg_begin(ptdp_svg *s, double width, double height);

/* Shapes.  fill / stroke are SVG colours ("#3b73c4", "none"); NULL omits
 * the attribute (fill then defaults to black, stroke to none). */
void ptdp_svg_rect(ptdp_svg *s, double x, double y, double w, double h,
                   const char *fill, const char *stroke);
/* dash: an SVG dash pattern ("6 4") or NULL for a solid line. */
void ptdp_svg_line(ptdp_svg *s, double x1, double y1, double x2, double y2,
                   const char *stroke, double width, const char *dash);
void ptdp_svg_polyline(ptdp_svg *s, const double *xs, const double *ys, int n,
                       const char *stroke, double width, const char *dash);
/* A closed filled shape (an arrow head, a marker). */
void ptdp_svg_polygon(ptdp_svg *s, const double *xs, const double *ys, int n, const char *fill);
/* A polyline whose last segment ends in an arrow head of length `head`. */
void ptdp_svg_arrow(ptdp_svg *s, const double *xs, const double *ys, int n,
                    const char *color, double width, double head);

/* printf-style text of `size` user units; `how` = START/MIDDLE/END [| BOLD]. */
void ptdp_svg_text(ptdp_svg *s, double x, double y, double size, int how,
                   const char *fill, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 7, 8)))
#endif
    ;

/* <g id="id" transform="translate(dx, dy)">: everything until the matching
 * group_end is shifted by (dx, dy).  id may be NULL. */
void ptdp_svg_group_begin(ptdp_svg *s, const char *id, double dx, double dy);
void ptdp_svg_group_end(ptdp_svg *s);
/* <g data-NAME="value">: a group a page's script can find by its data
 * (html.h: the boxes of micro-batch 3 are <g data-mb="3">).  Closed by
 * ptdp_svg_group_end. */
void ptdp_svg_group_begin_data(ptdp_svg *s, const char *name, long value);
/* <title>text</title>: what a browser shows when the mouse rests on the
 * enclosing group or shape (put it first inside a group). */
void ptdp_svg_title(ptdp_svg *s, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;

/* Close the document: 0, or the first error (an open group is PTDP_EINVAL). */
int  ptdp_svg_end(ptdp_svg *s);

/* Write the closed document to `path` atomically: a temporary file beside
 * it, fflush, fsync, rename — a reader sees the old file or the whole new
 * one, never half a picture.  0, or PTDP_EINVAL (not closed, or an earlier
 * error) / PTDP_EIO with the reason in msg. */
int  ptdp_svg_save(const ptdp_svg *s, const char *path, char *msg, size_t msglen);

void ptdp_svg_free(ptdp_svg *s);

/* Axis ticks: a step of 1, 2 or 5 times a power of ten that cuts `span`
 * into at most max_ticks intervals (1 for an empty span). */
double ptdp_svg_tick_step(double span, int max_ticks);

#endif
