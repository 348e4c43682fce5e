// gloo_allreduce: float32-sum all-reduce benchmark over Gloo's TCP transport,
// the Gloo side of scripts/bench-allreduce.sh (dlcp vs Gloo vs Open MPI).
//
//   gloo_allreduce --rank R --size N --store DIR [-b MIN] [-e MAX] [-f F]
//                  [-n ITERS] [-w WARMUP] [-a ALGOS] [--big-from BYTES
//                  --big-iters ITERS --big-warmup WARMUP] [--iface IF]
//                  [--json FILE]
//
// Start one process per rank (R = 0..N-1) with the same DIR: the ranks meet
// through a gloo::rendezvous::FileStore in DIR and connect a full mesh of
// gloo::transport::tcp pairs on 127.0.0.1, or on interface IF's address
// (--iface: ranks in different network namespaces, e.g. under
// dlcp-testbed run, where the file system is shared).  --rank and --size
// default to RANK and WORLD_SIZE from the environment.  Rank 0 prints one
// row per algorithm and size in the style of nccl-tests / dlcp-bench:
//
//   size count type redop algo time(us) algbw(GB/s) busbw(GB/s) #wrong
//   delivered% p90(us) max(us) mean(us)
//
// and with --json one JSON object per row (one line) with the same figures
// and every timed iteration's time in order ("times_us").
//
// Algorithms (ALGOS is a comma list, default ring,ring_chunked,halving_doubling):
//   ring              gloo::AllreduceRing: every rank passes the whole
//                     buffer around the ring, N-1 rounds (not bandwidth-
//                     optimal: each rank sends (N-1)*S bytes)
//   ring_chunked      gloo::AllreduceRingChunked: reduce-scatter +
//                     all-gather over 2N chunks, two chunks in flight
//   halving_doubling  gloo::AllreduceHalvingDoubling: recursive vector
//                     halving/distance doubling (Rabenseifner)
//   allreduce         the newer gloo::allreduce() function API with
//                     AllreduceOptions::Algorithm::RING, out of place (this is
//                     what PyTorch's ProcessGroupGloo calls for CPU tensors);
//                     not in the default list: with 4 ranks on 2 cores it
//                     took seconds per MiB (docs/performance-allreduce.md)
//
// Method, per size: build the algorithm once (buffers and pairs are set up
// outside the timed region), then WARMUP untimed and ITERS timed iterations;
// each iteration is a barrier, then the all-reduce timed with
// CLOCK_MONOTONIC on every rank.  After the loop the per-iteration times are
// max-reduced across ranks (the same number a per-iteration reduction to
// rank 0 gives, without the extra traffic between iterations) and the
// reported time is the median over iterations of that max.
// algbw = bytes / time, busbw = algbw * 2(N-1)/N.
//
// Check: rank r's element i is (i + 3r) mod 13, a small integer, so every
// sum is exact in float.  The legacy classes reduce in place, so the input is
// restored (untimed) before each iteration; after the last one every element
// is compared with the exact sum.  #wrong is the count of wrong elements
// summed over ranks; the process exits 1 if any is wrong.
#include <gloo/allreduce.h>
#include <gloo/allreduce_halving_doubling.h>
#include <gloo/allreduce_ring.h>
#include <gloo/allreduce_ring_chunked.h>
#include <gloo/barrier.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>

#include <sys/socket.h>
#include <time.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

