/*
 * svg_impl.h — SVG's text escaping, inside io/ (private to src/).
 *
 *   "a<b & c" ──ptdp_svg_escape──▶ "a&lt;b &amp; c"
 */

#ifndef PTDP_IO_SVG_IMPL_H
#define PTDP_IO_SVG_IMPL_H

#include <stdio.h>
#include "ptdp/svg.h"

/* Append `text` to s with &, <, >, " and ' escaped (for callers that build
 * their own elements). */
void ptdp_svg_escape(ptdp_svg *s, const char *text);

#endif
