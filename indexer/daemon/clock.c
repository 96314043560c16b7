/*
 * clock.c — the two clocks of the daemons and the logbox CLI, in microseconds: monotonic for
 * intervals, deadlines and uptime (it never jumps), real for what is shown or stored as a time
 * of day. Nothing here fails: clock_gettime() on these two clocks cannot, on Linux.
 */
#include <stdint.h>
#include <time.h>

#include "clock.h"

int64_t
now_mono_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ((int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000);
}

int64_t
now_real_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return ((int64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000);
}
