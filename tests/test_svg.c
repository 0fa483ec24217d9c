/*
 * test_svg.c — the SVG writer: escaped text, well-formed XML, atomic saves.
 *
 * Well-formedness is checked by a small XML checker written here (tags
 * balance in order, attribute values are quoted, every & starts a known
 * entity, one root element) — and the checker is first shown to reject
 * broken documents, so a pass means something.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "harness.h"
#include "ptdp/error.h"
#include "ptdp/svg.h"

static const harness_tcase svg_tests = { .name = "svg" };

/* ---- the XML checker of harness.h: it can say no ----------------------------------- */

TEST(svg_tests, the_checker_rejects_broken_documents)
{
    ck_assert_int_eq(harness_xml_elements("<svg><g><rect x=\"1\"/></g></svg>\n"), 3);
    ck_assert_int_eq(harness_xml_elements("<svg><text>a &lt; b &amp; c</text></svg>"), 2);
    ck_assert_int_eq(harness_xml_elements("<svg><g></svg>"), -1);                    /* unclosed   */
    ck_assert_int_eq(harness_xml_elements("<svg><g></svg></g>"), -1);                /* crossed    */
    ck_assert_int_eq(harness_xml_elements("<svg>"), -1);
    ck_assert_int_eq(harness_xml_elements("<svg><rect x=\"1/></svg>"), -1);          /* quote      */
    ck_assert_int_eq(harness_xml_elements("<svg><rect x=1/></svg>"), -1);            /* unquoted   */
    ck_assert_int_eq(harness_xml_elements("<svg><text>a & b</text></svg>"), -1);     /* bare &     */
    ck_assert_int_eq(harness_xml_elements("<svg><text>a > b</text></svg>"), -1);
    ck_assert_int_eq(harness_xml_elements("<svg><text>a < b</text></svg>"), -1);
    ck_assert_int_eq(harness_xml_elements("<svg><rect fill=\"a<b\"/></svg>"), -1);
    ck_assert_int_eq(harness_xml_elements("<svg/><svg/>"), -1);                      /* two roots  */
    ck_assert_int_eq(harness_xml_elements("hello <svg/>"), -1);
}
END_TEST

/* ---- the writer ------------------------------------------------------------------ */

TEST(svg_tests, text_and_attributes_are_escaped)
{
    ptdp_svg s;
    ck_assert_int_eq(ptdp_svg_begin(&s, 400, 120), PTDP_OK);
    ptdp_svg_text(&s, 10, 20, 12, PTDP_SVG_START, NULL, "a < b & \"c\" '%s' > %d", "d", 5);
    ptdp_svg_group_begin(&s, "id\"<&>", 0, 0);
    ptdp_svg_rect(&s, 0, 0, 1, 1, "red\" onload=\"x", NULL);
    ptdp_svg_group_end(&s);
    ck_assert_int_eq(ptdp_svg_end(&s), PTDP_OK);

    ck_assert_ptr_nonnull(strstr(s.buf, ">a &lt; b &amp; &quot;c&quot; &apos;d&apos; &gt; 5</text>"));
    ck_assert_ptr_nonnull(strstr(s.buf, "id=\"id&quot;&lt;&amp;&gt;\""));
    ck_assert_ptr_nonnull(strstr(s.buf, "fill=\"red&quot; onload=&quot;x\""));
    ck_assert_ptr_null(strstr(s.buf, "onload=\"x"));
    ck_assert_int_eq(harness_xml_elements(s.buf), 5);     /* svg, background, text, g, rect */
    ptdp_svg_free(&s);
}
END_TEST

