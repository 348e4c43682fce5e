/*
 * comm_internal.h: the communicator's state, shared by the files of the
 * communicator (comm.c: lifecycle, posting, the service pass; join.c,
 * ctrl.c, dgram.c, drive.c, config.c) and collective.c (collectives over
 * the same connections, with state of their own: dlcp_rt_colls).  Not
 * installed.
 */
#ifndef DLCP_RT_COMM_INTERNAL_H
#define DLCP_RT_COMM_INTERNAL_H

#include <arpa/inet.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "base/zalloc.h"
#include "coll/coll.h"
#include "dlcp/dlcp.h"
#include "proto/mlt.h"
#include "rt/auth.h"
#include "rt/env.h"
#include "rt/errbuf.h"
#include "rt/net.h"
#include "rt/fault.h"
#include "rt/loop.h"
#include "rt/rendezvous.h"
#include "rt/shm.h"
#include "rt/udp.h"
#include "wire/wire.h"

#define SCRATCH_LEN DLCP_WIRE_CTRL_MAX

enum op_kind { OP_SEND, OP_RECV };
enum { DRIVER_NONE = 0, DRIVER_LOOP_THREAD = 1, DRIVER_APP = 2 };

struct coll_run;
struct dlcp_rt_colls;

/* One posted transfer: the application's (p2p), or a collective's. */
typedef struct op {
  struct op *next;
  enum op_kind kind;
  struct coll_run *coll; /* NULL: the application's, completes to |cq| */
  uint32_t tag;          /* the collective's transfer tag */
  struct op *coll_next;  /* the collective's outstanding transfers */
  uint32_t peer;
  dlcp_tensor t;
  dlcp_send_opts opts;
  double loss_bound;
  uint32_t stage; /* a collective's: sent below earlier stages */
  /* A collective's receive reduced on arrival (dlcp_coll_action's
   * recv_place), or NULL */
  dlcp_mlt_place_fn place;
  void *place_user;
  uint32_t place_unit;
  dlcp_cq *cq;
  uint64_t user_data;
  dlcp_tstamp posted_ns;
} op;

typedef struct peer {
  struct dlcp_comm *comm;
  uint32_t rank;
  char name[96]; /* "rank R (ip:port)", "rank R ([ipv6]:port)" */
  dlcp_sockaddr udp[DLCP_ENV_MAX_PATHS];
  uint32_t udp_k;
  int tcp_fd;
  dlcp_mlt_conn *conn;
  dlcp_shm_out shm; /* its ring for us when it is on this host */
  bool shm_held;    /* data held back last service: its ring was full */
  /* When the connection was last polled dry: its input count then
   * (dlcp_mlt_inputs) and its next deadline after, and this peer's
   * deadline as the last service pass set it.  A pass leaves out a peer
   * whose count is unchanged and whose deadline is to come (comm.c). */
  uint64_t polled_inputs;
  dlcp_tstamp conn_due_ns, due_ns;
  bool both_rings;  /* both ends published rings on loopback: the control
                       stream rides them, never TCP (join.c) */
  uint8_t *rbuf;
  size_t rlen, rcap;
  uint8_t *wbuf;
  size_t wlen, woff, wcap;
  bool want_write;
  /* A job with a secret (rt/auth.h): the last counters used towards |p|
   * on each channel, the last control counter accepted from it (a byte
   * stream: in order), and the window of its datagram counters. */
  uint64_t dgram_tx, ctl_tx, ctl_rx;
  dlcp_replay dgram_rx;
  int dead_status; /* 0 while alive */
  char dead_reason[224];
} peer;

