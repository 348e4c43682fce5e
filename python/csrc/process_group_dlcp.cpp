// process_group_dlcp.cpp: the "dlcp" backend of torch.distributed, a
// c10d::ProcessGroup over libdlcp's public API (include/dlcp/dlcp.h), in
// the manner of torch-ucc.  Built against Debian's libtorch-dev 1.13 by
// python/setup.py; registered by dlcp.torch (python/dlcp/torch/backend.py),
// which also joins the dlcp job and hands the communicator over.
//
// Every operation is posted at once (dlcp runs it on its own thread) and
// returns a Work wrapping a c10 Future.  One completion thread per group
// waits for the requests in the order they were posted and completes
// their futures, so DDP's reducer, which chains on getFuture(), never
// blocks a Python thread.

#include <torch/extension.h>
#include <torch/csrc/distributed/c10d/ProcessGroup.hpp>

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <stdexcept>
#include <string>
#include <thread>

#include "dlcp/dlcp.h"

namespace {

dlcp_dtype dlcp_dtype_of(const at::Tensor &t) {
  switch (t.scalar_type()) {
  case at::kFloat:
    return DLCP_FLOAT32;
  case at::kHalf:
    return DLCP_FLOAT16;
  case at::kBFloat16:
    return DLCP_BFLOAT16;
  case at::kInt:
    return DLCP_INT32;
  case at::kLong:
    return DLCP_INT64;
  default:
    TORCH_CHECK(false, "dlcp backend: dtype ", t.scalar_type(),
                " is not one dlcp reduces (float32, float16, bfloat16, "
                "int32, int64)");
  }
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

// The one tensor of a collective: dlcp reduces contiguous CPU memory in
// place and never copies it.
const at::Tensor &single(const std::vector<at::Tensor> &tensors,
                         const char *op) {
  TORCH_CHECK(tensors.size() == 1, "dlcp backend: ", op,
              " takes one tensor per rank, got ", tensors.size());
  const at::Tensor &t = tensors[0];
  TORCH_CHECK(t.device().is_cpu(), "dlcp backend: ", op,
              ": tensor is on ", t.device(), "; dlcp takes CPU tensors");
  TORCH_CHECK(t.is_contiguous(), "dlcp backend: ", op,
              ": tensor is not contiguous");
  dlcp_dtype_of(t);
  return t;
}

void check_posted(int rc, const char *op) {
  TORCH_CHECK(rc == 0, "dlcp backend: ", op, " failed to start: ",
              dlcp_strerror(rc));
}

class ProcessGroupDlcp : public c10d::ProcessGroup {
public:
  // Takes ownership of |comm| (a joined dlcp communicator).
  ProcessGroupDlcp(dlcp_comm *comm, int rank, int size)
      : c10d::ProcessGroup(rank, size), comm_(comm),
        completer_([this] { complete_loop(); }) {}

  ~ProcessGroupDlcp() override {
    {
      std::unique_lock<std::mutex> lk(mu_);
      stopping_ = true;
    }
    cv_.notify_all();
    completer_.join(); // after every posted request finished or failed
    dlcp_comm_destroy(comm_);
  }

  const std::string getBackendName() const override { return "dlcp"; }

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

  c10::intrusive_ptr<c10d::Work>
  broadcast(std::vector<at::Tensor> &tensors,
            const c10d::BroadcastOptions &opts) override {
    const at::Tensor &t = single(tensors, "broadcast");
    TORCH_CHECK(opts.rootRank >= 0 && opts.rootRank < getSize(),
                "dlcp backend: broadcast root ", opts.rootRank,
                " is not a rank of the group");
    dlcp_request *req = nullptr;
    check_posted(dlcp_broadcast(comm_, t.data_ptr(),
                                static_cast<uint64_t>(t.numel()),
                                dlcp_dtype_of(t),
                                static_cast<uint32_t>(opts.rootRank), nullptr,
                                &req),
                 "broadcast");
    return enqueue(req, "broadcast", c10d::OpType::BROADCAST, tensors);
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
    dlcp_request *req = nullptr;
    check_posted(dlcp_allgather(comm_, in.data_ptr(), out.data_ptr(),
                                static_cast<uint64_t>(out.numel()),
                                dlcp_dtype_of(in), nullptr, &req),
                 "allgather");
    return enqueue(req, "allgather", c10d::OpType::_ALLGATHER_BASE,
                   {out, in});
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
    return c10d::Work::create_from_future(work->getFuture()->then(
        [flat, outs, n](c10::ivalue::Future &) {
          for (size_t r = 0; r < outs.size(); r++) {
            outs[r].view({-1}).copy_(
                flat.narrow(0, static_cast<int64_t>(r) * n, n));
          }
          return c10::IValue(outs);
        },
        c10::ListType::create(c10::TensorType::get())));
  }

  c10::intrusive_ptr<c10d::Work>
  barrier(const c10d::BarrierOptions &) override {
    dlcp_request *req = nullptr;
    check_posted(dlcp_barrier(comm_, &req), "barrier");
    return enqueue(req, "barrier", c10d::OpType::BARRIER, {});
  }

private:
  struct Pending {
    dlcp_request *req;
    const char *what;
    std::vector<at::Tensor> tensors; // borrowed by dlcp until completion
    c10::intrusive_ptr<c10::ivalue::Future> fut;
  };

  c10::intrusive_ptr<c10d::Work> enqueue(dlcp_request *req, const char *what,
                                         c10d::OpType,
                                         std::vector<at::Tensor> tensors) {
    auto fut = c10::make_intrusive<c10::ivalue::Future>(
        c10::ListType::create(c10::TensorType::get()));
    {
      std::unique_lock<std::mutex> lk(mu_);
      queue_.push_back(Pending{req, what, std::move(tensors), fut});
    }
    cv_.notify_one();
    return c10d::Work::create_from_future(fut);
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
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<Pending> queue_;
  bool stopping_ = false;
  std::thread completer_; // last: started once the rest is initialised
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
