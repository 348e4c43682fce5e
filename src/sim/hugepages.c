/*
 * hugepages.c: the simulator's executables ask glibc for transparent huge
 * pages.
 *
 * A large run's working set is the packets in flight, their events, the
 * ports and the routes: tens of megabytes touched at random, whose TLB
 * misses cost a two-dimensional page walk in a VM.  glibc (2.35 on) backs
 * its heap with transparent huge pages when the tunable
 * glibc.malloc.hugetlb=1 is set, and reads tunables only at start-up, so
 * the program starts itself again with it.  Measured on this project's
 * 2-vCPU VM (docs/performance-sim.md, "Cost per packet-hop"): a k = 16 fat
 * tree (1,024 hosts) ran 9-16 % faster in each of seven alternating pairs,
 * 16 hosts the same.
 */
#include "sim/sim.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define HUGE_TUNABLE "glibc.malloc.hugetlb"

void dlcp_sim_use_huge_pages(char **argv) {
  const char *t = getenv("GLIBC_TUNABLES");
  /* Set already (by us, or by the user, who may have chosen 0). */
  if (t && strstr(t, HUGE_TUNABLE)) {
    return;
  }
  char value[1024];
  int n = t && *t ? snprintf(value, sizeof(value), "%s:" HUGE_TUNABLE "=1", t)
                  : snprintf(value, sizeof(value), HUGE_TUNABLE "=1");
  if (n < 0 || (size_t)n >= sizeof(value) ||
      setenv("GLIBC_TUNABLES", value, 1) != 0) {
    return;
  }
  (void)execv("/proc/self/exe", argv);
  /* Not started again (no /proc): run as we are, with the tunable set for
   * the children only. */
}
