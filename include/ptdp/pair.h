/*
 * pair.h — an overlapped F&B pair on the two-stream clock.
 *
 * DualPipe (DeepSeek-V3) runs one micro-batch's forward beside another's
 * backward on the same device, so that each one's expert-parallel
 * all-to-alls move while the other computes.  The executor (pp.c) runs the
 * pair's F, then its B — the bits are those of any order — and marks the
 * pair on the device's virtual clock:
 *
 *   ptdp_pair_begin(dev)       F(pair) … B … ptdp_pair_end(dev)
 *
 * Inside the pair, a blocking collective marked overlappable (ep.c marks
 * its all-to-alls: the counts, dispatch and combine, and so their
 * backwards) runs on the communication stream (clock.h) instead of the
 * compute stream: it starts when every member's stream has reached it
 * (a member's stream is at least where its pair began), and does not
 * advance the compute stream.  Unmarked collectives (TP's all-reduces)
 * stay on the compute stream.  At the pair's end the compute stream waits
 * for the stream's last overlappable collective:
 *
 *   compute   |▇▇ F ▇▇▇▇▇▇▇▇▇ B ▇▇▇▇▇▇▇▇▇▇▇▇|░░░|
 *   comm      |a2a(F) a2a(F) a2a(B) a2a(B) a2a(B)|
 *             t0                            ^ now = max(now, end)
 *
 *   pair = max(F + B, all-to-alls)    with every member in step: the pair
 *                                      rule of ptdp schedule's timer
 *                                      (schedule_sim.c: max(F + B, 2 a2a))
 *
 * The host still moves the data at the same point, blocking, in the same
 * order: only virtual time changes.  A collective that the compute stream
 * never waits for is hidden (clock.hidden_s and clock.pair_hidden_s); what
 * it waits for at the end is exposed (comm_s), the rest of that wait idle.
 * Outside a pair a marked collective is an ordinary blocking one, all of
 * it exposed; clock.pairable_s adds up every marked collective's time.
 *
 * What the ideal leaves out: inside one half the data depend on each
 * other — F's experts cannot start before F's dispatch has brought their
 * rows, nor B's before the combine's backward has brought their
 * gradients, and F's combine must wait for its experts.  DualPipe cuts each
 * chunk into attention, dispatch, MLP and combine and interleaves the
 * two halves so that each all-to-all runs under the partner's compute;
 * the rule above assumes that interleaving always succeeds, as the
 * schedule's max(F + B, 2 a2a) does (and as DualPipe's published bubble,
 * with F&B a pair's time, does).
 */
#ifndef PTDP_PAIR_H
#define PTDP_PAIR_H

#include <stdbool.h>

struct ptdp_device;

/* The pair's compute begins / has ended on this device.  begin does
 * nothing when pairs are serial, end nothing outside a pair (or when no
 * overlappable collective ran in it: the clock then never moved). */
void ptdp_pair_begin(struct ptdp_device *dev);
void ptdp_pair_end(struct ptdp_device *dev);

/* Mark the blocking collectives this device calls from now on as
 * overlappable (on = true) or not; returns the mark as it was, to put
 * back:   bool was = ptdp_pair_mark(dev, true); …call…; ptdp_pair_mark(dev, was); */
bool ptdp_pair_mark(struct ptdp_device *dev, bool on);

/* serial = true: pairs overlap nothing, their marked collectives stay on
 * the compute stream (ptdp train --no-pair-overlap: the same run, timed
 * as if F and B ran one after the other). */
void ptdp_pair_set_serial(struct ptdp_device *dev, bool serial);

#endif