TEST(svg_tests, every_shape_makes_a_well_formed_document)
{
    ptdp_svg s;
    ck_assert_int_eq(ptdp_svg_begin(&s, 400, 120), PTDP_OK);
    ck_assert_msg(strncmp(s.buf, "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"400\" height=\"120\" "
                                 "viewBox=\"0 0 400 120\"", 82) == 0, "%s", s.buf);
    double xs[3] = { 10, 50, 100 }, ys[3] = { 10, 50, 50 };
    ptdp_svg_group_begin(&s, "outer", 5, 6);
    ptdp_svg_group_begin(&s, NULL, 0, 0);
    ptdp_svg_rect(&s, 10, 10, 80, 30, "#3b73c4", "white");
    ptdp_svg_line(&s, 0, 0, 10, 10, "#333", 1.5, "6 4");
    ptdp_svg_polyline(&s, xs, ys, 3, "blue", 2, NULL);
    ptdp_svg_polygon(&s, xs, ys, 3, "green");
    ptdp_svg_arrow(&s, xs, ys, 3, "black", 1, 6);          /* a polyline and a polygon */
    ptdp_svg_text(&s, 50, 30, 12, PTDP_SVG_MIDDLE | PTDP_SVG_BOLD, "white", "F%d", 3);
    ptdp_svg_group_end(&s);
    ptdp_svg_group_end(&s);
    ck_assert_int_eq(ptdp_svg_end(&s), PTDP_OK);

    ck_assert_int_eq(harness_xml_elements(s.buf), 11);
    ck_assert_ptr_nonnull(strstr(s.buf, "<g id=\"outer\" transform=\"translate(5 6)\">"));
    ck_assert_ptr_nonnull(strstr(s.buf, "<g>"));
    ck_assert_ptr_nonnull(strstr(s.buf, "stroke-dasharray=\"6 4\""));
    ck_assert_ptr_nonnull(strstr(s.buf,
                                 "text-anchor=\"middle\" font-weight=\"bold\" fill=\"white\">F3</text>"));
    /* the arrow's head ends exactly at the last point, its line stops short */
    ck_assert_ptr_nonnull(strstr(s.buf, "<polygon fill=\"black\" points=\"100,50 94,53 94,47\"/>"));
    ck_assert_ptr_nonnull(strstr(s.buf, "points=\"10,10 50,50 94,50\""));
    size_t n = strlen(s.buf);
    ck_assert_uint_eq(n, s.len);
    ck_assert_str_eq(s.buf + n - 7, "</svg>\n");
    ptdp_svg_free(&s);
}
END_TEST

TEST(svg_tests, numbers_are_short_and_finite)
{
    ptdp_svg s;
    ck_assert_int_eq(ptdp_svg_begin(&s, 10, 10), PTDP_OK);
    ptdp_svg_rect(&s, 12.5, -0.001, 1.0 / 3.0, 100, NULL, NULL);
    ptdp_svg_rect(&s, NAN, INFINITY, -5, 2.999, NULL, NULL);
    ck_assert_int_eq(ptdp_svg_end(&s), PTDP_OK);
    ck_assert_ptr_nonnull(strstr(s.buf, "<rect x=\"12.5\" y=\"0\" width=\"0.33\" height=\"100\"/>"));
    ck_assert_ptr_nonnull(strstr(s.buf, "<rect x=\"0\" y=\"0\" width=\"0\" height=\"3\"/>"));
    ck_assert_ptr_null(strstr(s.buf, "nan"));
    ck_assert_ptr_null(strstr(s.buf, "inf"));
    ptdp_svg_free(&s);
}
END_TEST

TEST(svg_tests, errors_are_sticky_and_groups_must_balance)
{
    char msg[256];
    ptdp_svg s;
    ck_assert_int_eq(ptdp_svg_begin(&s, 10, 10), PTDP_OK);
    ptdp_svg_group_begin(&s, NULL, 0, 0);
    ck_assert_int_eq(ptdp_svg_end(&s), PTDP_EINVAL);        /* a group left open */
    ck_assert_int_eq(ptdp_svg_save(&s, "/tmp/never-written.svg", msg, sizeof msg), PTDP_EINVAL);
    ck_assert_int_ne(access("/tmp/never-written.svg", F_OK), 0);
    ptdp_svg_free(&s);

    ck_assert_int_eq(ptdp_svg_begin(&s, 10, 10), PTDP_OK);
    ptdp_svg_group_end(&s);                                  /* closes nothing */
    ck_assert_int_eq(s.status, PTDP_EINVAL);
    size_t len = s.len;
    ptdp_svg_rect(&s, 0, 0, 1, 1, NULL, NULL);               /* ignored from now on */
    ck_assert_uint_eq(s.len, len);
    ck_assert_int_eq(ptdp_svg_end(&s), PTDP_EINVAL);
    ptdp_svg_free(&s);

    ck_assert_int_eq(ptdp_svg_begin(&s, 10, 10), PTDP_OK);
    ck_assert_int_eq(ptdp_svg_end(&s), PTDP_OK);
    ptdp_svg_rect(&s, 0, 0, 1, 1, NULL, NULL);               /* after the end */
    ck_assert_int_eq(s.status, PTDP_EINVAL);
    ptdp_svg_free(&s);
}
END_TEST