struct dlcp_comm {
  dlcp_rt_env env;
  dlcp_loop *loop;
  pthread_t thread;
  bool thread_started;
  pthread_mutex_t mu; /* the loop thread holds it while it works */
  int efd;
  bool closing;                  /* under mu */
  /* Who runs the event loop: the loop thread, or an application thread
   * waiting in dlcp_wait_cq (so a completion needs no thread hand-off).
   * All under pmu. */
  pthread_mutex_t pmu;
  pthread_cond_t pcv; /* application threads waiting to drive */
  pthread_cond_t lcv; /* the parked loop thread */
  int driver;         /* DRIVER_* */
  int app_wants;
  uint64_t app_drives;      /* turns application threads took as the driver */
  bool loop_awaits_release; /* the loop thread sleeps until the driving
                               application thread lets go (drive.c) */
  bool stopping;
  peer *peers;                   /* world_size entries; self unused */
  dlcp_udp udp;
  dlcp_shm_in shm_in; /* rings of the peers on this host */
  dlcp_fault fault;
  dlcp_fault_queue held; /* datagrams held back by fault injection */
  /* The earliest core deadline (under mu): the thread that next sleeps in
   * epoll sleeps until it (drive.c), and serves it when it passes.  Only
   * a deadline that moves earlier than what a thread already asleep in
   * epoll waits for goes into the timerfd: arming one for every pacing
   * gap cost 13 % of a rank's CPU on the testbed (timerfd_settime, 11,000
   * a second, a hypervisor exit each). */
  dlcp_tstamp next_ns;
  bool sleeping;          /* a thread is in epoll until sleep_until_ns */
  bool sleeper_waits;     /* ... an application thread, for a completion */
  dlcp_tstamp sleep_until_ns;
  /* Completions handed to the application so far (under mu): a waiter
   * about to sleep in epoll sees whether one came since it last looked
   * (dlcp_rt_completed). */
  uint64_t completions;
  /* When a spinning waiter next looks at the sockets, if every peer is
   * on a ring (drive.c); kept from one wait to the next, so that a run
   * of short operations does not make a system call each. */
  dlcp_tstamp next_epoll_ns;
  /* This job's ranks on this machine outnumber its CPUs (join.c): a
   * spinning waiter yields its core at once. */
  bool cores_shared;
  /* Those ranks per CPU, rounded up, 1 to DLCP_RT_MAX_SPIN_SCALE (join.c):
   * a waiter spins that many times DLCP_SPIN_US (drive.c). */
  uint32_t spin_scale;
  /* ... by DLCP_RT_CROWDED_RANKS_PER_CPU or more to a CPU (join.c): the
   * control channels acknowledge at once (dlcp_rt_make_conns). */
  bool cores_crowded;
  int tfd;                /* timerfd, for that thread */
  dlcp_tstamp armed_ns;   /* what tfd is set to; NEVER = disarmed */
  uint8_t *scratch;
  int listen_fd;
  /* With a job secret (rdzv.authenticated) every datagram on a socket and
   * every control message carries a trailer tagged under rdzv.session. */
  dlcp_rdzv rdzv;
  char local_ip[INET6_ADDRSTRLEN];
  dlcp_tstamp started_ns;
  bool paused_once;
  bool rx_in_place; /* DATA payloads are read straight into the tensor */
  /* Every connection's segment holds whole elements of every dtype, so
   * collectives reduce received bytes on arrival
   * (dlcp_coll_params.reduce_on_arrival). */
  bool reduce_on_arrival;
  /* Every connection sends a transfer of at most this many bytes whole
   * and reliably (EAGER); the same on every rank. */
  uint32_t eager_bytes;
  dlcp_comm_stats stats;
  struct dlcp_rt_colls *coll; /* the collectives (collective.c) */
  int lost_status;          /* the first lost rank, however learnt */
  uint32_t lost_rank;
  uint32_t lost_op_plus;    /* the operation it stalled in + 1, or 0 */
  char lost_reason[224];
  int dump_fd;              /* eventfd raised by SIGUSR1 (rt/sigdump.h) */
  uint32_t topo_levels;     /* rank r's label at level l: */
  uint32_t *topo;           /* topo[r * topo_levels + l] */
};

/* A NOTE with this op id is the runtime's, not a collective's: "rank
 * |value| is lost" (its control connection dropped at the sender). */
#define DLCP_RT_NOTE_PEER_LOST 0xFFFFFFFFu
/* A stall inquiry (rt/stall.h): "whom do you wait on?" (value: the
 * probe's nonce), and the answer (value: dlcp_stall_pack(nonce, rank)). */
#define DLCP_RT_NOTE_PROBE 0xFFFFFFFEu
#define DLCP_RT_NOTE_PROBE_ANSWER 0xFFFFFFFDu

/* comm.c: the service pass and the peers' fate; all with |mu| held. */
void dlcp_rt_submit(dlcp_comm *c, op *o, dlcp_tstamp now);
/* Polls every connection dry and moves the loop's deadline; _at with
 * the time just read by the caller. */
