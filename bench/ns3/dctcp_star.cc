/*
 * dctcp_star.cc: the ns-3 half of the dlcp-sim vs ns-3 comparison
 * (scripts/bench-sim.sh, docs/performance-sim.md).
 *
 * Model.  N hosts hang off one switch by point-to-point links of one rate
 * and one propagation delay.  Every flow is a DCTCP connection (ns-3's
 * TcpDctcp, g = 1/16, alpha starts at 1) that pushes a fixed number of
 * bytes.  Switch ports run a RED queue disc used as DCTCP's step marker:
 * instantaneous queue (QW = 1), MinTh = MaxTh = K packets, no gentle
 * region, ECN marking instead of drops, and a tail-drop limit equal to the
 * port buffer.  Host ports have a deep FIFO and no marking, like dlcp-sim's
 * NIC.  The device queues hold one packet, so the queue discs hold the
 * backlog (and the mark decision sees it).  TCP is set as dlcp-sim's DCTCP
 * is: initial window 20, an ACK per segment, RTO_min 1 ms, no SACK.
 *
 * FCT is measured as dlcp-sim measures it: from the moment the sender can
 * send data (ns-3's handshake completed; dlcp-sim has none) to the moment
 * the sender sees the ACK covering the last byte.
 *
 * Input (--flows FILE): one flow per line, "src dst bytes start_us".
 * Output (stdout): "fct id src dst bytes fct_us" per flow, then a line
 * "wall_s W" with the wall time of Simulator::Run().
 */
#include <chrono>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
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

struct FlowSpec {
  uint32_t id, src, dst;
  uint64_t bytes;
  double start_us;
  double fct_us = -1;
};

/* Sends |bytes| on one DCTCP connection and records when the last byte is
 * acknowledged. */
class FlowSender {
public:
  FlowSender(FlowSpec *spec, Ptr<Node> node, Address peer)
      : spec_(spec), node_(node), peer_(peer) {}

  void Start() {
    socket_ = Socket::CreateSocket(node_, TcpSocketFactory::GetTypeId());
    socket_->Bind();
    socket_->SetConnectCallback(
        MakeCallback(&FlowSender::Connected, this),
        MakeCallback(&FlowSender::Failed, this));
    socket_->SetSendCallback(MakeCallback(&FlowSender::Room, this));
    socket_->TraceConnectWithoutContext(
        "HighestRxAck", MakeCallback(&FlowSender::Acked, this));
    socket_->Connect(peer_);
  }

private:
  void Connected(Ptr<Socket>) {
    t0_ = Simulator::Now();
    Fill();
  }
  void Failed(Ptr<Socket>) { std::cerr << "flow " << spec_->id << ": connect failed\n"; }
  void Room(Ptr<Socket>, uint32_t) { Fill(); }
  void Fill() {
    while (sent_ < spec_->bytes) {
      uint32_t room = socket_->GetTxAvailable();
      if (room == 0) {
        return;
      }
      uint64_t left = spec_->bytes - sent_;
      uint32_t n = left < room ? static_cast<uint32_t>(left) : room;
      int rv = socket_->Send(Create<Packet>(n));
      if (rv <= 0) {
        return;
      }
      sent_ += static_cast<uint64_t>(rv);
    }
  }
  /* ns-3's initial sequence number is 0 and the SYN takes it, so the last
   * data byte is acknowledged by ACK number bytes + 1. */
  void Acked(SequenceNumber32, SequenceNumber32 now) {
    if (spec_->fct_us < 0 && !t0_.IsZero() &&
        static_cast<uint64_t>(now.GetValue()) >= spec_->bytes + 1) {
      spec_->fct_us = (Simulator::Now() - t0_).GetSeconds() * 1e6;
      socket_->Close();
    }
  }

  FlowSpec *spec_;
  Ptr<Node> node_;
  Address peer_;
  Ptr<Socket> socket_;
  Time t0_;
  uint64_t sent_ = 0;
};

} // namespace

