// process_group_dlcp.cpp: the "dlcp" backend of torch.distributed, a
// c10d::ProcessGroup over libdlcp's public API (include/dlcp/dlcp.h), in
// the manner of torch-ucc.  Built against Debian's libtorch-dev 1.13 by
// python/setup.py; registered by dlcp.torch (python/dlcp/torch/backend.py),
// which also joins the dlcp job and hands the communicator over.
//
// Every operation is posted at once (dlcp runs it on its own thread) and
// returns a Work wrapping a c10 Future.  One completion thread per group
// waits for the collectives' requests in the order they were posted and
// completes their futures, so DDP's reducer, which chains on getFuture(),
// never blocks a Python thread.  Point-to-point operations (send, recv,
// and gather, scatter and all-to-all, which are made of them) complete on
// a completion queue that a second thread waits on, in any order.

#include <torch/extension.h>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include <condition_variable>
#include <cstring>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>

#include "dlcp/dlcp.h"

namespace {

// dlcp's dtype for |t|'s, or false if dlcp has none.
bool dlcp_dtype_for(const at::Tensor &t, dlcp_dtype *dtype) {
  switch (t.scalar_type()) {
  case at::kFloat:
    *dtype = DLCP_FLOAT32;
    return true;
  case at::kHalf:
    *dtype = DLCP_FLOAT16;
    return true;
  case at::kBFloat16:
    *dtype = DLCP_BFLOAT16;
    return true;
  case at::kInt:
    *dtype = DLCP_INT32;
    return true;
  case at::kLong:
    *dtype = DLCP_INT64;
    return true;
  default:
    return false;
  }
}

dlcp_dtype dlcp_dtype_of(const at::Tensor &t) {
  dlcp_dtype dtype;
  TORCH_CHECK(dlcp_dtype_for(t, &dtype), "dlcp backend: dtype ",
              t.scalar_type(),
              " is not one dlcp reduces (float32, float16, bfloat16, "
              "int32, int64)");
  return dtype;
}

dlcp_redop dlcp_redop_of(const c10d::ReduceOp &op) {
  switch (static_cast<c10d::ReduceOp::RedOpType>(op)) {
  case c10d::ReduceOp::SUM:
    return DLCP_SUM;
  case c10d::ReduceOp::AVG:
    return DLCP_AVG;
  case c10d::ReduceOp::MIN:
    return DLCP_MIN;
  case c10d::ReduceOp::MAX:
    return DLCP_MAX;
  default:
    TORCH_CHECK(false, "dlcp backend: reduce op ",
                static_cast<int>(static_cast<c10d::ReduceOp::RedOpType>(op)),
                " is not supported (SUM, AVG, MIN, MAX)");
  }
}

// The one tensor of an operation: dlcp works on contiguous CPU memory in
// place and never copies it.  Its dtype matters to the reductions alone
// (they call dlcp_dtype_of); data only moved may be of any dtype.
const at::Tensor &single(const std::vector<at::Tensor> &tensors,
                         const char *op) {
  TORCH_CHECK(tensors.size() == 1, "dlcp backend: ", op,
              " takes one tensor per rank, got ", tensors.size());
  const at::Tensor &t = tensors[0];
  TORCH_CHECK(t.device().is_cpu(), "dlcp backend: ", op, ": tensor is on ",
              t.device(), "; dlcp takes CPU tensors");
  TORCH_CHECK(t.is_contiguous(), "dlcp backend: ", op,
              ": tensor is not contiguous");
  return t;
}

// A contiguous tensor's bytes, as a flat uint8 view.
at::Tensor bytes_of(const at::Tensor &t) {
  return t.view({-1}).view(at::kByte);
}

// What dlcp moves for |t| without reducing it, with its dtype and count:
// |t| itself in its own dtype if dlcp has it, else as int64 or int32 words
// when its size allows; else |t|'s bytes at the start of a zeroed int32
// tensor of whole words (the caller copies the result out of it).
at::Tensor movable(const at::Tensor &t, dlcp_dtype *dtype, uint64_t *count) {
  if (dlcp_dtype_for(t, dtype)) {
    *count = static_cast<uint64_t>(t.numel());
    return t;
  }
  int64_t bytes = t.numel() * t.element_size();
  if (bytes % 4 == 0) {
    *dtype = bytes % 8 == 0 ? DLCP_INT64 : DLCP_INT32;
    *count = static_cast<uint64_t>(bytes / (bytes % 8 == 0 ? 8 : 4));
    return t;
  }
  at::Tensor w = at::zeros({(bytes + 3) / 4}, at::kInt);
  bytes_of(w).narrow(0, 0, bytes).copy_(bytes_of(t));
  *dtype = DLCP_INT32;
  *count = static_cast<uint64_t>(w.numel());
  return w;
}

void check_posted(int rc, const char *op) {
  TORCH_CHECK(rc == 0, "dlcp backend: ", op,
              " failed to start: ", dlcp_strerror(rc));
}

// A list of |n| CPU tensors, each contiguous, of |like|'s dtype and size.
void check_list(const std::vector<at::Tensor> &list, size_t n,
                const at::Tensor &like, const char *op) {
  TORCH_CHECK(list.size() == n, "dlcp backend: ", op, " needs a list of ", n,
              " tensors, got ", list.size());
  for (const at::Tensor &t : list) {
    single({t}, op);
    TORCH_CHECK(t.numel() == like.numel() &&
                    t.scalar_type() == like.scalar_type(),
                "dlcp backend: ", op, ": every tensor of the list must have ",
                like.numel(), " elements of ", like.scalar_type());
  }
}

// Point-to-point tensor ids: torch's tags below kTagLimit, and above it
// one id per operation made of sends and receives, which every rank calls
// in the same order (dlcp matches a peer's posts of one id in order).
constexpr uint32_t kTagLimit = DLCP_TENSOR_ID_LIMIT / 2;
constexpr uint32_t kGatherId = kTagLimit;
constexpr uint32_t kScatterId = kTagLimit + 1;
constexpr uint32_t kAlltoallId = kTagLimit + 2;

uint32_t id_of_tag(int tag, const char *op) {
  TORCH_CHECK(tag >= 0 && static_cast<uint32_t>(tag) < kTagLimit,
              "dlcp backend: ", op, ": tag ", tag, " is outside [0, ",
              kTagLimit, ")");
  return static_cast<uint32_t>(tag);
}

// The Work of every operation: a view of its future whose wait() throws
// the operation's error.  (torch 1.13's Work::create_from_future returns
// from wait() on a failed future as on a completed one, so that a
// dist.all_reduce whose peer died returned as if it had run.)
class DlcpWork : public c10d::Work {
public:
  DlcpWork(c10::intrusive_ptr<c10::ivalue::Future> fut, int rank,
           c10d::OpType type)
      : c10d::Work(rank, type), fut_(std::move(fut)),
        done_(std::make_shared<Done>()) {
    // The future's callback may run after this Work is gone: it holds the
    // flag, not the Work.
    std::shared_ptr<Done> done = done_;
    fut_->addCallback([done](c10::ivalue::Future &) {
      std::unique_lock<std::mutex> lk(done->mu);
      done->set = true;
      done->cv.notify_all();
    });
  }

