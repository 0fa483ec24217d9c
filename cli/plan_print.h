/*
 * plan_print.h — what `ptdp plan` prints: the table of the best layouts,
 * --json, and --explain's term-by-term account of one layout
 * (plan_print.c); the command itself is plan_cmd.c.
 */
#ifndef PTDP_CLI_PLAN_PRINT_H
#define PTDP_CLI_PLAN_PRINT_H

#include <stdbool.h>
#include <stdio.h>

#include "ptdp/plan_search.h"

/* Everything `ptdp plan` was asked for. */
typedef struct {
    ptdp_plan_request rq;
    double device_bytes;         /* --device-mem, or 0: the profile's       */
    int top;                     /* --top K                                 */
    bool json, explain;
    bool compare_zero;           /* --compare-zero: ZeRO-3's options side by side */
    bool qwz, qgz;               /* --zero-qwz, --zero-qgz as typed          */
    int quant_block;             /* --zero-quant-block B; 0: not given       */
    int qgz_bits;                /* --zero-qgz-bits b; 0: not given          */
    int attention;               /* --attention: 0 full, 1 tiled, -1 not given */
    const char *html;            /* --html FILE, or NULL                    */
    const char *model_name;      /* --model as typed                        */
    const char *profile_name;    /* --profile as typed                      */
    char moe_flag[64];           /* a mixture's flag other than --moe-experts, if typed ("": none) */
    const char *given[32];       /* the model's flags typed (--ffn, its own) */
    char given_names[32][64];    /* ... their names (given[i] points here)  */
    int ngiven;
} plan_options;

/* The header (model, cluster, counts) and the best n layouts, one a row. */
void ptdp_plan_print_table(FILE *f, const plan_options *o, const ptdp_plan_search_stats *st,
                           const ptdp_plan_candidate *c, int n);
/* {"candidates": [{…}, …]}, best first, one candidate a line. */
void ptdp_plan_print_json(FILE *f, const plan_options *o, const ptdp_plan_search_stats *st,
                          const ptdp_plan_candidate *c, int n);
/* One layout term by term, and the `ptdp train` line that runs it. */
void ptdp_plan_print_explain(FILE *f, const plan_options *o, const ptdp_plan_candidate *c);

/* --compare-zero: the layout c priced under ZeRO-3 and each of its options
 * (HSDP, hpZ, qwZ, qgZ, ZeRO++'s three), by collective and link level,
 * with memory and step time (plan_compare.c). */
void ptdp_plan_print_compare(FILE *f, const plan_options *o, const ptdp_plan_candidate *c);
/* ... as JSON: "zero3_options": [{…}, …] (a key of --json's object). */
void ptdp_plan_print_compare_json(FILE *f, const plan_options *o, const ptdp_plan_candidate *c);

/* The model's parameters, the whole model (its CLI's count, model_flags.h). */
double ptdp_plan_parameters(const ptdp_model_config *m);

#endif