int main(int argc, char **argv) {
  std::string flows_file;
  uint32_t hosts = 16;
  std::string rate = "100Gbps";
  std::string delay = "6us";
  uint32_t buffer_pkts = 341; /* 512 KB of 1502-byte packets */
  uint32_t ecn_pkts = 65;
  uint32_t mss = 1460;       /* 1500-byte IP packets */
  uint32_t nic_pkts = 5400;  /* 8 MB */
  CommandLine cmd;
  cmd.AddValue("flows", "flow list: src dst bytes start_us per line",
               flows_file);
  cmd.AddValue("hosts", "hosts on the switch", hosts);
  cmd.AddValue("rate", "link rate", rate);
  cmd.AddValue("delay", "one-way link delay", delay);
  cmd.AddValue("buffer", "switch port buffer in packets", buffer_pkts);
  cmd.AddValue("ecn", "ECN marking threshold in packets", ecn_pkts);
  cmd.AddValue("mss", "TCP segment size", mss);
  cmd.Parse(argc, argv);

  std::vector<FlowSpec> flows;
  std::ifstream in(flows_file);
  if (!in) {
    std::cerr << "dctcp_star: cannot read --flows=" << flows_file << "\n";
    return 2;
  }
  for (std::string line; std::getline(in, line);) {
    if (line.empty() || line[0] == '#') {
      continue;
    }
    std::istringstream ls(line);
    FlowSpec f{};
    f.id = static_cast<uint32_t>(flows.size());
    if (!(ls >> f.src >> f.dst >> f.bytes >> f.start_us) || f.src >= hosts ||
        f.dst >= hosts || f.src == f.dst) {
      std::cerr << flows_file << ":" << flows.size() + 1
                << ": expected 'src dst bytes start_us'\n";
      return 2;
    }
    flows.push_back(f);
  }

  SetDctcpDefaults(mss);
  Config::SetDefault("ns3::RedQueueDisc::MinTh",
                     DoubleValue(static_cast<double>(ecn_pkts)));
  Config::SetDefault("ns3::RedQueueDisc::MaxTh",
                     DoubleValue(static_cast<double>(ecn_pkts)));

  NodeContainer sw, hs;
  sw.Create(1);
  hs.Create(hosts);
  InternetStackHelper stack;
  stack.Install(sw);
  stack.Install(hs);

  PointToPointHelper p2p;
  p2p.SetDeviceAttribute("DataRate", StringValue(rate));
  p2p.SetChannelAttribute("Delay", StringValue(delay));
  p2p.SetQueue("ns3::DropTailQueue", "MaxSize", StringValue("1p"));

  TrafficControlHelper red;
  red.SetRootQueueDisc("ns3::RedQueueDisc", "MaxSize",
                       StringValue(std::to_string(buffer_pkts) + "p"),
                       "LinkBandwidth", StringValue(rate), "LinkDelay",
                       StringValue(delay));
  TrafficControlHelper fifo;
  fifo.SetRootQueueDisc("ns3::FifoQueueDisc", "MaxSize",
                        StringValue(std::to_string(nic_pkts) + "p"));

  Ipv4AddressHelper addr;
  std::vector<Ipv4Address> host_ip(hosts);
  for (uint32_t h = 0; h < hosts; h++) {
    NetDeviceContainer d = p2p.Install(hs.Get(h), sw.Get(0));
    fifo.Install(d.Get(0));
    red.Install(d.Get(1));
    std::ostringstream net;
    net << "10." << h / 250 << "." << h % 250 << ".0";
    addr.SetBase(net.str().c_str(), "255.255.255.0");
    Ipv4InterfaceContainer ifs = addr.Assign(d);
    host_ip[h] = ifs.GetAddress(0);
  }
  Ipv4GlobalRoutingHelper::PopulateRoutingTables();

  std::vector<FlowSender *> senders;
  for (FlowSpec &f : flows) {
    uint16_t port = static_cast<uint16_t>(10000 + f.id);
    PacketSinkHelper sink("ns3::TcpSocketFactory",
                          InetSocketAddress(Ipv4Address::GetAny(), port));
    sink.Install(hs.Get(f.dst)).Start(Seconds(0));
    auto *s = new FlowSender(&f, hs.Get(f.src),
                             InetSocketAddress(host_ip[f.dst], port));
    senders.push_back(s);
    Simulator::Schedule(MicroSeconds(f.start_us), &FlowSender::Start, s);
  }

  Simulator::Stop(Seconds(10));
  auto t0 = std::chrono::steady_clock::now();
  Simulator::Run();
  auto t1 = std::chrono::steady_clock::now();
  for (const FlowSpec &f : flows) {
    std::printf("fct %u %u %u %llu %.3f\n", f.id, f.src, f.dst,
                static_cast<unsigned long long>(f.bytes), f.fct_us);
  }
  std::printf("wall_s %.3f\n",
              std::chrono::duration<double>(t1 - t0).count());
  Simulator::Destroy();
  for (FlowSender *s : senders) {
    delete s;
  }
  return 0;
}
