/*
 * test_html.c — the page writer (html.h): nothing typed or embedded can
 * break out of where it belongs, and a number by key shows its value.
 *
 *   the data      a "</script>" in a JSON string cannot end the data element;
 *                 the escapes read back as the same characters
 *   text          & < > " ' become entities
 *   scripts       one holding "</" is refused, not written
 *   numbers       the shortest text that reads back the double; data-round N
 *                 is %.Ng; NaN and infinities are null, as in the JSON
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "harness.h"
#include "ptdp/error.h"
#include "ptdp/html.h"

static const harness_tcase html_tests = { .name = "html" };

static int count(const char *hay, const char *needle)
{
    int n = 0;
    for (const char *p = strstr(hay, needle); p != NULL; p = strstr(p + 1, needle))
        n++;
    return n;
}

TEST(html_tests, the_data_cannot_end_its_script)
{
    ptdp_html h;
    ck_assert_int_eq(ptdp_html_begin(&h, "a <title> & more"), PTDP_OK);
    const char json[] = "{\"name\": \"</script><b>&amp;\", \"x\": 1}";
    ptdp_html_data(&h, json, strlen(json));
    ck_assert_int_eq(ptdp_html_end(&h), PTDP_OK);
    ck_assert_int_eq(count(h.buf, "</script>"), 1);    /* the data element's own end, only */
    ck_assert_ptr_nonnull(strstr(h.buf, "{\"name\": \"\\u003c/script\\u003e\\u003cb\\u003e\\u0026amp;\", \"x\": 1}"
                                        "</script>"));
    ck_assert_ptr_nonnull(strstr(h.buf, "<script type=\"application/json\" id=\"ptdp-data\">"));
    ck_assert_ptr_nonnull(strstr(h.buf, "<title>a &lt;title&gt; &amp; more</title>"));
    ck_assert_ptr_null(strstr(h.buf, "<title>a <title>"));
    ptdp_html_free(&h);
}
END_TEST

TEST(html_tests, text_is_escaped_and_scripts_with_an_end_are_refused)
{
    ptdp_html h;
    ck_assert_int_eq(ptdp_html_begin(&h, "t"), PTDP_OK);
    ptdp_html_text(&h, "a < b & \"c\" '%s' > %d", "d", 5);
    ptdp_html_string(&h, "name", "<i>");
    ck_assert_ptr_nonnull(strstr(h.buf, "a &lt; b &amp; &quot;c&quot; &#39;d&#39; &gt; 5"));
    ck_assert_ptr_nonnull(strstr(h.buf, "<span data-key=\"name\">&lt;i&gt;</span>"));
    ptdp_html_script(&h, "var a = 1;");
    ck_assert_int_eq(h.status, PTDP_OK);
    ptdp_html_script(&h, "document.write('</script>');");
    ck_assert_int_eq(h.status, PTDP_EINVAL);
    ck_assert_ptr_null(strstr(h.buf, "document.write"));
    ck_assert_int_eq(ptdp_html_end(&h), PTDP_EINVAL);
    char msg[256];
    ck_assert_int_eq(ptdp_html_save(&h, "/tmp/never-written.html", msg, sizeof msg), PTDP_EINVAL);
    ptdp_html_free(&h);
}
END_TEST

TEST(html_tests, numbers_read_back_their_value)
{
    ptdp_html h;
    ck_assert_int_eq(ptdp_html_begin(&h, "t"), PTDP_OK);
    ptdp_html_number(&h, "a", 1.0 / 3.0, 0);
    ptdp_html_number(&h, "b", 0.1, 0);
    ptdp_html_number(&h, "c", 1.0 / 3.0, 4);
    ptdp_html_number(&h, "d", 27, 0);
    ptdp_html_number(&h, "e", NAN, 4);
    ptdp_html_number(&h, "f", -INFINITY, 0);
    ptdp_html_number(&h, "g", 123456.0, 3);
    ck_assert_ptr_nonnull(strstr(h.buf, "<span data-key=\"a\">0.3333333333333333</span>"));
    ck_assert_ptr_nonnull(strstr(h.buf, "<span data-key=\"b\">0.1</span>"));
    ck_assert_ptr_nonnull(strstr(h.buf, "<span data-key=\"c\" data-round=\"4\">0.3333</span>"));
    ck_assert_ptr_nonnull(strstr(h.buf, "<span data-key=\"d\">27</span>"));
    ck_assert_ptr_nonnull(strstr(h.buf, "<span data-key=\"e\">null</span>"));
    ck_assert_ptr_nonnull(strstr(h.buf, "<span data-key=\"f\">null</span>"));
    ck_assert_ptr_nonnull(strstr(h.buf, "<span data-key=\"g\" data-round=\"3\">1.23e+05</span>"));
    ck_assert_double_eq(strtod("0.3333333333333333", NULL), 1.0 / 3.0);
    ck_assert_int_eq(ptdp_html_end(&h), PTDP_OK);
    ptdp_html_raw(&h, "<p>");                         /* nothing after </html> */
    ck_assert_int_eq(h.status, PTDP_EINVAL);
    ptdp_html_free(&h);
}
END_TEST

int main(void)
{
    return harness_main("html");
}