namespace {

const char* const kAlgos[] = {"ring", "ring_chunked", "halving_doubling",
                              "allreduce"};

struct Options {
  int rank = -1;
  int size = -1;
  std::string store;
  uint64_t min_bytes = 8;
  uint64_t max_bytes = 256ull << 20;
  uint64_t factor = 4;
  int iters = 20;
  int warmup = 5;
  uint64_t big_from = UINT64_MAX;  // sizes >= this use big_iters
  int big_iters = 0;
  int big_warmup = 0;
  std::vector<std::string> algos;
  std::string iface;  // empty: 127.0.0.1
  std::string json;   // empty: no JSON
};

void usage(FILE* f) {
  std::fprintf(
      f,
      "usage: gloo_allreduce --rank R --size N --store DIR [-b MIN] [-e MAX]\n"
      "                      [-f F] [-n ITERS] [-w WARMUP] [-a ALGOS]\n"
      "                      [--big-from B --big-iters N --big-warmup W]\n"
      "  --rank R        this process's rank, 0..N-1\n"
      "  --size N        number of ranks, 2..64\n"
      "  --store DIR     existing directory for the Gloo FileStore rendezvous\n"
      "                  (the same for all ranks, empty for each run)\n"
      "  -b, -e          smallest / largest message in bytes, K/M/G suffixes\n"
      "                  allowed, multiples of 4 (default 8 and 256M)\n"
      "  -f F            size step factor, >= 2 (default 4)\n"
      "  -n ITERS        timed iterations per size, 1..100000 (default 20)\n"
      "  -w WARMUP       untimed iterations per size, 0..100000 (default 5)\n"
      "  -a ALGOS        comma list of ring,ring_chunked,halving_doubling,\n"
      "                  allreduce (default ring,ring_chunked,halving_doubling)\n"
      "  --big-from B    sizes >= B bytes use --big-iters timed and\n"
      "                  --big-warmup untimed iterations instead (all three\n"
      "                  go together; N 1..100000, W 0..100000)\n"
      "  --iface IF      connect over interface IF (default 127.0.0.1)\n"
      "  --json FILE     rank 0 also writes one JSON object per row to FILE\n"
      "  --rank and --size default to $RANK and $WORLD_SIZE\n");
}

[[noreturn]] void die_usage(const char* what, const char* arg) {
  if (arg != nullptr && *arg != '\0')
    std::fprintf(stderr, "gloo_allreduce: %s: '%s'\n", what, arg);
  else
    std::fprintf(stderr, "gloo_allreduce: %s\n", what);
  usage(stderr);
  std::exit(2);
}

// parse_bytes accepts a decimal with an optional K, M or G (binary) suffix.
bool parse_bytes(const char* s, uint64_t* out) {
  if (s == nullptr || *s < '0' || *s > '9') return false;
  errno = 0;
  char* end = nullptr;
  unsigned long long v = std::strtoull(s, &end, 10);
  if (errno != 0) return false;
  unsigned shift = 0;
  if (*end == 'K' || *end == 'k') shift = 10, end++;
  else if (*end == 'M' || *end == 'm') shift = 20, end++;
  else if (*end == 'G' || *end == 'g') shift = 30, end++;
  if (*end != '\0' || v > (UINT64_MAX >> shift)) return false;
  *out = static_cast<uint64_t>(v) << shift;
  return true;
}

bool parse_int(const char* s, long min, long max, int* out) {
  if (s == nullptr || ((*s < '0' || *s > '9') && *s != '-')) return false;
  errno = 0;
  char* end = nullptr;
  long v = std::strtol(s, &end, 10);
  if (errno != 0 || *end != '\0' || v < min || v > max) return false;
  *out = static_cast<int>(v);
  return true;
}

Options parse_args(int argc, char** argv) {
  Options o;
  std::string algos = "ring,ring_chunked,halving_doubling";
  for (int i = 1; i < argc; i++) {
    std::string a = argv[i];
    if (a == "-h" || a == "--help") {
      usage(stdout);
      std::exit(0);
    }
    const char* v = (i + 1 < argc) ? argv[i + 1] : nullptr;
    if (v == nullptr) die_usage("missing value for option", argv[i]);
    i++;
    if (a == "--rank") {
      if (!parse_int(v, 0, 63, &o.rank)) die_usage("bad --rank", v);
    } else if (a == "--size") {
      if (!parse_int(v, 2, 64, &o.size)) die_usage("bad --size", v);
    } else if (a == "--store") {
      o.store = v;
    } else if (a == "-b") {
      if (!parse_bytes(v, &o.min_bytes)) die_usage("bad -b", v);
    } else if (a == "-e") {
      if (!parse_bytes(v, &o.max_bytes)) die_usage("bad -e", v);
    } else if (a == "-f") {
      int f;
      if (!parse_int(v, 2, 1 << 20, &f)) die_usage("bad -f", v);
      o.factor = static_cast<uint64_t>(f);
    } else if (a == "-n") {
      if (!parse_int(v, 1, 100000, &o.iters)) die_usage("bad -n", v);
    } else if (a == "-w") {
      if (!parse_int(v, 0, 100000, &o.warmup)) die_usage("bad -w", v);
    } else if (a == "-a") {
      algos = v;
    } else if (a == "--big-from") {
      if (!parse_bytes(v, &o.big_from)) die_usage("bad --big-from", v);
    } else if (a == "--big-iters") {
      if (!parse_int(v, 1, 100000, &o.big_iters)) die_usage("bad --big-iters", v);
    } else if (a == "--big-warmup") {
      if (!parse_int(v, 0, 100000, &o.big_warmup)) die_usage("bad --big-warmup", v);
    } else if (a == "--iface") {
      o.iface = v;
    } else if (a == "--json") {
      o.json = v;
    } else {
      die_usage("unknown option", argv[i - 1]);
    }
  }
  const char* env_rank = std::getenv("RANK");
  const char* env_size = std::getenv("WORLD_SIZE");
  if (o.rank < 0 && env_rank != nullptr && !parse_int(env_rank, 0, 63, &o.rank))
    die_usage("bad RANK", env_rank);
  if (o.size < 0 && env_size != nullptr && !parse_int(env_size, 2, 64, &o.size))
    die_usage("bad WORLD_SIZE", env_size);
  if (o.rank < 0 || o.size < 0 || o.store.empty())
    die_usage("--rank, --size and --store are required", "");
  if (o.rank >= o.size) die_usage("--rank must be < --size", "");
  // Gloo's legacy classes take the element count as an int.
  const uint64_t max_ok = static_cast<uint64_t>(INT_MAX) / sizeof(float) * sizeof(float);
  if (o.min_bytes == 0 || o.min_bytes % sizeof(float) != 0 ||
      o.max_bytes % sizeof(float) != 0 || o.min_bytes > o.max_bytes ||
      o.max_bytes > max_ok)
    die_usage("-b/-e must be multiples of 4 with 0 < MIN <= MAX <= 2G", "");
  if ((o.big_from != UINT64_MAX) != (o.big_iters != 0))
    die_usage("--big-from and --big-iters go together", "");
  size_t p = 0;
  while (p <= algos.size()) {
    size_t q = algos.find(',', p);
    if (q == std::string::npos) q = algos.size();
    std::string name = algos.substr(p, q - p);
    bool known = false;
    for (const char* k : kAlgos) known = known || name == k;
    if (!known) die_usage("unknown algorithm in -a", name.c_str());
    o.algos.push_back(name);
    p = q + 1;
  }
  return o;
}

double now_s() {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + 1e-9 * static_cast<double>(ts.tv_nsec);
}

float input_value(size_t i, int rank) {
  return static_cast<float>((i + 3u * static_cast<unsigned>(rank)) % 13u);
}

float expected_value(size_t i, int nranks) {
  unsigned s = 0;
  for (int r = 0; r < nranks; r++)
    s += static_cast<unsigned>((i + 3u * static_cast<unsigned>(r)) % 13u);
  return static_cast<float>(s);
}

// One benchmarked collective: run() does a single all-reduce; reset()
// restores the input where the algorithm works in place; result() is the
// buffer holding the output.
struct Bench {
  virtual ~Bench() = default;
  virtual void run() = 0;
  virtual void reset() {}
  virtual const float* result() const = 0;
};

// The legacy gloo::Algorithm classes (in place on one buffer).
template <typename Algo>
struct LegacyBench : Bench {
  LegacyBench(const std::shared_ptr<gloo::Context>& ctx, const float* input, size_t count)
      : input_(input), buf_(input, input + count) {
    std::vector<float*> ptrs{buf_.data()};
    algo_.reset(new Algo(ctx, ptrs, static_cast<int>(count),
                         gloo::ReductionFunction<float>::sum));
  }
  void run() override { algo_->run(); }
  void reset() override { std::copy(input_, input_ + buf_.size(), buf_.begin()); }
  const float* result() const override { return buf_.data(); }

