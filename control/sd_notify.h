/* control/sd_notify.h — tell the service manager how the broker is doing
 * (systemd's notification protocol: sd_notify(3), Type=notify units).
 *
 * A datagram of "KEY=VALUE\n" lines to the AF_UNIX socket named by
 * $NOTIFY_SOCKET (a path, or an abstract name when it starts with '@').
 * With no $NOTIFY_SOCKET (not started by systemd, or by a unit of another
 * Type) every call does nothing and returns 0.
 *
 * Written here rather than linked from libsystemd: the protocol is one
 * sendto() that systemd documents as stable for other implementations,
 * and a broker that runs outside systemd (containers, tests, `make run`)
 * should not need libsystemd installed for it.
 *
 * Thread: the main thread only (sluiced.c's start-up, signal loop and
 * shutdown); no state is kept between calls.
 */
#ifndef SLUICE_SD_NOTIFY_H
#define SLUICE_SD_NOTIFY_H

/* Send STATE (one or more "KEY=VALUE" lines, e.g. "READY=1\nSTATUS=...").
 * Returns 0 when sent or when there is no socket to send to, -errno when
 * the socket was named but the send failed (the caller logs it once). */
int sd_notify_send(const char *state);

/* sd_notify_send() of a formatted state. */
int sd_notify_sendf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));

/* The monotonic clock in microseconds, as systemd wants it beside
 * RELOADING=1 (MONOTONIC_USEC). */
unsigned long long sd_notify_monotonic_usec(void);

#endif