void dlcp_rt_service(dlcp_comm *c);
void dlcp_rt_service_at(dlcp_comm *c, dlcp_tstamp now);
/* dlcp_rt_service_if_due serves |c| if its deadline is at or before
 * |now| (with mu held). */
void dlcp_rt_service_if_due(dlcp_comm *c, dlcp_tstamp now);
/* Fails |p| for good: its transfers, its collectives, and tells the other
 * ranks (a PEER_LOST note) so their collectives name |p|. */
void dlcp_rt_peer_fail(dlcp_comm *c, peer *p, int status, const char *reason,
                       dlcp_tstamp now);

/* ctrl.c: the control streams; all with |mu| held. */
void dlcp_rt_queue_control(dlcp_comm *c, peer *p, const uint8_t *msg,
                           size_t len, dlcp_tstamp now);
/* Writes what |p|'s queue holds as far as the socket or ring allows.
 * Returns 0, or -1 if |p| failed. */
int dlcp_rt_ctrl_flush(dlcp_comm *c, peer *p, dlcp_tstamp now);
/* Reads and handles |p|'s control connection (see ctrl.c). */
void dlcp_rt_ctrl_read(dlcp_comm *c, peer *p, bool to_the_end,
                       dlcp_tstamp now);
/* Room for |more| bytes in |p|'s input buffer; false if |p| failed. */
bool dlcp_rt_ctrl_reserve(dlcp_comm *c, peer *p, size_t more,
                          dlcp_tstamp now);
/* Handles every whole message of |p|'s input buffer. */
void dlcp_rt_ctrl_parse(dlcp_comm *c, peer *p, dlcp_tstamp now);
/* Handles |len| more bytes of |p|'s control stream (a piece of its ring,
 * which may be released on return): whole messages where they lie when
 * nothing is buffered, the rest kept for the next piece. */
void dlcp_rt_ctrl_take(dlcp_comm *c, peer *p, const uint8_t *piece,
                       size_t len, dlcp_tstamp now);
/* The loop callback of a control connection (user: its peer). */
void dlcp_rt_on_tcp(dlcp_loop *loop, int fd, uint32_t events, void *user);

/* dgram.c: the datagram path; all with |mu| held. */
void dlcp_rt_send_datagram(dlcp_comm *c, peer *p, const dlcp_mlt_action *a,
                           dlcp_tstamp now);
/* Sends the queued batch and rings the sleeping peers on this host. */
void dlcp_rt_flush_datagrams(dlcp_comm *c);
/* Sends the fault-held datagrams that are due. */
void dlcp_rt_release_held(dlcp_comm *c, dlcp_tstamp now);
void dlcp_rt_drain_peer_ring(dlcp_comm *c, peer *p, uint32_t max,
                             dlcp_tstamp now);
/* Reads the rings of the peers on this host, the first pass at |now|;
 * true if some are left. */
bool dlcp_rt_drain_rings(dlcp_comm *c, dlcp_tstamp now);
/* The loop callback of a UDP path (user: the communicator). */
void dlcp_rt_on_udp(dlcp_loop *loop, int fd, uint32_t events, void *user);

/* drive.c: the loop thread's body, and its wake-up. */
void *dlcp_rt_loop_main(void *arg);
void dlcp_rt_kick(dlcp_comm *c);
/* A completion was just handed to the application (a queue entry, a
 * finished request), under mu.  The thread that produced it need not be
 * the one waiting for it: an application thread's post or the loop
 * thread's first pass serve the connections too, while the waiter drives
 * the loop asleep in epoll; it is woken. */
void dlcp_rt_completed(dlcp_comm *c);

/* join.c: joining the job, then one MLT connection per peer.  Both
 * return 0 or an error with |eb| saying what failed. */
int dlcp_rt_join(dlcp_comm *c, dlcp_errbuf *eb);
int dlcp_rt_make_conns(dlcp_comm *c, dlcp_errbuf *eb);