  const float* input_;
  std::vector<float> buf_;
  std::unique_ptr<Algo> algo_;
};

// gloo::allreduce() with AllreduceOptions (out of place).
struct FunctionBench : Bench {
  FunctionBench(const std::shared_ptr<gloo::Context>& ctx, const float* input, size_t count,
                uint32_t tag)
      : in_(input, input + count), out_(count), opts_(ctx) {
    opts_.setAlgorithm(gloo::AllreduceOptions::Algorithm::RING);
    opts_.setInput(in_.data(), count);
    opts_.setOutput(out_.data(), count);
    opts_.setReduceFunction(
        static_cast<void (*)(void*, const void*, const void*, size_t)>(&gloo::sum<float>));
    opts_.setTag(tag);
  }
  void run() override { gloo::allreduce(opts_); }
  const float* result() const override { return out_.data(); }

  std::vector<float> in_, out_;
  gloo::AllreduceOptions opts_;
};

// Tags of the function-API collectives used for bookkeeping and for the
// "allreduce" algorithm; all run one at a time, so fixed values suffice.
constexpr uint32_t kTagBarrier = 1;
constexpr uint32_t kTagMax = 2;
constexpr uint32_t kTagSum = 3;
constexpr uint32_t kTagBench = 4;

void barrier(const std::shared_ptr<gloo::Context>& ctx) {
  gloo::BarrierOptions b(ctx);
  b.setTag(kTagBarrier);
  gloo::barrier(b);
}

// Element-wise max (or sum) of |v| across ranks, result on every rank.
void allreduce_doubles(const std::shared_ptr<gloo::Context>& ctx, std::vector<double>& v,
                       bool max) {
  gloo::AllreduceOptions o(ctx);
  o.setOutput(v.data(), v.size());
  o.setReduceFunction(max ? static_cast<void (*)(void*, const void*, const void*, size_t)>(
                                &gloo::max<double>)
                          : static_cast<void (*)(void*, const void*, const void*, size_t)>(
                                &gloo::sum<double>));
  o.setTag(max ? kTagMax : kTagSum);
  gloo::allreduce(o);
}

std::unique_ptr<Bench> make_bench(const std::string& algo,
                                  const std::shared_ptr<gloo::Context>& ctx,
                                  const float* input, size_t count) {
  if (algo == "ring")
    return std::unique_ptr<Bench>(new LegacyBench<gloo::AllreduceRing<float>>(ctx, input, count));
  if (algo == "ring_chunked")
    return std::unique_ptr<Bench>(
        new LegacyBench<gloo::AllreduceRingChunked<float>>(ctx, input, count));
  if (algo == "halving_doubling")
    return std::unique_ptr<Bench>(
        new LegacyBench<gloo::AllreduceHalvingDoubling<float>>(ctx, input, count));
  return std::unique_ptr<Bench>(new FunctionBench(ctx, input, count, kTagBench));
}

int run(const Options& o) {
  // TCP device bound to loopback or to the interface, IPv4.
  gloo::transport::tcp::attr attr;
  if (o.iface.empty())
    attr.hostname = "127.0.0.1";
  else
    attr.iface = o.iface;
  attr.ai_family = AF_INET;
  auto dev = gloo::transport::tcp::CreateDevice(attr);

  // Rendezvous through files in o.store; every pair gets its own TCP socket.
  gloo::rendezvous::FileStore store(o.store);
  auto ctx = std::make_shared<gloo::rendezvous::Context>(o.rank, o.size);
  ctx->setTimeout(std::chrono::seconds(120));  // a dead rank fails, never hangs
  ctx->connectFullMesh(store, dev);

  const int n = o.size;
  const double bus_factor = 2.0 * (n - 1) / n;
  if (o.rank == 0) {
    std::printf("# gloo_allreduce: %d ranks, gloo::transport::tcp on %s, "
                "float32 sum, warmup %d, iters %d", n,
                o.iface.empty() ? "127.0.0.1" : o.iface.c_str(), o.warmup, o.iters);
    if (o.big_iters)
      std::printf(" (from %llu B: warmup %d, iters %d)",
                  static_cast<unsigned long long>(o.big_from), o.big_warmup, o.big_iters);
    std::printf("\n# time = median over iterations of the max over ranks\n");
    std::printf("#%11s %12s %6s %6s %16s %12s %12s %12s %7s %10s %11s %11s %11s\n", "size",
                "count", "type", "redop", "algo", "time(us)", "algbw(GB/s)", "busbw(GB/s)",
                "#wrong", "delivered%", "p90(us)", "max(us)", "mean(us)");
    std::fflush(stdout);
  }

  // The input pattern, built once at the largest size.
  const size_t max_count = o.max_bytes / sizeof(float);
  std::vector<float> input(max_count);
  for (size_t i = 0; i < max_count; i++) input[i] = input_value(i, o.rank);

  FILE* json = nullptr;
  if (o.rank == 0 && !o.json.empty() && (json = std::fopen(o.json.c_str(), "w")) == nullptr)
    throw std::runtime_error("--json " + o.json + ": " + std::strerror(errno));

  uint64_t total_wrong = 0;
  for (const std::string& algo : o.algos) {
    for (uint64_t bytes = o.min_bytes; bytes <= o.max_bytes; bytes *= o.factor) {
      const size_t count = bytes / sizeof(float);
      const bool big = bytes >= o.big_from;
      const int iters = big ? o.big_iters : o.iters;
      const int warmup = big ? o.big_warmup : o.warmup;
      std::unique_ptr<Bench> b = make_bench(algo, ctx, input.data(), count);

      std::vector<double> t(static_cast<size_t>(iters), 0.0);
      for (int it = -warmup; it < iters; it++) {
        b->reset();
        barrier(ctx);
        double t0 = now_s();
        b->run();
        double t1 = now_s();
        if (it >= 0) t[static_cast<size_t>(it)] = t1 - t0;
      }

      // Check the last result against the exact sum.
      const float* out = b->result();
      double wrong = 0;
      for (size_t i = 0; i < count; i++)
        if (out[i] != expected_value(i, n)) wrong += 1;
      std::vector<double> w{wrong};
      allreduce_doubles(ctx, w, false);
      allreduce_doubles(ctx, t, true);

      const std::vector<double> order = t;
      std::sort(t.begin(), t.end());
      const size_t m = t.size();
      const double med = (m % 2) ? t[m / 2] : 0.5 * (t[m / 2 - 1] + t[m / 2]);
      const double p90 = t[(9 * m + 9) / 10 - 1];  // nearest rank
      double mean = 0;
      for (double x : t) mean += x / static_cast<double>(m);
      const double algbw = static_cast<double>(bytes) / med / 1e9;
      total_wrong += static_cast<uint64_t>(w[0]);
      if (o.rank == 0) {
        std::printf("%12llu %12zu %6s %6s %16s %12.1f %12.3f %12.3f %7.0f %10.2f %11.1f %11.1f "
                    "%11.1f\n",
                    static_cast<unsigned long long>(bytes), count, "float", "sum",
                    algo.c_str(), med * 1e6, algbw, algbw * bus_factor, w[0], 100.0, p90 * 1e6,
                    t[m - 1] * 1e6, mean * 1e6);
        std::fflush(stdout);
      }
      if (json != nullptr) {
        std::fprintf(json,
                     "{\"impl\":\"gloo\",\"ranks\":%d,\"algo\":\"%s\",\"bytes\":%llu,"
                     "\"p50_us\":%.1f,\"p90_us\":%.1f,\"max_us\":%.1f,\"mean_us\":%.1f,"
                     "\"wrong\":%.0f,\"delivered\":1,\"times_us\":[",
                     n, algo.c_str(), static_cast<unsigned long long>(bytes), med * 1e6,
                     p90 * 1e6, t[m - 1] * 1e6, mean * 1e6, w[0]);
        for (size_t i = 0; i < m; i++) std::fprintf(json, "%s%.1f", i ? "," : "", order[i] * 1e6);
        std::fprintf(json, "]}\n");
        std::fflush(json);
      }
      if (bytes > o.max_bytes / o.factor) break;  // no overflow of bytes *= factor
    }
  }
  barrier(ctx);
  if (json != nullptr) std::fclose(json);
  if (o.rank == 0 && total_wrong)
    std::fprintf(stderr, "gloo_allreduce: %llu wrong elements\n",
                 static_cast<unsigned long long>(total_wrong));
  return total_wrong ? 1 : 0;
}

}  // namespace

int main(int argc, char** argv) {
  Options o = parse_args(argc, argv);
  try {
    return run(o);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "gloo_allreduce: rank %d: %s\n", o.rank, e.what());
    return 1;
  }
}
