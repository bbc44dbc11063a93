// rlflow/comm/nccl_communicator.hpp: comm::NcclCommunicator, the communicator interface
// over NCCL for device buffers (CUDA builds only: include it from a .cu translation unit and
// link NCCL and MPI). Bootstrapped over MPI: rank 0 of the MPI communicator creates the NCCL
// unique id, MPI_Bcast hands it to every rank, ncclCommInitRank joins them (the caller selects
// the device first, e.g. cudaSetDevice(local_rank)). Deterministic like the host
// communicators: the all-reduce is a reduce-scatter by hand (grouped ncclSend/ncclRecv of
// segments, then a kernel summing each element over ranks in rank order, in the element type)
// followed by grouped ncclBroadcasts of the summed segments (they differ in length by one at
// most), so every rank gets the bits comm::LocalCommunicator gives; never
// ncclAllReduce, whose summation order is NCCL's. Every span passed in is device memory.
// verl: torch.distributed's nccl process group.
#pragma once
#if !defined(__CUDACC__)
#error "rlflow/comm/nccl_communicator.hpp: compile this translation unit with nvcc (a .cu file)"
#endif
#include <cuda_runtime.h>
#include <mpi.h>
#include <nccl.h>

#include <cstddef>
#include <memory>
#include <span>
#include <string>

#include <rlflow/comm/communicator.hpp>
#include <rlflow/core/error.hpp>

namespace rlflow::comm {

namespace detail {
inline void nccl_check(ncclResult_t rc, const char* what) {
  if (rc != ncclSuccess)
    throw worker_error(msg("rlflow::comm::NcclCommunicator: ", what, " failed: ", ncclGetErrorString(rc), " (",
                           ncclGetLastError(nullptr) ? ncclGetLastError(nullptr) : "", ")"));
}
inline void cuda_check(cudaError_t rc, const char* what) {
  if (rc != cudaSuccess)
    throw worker_error(msg("rlflow::comm::NcclCommunicator: ", what, " failed: ", cudaGetErrorString(rc)));
}
//! out[i] = sum over r in rank order of in[r * n + i], in T.
template <class T>
__global__ void rank_order_sum(T const* in, T* out, std::size_t n, int ranks) {
  std::size_t const i = blockIdx.x * static_cast<std::size_t>(blockDim.x) + threadIdx.x;
  if (i >= n) return;
  T acc = in[i];
  for (int r = 1; r < ranks; ++r) acc += in[static_cast<std::size_t>(r) * n + i];
  out[i] = acc;
}
template <class T>
constexpr ncclDataType_t nccl_type() {
  if constexpr (sizeof(T) == 4) return ncclFloat32;
  else return ncclFloat64;
}
}  // namespace detail

//! Collectives over NCCL on device buffers; one per process (one device per process).
class NcclCommunicator final : public Communicator {
 public:
  //! Joins every rank of 'mpi_comm' into one NCCL communicator (collective over mpi_comm).
  explicit NcclCommunicator(MPI_Comm mpi_comm, cudaStream_t stream = nullptr) : stream_(stream) {
    MPI_Comm_rank(mpi_comm, &rank_);
    MPI_Comm_size(mpi_comm, &size_);
    ncclUniqueId id{};
    if (rank_ == 0) detail::nccl_check(ncclGetUniqueId(&id), "ncclGetUniqueId");
    if (MPI_Bcast(&id, sizeof id, MPI_BYTE, 0, mpi_comm) != MPI_SUCCESS)
      throw worker_error("rlflow::comm::NcclCommunicator: MPI_Bcast of the NCCL unique id failed");
    detail::nccl_check(ncclCommInitRank(&comm_, size_, id, rank_), "ncclCommInitRank");
  }
  NcclCommunicator(NcclCommunicator const&) = delete;
  NcclCommunicator& operator=(NcclCommunicator const&) = delete;
  ~NcclCommunicator() override {
    if (scratch_) cudaFree(scratch_);
    if (comm_) ncclCommDestroy(comm_);
  }

  int rank() const override { return rank_; }
  int size() const override { return size_; }
  ncclComm_t native() const { return comm_; }
  cudaStream_t stream() const { return stream_; }