  bool isCompleted() override {
    return fut_->completed();
  }

  bool isSuccess() const override {
    return fut_->completed() && !fut_->hasError();
  }

  std::exception_ptr exception() const override {
    return fut_->completed() ? fut_->exception_ptr() : nullptr;
  }

  std::vector<at::Tensor> result() override {
    return fut_->value().toTensorVector();
  }

  // With a timeout, raises if the operation has not finished by then (it
  // goes on: wait again, or let the communicator's DLCP_TIMEOUT_MS fail it).
  bool wait(std::chrono::milliseconds timeout) override {
    if (timeout != kNoTimeout) {
      std::unique_lock<std::mutex> lk(done_->mu);
      TORCH_CHECK(
          done_->cv.wait_for(lk, timeout, [this] { return done_->set; }),
          "dlcp backend: rank ", rank_,
          ": the operation did not finish within ", timeout.count(), " ms");
    }
    fut_->waitAndThrow();
    return true;
  }

  c10::intrusive_ptr<c10::ivalue::Future> getFuture() override {
    return fut_;
  }

private:
  struct Done {
    std::mutex mu;
    std::condition_variable cv;
    bool set = false;
  };
  c10::intrusive_ptr<c10::ivalue::Future> fut_;
  std::shared_ptr<Done> done_;
};

class ProcessGroupDlcp : public c10d::ProcessGroup {
public:
  // Takes ownership of |comm| (a joined dlcp communicator).
  ProcessGroupDlcp(dlcp_comm *comm, int rank, int size)
      : c10d::ProcessGroup(rank, size), comm_(comm), cq_(make_cq(comm)),
        completer_([this] { complete_loop(); }),
        p2p_completer_([this] { p2p_loop(); }) {}

