/*
 * test_moe_z_loss.c — ST-MoE's router z-loss (moe_z_loss.c) on numbers:
 *
 *   loss = beta sum_t lse_t^2 / T_seq,   lse_t = log sum_e exp z_te
 *   dz   = scale beta 2 lse_t softmax(z_t) / T_seq   (added to dz)
 *
 * The value against the file's picture worked by hand, a row too large
 * for exp (lse from its largest entry: no overflow), the backward against
 * central differences of the forward, that the backward adds to what dz
 * holds (the router's own gradient is there first), and that two devices'
 * shares of a sequence (CP) add up to the whole sequence's loss.
 */
#include <math.h>

#include "harness.h"
#include "ptdp/moe_route.h"

static const harness_tcase z_tests = { .name = "z-loss", .timeout_s = 60 };

/* The file's picture: z = [2 0 0], lse = log(e^2 + 2). */
TEST(z_tests, test_the_picture_by_hand)
{
    const ptdp_real z[3] = { 2, 0, 0 };
    const double lse = log(exp(2.0) + 2.0);
    ck_assert_double_eq_tol(lse, 2.2395, 1e-4);
    ck_assert_double_eq_tol(ptdp_moe_z_loss(1, 3, 1, 1.0, z), lse * lse, 1e-6 * lse * lse);
    ck_assert_double_eq_tol(ptdp_moe_z_loss(1, 3, 4, 0.5, z), 0.5 * lse * lse / 4, 1e-6 * lse * lse);
    ptdp_real dz[3] = { 0, 0, 0 };
    ptdp_moe_z_loss_backward(1, 3, 1, 1.0, z, 1.0, dz);
    ck_assert_double_eq_tol(dz[0], 2 * lse * exp(2.0 - lse), 1e-5);   /* 2 lse x .79 */
    ck_assert_double_eq_tol(dz[1], 2 * lse * exp(0.0 - lse), 1e-5);   /* 2 lse x .11 */
}
END_TEST

/* exp(1000) overflows a double; lse = 1000 + log(1 + e^-1000) = 1000. */
TEST(z_tests, test_a_large_row_does_not_overflow)
{
    const ptdp_real z[2] = { 1000, 0 };
    const double loss = ptdp_moe_z_loss(1, 2, 1, 1.0, z);
    ck_assert_msg(isfinite(loss), "the z-loss of [1000 0] is %g", loss);
    ck_assert_double_eq_tol(loss, 1e6, 1e-6 * 1e6);
    ptdp_real dz[2] = { 0, 0 };
    ptdp_moe_z_loss_backward(1, 2, 1, 1.0, z, 1.0, dz);
    ck_assert_double_eq_tol(dz[0], 2000.0, 1e-3);   /* softmax = [1 0] */
    ck_assert_double_eq_tol(dz[1], 0.0, 1e-6);
}
END_TEST

enum { ROWS = 6, E = 5, T_SEQ = 3 };

static void some_logits(ptdp_real *z)
{
    for (int i = 0; i < ROWS * E; i++)
        z[i] = (ptdp_real)(1.5 * sin(0.7 * i + 0.3) + 0.25 * (i % 3));
}

/* dz = scale d loss / dz, for every logit, by central differences. */
TEST(z_tests, test_the_backward_is_the_forwards_derivative)
{
    const double beta = 0.3, scale = 0.7;
    const double eps = sizeof(ptdp_real) == sizeof(double) ? 1e-6 : 1e-2;
    const double tol = sizeof(ptdp_real) == sizeof(double) ? 1e-8 : 2e-3;
    ptdp_real z[ROWS * E], dz[ROWS * E] = { 0 };
    some_logits(z);
    ptdp_moe_z_loss_backward(ROWS, E, T_SEQ, beta, z, scale, dz);
    for (int i = 0; i < ROWS * E; i++) {
        const ptdp_real keep = z[i];
        z[i] = (ptdp_real)(keep + eps);
        const double up = ptdp_moe_z_loss(ROWS, E, T_SEQ, beta, z);
        z[i] = (ptdp_real)(keep - eps);
        const double down = ptdp_moe_z_loss(ROWS, E, T_SEQ, beta, z);
        z[i] = keep;
        const double want = scale * (up - down) / (((double)(ptdp_real)(keep + eps)) - (ptdp_real)(keep - eps));
        ck_assert_msg(fabs(dz[i] - want) <= tol * (1 + fabs(want)), "logit %d: dz %.10g, differences %.10g", i,
                      (double)dz[i], want);
    }
}
END_TEST

/* The router's gradient is in dz first: the z-loss's is added to it. */
TEST(z_tests, test_the_backward_adds)
{
    ptdp_real z[ROWS * E], alone[ROWS * E] = { 0 }, added[ROWS * E];
    some_logits(z);
    for (int i = 0; i < ROWS * E; i++)
        added[i] = 1;
    ptdp_moe_z_loss_backward(ROWS, E, T_SEQ, 0.3, z, 1.0, alone);
    ptdp_moe_z_loss_backward(ROWS, E, T_SEQ, 0.3, z, 1.0, added);
    for (int i = 0; i < ROWS * E; i++)
        ck_assert_double_eq_tol(added[i], 1 + alone[i], 1e-6);
}
END_TEST

/* CP: rows 0..2 on one device, 3..5 on the other, the same T_seq. */
TEST(z_tests, test_shares_add_up_to_the_sequence)
{
    ptdp_real z[ROWS * E];
    some_logits(z);
    const double whole = ptdp_moe_z_loss(ROWS, E, T_SEQ, 0.3, z);
    const double a = ptdp_moe_z_loss(ROWS / 2, E, T_SEQ, 0.3, z);
    const double b = ptdp_moe_z_loss(ROWS / 2, E, T_SEQ, 0.3, z + (ROWS / 2) * E);
    ck_assert_double_eq_tol(a + b, whole, 1e-6 * whole);
    ck_assert_double_eq(ptdp_moe_z_loss(ROWS, E, T_SEQ, 0.0, z), 0.0);
}
END_TEST

int main(void)
{
    return harness_main("moe-z-loss");
}
