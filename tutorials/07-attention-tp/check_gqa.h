/*
 * check_gqa.h — lesson 07's check of blanks 6 and 7 (check_gqa.c): the
 * llama's grouped-query attention under TP, more ranks than kv heads.
 */
#ifndef LESSON_07_CHECK_GQA_H
#define LESSON_07_CHECK_GQA_H

#include <stdbool.h>

/* Runs the (K, tp) cases, prints a verdict each; true when all pass. */
bool check_gqa(void);

#endif
