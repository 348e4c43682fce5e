/* udpcaps.c: see udpcaps.h. */
#include "udpcaps.h"

#include <netinet/in.h>
#include <netinet/udp.h>
#include <sys/socket.h>
#include <unistd.h>

bool udpcaps_coalesces(void) {
  int fd = socket(AF_INET, SOCK_DGRAM, 0);
  if (fd < 0) {
    return false;
  }
  int seg = 1400, on = 1;
  bool ok = setsockopt(fd, SOL_UDP, UDP_SEGMENT, &seg, sizeof(seg)) == 0 &&
            setsockopt(fd, SOL_UDP, UDP_GRO, &on, sizeof(on)) == 0;
  close(fd);
  return ok;
}
