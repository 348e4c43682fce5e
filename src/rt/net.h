/*
 * net.h: small socket helpers shared by the runtime: name resolution,
 * printable addresses, and whole-buffer reads and writes bounded by an
 * absolute deadline.  All helpers report failures as negative codes
 * (DLCP_ERR_* or -errno, as libuv's UV__ERR) and never block past the
 * deadline they are given.
 */
#ifndef DLCP_RT_NET_H
#define DLCP_RT_NET_H

#include <netinet/in.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>

#include "dlcp/dlcp_types.h"
#include "rt/errbuf.h"

/* Room for "[ipv6-address]:65535" and the NUL. */
#define DLCP_NET_ADDRSTR_LEN 64

/* An IPv4 or IPv6 socket address, by value: a job's data path speaks the
 * family of its MASTER_ADDR. */
typedef union dlcp_sockaddr {
  struct sockaddr sa;
  struct sockaddr_in in;
  struct sockaddr_in6 in6;
} dlcp_sockaddr;

_Static_assert(offsetof(struct sockaddr_in, sin_port) ==
                   offsetof(struct sockaddr_in6, sin6_port),
               "both families keep the port at one offset");

/* dlcp_sockaddr_parse sets |a| to the numeric IPv4 or IPv6 address |ip|
 * and |port|; returns 0, or -1 if |ip| is neither. */
int dlcp_sockaddr_parse(dlcp_sockaddr *a, const char *ip, uint16_t port);

/* dlcp_sockaddr_len returns the length of |a|'s family's address. */
static inline socklen_t dlcp_sockaddr_len(const dlcp_sockaddr *a) {
  return a->sa.sa_family == AF_INET6 ? sizeof(a->in6) : sizeof(a->in);
}

/* dlcp_sockaddr_same_host: the same family and address, any port.  Inline
 * with dlcp_sockaddr_equal: a received datagram's sender is matched
 * against every peer's paths. */
static inline bool dlcp_sockaddr_same_host(const dlcp_sockaddr *a,
                                           const dlcp_sockaddr *b) {
  if (a->sa.sa_family != b->sa.sa_family) {
    return false;
  }
  if (a->sa.sa_family == AF_INET6) {
    return memcmp(&a->in6.sin6_addr, &b->in6.sin6_addr,
                  sizeof(a->in6.sin6_addr)) == 0;
  }
  return a->in.sin_addr.s_addr == b->in.sin_addr.s_addr;
}

/* dlcp_sockaddr_equal: the same family, address and port (the port field
 * sits at the same offset in both families). */
static inline bool dlcp_sockaddr_equal(const dlcp_sockaddr *a,
                                       const dlcp_sockaddr *b) {
  return a->in.sin_port == b->in.sin_port && dlcp_sockaddr_same_host(a, b);
}

/* dlcp_sockaddr_is_loopback: 127.0.0.0/8 or ::1. */
bool dlcp_sockaddr_is_loopback(const dlcp_sockaddr *a);

/* The traffic class byte (DSCP and ECN) of |family|'s datagrams: the
 * ancillary data and socket option level, the option that sets it
 * (IP_TOS, IPV6_TCLASS) and the one that reports it on receive
 * (IP_RECVTOS, IPV6_RECVTCLASS). */
int dlcp_net_tclass_level(int family);
int dlcp_net_tclass_opt(int family);
int dlcp_net_recv_tclass_opt(int family);

/* dlcp_net_tclass_of returns the traffic class byte of received
 * ancillary datum |c| (IP_TOS or IPV6_TCLASS), or -1 if |c| is neither. */
int dlcp_net_tclass_of(const struct cmsghdr *c);

/* dlcp_net_ip_header_len: the IP header's bytes for |family| (20, 40). */
int dlcp_net_ip_header_len(int family);

/* dlcp_net_path_mtu returns the path MTU towards |to| as the kernel knows
 * it (IP_MTU / IPV6_MTU of a connected socket), or |fallback|. */
int dlcp_net_path_mtu(const dlcp_sockaddr *to, int fallback);

