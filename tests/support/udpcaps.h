/*
 * udpcaps.h: what this kernel's UDP offers the runtime, for tests that
 * assert a count which exists only where the kernel does it.
 */
#ifndef DLCP_TEST_UDPCAPS_H
#define DLCP_TEST_UDPCAPS_H

#include <stdbool.h>

/* Whether this kernel sends UDP GSO (UDP_SEGMENT) and hands a UDP_GRO
 * socket coalesced messages: then loopback passes a run of one sender's
 * datagrams to such a socket whole. */
bool udpcaps_coalesces(void);

#endif /* DLCP_TEST_UDPCAPS_H */
