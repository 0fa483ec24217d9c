/*
 * lesson.h — lesson 04: the functions you write in exercise.c, which the
 * check calls.
 *
 * Each one fills an empty schedule (made by ptdp_schedule_alloc for
 * s->pp stages and s->micro_batches micro-batches) with every stage's whole
 * list of actions — compute, sends, receives and the optimizer step — using
 * ptdp_schedule_push (schedule.h), and returns a status, so that an
 * unfinished one can say so.  The library's ptdp_schedule_gpipe and
 * ptdp_schedule_1f1b list only the compute; ptdp_schedule_place_comms
 * (PTDP_PLACE_EVEN_ODD) then adds the rest exactly as you do here.
 */
#ifndef LESSON_04_H
#define LESSON_04_H

#include "ptdp/schedule.h"

/* GPipe: every stage runs all m forwards, then all m backwards, then the
 * optimizer step.  Returns 0 or a PTDP_E… code. */
int lesson_gpipe(ptdp_schedule *s);

/* 1F1B: a warm-up of forwards, then one forward and one backward at a time,
 * then the backwards still owed, then the optimizer step; sends and
 * receives ordered so that blocking rendezvous send/recv cannot deadlock.
 * Returns 0 or a PTDP_E… code. */
int lesson_1f1b(ptdp_schedule *s);

#endif