/*
 * dlcp_net_resolve resolves |host| (a name or a numeric IPv4/IPv6 address)
 * and |port| into |addr|, preferring IPv4.  |socktype| is SOCK_STREAM or
 * SOCK_DGRAM.  Returns 0, or DLCP_ERR_CONFIG with a message naming |host| if
 * it cannot be resolved.
 */
int dlcp_net_resolve(dlcp_sockaddr *addr, const char *host, uint16_t port,
                     int socktype, dlcp_errbuf *eb);

/*
 * dlcp_net_addr_format writes |sa| as "a.b.c.d:port" or "[v6]:port" into
 * |buf| (at least DLCP_NET_ADDRSTR_LEN bytes recommended) and returns |buf|.
 */
const char *dlcp_net_addr_format(char *buf, size_t buflen,
                                 const struct sockaddr *sa);

/* dlcp_net_split_host_port splits |s|, "HOST:PORT" or "[IPV6]:PORT", into
 * |host| (|hostlen| bytes with the NUL, brackets removed) and |port|, a
 * number from 1 to 65535.  An IPv6 address needs the brackets.  Returns 0,
 * or -1 if |s| is not of that form or the host does not fit. */
int dlcp_net_split_host_port(const char *s, char *host, size_t hostlen,
                             uint16_t *port);

/* dlcp_net_addr_port returns the port of an IPv4/IPv6 address, else 0. */
uint16_t dlcp_net_addr_port(const struct sockaddr *sa);

/*
 * dlcp_net_path_rate_gbps returns the line rate of the path towards |to|:
 * the speed the kernel reports for the interface its route leaves by
 * (/sys/class/net/IF/speed); |local_gbps| when |to| is on this host (the
 * path is memory, not a link); |unknown_gbps| when the interface reports
 * no speed (most virtual devices, a link that is down).
 */
double dlcp_net_path_rate_gbps(const dlcp_sockaddr *to, double local_gbps,
                               double unknown_gbps);

/* dlcp_net_set_nonblock makes |fd| non-blocking; 0 or -errno. */
int dlcp_net_set_nonblock(int fd);

/*
 * dlcp_net_write_all writes all |len| bytes of |buf| to the stream socket
 * |fd| (blocking or not), waiting at most until |deadline|.  SIGPIPE is
 * never raised.  Returns 0, DLCP_ERR_TIMEOUT, DLCP_ERR_PEER_CLOSED (the
 * peer reset or closed the connection) or -errno.
 */
int dlcp_net_write_all(int fd, const void *buf, size_t len,
                       dlcp_tstamp deadline);

/*
 * dlcp_net_read_all reads exactly |len| bytes from the stream socket |fd|
 * into |buf|, waiting at most until |deadline|.  Returns 0,
 * DLCP_ERR_TIMEOUT, DLCP_ERR_PEER_CLOSED (end of stream or reset before
 * |len| bytes arrived) or -errno.
 */
int dlcp_net_read_all(int fd, void *buf, size_t len, dlcp_tstamp deadline);

/* dlcp_net_ecn_of returns the ECN bits (0..3) of the IP_TOS or
 * IPV6_TCLASS ancillary datum of a message received with IP_RECVTOS or
 * IPV6_RECVTCLASS set, 0 if it carries none or its control data was
 * truncated. */
uint8_t dlcp_net_ecn_of(const struct msghdr *m);

/* Datagrams of one UDP GSO send (UDP_SEGMENT; the kernel's
 * UDP_MAX_SEGMENTS), and the most bytes it may carry. */
#define DLCP_NET_GSO_MAX 64
#define DLCP_NET_GSO_BYTES 65000

/* dlcp_net_put_cmsg fills ancillary data item |c| (level, type, |len|
 * bytes of |data|) and returns where the next item goes; the caller's
 * control buffer must have room for both (CMSG_SPACE each). */
struct cmsghdr *dlcp_net_put_cmsg(struct cmsghdr *c, int level, int type,
                                  const void *data, size_t len);

/* Room for the ancillary data of dlcp_net_gso_message: IP_TOS (or
 * IPV6_TCLASS) and UDP_SEGMENT. */
#define DLCP_NET_GSO_CTL (2 * CMSG_SPACE(sizeof(int)))

