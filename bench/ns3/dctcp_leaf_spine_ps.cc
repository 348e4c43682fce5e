/*
 * dctcp_leaf_spine_ps.cc: the ns-3 half of the 144-host leaf-spine
 * comparison (scripts/bench-sim.sh, docs/performance-sim.md).
 *
 * Model: dlcp-sim's default scenario (the MLT seed's section 5.4.2).
 * |tors| racks of |hosts_per_tor| hosts, each ToR wired to every one of
 * |spines| spines, every link at one rate with one propagation delay (a
 * quarter of the base RTT's one-way half: host-ToR-spine-ToR-host is four
 * links).  Switch ports run RED as DCTCP's step marker exactly as in
 * dctcp_star.cc (instantaneous queue, MinTh = MaxTh = K packets, ECN marks
 * instead of drops, tail drop at the port buffer); host NICs a deep FIFO.
 * With --bytes=1 the port buffer and the threshold are counted in bytes
 * (packets x (mss + 42)), as dlcp-sim counts them; by default in packets,
 * as dctcp_star.cc does, where a 42-byte ACK takes a full packet's slot.
 * TCP is ns-3's TcpDctcp with the star comparison's settings.
 *
 * Load balancing is per-flow ECMP: ns-3 3.37's Ipv4GlobalRouting only
 * offers per-packet random ECMP, so every node runs FlowHashRouting below,
 * which forwards on the leaf-spine's shortest paths and, at a ToR with a
 * packet for another rack, picks the uplink by a salted hash of the
 * 5-tuple and the switch id (as dlcp-sim hashes flow, src, dst and the
 * switch id).  A flow's data and its ACKs hash independently.
 *
 * Traffic is dlcp-sim's `workload.ps` with the same parameters, host
 * placement and flow numbering (src/sim/workload.c): servers and workers
 * are the hosts in rack-major round-robin order (servers first); each
 * iteration every worker pushes shard j (model/servers bytes) to server j;
 * a server that holds all of an iteration's pushes pulls its shard back to
 * every worker; a worker that has all its pulls computes for
 * |compute_us| and starts its next iteration's pushes.  A flow is
 * finished, for these barriers and for its FCT, when its sender sees the
 * ACK of its last byte.  Flow ids are iteration-major, pushes worker-major
 * then pulls server-major, as dlcp-sim numbers them, so FCTs compare flow
 * by flow.
 *
 * dlcp-sim has no handshake, so every flow's connection is opened during
 * a warm-up before the workload (one SYN every |warmup_gap_ns|, a few
 * hundred bytes per microsecond across the fabric) and its data are
 * written at the flow's start time; FCT runs from that write to the ACK of
 * the last byte.  One connection per flow, as dlcp-sim starts every flow
 * with a fresh window and alpha.
 *
 * With --flows=FILE the workload is instead the flows FILE lists, one per
 * line as "src dst bytes start_ns" (hosts numbered rack-major, as
 * dlcp-sim numbers a leaf-spine's; the start counted from the workload's),
 * each independent of the others: scripts/bench-sim-scaling-ns3.sh feeds
 * it the background flows of dlcp-sim's scaling scenarios, and
 * --countHops=1 counts the packets every device puts on its link from the
 * workload's start ("packet_hops N"), the unit of dlcp-sim's cost per
 * packet-hop.
 *
 * Output (stdout): "fct id src dst bytes fct_us timeouts retransmits
 * recoveries" per flow (fct_us -1: not finished; timeouts: entries into
 * ns-3's CA_LOSS, recoveries: into CA_RECOVERY, retransmits: data
 * segments sent below the highest sequence sent), "queues drops D marks M"
 * (summed over the switch ports' queue discs), "cpu_s C" (user + system CPU time of the workload: from its
 * first push to the end of Simulator::Run(), warm-up excluded),
 * "cpu_run_s C" (all of Simulator::Run()), "wall_s W" (wall time of the
 * workload) and "sim_end_us T" (simulated time of the last finish,
 * counted from the first push).
 */
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <iostream>
#include <string>
#include <unordered_map>
#include <vector>

#include "ns3/applications-module.h"
#include "ns3/core-module.h"
#include "ns3/internet-module.h"
#include "ns3/network-module.h"
#include "ns3/point-to-point-module.h"
#include "ns3/traffic-control-module.h"

#include "dctcp_defaults.h"