  ~ProcessGroupDlcp() override {
    {
      std::unique_lock<std::mutex> lk(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    completer_.join(); // after every posted request finished or failed
    {
      std::unique_lock<std::mutex> lk(p2p_mu_);
      p2p_stopping_ = true;
    }
    p2p_completer_.join();
    // Cancels the parts still in flight (a recv no rank sent to): each
    // completes on the queue with DLCP_ERR_CANCELED, failing its future.
    dlcp_comm_destroy(comm_);
    dlcp_completion c;
    while (dlcp_poll_cq(cq_, &c, 1) == 1) {
      complete_part(c);
    }
    dlcp_cq_destroy(cq_);
  }

  const std::string getBackendName() const override {
    return "dlcp";
  }

  c10::intrusive_ptr<c10d::Work>
  allreduce(std::vector<at::Tensor> &tensors,
            const c10d::AllreduceOptions &opts) override {
    const at::Tensor &t = single(tensors, "allreduce");
    dlcp_request *req = nullptr;
    check_posted(dlcp_allreduce(comm_, t.data_ptr(), t.data_ptr(),
                                static_cast<uint64_t>(t.numel()),
                                dlcp_dtype_of(t), dlcp_redop_of(opts.reduceOp),
                                nullptr, &req),
                 "allreduce");
    return enqueue(req, "allreduce", c10d::OpType::ALLREDUCE, tensors);
  }

  // all_reduce_coalesced: the tensors (one dtype) laid out in one, reduced
  // in one all-reduce, and copied back.
  c10::intrusive_ptr<c10d::Work>
  allreduce_coalesced(std::vector<at::Tensor> &tensors,
                      const c10d::AllreduceCoalescedOptions &opts) override {
    TORCH_CHECK(!tensors.empty(), "dlcp backend: allreduce_coalesced takes "
                                  "at least one tensor");
    std::vector<at::Tensor> flat_list;
    for (const at::Tensor &t : tensors) {
      single({t}, "allreduce_coalesced");
      TORCH_CHECK(t.scalar_type() == tensors[0].scalar_type(),
                  "dlcp backend: allreduce_coalesced: the tensors' dtypes "
                  "differ");
      flat_list.push_back(t.view({-1}));
    }
    std::vector<at::Tensor> flat{at::cat(flat_list)};
    auto work = allreduce(flat, opts);
    std::vector<at::Tensor> outs = tensors;
    at::Tensor sum = flat[0];
    return then(work, c10d::OpType::ALLREDUCE_COALESCED, [outs, sum] {
      int64_t off = 0;
      for (const at::Tensor &t : outs) {
        t.view({-1}).copy_(sum.narrow(0, off, t.numel()));
        off += t.numel();
      }
      return outs;
    });
  }

  c10::intrusive_ptr<c10d::Work>
  broadcast(std::vector<at::Tensor> &tensors,
            const c10d::BroadcastOptions &opts) override {
    const at::Tensor &t = single(tensors, "broadcast");
    TORCH_CHECK(opts.rootRank >= 0 && opts.rootRank < getSize(),
                "dlcp backend: broadcast root ", opts.rootRank,
                " is not a rank of the group");
    dlcp_dtype dtype;
    uint64_t count;
    at::Tensor buf = movable(t, &dtype, &count);
    dlcp_request *req = nullptr;
    check_posted(dlcp_broadcast(comm_, buf.data_ptr(), count, dtype,
                                static_cast<uint32_t>(opts.rootRank), nullptr,
                                &req),
                 "broadcast");
    auto work = enqueue(req, "broadcast", c10d::OpType::BROADCAST, {t, buf});
    if (buf.is_same(t)) {
      return work;
    }
    at::Tensor target = t;
    return then(work, c10d::OpType::BROADCAST, [target, buf] {
      bytes_of(target).copy_(
          bytes_of(buf).narrow(0, 0, bytes_of(target).numel()));
      return std::vector<at::Tensor>{target};
    });
  }

  // all_gather_into_tensor: |out| holds size * numel(in), zero-copy.
  c10::intrusive_ptr<c10d::Work>
  _allgather_base(at::Tensor &out, at::Tensor &in,
                  const c10d::AllgatherOptions &) override {
    std::vector<at::Tensor> ins{in}, outs{out};
    single(ins, "allgather");
    single(outs, "allgather");
    TORCH_CHECK(out.numel() == in.numel() * getSize() &&
                    out.scalar_type() == in.scalar_type(),
                "dlcp backend: allgather output must hold world size x the "
                "input's elements of the same dtype");
    dlcp_dtype dtype;
    uint64_t count;
    at::Tensor src = movable(in, &dtype, &count);
    at::Tensor dst =
        src.is_same(in) ? out : at::empty({getSize() * src.numel()}, at::kInt);
    dlcp_request *req = nullptr;
    check_posted(dlcp_allgather(comm_, src.data_ptr(), dst.data_ptr(),
                                count * static_cast<uint64_t>(getSize()), dtype,
                                nullptr, &req),
                 "allgather");
    auto work = enqueue(req, "allgather", c10d::OpType::_ALLGATHER_BASE,
                        {out, in, dst, src});
    if (dst.is_same(out)) {
      return work;
    }
    // Each rank's part sits at the start of its words.
    at::Tensor target = out;
    int64_t bytes = in.numel() * in.element_size(), stride = src.numel() * 4;
    return then(work, c10d::OpType::_ALLGATHER_BASE,
                [target, dst, bytes, stride] {
                  at::Tensor to = bytes_of(target), from = bytes_of(dst);
                  for (int64_t r = 0; r * bytes < to.numel(); r++) {
                    to.narrow(0, r * bytes, bytes)
                        .copy_(from.narrow(0, r * stride, bytes));
                  }
                  return std::vector<at::Tensor>{target};
                });
  }

  // all_gather into a list: gathered into one flat tensor, then copied
  // into the list's tensors (the list form cannot be zero-copy).
  c10::intrusive_ptr<c10d::Work>
  allgather(std::vector<std::vector<at::Tensor>> &outputs,
            std::vector<at::Tensor> &inputs,
            const c10d::AllgatherOptions &opts) override {
    const at::Tensor &in = single(inputs, "allgather");
    TORCH_CHECK(outputs.size() == 1 &&
                    outputs[0].size() == static_cast<size_t>(getSize()),
                "dlcp backend: allgather needs one list of world-size "
                "output tensors");
    at::Tensor flat = at::empty({getSize() * in.numel()}, in.options());
    at::Tensor src = in;
    auto work = _allgather_base(flat, src, opts);
    std::vector<at::Tensor> outs = outputs[0];
    int64_t n = in.numel();
    return then(work, c10d::OpType::ALLGATHER, [flat, outs, n] {
      for (size_t r = 0; r < outs.size(); r++) {
        outs[r].view({-1}).copy_(
            flat.narrow(0, static_cast<int64_t>(r) * n, n));
      }
      return outs;
    });
  }

  // reduce: dlcp's chain to the root, in place there; the other ranks'
  // partial results go to scratch, so that their tensors stay as they were.
  c10::intrusive_ptr<c10d::Work>
  reduce(std::vector<at::Tensor> &tensors,
         const c10d::ReduceOptions &opts) override {
    const at::Tensor &t = single(tensors, "reduce");
    check_root(opts.rootRank, "reduce");
    at::Tensor out = opts.rootRank == getRank() ? t : at::empty_like(t);
    dlcp_request *req = nullptr;
    check_posted(dlcp_reduce(comm_, t.data_ptr(), out.data_ptr(),
                             static_cast<uint64_t>(t.numel()), dlcp_dtype_of(t),
                             dlcp_redop_of(opts.reduceOp),
                             static_cast<uint32_t>(opts.rootRank), nullptr,
                             &req),
                 "reduce");
    return enqueue(req, "reduce", c10d::OpType::REDUCE, {t, out});
  }

  // reduce_scatter_tensor: |in| holds size * numel(out), and rank r's
  // part of the reduction, elements [r * n, (r + 1) * n), is dlcp's shard
  // of it, reduced straight into |out| (zero-copy).
  c10::intrusive_ptr<c10d::Work>
  _reduce_scatter_base(at::Tensor &out, at::Tensor &in,
                       const c10d::ReduceScatterOptions &opts) override {
    std::vector<at::Tensor> ins{in}, outs{out};
    single(ins, "reduce_scatter");
    single(outs, "reduce_scatter");
    TORCH_CHECK(in.numel() == out.numel() * getSize() &&
                    out.scalar_type() == in.scalar_type(),
                "dlcp backend: reduce_scatter input must hold world size x "
                "the output's elements of the same dtype");
    return reduce_scatter_into(out, in, opts);
  }

  // reduce_scatter of a list: the list is laid out in one tensor first.
  c10::intrusive_ptr<c10d::Work>
  reduce_scatter(std::vector<at::Tensor> &outputs,
                 std::vector<std::vector<at::Tensor>> &inputs,
                 const c10d::ReduceScatterOptions &opts) override {
    const at::Tensor &out = single(outputs, "reduce_scatter");
    TORCH_CHECK(inputs.size() == 1,
                "dlcp backend: reduce_scatter takes one "
                "list of inputs per rank, got ",
                inputs.size());
    check_list(inputs[0], static_cast<size_t>(getSize()), out,
               "reduce_scatter");
    at::Tensor flat = at::cat(inputs[0]);
    return reduce_scatter_into(out, flat, opts);
  }

  c10::intrusive_ptr<c10d::Work> send(std::vector<at::Tensor> &tensors, int dst,
                                      int tag) override {
    const at::Tensor &t = single(tensors, "send");
    check_peer(dst, "send");
    uint32_t id = id_of_tag(tag, "send");
    auto op = new_p2p("send", c10d::OpType::SEND, tensors);
    post_send(op, dst, id, t);
    return finish_posting(op);
  }

  c10::intrusive_ptr<c10d::Work> recv(std::vector<at::Tensor> &tensors, int src,
                                      int tag) override {
    const at::Tensor &t = single(tensors, "recv");
    check_peer(src, "recv");
    uint32_t id = id_of_tag(tag, "recv");
    auto op = new_p2p("recv", c10d::OpType::RECV, tensors);
    post_recv(op, src, id, t);
    return finish_posting(op);
  }

  // gather: every rank sends its tensor to the root, which copies its own.
  c10::intrusive_ptr<c10d::Work>
  gather(std::vector<std::vector<at::Tensor>> &outputs,
         std::vector<at::Tensor> &inputs,
         const c10d::GatherOptions &opts) override {
    const at::Tensor &in = single(inputs, "gather");
    check_root(opts.rootRank, "gather");
    const int root = static_cast<int>(opts.rootRank);
    if (root != getRank()) {
      TORCH_CHECK(outputs.empty() ||
                      (outputs.size() == 1 && outputs[0].empty()),
                  "dlcp backend: gather: only the root takes outputs");
      auto op = new_p2p("gather", c10d::OpType::GATHER, inputs);
      post_send(op, root, kGatherId, in);
      return finish_posting(op);
    }
    TORCH_CHECK(outputs.size() == 1,
                "dlcp backend: gather: the root takes "
                "one list of outputs, got ",
                outputs.size());
    check_list(outputs[0], static_cast<size_t>(getSize()), in, "gather");
    auto op = new_p2p("gather", c10d::OpType::GATHER, outputs[0]);
    op->tensors.push_back(in);
    for (int r = 0; r < getSize(); r++) {
      if (r == root) {
        outputs[0][r].copy_(in);
      } else {
        post_recv(op, r, kGatherId, outputs[0][r]);
      }
    }
    return finish_posting(op);
  }

  // scatter: the root sends each rank its tensor and copies its own.
  c10::intrusive_ptr<c10d::Work>
  scatter(std::vector<at::Tensor> &outputs,
          std::vector<std::vector<at::Tensor>> &inputs,
          const c10d::ScatterOptions &opts) override {
    const at::Tensor &out = single(outputs, "scatter");
    check_root(opts.rootRank, "scatter");
    const int root = static_cast<int>(opts.rootRank);
    if (root != getRank()) {
      TORCH_CHECK(inputs.empty() || (inputs.size() == 1 && inputs[0].empty()),
                  "dlcp backend: scatter: only the root takes inputs");
      auto op = new_p2p("scatter", c10d::OpType::SCATTER, outputs);
      post_recv(op, root, kScatterId, out);
      return finish_posting(op);
    }
    TORCH_CHECK(inputs.size() == 1,
                "dlcp backend: scatter: the root takes "
                "one list of inputs, got ",
                inputs.size());
    check_list(inputs[0], static_cast<size_t>(getSize()), out, "scatter");
    auto op = new_p2p("scatter", c10d::OpType::SCATTER, inputs[0]);
    op->tensors.push_back(out);
    for (int r = 0; r < getSize(); r++) {
      if (r == root) {
        out.copy_(inputs[0][r]);
      } else {
        post_send(op, r, kScatterId, inputs[0][r]);
      }
    }
    return finish_posting(op);
  }

  // all_to_all_single: rank r's part j of |in| goes to rank j's part r of
  // |out|; parts are rows of dimension 0, equal unless split sizes are
  // given.  Empty parts are not sent.
  c10::intrusive_ptr<c10d::Work> alltoall_base(
      at::Tensor &out, at::Tensor &in, std::vector<int64_t> &out_splits,
      std::vector<int64_t> &in_splits, const c10d::AllToAllOptions &) override {
    std::vector<at::Tensor> ins{in}, outs{out};
    single(ins, "alltoall");
    single(outs, "alltoall");
    TORCH_CHECK(out.scalar_type() == in.scalar_type(),
                "dlcp backend: alltoall: input and output dtypes differ");
    std::vector<int64_t> in_off = part_offsets(in, in_splits, "input");
    std::vector<int64_t> out_off = part_offsets(out, out_splits, "output");
    const int me = getRank();
    TORCH_CHECK(in_off[me + 1] - in_off[me] == out_off[me + 1] - out_off[me],
                "dlcp backend: alltoall: this rank's part to itself differs "
                "in size between input and output");
    at::Tensor in_flat = in.view({-1}), out_flat = out.view({-1});
    auto op = new_p2p("alltoall", c10d::OpType::ALLTOALL_BASE, {out, in});
    for (int r = 0; r < getSize(); r++) {
      exchange(op, r, in_flat.slice(0, in_off[r], in_off[r + 1]),
               out_flat.slice(0, out_off[r], out_off[r + 1]));
    }
    return finish_posting(op);
  }

  // all_to_all of lists: inputs[j] goes to rank j's outputs[r].
  c10::intrusive_ptr<c10d::Work>
  alltoall(std::vector<at::Tensor> &outputs, std::vector<at::Tensor> &inputs,
           const c10d::AllToAllOptions &) override {
    const size_t world = static_cast<size_t>(getSize());
    TORCH_CHECK(outputs.size() == world && inputs.size() == world,
                "dlcp backend: alltoall needs lists of ", world,
                " tensors, got ", outputs.size(), " outputs and ",
                inputs.size(), " inputs");
    for (size_t r = 0; r < world; r++) {
      single({inputs[r]}, "alltoall");
      single({outputs[r]}, "alltoall");
      TORCH_CHECK(inputs[r].scalar_type() == inputs[0].scalar_type() &&
                      outputs[r].scalar_type() == inputs[0].scalar_type(),
                  "dlcp backend: alltoall: the tensors' dtypes differ");
    }
    const size_t me = static_cast<size_t>(getRank());
    TORCH_CHECK(inputs[me].numel() == outputs[me].numel(),
                "dlcp backend: alltoall: this rank's part to itself differs "
                "in size between input and output");
    std::vector<at::Tensor> kept(outputs);
    kept.insert(kept.end(), inputs.begin(), inputs.end());
    auto op = new_p2p("alltoall", c10d::OpType::ALLTOALL, std::move(kept));
    for (size_t r = 0; r < world; r++) {
      exchange(op, static_cast<int>(r), inputs[r], outputs[r]);
    }
    return finish_posting(op);
  }

  c10::intrusive_ptr<c10d::Work>
  barrier(const c10d::BarrierOptions &) override {
    dlcp_request *req = nullptr;
    check_posted(dlcp_barrier(comm_, &req), "barrier");
    return enqueue(req, "barrier", c10d::OpType::BARRIER, {});
  }

private:
  // A Work that completes after |work| once |finish| ran (it copies the
  // results to where torch wants them and returns them); a failure of
  // |work| fails it without running |finish|.  (The all_gather of a list
  // used to copy out and succeed after a failed all-gather.)
  c10::intrusive_ptr<c10d::Work>
  then(const c10::intrusive_ptr<c10d::Work> &work, c10d::OpType type,
       std::function<std::vector<at::Tensor>()> finish) {
    return c10::make_intrusive<DlcpWork>(
        work->getFuture()->then(
            [finish](c10::ivalue::Future &done) {
              // c10's then() runs this on a failed future too: value()
              // rethrows its error, which fails the new one.
              done.value();
              return c10::IValue(finish());
            },
            c10::ListType::create(c10::TensorType::get())),
        getRank(), type);
  }

  void check_root(int64_t root, const char *op) const {
    TORCH_CHECK(root >= 0 && root < getSize(), "dlcp backend: ", op, " root ",
                root, " is not a rank of the group");
  }

  void check_peer(int peer, const char *op) const {
    TORCH_CHECK(peer >= 0 && peer < getSize() && peer != getRank(),
                "dlcp backend: ", op, ": peer ", peer,
                " is not another rank of the group");
  }

  c10::intrusive_ptr<c10d::Work>
  reduce_scatter_into(const at::Tensor &out, const at::Tensor &in,
                      const c10d::ReduceScatterOptions &opts) {
    dlcp_request *req = nullptr;
    check_posted(dlcp_reduce_scatter(
                     comm_, in.data_ptr(), out.data_ptr(),
                     static_cast<uint64_t>(in.numel()), dlcp_dtype_of(in),
                     dlcp_redop_of(opts.reduceOp), nullptr, &req),
                 "reduce_scatter");
    return enqueue(req, "reduce_scatter", c10d::OpType::_REDUCE_SCATTER_BASE,
                   {out, in});
  }

  // Element offsets of the world's parts of |t| along dimension 0, from
  // torch's split sizes (rows; empty: equal parts).
  std::vector<int64_t> part_offsets(const at::Tensor &t,
                                    const std::vector<int64_t> &splits,
                                    const char *which) const {
    const int64_t world = getSize();
    const int64_t rows = t.dim() == 0 ? 1 : t.size(0);
    const int64_t row_elems = rows == 0 ? 0 : t.numel() / rows;
    std::vector<int64_t> off(static_cast<size_t>(world) + 1, 0);
    if (splits.empty()) {
      TORCH_CHECK(rows % world == 0, "dlcp backend: alltoall: the ", which,
                  "'s ", rows, " rows do not split evenly over ", world,
                  " ranks");
      for (int64_t r = 0; r < world; r++) {
        off[r + 1] = off[r] + rows / world * row_elems;
      }
      return off;
    }
    TORCH_CHECK(static_cast<int64_t>(splits.size()) == world,
                "dlcp backend: alltoall: ", splits.size(), " ", which,
                " split sizes for ", world, " ranks");
    int64_t sum = 0;
    for (int64_t r = 0; r < world; r++) {
      TORCH_CHECK(splits[r] >= 0, "dlcp backend: alltoall: a negative ", which,
                  " split size");
      sum += splits[r];
      off[r + 1] = off[r] + splits[r] * row_elems;
    }
    TORCH_CHECK(sum == rows, "dlcp backend: alltoall: the ", which,
                " split sizes add up to ", sum, " rows of ", rows);
    return off;
  }

  // A torch operation made of point-to-point parts: its future completes
  // when the last part did, failed if any part failed.
  struct P2pOp {
    const char *what;
    c10d::OpType type;
    std::vector<at::Tensor> tensors; // borrowed by dlcp until completion
    c10::intrusive_ptr<c10::ivalue::Future> fut;
    size_t left; // parts not completed, + 1 while parts are being posted
    std::string error;
  };

  P2pOp *new_p2p(const char *what, c10d::OpType type,
                 std::vector<at::Tensor> tensors) {
    auto op = std::make_unique<P2pOp>();
    op->what = what;
    op->type = type;
    op->tensors = std::move(tensors);
    op->fut = c10::make_intrusive<c10::ivalue::Future>(
        c10::ListType::create(c10::TensorType::get()));
    op->left = 1;
    return op.release();
  }

  void post_send(P2pOp *op, int peer, uint32_t id, const at::Tensor &t) {
    dlcp_tensor dt{id, t.data_ptr(),
                   static_cast<uint64_t>(t.numel() * t.element_size())};
    post_part(op, peer, [&] {
      return dlcp_post_send(comm_, static_cast<uint32_t>(peer), &dt, nullptr,
                            cq_, reinterpret_cast<uintptr_t>(op));
    });
  }

  void post_recv(P2pOp *op, int peer, uint32_t id, const at::Tensor &t) {
    dlcp_tensor dt{id, t.data_ptr(),
                   static_cast<uint64_t>(t.numel() * t.element_size())};
    post_part(op, peer, [&] {
      return dlcp_post_recv(comm_, static_cast<uint32_t>(peer), &dt, 0.0, cq_,
                            reinterpret_cast<uintptr_t>(op));
    });
  }

  // Counts the part before |post| runs: its completion may come on the
  // other thread before |post| returns.
  template <typename Post> void post_part(P2pOp *op, int peer, Post post) {
    {
      std::unique_lock<std::mutex> lk(p2p_mu_);
      op->left++;
    }
    int rc = post();
    if (rc != 0) {
      std::unique_lock<std::mutex> lk(p2p_mu_);
      op->left--;
      if (op->error.empty()) {
        op->error = std::string("rank ") + std::to_string(peer) +
                    ": failed to start: " + dlcp_strerror(rc);
      }
    }
  }

  // Ends the posting of |op|'s parts; its future completes now if every
  // part already did (or none was posted).
  c10::intrusive_ptr<c10d::Work> finish_posting(P2pOp *op) {
    auto work = c10::make_intrusive<DlcpWork>(op->fut, getRank(), op->type);
    part_done(op);
    return work;
  }

  void part_done(P2pOp *op) {
    {
      std::unique_lock<std::mutex> lk(p2p_mu_);
      if (--op->left > 0) {
        return;
      }
    }
    std::unique_ptr<P2pOp> owned(op);
    if (op->error.empty()) {
      op->fut->markCompleted(c10::IValue(op->tensors));
    } else {
      std::string msg = std::string("dlcp backend: rank ") +
                        std::to_string(getRank()) + ": " + op->what + ": " +
                        op->error;
      op->fut->setError(std::make_exception_ptr(std::runtime_error(msg)));
    }
  }

  void complete_part(const dlcp_completion &c) {
    auto *op = reinterpret_cast<P2pOp *>(static_cast<uintptr_t>(c.user_data));
    {
      std::unique_lock<std::mutex> lk(p2p_mu_);
      if (c.status != 0 && op->error.empty()) {
        op->error = c.error[0] ? c.error : dlcp_strerror(c.status);
      }
    }
    part_done(op);
  }

  // Completes point-to-point parts until the group is destroyed; the
  // parts still in flight then are cancelled by dlcp_comm_destroy and
  // completed by the destructor.
  void p2p_loop() {
    for (;;) {
      {
        std::unique_lock<std::mutex> lk(p2p_mu_);
        if (p2p_stopping_) {
          return;
        }
      }
      dlcp_completion c;
      if (dlcp_wait_cq(cq_, &c, 50) == 1) {
        complete_part(c);
      }
    }
  }

  // One rank's part of an all-to-all: |src| to rank |r|, |dst| from it
  // (copied when |r| is this rank; empty parts are not sent).
  void exchange(P2pOp *op, int r, const at::Tensor &src,
                const at::Tensor &dst) {
    if (r == getRank()) {
      dst.view({-1}).copy_(src.view({-1}));
      return;
    }
    if (dst.numel() > 0) {
      post_recv(op, r, kAlltoallId, dst);
    }
    if (src.numel() > 0) {
      post_send(op, r, kAlltoallId, src);
    }
  }

  static dlcp_cq *make_cq(dlcp_comm *comm) {
    dlcp_cq *cq = nullptr;
    int rc = dlcp_cq_create(comm, &cq);
    if (rc != 0) {
      dlcp_comm_destroy(comm);
      TORCH_CHECK(false,
                  "dlcp backend: no completion queue: ", dlcp_strerror(rc));
    }
    return cq;
  }

  struct Pending {
    dlcp_request *req;
    const char *what;
    std::vector<at::Tensor> tensors; // borrowed by dlcp until completion
    c10::intrusive_ptr<c10::ivalue::Future> fut;
  };

  c10::intrusive_ptr<c10d::Work> enqueue(dlcp_request *req, const char *what,
                                         c10d::OpType type,
                                         std::vector<at::Tensor> tensors) {
    auto fut = c10::make_intrusive<c10::ivalue::Future>(
        c10::ListType::create(c10::TensorType::get()));
    {
      std::unique_lock<std::mutex> lk(mu_);
      queue_.push_back(Pending{req, what, std::move(tensors), fut});
    }
    cv_.notify_one();
    return c10::make_intrusive<DlcpWork>(fut, getRank(), type);
  }

  void complete_loop() {
    for (;;) {
      Pending p;
      {
        std::unique_lock<std::mutex> lk(mu_);
        cv_.wait(lk, [this] { return stopping_ || !queue_.empty(); });
        if (queue_.empty()) {
          return; // stopping, nothing left
        }
        p = std::move(queue_.front());
        queue_.pop_front();
      }
      dlcp_coll_info info{};
      int rc = dlcp_wait(p.req, -1, &info);
      dlcp_request_free(p.req);
      if (rc == 0) {
        p.fut->markCompleted(c10::IValue(p.tensors));
      } else {
        std::string msg = std::string("dlcp backend: rank ") +
                          std::to_string(getRank()) + ": " + p.what + ": " +
                          (info.error[0] ? info.error : dlcp_strerror(rc));
        p.fut->setError(std::make_exception_ptr(std::runtime_error(msg)));
      }
    }
  }

  dlcp_comm *comm_;
  dlcp_cq *cq_; // the point-to-point parts' completions
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Pending> queue_;
  bool stopping_ = false;
  std::mutex p2p_mu_; // the parts' counts and errors
  bool p2p_stopping_ = false;
  // last: started once the rest is initialised
  std::thread completer_;
  std::thread p2p_completer_;
};

} // namespace

PYBIND11_MODULE(TORCH_EXTENSION_NAME, m) {
  m.doc() = "torch.distributed backend over libdlcp (see dlcp.torch)";
  py::object pg = py::module::import("torch.distributed").attr("ProcessGroup");
  py::class_<ProcessGroupDlcp, c10::intrusive_ptr<ProcessGroupDlcp>>(
      m, "ProcessGroupDlcp", pg)
      .def(py::init([](uintptr_t comm, int rank, int size) {
             return c10::make_intrusive<ProcessGroupDlcp>(
                 reinterpret_cast<dlcp_comm *>(comm), rank, size);
           }),
           py::arg("comm"), py::arg("rank"), py::arg("size"),
           "Takes ownership of a joined dlcp_comm* (Communicator.detach()).");
}