/* dlcp_net_gso_run returns how many of the datagrams iov[0..n) (n > 0)
 * can go as one UDP GSO message: those of the first's length that follow
 * it (and one shorter last), at most DLCP_NET_GSO_MAX and
 * DLCP_NET_GSO_BYTES in all. */
size_t dlcp_net_gso_run(const struct iovec *iov, size_t n);

/* dlcp_net_gso_refused: whether a send of several datagrams as one GSO
 * message that failed with |err| (an errno) was refused as such, so that
 * they may go one by one: the kernel has no UDP GSO (EINVAL, ENOPROTOOPT,
 * EIO), or the segments are longer than the path's MTU allows (EMSGSIZE:
 * the kernel fragments such a datagram, but not a GSO segment). */
bool dlcp_net_gso_refused(int err);

/* dlcp_net_gso_message makes |m| (zeroed first; |name| may be NULL on a
 * connected socket) send iov[0..count) as one message: with count > 1 a
 * UDP_SEGMENT of iov[0]'s length, so the kernel cuts it into those
 * datagrams, and with |tos| != 0 an IP_TOS (IPV6_TCLASS towards an IPv6
 * |name|, which must then be given); the control data goes in
 * |ctl|, DLCP_NET_GSO_CTL bytes aligned as a struct cmsghdr that must live
 * until the send. */
void dlcp_net_gso_message(struct msghdr *m, const dlcp_sockaddr *name,
                          struct iovec *iov, size_t count, int tos, void *ctl);

/* dlcp_net_set_buffers sets socket |fd|'s receive and send buffers to
 * |rcv| and |snd| bytes (0: left as they are).  Large buffers absorb
 * bursts at line rate: SO_*BUFFORCE goes beyond the host's rmem_max and
 * wmem_max for a privileged process, the plain option (capped there) is
 * the fallback.  Best effort: a buffer left smaller costs drops, which
 * are counted and recovered, not a failure. */
void dlcp_net_set_buffers(int fd, int rcv, int snd);

/* A receiving socket's drops: datagrams its kernel discarded because its
 * buffer was full (its process did not read for a while), lost at this
 * host rather than in the network.  The socket reports its drop count
 * with each datagram once it has dropped any (SO_RXQ_OVFL, set by
 * dlcp_net_count_drops); the count wraps at 32 bits. */
typedef struct dlcp_net_drops {
  uint64_t total;
  uint32_t last; /* the count last seen */
} dlcp_net_drops;

/* dlcp_net_count_drops asks socket |fd| for its drop count with every
 * datagram.  Returns 0, or -errno (a kernel without the option: the
 * count then stays 0). */
int dlcp_net_count_drops(int fd);

/* dlcp_net_note_drops adds to |d| what the drop count in message |m|
 * (received on a socket set by dlcp_net_count_drops) grew by since the
 * count last seen, and returns that growth; a message that carries none
 * changes nothing and returns 0. */
uint32_t dlcp_net_note_drops(dlcp_net_drops *d, const struct msghdr *m);

/* Room for the ancillary datum dlcp_net_note_drops reads. */
#define DLCP_NET_DROPS_CTL CMSG_SPACE(sizeof(uint32_t))

/* dlcp_net_gro_segment returns the length of each datagram in message |m|
 * of |len| bytes received on a socket with UDP_GRO set: the segment size
 * of its UDP_GRO ancillary datum when the kernel kept a run of datagrams
 * together (the last may be shorter), else |len| (one datagram). */
size_t dlcp_net_gro_segment(const struct msghdr *m, size_t len);

/*
 * dlcp_net_free_port finds a currently unused TCP port on |host|: a
 * random one outside the kernel's ephemeral range (so no connect() can
 * take it before the caller binds it), else the kernel's choice of port 0.
 * Another process binding the same port explicitly can still take it
 * first; torchrun --standalone has the same window.  Returns 0 with
 * |*port| set, or a negative code with |eb| filled.
 */
int dlcp_net_free_port(const char *host, uint16_t *port, dlcp_errbuf *eb);

#endif /* DLCP_RT_NET_H */
