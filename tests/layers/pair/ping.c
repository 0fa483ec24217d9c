/* ping.c — half of a pair that calls each other, for calls_can_fail.sh:
 * ping needs pong (pong.c) and pong needs ping. */
int ping(int n);
int pong(int n);

int ping(int n)
{
    return n > 0 ? pong(n - 1) : 0;
}
