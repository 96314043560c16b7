/*
 * clock.h — the clocks (daemon/clock.c) of logbox-indexd, logbox-searchd and the logbox CLI.
 */
#ifndef LB_DAEMON_CLOCK_H
#define LB_DAEMON_CLOCK_H

#include <stdint.h>

/* CLOCK_MONOTONIC in µs: for intervals only (its zero is arbitrary). */
int64_t	now_mono_us(void);
/* CLOCK_REALTIME in µs since the Unix epoch. */
int64_t	now_real_us(void);

#endif
