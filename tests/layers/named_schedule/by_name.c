/* by_name.c — a file outside the registry that asks for a schedule by
 * name and re-teaches what one refuses: schedule_names.py must refuse it
 * (schedule_names_can_fail.sh).  Never compiled. */
#include <string.h>

int refuses_bf16(const char *schedule)
{
    return strcmp(schedule, "zb-h1") == 0;   /* a comment may say gpipe */
}

const char *advice(void)
{
    return "use --schedule 1f1b or gpipe";
}
