/* pong.c — the other half of the pair (ping.c). */
int ping(int n);
int pong(int n);

int pong(int n)
{
    return n > 0 ? ping(n - 1) : 1;
}