using namespace ns3;

namespace {

double CpuSeconds() {
  struct rusage ru;
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_utime.tv_sec + ru.ru_stime.tv_sec) +
         static_cast<double>(ru.ru_utime.tv_usec + ru.ru_stime.tv_usec) / 1e6;
}

uint64_t Mix64(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/* Where the fabric is: shared by every node's FlowHashRouting. */
struct Fabric {
  uint32_t hosts_per_tor = 0;
  uint64_t salt = 0;
  std::unordered_map<uint32_t, uint32_t> host_of_addr; /* IPv4 -> host */
};

/*
 * Shortest-path forwarding in a leaf-spine with per-flow hashing at the
 * ToR uplinks.  A host sends everything on its NIC; a ToR sends a packet
 * for one of its hosts on that host's port and any other packet up the
 * uplink its flow hashes to; a spine sends it down to the destination's
 * ToR.
 */
class FlowHashRouting : public Ipv4RoutingProtocol {
public:
  enum Role { HOST, TOR, SPINE };

  FlowHashRouting(const Fabric *fabric, Role role, uint32_t index)
      : fabric_(fabric), role_(role), index_(index) {}

  /* Interfaces: a host's NIC; a ToR's port to each of its hosts (by
   * position in the rack) and its uplinks in spine order; a spine's port
   * to each ToR. */
  std::vector<uint32_t> down_if;
  std::vector<uint32_t> up_if;

  Ptr<Ipv4Route> RouteOutput(Ptr<Packet>, const Ipv4Header &header,
                             Ptr<NetDevice>,
                             Socket::SocketErrno &sockerr) override {
    /* Only hosts originate packets. */
    uint32_t nic = down_if.at(0);
    sockerr = Socket::ERROR_NOTERROR;
    return MakeRoute(header.GetDestination(), nic,
                     ipv4_->GetAddress(nic, 0).GetLocal());
  }

  bool RouteInput(Ptr<const Packet> p, const Ipv4Header &header,
                  Ptr<const NetDevice> idev, UnicastForwardCallback ucb,
                  MulticastForwardCallback, LocalDeliverCallback lcb,
                  ErrorCallback ecb) override {
    uint32_t iif = static_cast<uint32_t>(ipv4_->GetInterfaceForDevice(idev));
    if (ipv4_->IsDestinationAddress(header.GetDestination(), iif)) {
      lcb(p, header, iif);
      return true;
    }
    auto it = fabric_->host_of_addr.find(header.GetDestination().Get());
    if (it == fabric_->host_of_addr.end() || role_ == HOST) {
      ecb(p, header, Socket::ERROR_NOROUTETOHOST);
      return false;
    }
    uint32_t dst = it->second;
    uint32_t rack = dst / fabric_->hosts_per_tor;
    uint32_t oif;
    if (role_ == SPINE) {
      oif = down_if[rack];
    } else if (rack == index_) {
      oif = down_if[dst % fabric_->hosts_per_tor];
    } else {
      oif = up_if[PickUplink(p, header)];
    }
    ucb(MakeRoute(header.GetDestination(), oif, header.GetSource()), p,
        header);
    return true;
  }

  void NotifyInterfaceUp(uint32_t) override {}
  void NotifyInterfaceDown(uint32_t) override {}
  void NotifyAddAddress(uint32_t, Ipv4InterfaceAddress) override {}
  void NotifyRemoveAddress(uint32_t, Ipv4InterfaceAddress) override {}
  void SetIpv4(Ptr<Ipv4> ipv4) override { ipv4_ = ipv4; }
  void PrintRoutingTable(Ptr<OutputStreamWrapper>, Time::Unit) const override {}

private:
  Ptr<Ipv4Route> MakeRoute(Ipv4Address dst, uint32_t oif, Ipv4Address src) {
    Ptr<Ipv4Route> r = Create<Ipv4Route>();
    r->SetDestination(dst);
    r->SetSource(src);
    r->SetGateway(Ipv4Address("0.0.0.0")); /* point-to-point: on link */
    r->SetOutputDevice(ipv4_->GetNetDevice(oif));
    return r;
  }

  /* The packet's TCP ports are its first four bytes (IP's header has been
   * removed); hashed with the addresses, the run's salt and the switch. */
  uint32_t PickUplink(Ptr<const Packet> p, const Ipv4Header &header) const {
    uint8_t ports[4] = {0, 0, 0, 0};
    p->CopyData(ports, sizeof(ports));
    uint64_t h = Mix64(fabric_->salt ^
                       (static_cast<uint64_t>(header.GetSource().Get()) << 32) ^
                       header.GetDestination().Get());
    h = Mix64(h ^ (static_cast<uint64_t>(ports[0]) << 24 |
                   static_cast<uint64_t>(ports[1]) << 16 |
                   static_cast<uint64_t>(ports[2]) << 8 | ports[3]));
    h = Mix64(h ^ (static_cast<uint64_t>(index_) * 0x9E3779B97F4A7C15ull));
    return static_cast<uint32_t>(((h >> 32) * up_if.size()) >> 32);
  }

  const Fabric *fabric_;
  Role role_;
  uint32_t index_;
  Ptr<Ipv4> ipv4_;
};

/* A barrier: when |remaining| flows have finished, |release| start
 * |delay| later. */
struct Barrier {
  uint32_t remaining;
  Time delay;
  std::vector<uint32_t> release;
};

/* A flow's barrier when it has none (--flows). */
constexpr uint32_t kNoBarrier = UINT32_MAX;

struct Flow {
  uint32_t src, dst;
  uint64_t bytes;
  uint32_t barrier; /* the barrier this flow's finish counts towards */
  Time at;          /* its start after the workload's (--flows) */
  Ptr<Socket> socket;
  bool connected = false;
  Time start;
  double fct_us = -1;
  uint64_t sent = 0;
  uint32_t timeouts = 0, recoveries = 0, retransmits = 0;
  uint32_t high_tx = 0; /* highest sequence number sent + 1 */
};

class PsJob {
public:
  std::vector<Flow> flows;
  std::vector<Barrier> barriers;
  std::vector<uint32_t> first; /* flows that start with the workload */
  Time t0;                     /* the workload's start */
  double cpu_t0 = 0;
  std::chrono::steady_clock::time_point wall_t0;
  uint32_t finished = 0;
  Time last_finish;

  /* dlcp-sim's build_ps (src/sim/workload.c), flow for flow. */
  void Build(const std::vector<uint32_t> &order, uint32_t workers,
             uint32_t servers, uint64_t model, uint32_t iterations,
             Time compute) {
    const uint32_t *server = order.data();
    const uint32_t *worker = order.data() + servers;
    uint64_t base = model / servers, extra = model % servers;
    uint32_t prev_worker_barrier0 = 0;
    for (uint32_t it = 0; it < iterations; it++) {
      uint32_t server_barrier0 = static_cast<uint32_t>(barriers.size());
      for (uint32_t j = 0; j < servers; j++) {
        barriers.push_back({workers, Time(0), {}});
      }
      uint32_t worker_barrier0 = static_cast<uint32_t>(barriers.size());
      for (uint32_t i = 0; i < workers; i++) {
        barriers.push_back({servers, compute, {}});
      }
      for (uint32_t i = 0; i < workers; i++) {
        for (uint32_t j = 0; j < servers; j++) {
          uint32_t id = Add(worker[i], server[j], base + (j < extra ? 1 : 0),
                            server_barrier0 + j);
          if (it == 0) {
            first.push_back(id);
          } else {
            barriers[prev_worker_barrier0 + i].release.push_back(id);
          }
        }
      }
      for (uint32_t j = 0; j < servers; j++) {
        for (uint32_t i = 0; i < workers; i++) {
          uint32_t id = Add(server[j], worker[i], base + (j < extra ? 1 : 0),
                            worker_barrier0 + i);
          barriers[server_barrier0 + j].release.push_back(id);
        }
      }
      prev_worker_barrier0 = worker_barrier0;
    }
  }

  void Connect(uint32_t id, Ptr<Node> node, Address peer) {
    Flow &f = flows[id];
    f.socket = Socket::CreateSocket(node, TcpSocketFactory::GetTypeId());
    f.socket->Bind();
    f.socket->SetConnectCallback(
        MakeBoundCallback(&PsJob::Connected, this, id),
        MakeBoundCallback(&PsJob::Failed, this, id));
    f.socket->SetSendCallback(MakeBoundCallback(&PsJob::Room, this, id));
    if (!f.socket->TraceConnectWithoutContext(
            "HighestRxAck", MakeBoundCallback(&PsJob::Acked, this, id)) ||
        !f.socket->TraceConnectWithoutContext(
            "CongState", MakeBoundCallback(&PsJob::State, this, id)) ||
        !f.socket->TraceConnectWithoutContext(
            "Tx", MakeBoundCallback(&PsJob::Sent, this, id))) {
      std::cerr << "dctcp_leaf_spine_ps: a TCP trace source is missing\n";
      std::exit(1);
    }
    f.socket->Connect(peer);
  }

  void StartWorkload() {
    t0 = Simulator::Now();
    cpu_t0 = CpuSeconds();
    wall_t0 = std::chrono::steady_clock::now();
    for (uint32_t id : first) {
      if (flows[id].at.IsZero()) {
        StartFlow(id);
      } else {
        Simulator::Schedule(flows[id].at, &PsJob::StartFlow, this, id);
      }
    }
  }

  /* The flows of FILE ("src dst bytes start_ns" per line), each on its
   * own; false if a line does not parse or names no host. */
  bool Load(const std::string &path, uint32_t hosts) {
    FILE *f = std::fopen(path.c_str(), "r");
    if (!f) {
      return false;
    }
    unsigned src, dst;
    unsigned long long bytes, start_ns;
    int n;
    while ((n = std::fscanf(f, "%u %u %llu %llu", &src, &dst, &bytes,
                            &start_ns)) == 4) {
      if (src >= hosts || dst >= hosts || src == dst || bytes == 0) {
        std::fclose(f);
        return false;
      }
      uint32_t id = Add(src, dst, bytes, kNoBarrier);
      flows[id].at = NanoSeconds(static_cast<int64_t>(start_ns));
      first.push_back(id);
    }
    std::fclose(f);
    return n == EOF && !flows.empty();
  }

private:
  uint32_t Add(uint32_t src, uint32_t dst, uint64_t bytes, uint32_t barrier) {
    Flow f;
    f.src = src;
    f.dst = dst;
    f.bytes = bytes;
    f.barrier = barrier;
    flows.push_back(f);
    return static_cast<uint32_t>(flows.size() - 1);
  }

  void StartFlow(uint32_t id) {
    Flow &f = flows[id];
    if (!f.connected) {
      std::cerr << "flow " << id << ": not connected at its start\n";
      std::exit(1);
    }
    f.start = Simulator::Now();
    Fill(id);
  }

  void Fill(uint32_t id) {
    Flow &f = flows[id];
    while (f.sent < f.bytes) {
      uint32_t room = f.socket->GetTxAvailable();
      if (room == 0) {
        return;
      }
      uint64_t left = f.bytes - f.sent;
      uint32_t n = left < room ? static_cast<uint32_t>(left) : room;
      int rv = f.socket->Send(Create<Packet>(n));
      if (rv <= 0) {
        return;
      }
      f.sent += static_cast<uint64_t>(rv);
    }
  }

  void Finish(uint32_t id) {
    Flow &f = flows[id];
    f.fct_us = (Simulator::Now() - f.start).GetSeconds() * 1e6;
    f.socket->Close();
    finished++;
    last_finish = Simulator::Now();
    if (f.barrier == kNoBarrier) {
      return;
    }
    Barrier &b = barriers[f.barrier];
    if (--b.remaining > 0) {
      return;
    }
    for (uint32_t next : b.release) {
      Simulator::Schedule(b.delay, &PsJob::StartFlow, this, next);
    }
  }

  static void Connected(PsJob *job, uint32_t id, Ptr<Socket>) {
    job->flows[id].connected = true;
  }
  static void Failed(PsJob *, uint32_t id, Ptr<Socket>) {
    std::cerr << "flow " << id << ": connect failed\n";
  }
  static void Room(PsJob *job, uint32_t id, Ptr<Socket>, uint32_t) {
    if (!job->flows[id].start.IsZero()) {
      job->Fill(id);
    }
  }
  static void State(PsJob *job, uint32_t id, TcpSocketState::TcpCongState_t,
                    TcpSocketState::TcpCongState_t now) {
    Flow &f = job->flows[id];
    f.timeouts += now == TcpSocketState::CA_LOSS;
    f.recoveries += now == TcpSocketState::CA_RECOVERY;
  }
  static void Sent(PsJob *job, uint32_t id, Ptr<const Packet> p,
                   const TcpHeader &h, Ptr<const TcpSocketBase>) {
    Flow &f = job->flows[id];
    if (p->GetSize() == 0) {
      return;
    }
    uint32_t end = h.GetSequenceNumber().GetValue() + p->GetSize();
    if (end <= f.high_tx) {
      f.retransmits++;
    } else {
      f.high_tx = end;
    }
  }
  /* ns-3's initial sequence number is 0 and the SYN takes it, so the last
   * data byte is acknowledged by ACK number bytes + 1. */
  static void Acked(PsJob *job, uint32_t id, SequenceNumber32,
                    SequenceNumber32 now) {
    Flow &f = job->flows[id];
    if (f.fct_us < 0 && !f.start.IsZero() &&
        static_cast<uint64_t>(now.GetValue()) >= f.bytes + 1) {
      job->Finish(id);
    }
  }
};

/* Accepts every connection to a host's port and discards what arrives. */
void Drain(Ptr<Socket> s) {
  while (s->Recv() != nullptr) {
  }
}
bool AcceptAll(Ptr<Socket>, const Address &) { return true; }

/* Packets put on a link since the workload started (--countHops). */
uint64_t g_hops = 0;
const PsJob *g_job = nullptr;
void CountHop(Ptr<const Packet>) {
  g_hops += !g_job->t0.IsZero();
}
void Accepted(Ptr<Socket> s, const Address &) {
  s->SetRecvCallback(MakeCallback(&Drain));
}

} // namespace