/* collective.c, for comm.c; all with |mu| held except new and free. */
typedef struct dlcp_rt_colls dlcp_rt_colls;
int dlcp_rt_coll_new(dlcp_rt_colls **pcoll);
/* Frees what the collectives keep (call after dlcp_rt_coll_shutdown). */
void dlcp_rt_coll_free(dlcp_rt_colls *co);
/* Whether a collective is running (the loop thread then drives). */
bool dlcp_rt_coll_busy(const dlcp_rt_colls *co);
void dlcp_rt_coll_transfer_done(dlcp_comm *c, op *o,
                                const dlcp_mlt_completion *mc, int status,
                                dlcp_tstamp now);
void dlcp_rt_coll_note(dlcp_comm *c, peer *p, const uint8_t *msg,
                       size_t len, dlcp_tstamp now);
/* Runs every collective that has work; returns whether it posted new
 * transfers, and lowers |*next| to the collectives' earliest deadline. */
bool dlcp_rt_coll_service(dlcp_comm *c, dlcp_tstamp now, dlcp_tstamp *next);
void dlcp_rt_coll_peer_lost(dlcp_comm *c, peer *p, dlcp_tstamp now);
/* Fails every collective (the communicator is going away). */
void dlcp_rt_coll_shutdown(dlcp_comm *c, dlcp_tstamp now);
/* Writes the flight recorder (rt/flight.h) to stderr and to
 * DLCP_FLIGHT_DIR, headed by |reason|. */
void dlcp_rt_coll_dump(dlcp_comm *c, const char *reason, dlcp_tstamp now);
/* The flight recorder, made at the first call; NULL if out of memory. */
struct dlcp_flight *dlcp_rt_coll_flight(dlcp_comm *c);

/* collective.c, for the public calls of collective_api.c; these take
 * |mu| themselves.  dlcp_rt_coll_start runs the operation |p| (complete
 * but for the straggler bypass's hints, which it adds) with |opts|'s
 * layer and importance, and returns its request in |*preq|: 0,
 * DLCP_ERR_NOMEM, DLCP_ERR_CANCELED (the communicator is closing),
 * DLCP_ERR_LIMIT (too many running) or dlcp_coll_new's error.
 * dlcp_rt_coll_cancel fails |req|'s run if it is still running;
 * dlcp_rt_coll_await waits until |req| is done or |deadline|, while
 * another thread drives the loop; dlcp_rt_coll_ina is where the INA
 * all-reduces keep their switch state. */
int dlcp_rt_coll_start(dlcp_comm *c, dlcp_coll_params *p,
                       const dlcp_coll_opts *opts, dlcp_request **preq);
/* With |mu| held, for a collective started by another one (the INA
 * all-reduce's agreements and ring part, ina_run.c): the next run id,
 * which every rank reserves at the same point of its call sequence;
 * dlcp_rt_coll_start_locked starts run |id| without running the service
 * pass (the caller is in it, or runs it); dlcp_rt_coll_drop frees a
 * request, failing its run if it is still running;
 * dlcp_rt_coll_finish_request marks |req| done and wakes its waiters. */
uint32_t dlcp_rt_coll_reserve_id(dlcp_comm *c);
/* collective_api.c: the parameters of a collective of |c| (a public call's
 * arguments and options). */
void dlcp_rt_coll_params_for(dlcp_comm *c, dlcp_coll_params *p,
                             dlcp_coll_kind kind, const void *sendbuf,
                             void *recvbuf, uint64_t count, dlcp_dtype dtype,
                             dlcp_redop redop, uint32_t root,
                             const dlcp_coll_opts *opts);
int dlcp_rt_coll_start_locked(dlcp_comm *c, dlcp_coll_params *p,
                              const dlcp_coll_opts *opts, uint32_t id,
                              dlcp_request **preq);
void dlcp_rt_coll_drop(dlcp_comm *c, dlcp_request *req);
/* With |mu| held: dlcp_coll_final_prefix of |req|'s run while it runs;
 * once the request is done UINT64_MAX (all), or 0 if it failed. */
uint64_t dlcp_rt_coll_final_prefix(const dlcp_request *req);
void dlcp_rt_coll_finish_request(dlcp_comm *c, dlcp_request *req);
void dlcp_rt_coll_cancel(dlcp_comm *c, dlcp_request *req);
void dlcp_rt_coll_await(dlcp_comm *c, dlcp_request *req,
                        dlcp_tstamp deadline);
struct dlcp_rt_ina **dlcp_rt_coll_ina(dlcp_comm *c);

#endif /* DLCP_RT_COMM_INTERNAL_H */