  //! A zero-byte all-reduce, then a stream sync: every rank has reached this point.
  void barrier() override {
    float* none = nullptr;
    detail::nccl_check(ncclAllReduce(none, none, 0, ncclFloat32, ncclSum, comm_, stream_), "ncclAllReduce (barrier)");
    sync();
  }
  void allreduce_sum(std::span<float> data) override { allreduce_impl(data); }
  void allreduce_sum(std::span<double> data) override { allreduce_impl(data); }
  void broadcast(std::span<float> data, int root) override {
    if (root < 0 || root >= size_)
      throw value_error(msg("rlflow::comm::NcclCommunicator::broadcast: root ", root, " is outside [0, ", size_, ")"));
    detail::nccl_check(ncclBroadcast(data.data(), data.data(), data.size(), ncclFloat32, root, comm_, stream_),
                       "ncclBroadcast");
    sync();
  }
  //! On 'root': out (size() * in.size()) := every rank's 'in' in rank order (grouped
  //! ncclSend / ncclRecv; the root's own part too); 'out' is not touched elsewhere (pass an empty
  //! span). verl / torch: torch.distributed.gather.
  void gather(std::span<float const> in, std::span<float> out, int root) override {
    if (root < 0 || root >= size_)
      throw value_error(msg("rlflow::comm::NcclCommunicator::gather: root ", root, " is outside [0, ", size_, ")"));
    std::size_t const n = in.size();
    if (rank_ == root && out.size() != n * static_cast<std::size_t>(size_))
      throw value_error(msg("rlflow::comm::NcclCommunicator::gather: the root's out has ", out.size(), " elements, expected ",
                            size_, " ranks * ", n));
    detail::nccl_check(ncclGroupStart(), "ncclGroupStart");
    if (rank_ == root)
      for (int r = 0; r < size_; ++r)
        detail::nccl_check(ncclRecv(out.data() + static_cast<std::size_t>(r) * n, n, ncclFloat32, r, comm_, stream_), "ncclRecv");
    detail::nccl_check(ncclSend(in.data(), n, ncclFloat32, root, comm_, stream_), "ncclSend");
    detail::nccl_check(ncclGroupEnd(), "ncclGroupEnd");
    sync();
  }
  //! The ranks passing the same 'color' (>= 0), ranked by (key, rank), as a communicator of their
  //! own: ncclCommSplit (NCCL >= 2.18), a collective of every rank of this communicator; the
  //! sub-communicator enqueues on this one's stream. The TP and DP groups of a mesh come from it
  //! (comm::split_mesh). verl / torch: new_group on the nccl backend.
  std::unique_ptr<Communicator> split(int color, int key) override {
    if (color < 0)
      throw value_error(msg("rlflow::comm::NcclCommunicator::split: color ", color, " is negative; every rank needs a "
                            "group (colors >= 0)"));
    ncclComm_t sub = nullptr;
    detail::nccl_check(ncclCommSplit(comm_, color, key, &sub, nullptr), "ncclCommSplit");
    return std::unique_ptr<Communicator>(new NcclCommunicator(sub, stream_));
  }
  void allgather(std::span<float const> in, std::span<float> out) override {
    if (out.size() != in.size() * static_cast<std::size_t>(size_))
      throw value_error(msg("rlflow::comm::NcclCommunicator::allgather: out has ", out.size(), " elements, expected ", size_,
                            " ranks * ", in.size()));
    detail::nccl_check(ncclAllGather(in.data(), out.data(), in.size(), ncclFloat32, comm_, stream_), "ncclAllGather");
    sync();
  }

 private:
  //! Wraps a communicator made by ncclCommSplit (owned from here on).
  NcclCommunicator(ncclComm_t comm, cudaStream_t stream) : comm_(comm), stream_(stream) {
    detail::nccl_check(ncclCommUserRank(comm_, &rank_), "ncclCommUserRank");
    detail::nccl_check(ncclCommCount(comm_, &size_), "ncclCommCount");
  }
  void sync() { detail::cuda_check(cudaStreamSynchronize(stream_), "cudaStreamSynchronize"); }
  void* scratch(std::size_t bytes) {
    if (bytes > scratch_bytes_) {
      if (scratch_) cudaFree(scratch_);
      scratch_ = nullptr;
      detail::cuda_check(cudaMalloc(&scratch_, bytes), "cudaMalloc (scratch)");
      scratch_bytes_ = bytes;
    }
    return scratch_;
  }
  template <class T>
  void allreduce_impl(std::span<T> data) {
    std::size_t const n = data.size();
    auto const ws = static_cast<std::size_t>(size_);
    auto const seg = [&](std::size_t r) { return n * r / ws; };
    std::size_t const mb = seg(static_cast<std::size_t>(rank_)), mine = seg(static_cast<std::size_t>(rank_) + 1) - mb;
    // [ws * mine] received copies of my segment, then [max segment] of the summed one
    std::size_t const maxseg = n / ws + 1;
    T* recv = static_cast<T*>(scratch((ws * mine + maxseg) * sizeof(T)));
    T* part = recv + ws * mine;
    constexpr ncclDataType_t ty = detail::nccl_type<T>();
    detail::nccl_check(ncclGroupStart(), "ncclGroupStart");
    for (std::size_t r = 0; r < ws; ++r) {
      detail::nccl_check(ncclSend(data.data() + seg(r), seg(r + 1) - seg(r), ty, static_cast<int>(r), comm_, stream_), "ncclSend");
      detail::nccl_check(ncclRecv(recv + r * mine, mine, ty, static_cast<int>(r), comm_, stream_), "ncclRecv");
    }
    detail::nccl_check(ncclGroupEnd(), "ncclGroupEnd");
    if (mine > 0) {
      unsigned const threads = 256;
      auto const blocks = static_cast<unsigned>((mine + threads - 1) / threads);
      detail::rank_order_sum<T><<<blocks, threads, 0, stream_>>>(recv, part, mine, size_);
      detail::cuda_check(cudaGetLastError(), "rank_order_sum launch");
    }
    // segments differ in length by at most one: gather them with grouped broadcasts
    detail::nccl_check(ncclGroupStart(), "ncclGroupStart");
    for (std::size_t r = 0; r < ws; ++r) {
      T const* src = static_cast<int>(r) == rank_ ? part : nullptr;
      detail::nccl_check(ncclBroadcast(src, data.data() + seg(r), seg(r + 1) - seg(r), ty, static_cast<int>(r), comm_, stream_),
                         "ncclBroadcast");
    }
    detail::nccl_check(ncclGroupEnd(), "ncclGroupEnd");
    sync();
  }

  ncclComm_t comm_ = nullptr;
  cudaStream_t stream_ = nullptr;
  int rank_ = 0, size_ = 1;
  void* scratch_ = nullptr;
  std::size_t scratch_bytes_ = 0;
};

}  // namespace rlflow::comm