int main(int argc, char **argv) {
  uint32_t tors = 9, hosts_per_tor = 16, spines = 4;
  uint32_t workers = 108, servers = 36, iterations = 2;
  uint64_t model_bytes = 3600000;
  double compute_us = 100;
  std::string rate = "100Gbps";
  double base_rtt_us = 24;
  uint32_t buffer_pkts = 341; /* 512 KB of 1502-byte packets */
  uint32_t ecn_pkts = 65;
  bool in_bytes = false;
  uint32_t mss = 1460;      /* 1500-byte IP packets */
  uint32_t nic_pkts = 5400; /* 8 MB */
  uint32_t warmup_gap_ns = 100;
  uint64_t salt = 1;
  std::string flows_file;
  bool count_hops = false;
  CommandLine cmd;
  cmd.AddValue("tors", "racks", tors);
  cmd.AddValue("hostsPerTor", "hosts per rack", hosts_per_tor);
  cmd.AddValue("spines", "spine switches", spines);
  cmd.AddValue("workers", "PS workers", workers);
  cmd.AddValue("servers", "PS servers", servers);
  cmd.AddValue("model", "model bytes per iteration", model_bytes);
  cmd.AddValue("iterations", "PS iterations", iterations);
  cmd.AddValue("computeUs", "compute time between iterations (us)",
               compute_us);
  cmd.AddValue("rate", "link rate", rate);
  cmd.AddValue("baseRttUs", "base RTT across the fabric (us)", base_rtt_us);
  cmd.AddValue("buffer", "switch port buffer in packets", buffer_pkts);
  cmd.AddValue("ecn", "ECN marking threshold in packets", ecn_pkts);
  cmd.AddValue("bytes",
               "count the switch buffer and ECN threshold in bytes "
               "(packets x (mss + 42)), as dlcp-sim does, not in packets",
               in_bytes);
  cmd.AddValue("mss", "TCP segment size", mss);
  cmd.AddValue("salt", "ECMP hash salt", salt);
  cmd.AddValue("warmupGapNs", "gap between the warm-up's SYNs (ns)",
               warmup_gap_ns);
  cmd.AddValue("flows",
               "FILE of independent flows, \"src dst bytes start_ns\" per "
               "line, instead of the PS job",
               flows_file);
  cmd.AddValue("countHops", "count the packets put on links (packet_hops)",
               count_hops);
  cmd.Parse(argc, argv);
  uint32_t hosts = tors * hosts_per_tor;
  if (!flows_file.empty()) {
    workers = 1; /* the PS job's checks below pass; it is not built */
    servers = 1;
  }
  if (tors == 0 || hosts_per_tor == 0 || spines == 0 || servers == 0 ||
      workers == 0 || workers + servers > hosts || iterations == 0 ||
      model_bytes < servers || hosts > 65000) {
    std::cerr << "dctcp_leaf_spine_ps: expected tors, hostsPerTor, spines, "
                 "servers, workers, iterations >= 1, workers + servers <= "
                 "hosts <= 65000 and model >= servers\n";
    return 2;
  }

  SetDctcpDefaults(mss);
  /* RED compares its thresholds with the queue in the queue's own unit. */
  const uint32_t wire_bytes = mss + kWireHeaderBytes;
  double ecn_th = static_cast<double>(ecn_pkts) * (in_bytes ? wire_bytes : 1);
  std::string port_size =
      in_bytes ? std::to_string(buffer_pkts * wire_bytes) + "B"
               : std::to_string(buffer_pkts) + "p";
  Config::SetDefault("ns3::RedQueueDisc::MinTh", DoubleValue(ecn_th));
  Config::SetDefault("ns3::RedQueueDisc::MaxTh", DoubleValue(ecn_th));

  /* Four links from host to host across the fabric. */
  Time delay = MicroSeconds(1) * (base_rtt_us / 8);
  Fabric fabric;
  fabric.hosts_per_tor = hosts_per_tor;
  fabric.salt = Mix64(salt);

  NodeContainer hs, tor, spine;
  hs.Create(hosts);
  tor.Create(tors);
  spine.Create(spines);
  std::vector<Ptr<FlowHashRouting>> host_rt, tor_rt, spine_rt;
  for (uint32_t h = 0; h < hosts; h++) {
    host_rt.push_back(
        Create<FlowHashRouting>(&fabric, FlowHashRouting::HOST, h));
  }
  for (uint32_t t = 0; t < tors; t++) {
    tor_rt.push_back(Create<FlowHashRouting>(&fabric, FlowHashRouting::TOR, t));
  }
  for (uint32_t s = 0; s < spines; s++) {
    spine_rt.push_back(
        Create<FlowHashRouting>(&fabric, FlowHashRouting::SPINE, s));
  }
  InternetStackHelper stack;
  stack.Install(hs);
  stack.Install(tor);
  stack.Install(spine);
  for (uint32_t h = 0; h < hosts; h++) {
    hs.Get(h)->GetObject<Ipv4>()->SetRoutingProtocol(host_rt[h]);
  }
  for (uint32_t t = 0; t < tors; t++) {
    tor.Get(t)->GetObject<Ipv4>()->SetRoutingProtocol(tor_rt[t]);
  }
  for (uint32_t s = 0; s < spines; s++) {
    spine.Get(s)->GetObject<Ipv4>()->SetRoutingProtocol(spine_rt[s]);
  }

  PointToPointHelper p2p;
  p2p.SetDeviceAttribute("DataRate", StringValue(rate));
  p2p.SetChannelAttribute("Delay", TimeValue(delay));
  p2p.SetQueue("ns3::DropTailQueue", "MaxSize", StringValue("1p"));
  TrafficControlHelper red;
  red.SetRootQueueDisc("ns3::RedQueueDisc", "MaxSize",
                       StringValue(port_size),
                       "LinkBandwidth", StringValue(rate), "LinkDelay",
                       TimeValue(delay));
  TrafficControlHelper fifo;
  fifo.SetRootQueueDisc("ns3::FifoQueueDisc", "MaxSize",
                        StringValue(std::to_string(nic_pkts) + "p"));

  /* One /30 per cable; returns the two ends' interfaces. */
  Ipv4AddressHelper addr("10.0.0.0", "255.255.255.252");
  QueueDiscContainer switch_qdiscs;
  auto wire = [&](Ptr<Node> a, Ptr<Node> b, TrafficControlHelper &qa,
                  TrafficControlHelper &qb) {
    NetDeviceContainer d = p2p.Install(a, b);
    QueueDiscContainer q = qa.Install(d.Get(0));
    if (&qa == &red) {
      switch_qdiscs.Add(q);
    }
    switch_qdiscs.Add(qb.Install(d.Get(1)));
    Ipv4InterfaceContainer ifs = addr.Assign(d);
    addr.NewNetwork();
    return ifs;
  };
  std::vector<Ipv4Address> host_ip(hosts);
  for (uint32_t h = 0; h < hosts; h++) {
    uint32_t t = h / hosts_per_tor;
    Ipv4InterfaceContainer ifs = wire(hs.Get(h), tor.Get(t), fifo, red);
    host_ip[h] = ifs.GetAddress(0);
    fabric.host_of_addr[host_ip[h].Get()] = h;
    host_rt[h]->down_if.push_back(ifs.Get(0).second);
    tor_rt[t]->down_if.push_back(ifs.Get(1).second);
  }
  for (uint32_t t = 0; t < tors; t++) {
    for (uint32_t s = 0; s < spines; s++) {
      Ipv4InterfaceContainer ifs = wire(tor.Get(t), spine.Get(s), red, red);
      tor_rt[t]->up_if.push_back(ifs.Get(0).second);
      spine_rt[s]->down_if.push_back(ifs.Get(1).second);
    }
  }

  /* dlcp-sim's placement (ps_host_order): rack-major round-robin. */
  std::vector<uint32_t> order;
  for (uint32_t i = 0; i < hosts_per_tor; i++) {
    for (uint32_t t = 0; t < tors; t++) {
      order.push_back(t * hosts_per_tor + i);
    }
  }
  PsJob job;
  if (flows_file.empty()) {
    job.Build(order, workers, servers, model_bytes, iterations,
              MicroSeconds(1) * compute_us);
  } else if (!job.Load(flows_file, hosts)) {
    std::cerr << "dctcp_leaf_spine_ps: " << flows_file
              << ": expected lines \"src dst bytes start_ns\" with hosts "
                 "below "
              << hosts << "\n";
    return 2;
  }
  if (count_hops) {
    g_job = &job;
    Config::ConnectWithoutContext(
        "/NodeList/*/DeviceList/*/$ns3::PointToPointNetDevice/PhyTxBegin",
        MakeCallback(&CountHop));
  }

  const uint16_t port = 5000;
  for (uint32_t h = 0; h < hosts; h++) {
    Ptr<Socket> l = Socket::CreateSocket(hs.Get(h),
                                         TcpSocketFactory::GetTypeId());
    l->Bind(InetSocketAddress(Ipv4Address::GetAny(), port));
    l->Listen();
    l->SetAcceptCallback(MakeCallback(&AcceptAll), MakeCallback(&Accepted));
  }
  Time gap = NanoSeconds(warmup_gap_ns);
  for (uint32_t id = 0; id < job.flows.size(); id++) {
    const Flow &f = job.flows[id];
    Simulator::Schedule(gap * id, &PsJob::Connect, &job, id, hs.Get(f.src),
                        Address(InetSocketAddress(host_ip[f.dst], port)));
  }
  /* Every handshake is over one base RTT after the last SYN. */
  Time start = gap * job.flows.size() + MicroSeconds(1) * (4 * base_rtt_us);
  Simulator::Schedule(start, &PsJob::StartWorkload, &job);

  Simulator::Stop(Seconds(10));
  double cpu0 = CpuSeconds();
  Simulator::Run();
  double cpu1 = CpuSeconds();
  auto wall1 = std::chrono::steady_clock::now();
  for (uint32_t id = 0; id < job.flows.size(); id++) {
    const Flow &f = job.flows[id];
    std::printf("fct %u %u %u %llu %.3f %u %u %u\n", id, f.src, f.dst,
                static_cast<unsigned long long>(f.bytes), f.fct_us,
                f.timeouts, f.retransmits, f.recoveries);
  }
  uint64_t drops = 0, marks = 0;
  for (uint32_t i = 0; i < switch_qdiscs.GetN(); i++) {
    const QueueDisc::Stats &st = switch_qdiscs.Get(i)->GetStats();
    drops += st.nTotalDroppedPackets;
    marks += st.nTotalMarkedPackets;
  }
  std::printf("queues drops %llu marks %llu\n",
              static_cast<unsigned long long>(drops),
              static_cast<unsigned long long>(marks));
  std::printf("flows %u/%zu\n", job.finished, job.flows.size());
  if (count_hops) {
    std::printf("packet_hops %llu\n", static_cast<unsigned long long>(g_hops));
  }
  std::printf("cpu_s %.3f\n", cpu1 - job.cpu_t0);
  std::printf("cpu_run_s %.3f\n", cpu1 - cpu0);
  std::printf("wall_s %.3f\n",
              std::chrono::duration<double>(wall1 - job.wall_t0).count());
  std::printf("sim_end_us %.3f\n",
              (job.last_finish - job.t0).GetSeconds() * 1e6);
  Simulator::Destroy();
  return job.finished == job.flows.size() ? 0 : 1;
}
