/*
 * sigdump.h: SIGUSR1 as "dump your flight recorder".
 *
 * A communicator registers an eventfd; the first registration installs a
 * SIGUSR1 handler, unless the application has its own (then dlcp leaves
 * SIGUSR1 alone and the dump is only written on stalls and failures).
 * The handler only writes to the registered eventfds (async-signal-safe);
 * each communicator's event loop watches its eventfd and dumps from
 * there, under its own lock.  The last unregistration restores the
 * previous disposition.
 */
#ifndef DLCP_RT_SIGDUMP_H
#define DLCP_RT_SIGDUMP_H

#include <stdbool.h>

#define DLCP_SIGDUMP_MAX 16 /* communicators at once that get the signal */

/* dlcp_sigdump_register adds |efd|; returns true if SIGUSR1 will reach
 * it (false: the application handles SIGUSR1, or the table is full). */
bool dlcp_sigdump_register(int efd);
void dlcp_sigdump_unregister(int efd);

#endif /* DLCP_RT_SIGDUMP_H */
