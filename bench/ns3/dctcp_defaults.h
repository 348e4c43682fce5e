/*
 * dctcp_defaults.h: the TCP and RED defaults both ns-3 programs give
 * DCTCP, as dlcp-sim's DCTCP runs: RTO_min 1 ms, no SACK, a first window
 * of 20 segments, an ACK per segment, buffers that never limit, and RED
 * marking on the instantaneous queue (QW 1) without drops.  The callers
 * set RED's thresholds, which differ in unit (packets or bytes).
 */
#ifndef DLCP_BENCH_NS3_DCTCP_DEFAULTS_H
#define DLCP_BENCH_NS3_DCTCP_DEFAULTS_H

#include <cstdint>

#include "ns3/core-module.h"
#include "ns3/internet-module.h"
#include "ns3/traffic-control-module.h"

/* |mss|: TCP payload bytes per segment; 54 bytes of headers on the wire. */
inline void SetDctcpDefaults(uint32_t mss) {
  using namespace ns3;
  Config::SetDefault("ns3::TcpL4Protocol::SocketType",
                     TypeIdValue(TcpDctcp::GetTypeId()));
  Config::SetDefault("ns3::TcpSocketBase::UseEcn", StringValue("On"));
  Config::SetDefault("ns3::TcpSocketBase::Sack", BooleanValue(false));
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
                     UintegerValue(mss + 54));
}

#endif
