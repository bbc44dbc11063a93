// rlflow/dispatch/dispatch.hpp: umbrella of the dispatch area: every built-in mode, the mode
// building blocks, the in-process backend and the communicator.
//
// | rlflow                              | verl                                         |
// | ----------------------------------- | -------------------------------------------- |
// | dispatch::OneToAll                  | Dispatch.ONE_TO_ALL                          |
// | dispatch::AllToAll (+ PerRank<T>)   | Dispatch.ALL_TO_ALL                          |
// | dispatch::DPCompute                 | Dispatch.DP_COMPUTE                          |
// | dispatch::DPComputeProto            | Dispatch.DP_COMPUTE_PROTO (+ auto-padding)   |
// | dispatch::DPComputeProtoWithFunc    | Dispatch.DP_COMPUTE_PROTO_WITH_FUNC          |
// | dispatch::DPComputeMetric           | Dispatch.DP_COMPUTE_METRIC                   |
// | dispatch::NDComputeProto<Layout>    | make_nd_compute_dataproto_dispatch_fn(mesh)  |
// | execute::All / execute::RankZero    | Execute.ALL / Execute.RANK_ZERO              |
#pragma once
#include <rlflow/dispatch/all_to_all.hpp>
#include <rlflow/comm/communicator.hpp>
#include <rlflow/dispatch/context.hpp>
#include <rlflow/dispatch/dp_compute.hpp>
#include <rlflow/dispatch/dp_compute_proto.hpp>
#include <rlflow/dispatch/handoff.hpp>
#include <rlflow/dispatch/in_process.hpp>
#include <rlflow/dispatch/mode.hpp>
#include <rlflow/dispatch/one_to_all.hpp>
