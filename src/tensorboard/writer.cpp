// The body of rlflow::TensorBoardWriter (rlflow/core/tensorboard.hpp) on the protobuf messages of
// event.proto; built into rlflow_tensorboard when CMake finds protobuf.
#include <rlflow/core/tensorboard.hpp>

#include <chrono>
#include <cmath>
#include <system_error>
#include <unistd.h>  // gethostname

#include <rlflow/core/error.hpp>

#include "event.pb.h"

namespace rlflow {

namespace {
double now_seconds() {
  return std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
}
}  // namespace

TensorBoardWriter::TensorBoardWriter(std::filesystem::path const& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec)
    throw io_error(msg("trainer.logger=tensorboard: cannot create the event folder '", dir.string(), "' (", ec.message(),
                       "); set TENSORBOARD_DIR to a writable folder"));
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) != 0) host[0] = '\0';
  double const t = now_seconds();
  path_ = dir / msg("events.out.tfevents.", static_cast<long long>(t), ".", host[0] ? host : "localhost", ".rlflow");
  out_.open(path_, std::ios::binary | std::ios::app);
  if (!out_)
    throw io_error(msg("trainer.logger=tensorboard: cannot open '", path_.string(), "' for writing; set TENSORBOARD_DIR "
                       "to a writable folder"));
  tensorboard::Event e;
  e.set_wall_time(t);
  e.set_step(0);
  e.set_file_version("brain.Event:2");
  out_ << detail::tfrecord(e.SerializeAsString());
  out_.flush();
}

void TensorBoardWriter::add_scalars(std::int64_t step, Metrics const& m) {
  tensorboard::Event e;
  e.set_wall_time(now_seconds());
  e.set_step(step);
  auto* s = e.mutable_summary();
  for (auto const& [tag, v] : m) {
    if (!std::isfinite(v)) continue;
    auto* value = s->add_value();
    value->set_tag(tag);
    value->set_simple_value(static_cast<float>(v));
  }
  out_ << detail::tfrecord(e.SerializeAsString());
  out_.flush();
  if (!out_)
    throw io_error(msg("trainer.logger=tensorboard: writing '", path_.string(), "' failed (disk full?)"));
}

}  // namespace rlflow