TEST(svg_tests, the_buffer_grows)
{
    ptdp_svg s;
    ck_assert_int_eq(ptdp_svg_begin(&s, 1000, 1000), PTDP_OK);
    for (int i = 0; i < 20000; i++) {
        ptdp_svg_group_begin(&s, NULL, i % 7, 0);
        ptdp_svg_text(&s, i % 1000, i / 20, 10, PTDP_SVG_END, NULL, "%d & %d", i, i + 1);
        ptdp_svg_group_end(&s);
    }
    ck_assert_int_eq(ptdp_svg_end(&s), PTDP_OK);
    ck_assert_uint_gt(s.len, 20000u * 40u);
    ck_assert_int_eq(harness_xml_elements(s.buf), 2 + 2 * 20000);
    ck_assert_ptr_nonnull(strstr(s.buf, ">19999 &amp; 20000</text>"));
    ptdp_svg_free(&s);
}
END_TEST

/* ---- saving ---------------------------------------------------------------------- */

TEST(svg_tests, save_replaces_the_file_whole_or_not_at_all)
{
    char dir[] = "/tmp/ptdp_svg_XXXXXX", path[128], other[160], msg[512];
    ck_assert_ptr_nonnull(mkdtemp(dir));
    snprintf(path, sizeof path, "%s/picture.svg", dir);
    FILE *old = fopen(path, "w");
    fputs("old picture", old);
    fclose(old);

    ptdp_svg s;
    ck_assert_int_eq(ptdp_svg_begin(&s, 40, 20), PTDP_OK);
    ptdp_svg_text(&s, 1, 10, 8, PTDP_SVG_START, NULL, "new");

    /* not closed yet: refused, the old file untouched */
    ck_assert_int_eq(ptdp_svg_save(&s, path, msg, sizeof msg), PTDP_EINVAL);
    char *text = harness_read_file(path, NULL);
    ck_assert_str_eq(text, "old picture");
    free(text);

    ck_assert_int_eq(ptdp_svg_end(&s), PTDP_OK);
    ck_assert_int_eq(ptdp_svg_save(&s, path, msg, sizeof msg), PTDP_OK);
    text = harness_read_file(path, NULL);
    ck_assert_str_eq(text, s.buf);
    ck_assert_int_eq(harness_xml_elements(text), 3);
    free(text);
    ck_assert_int_eq(harness_count_entries(dir, true), 0);

    /* a target that cannot be replaced (a directory): an error, no debris */
    snprintf(other, sizeof other, "%s/adir", dir);
    ck_assert_int_eq(mkdir(other, 0700), 0);
    ck_assert_int_eq(ptdp_svg_save(&s, other, msg, sizeof msg), PTDP_EIO);
    ck_assert_ptr_nonnull(strstr(msg, other));
    ck_assert_int_eq(harness_count_entries(dir, true), 0);
    struct stat st;
    ck_assert(stat(other, &st) == 0 && S_ISDIR(st.st_mode));
    ck_assert_int_eq(rmdir(other), 0);

    /* a directory that does not exist */
    snprintf(other, sizeof other, "%s/missing/picture.svg", dir);
    ck_assert_int_eq(ptdp_svg_save(&s, other, msg, sizeof msg), PTDP_EIO);
    ck_assert_ptr_nonnull(strstr(msg, other));

    ptdp_svg_free(&s);
    ck_assert_int_eq(unlink(path), 0);
    ck_assert_int_eq(rmdir(dir), 0);
}
END_TEST

int main(void)
{
    return harness_main("svg");
}
