/*
 * dctcp_defaults.h: the TCP and RED defaults both ns-3 programs give
 * DCTCP, as dlcp-sim's DCTCP runs: RTO_min 1 ms, no SACK, a first window
 * of 20 segments, an ACK per segment, buffers that never limit, and RED
 * marking on the instantaneous queue (QW 1) without drops.  The callers
 * set RED's thresholds, which differ in unit (packets or bytes).
 *
 * No timestamp option: ns-3's TSval counts milliseconds, so with it every
 * RTT sample is 0 (ignored) or a whole millisecond, and one such sample
 * in a 24 us fabric inflates the RTO to 2-3 ms (a traced flow's timeout
 * fired 2.69 ms after its last ACK).  Without it ns-3 times its segments
 * itself, to the nanosecond, as dlcp-sim does.
 *
 * DCTCP's cut keeps at least two segments (TcpDctcpFloor), as Linux's
 * dctcp_ssthresh and dlcp-sim do.  ns-3 3.37's TcpDctcp has no floor: a
 * flow that meets a mark just after a timeout (window one segment)
 * falls below one segment, sends nothing, and waits for a second,
 * doubled timeout (traced: 2.9 ms of a 100 KB push).
 */
#ifndef DLCP_BENCH_NS3_DCTCP_DEFAULTS_H
#define DLCP_BENCH_NS3_DCTCP_DEFAULTS_H

#include <algorithm>
#include <cstdint>
#include <string>

#include "ns3/core-module.h"
#include "ns3/internet-module.h"
#include "ns3/traffic-control-module.h"

namespace ns3 {

/* ns-3's DCTCP with Linux's two-segment floor on the window after a cut. */
class TcpDctcpFloor : public TcpDctcp {
public:
  static TypeId GetTypeId() {
    static TypeId tid = TypeId("ns3::TcpDctcpFloor")
                            .SetParent<TcpDctcp>()
                            .SetGroupName("Internet")
                            .AddConstructor<TcpDctcpFloor>();
    return tid;
  }
  TcpDctcpFloor() = default;
  TcpDctcpFloor(const TcpDctcpFloor &other) = default;
  std::string GetName() const override { return "TcpDctcpFloor"; }
  uint32_t GetSsThresh(Ptr<const TcpSocketState> tcb,
                       uint32_t bytes_in_flight) override {
    return std::max(TcpDctcp::GetSsThresh(tcb, bytes_in_flight),
                    2 * tcb->m_segmentSize);
  }
  Ptr<TcpCongestionOps> Fork() override {
    return CopyObject<TcpDctcpFloor>(this);
  }
};

} // namespace ns3

/* Bytes on the wire around a segment's payload: IPv4 and TCP without
 * options (40) and PPP (2). */
constexpr uint32_t kWireHeaderBytes = 42;

/* |mss|: TCP payload bytes per segment. */
inline void SetDctcpDefaults(uint32_t mss) {
  using namespace ns3;
  Config::SetDefault("ns3::TcpL4Protocol::SocketType",
                     TypeIdValue(TcpDctcpFloor::GetTypeId()));
  Config::SetDefault("ns3::TcpSocketBase::UseEcn", StringValue("On"));
  Config::SetDefault("ns3::TcpSocketBase::Sack", BooleanValue(false));
  Config::SetDefault("ns3::TcpSocketBase::Timestamp", BooleanValue(false));
  Config::SetDefault("ns3::TcpSocketBase::MinRto",
                     TimeValue(MilliSeconds(1)));
  Config::SetDefault("ns3::TcpSocketBase::ClockGranularity",
                     TimeValue(NanoSeconds(1)));
  Config::SetDefault("ns3::TcpSocket::SegmentSize", UintegerValue(mss));
  Config::SetDefault("ns3::TcpSocket::InitialCwnd", UintegerValue(20));
  Config::SetDefault("ns3::TcpSocket::DelAckCount", UintegerValue(1));
  Config::SetDefault("ns3::TcpSocket::SndBufSize",
                     UintegerValue(64u << 20));
  Config::SetDefault("ns3::TcpSocket::RcvBufSize",
                     UintegerValue(64u << 20));
  Config::SetDefault("ns3::RedQueueDisc::UseEcn", BooleanValue(true));
  Config::SetDefault("ns3::RedQueueDisc::UseHardDrop", BooleanValue(false));
  Config::SetDefault("ns3::RedQueueDisc::Gentle", BooleanValue(false));
  Config::SetDefault("ns3::RedQueueDisc::QW", DoubleValue(1.0));
  Config::SetDefault("ns3::RedQueueDisc::MeanPktSize",
                     UintegerValue(mss + kWireHeaderBytes));
}

#endif
