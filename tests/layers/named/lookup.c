/* lookup.c — a file outside the models that asks for one by name and
 * calls its symbols: model_names.py must refuse it
 * (model_names_can_fail.sh).  Never compiled. */
#include "ptdp/gpt.h"

int lookup_heads(const ptdp_model_config *c)
{
    return c->ops == &ptdp_gpt_ops ? ptdp_gpt(c)->heads : 0;   /* a comment may say gpt */
}

const char *lookup_default(void)
{
    return "mlp";
}
