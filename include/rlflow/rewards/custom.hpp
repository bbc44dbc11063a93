// rlflow/rewards/custom.hpp: a user scorer loaded from a shared library (verl:
// custom_reward_function.path / custom_reward_function.name, which load a Python function from a
// file). The symbol is a C function with verl's compute_score arguments:
//   extern "C" double compute_score(const char* data_source, const char* solution_str,
//                                   const char* ground_truth, const char* extra_info_json);
// (extra_info_json is "" when the row has none). A missing library or symbol is a config_error
// naming the path, the symbol and the fix. The library stays loaded while a CustomScore lives.
#pragma once
#include <memory>
#include <string>
#include <string_view>

#include <dlfcn.h>  // dlopen, dlsym, dlerror, dlclose

#include <rlflow/core/error.hpp>

namespace rlflow::rewards {

//! The C signature of a custom scorer (verl: compute_score(data_source, solution_str, ground_truth, extra_info)).
using custom_score_fn = double (*)(char const* data_source, char const* solution_str, char const* ground_truth,
                                   char const* extra_info_json);

//! A scorer loaded from a shared library; copyable (the library handle is shared).
class CustomScore {
 public:
  //! Loads 'name' (default verl's "compute_score") from the shared library at 'path'.
  CustomScore(std::string const& path, std::string const& name = "compute_score") : path_(path), name_(name) {
    if (path.empty())
      throw config_error("rlflow::rewards::CustomScore: custom_reward_function.path is empty; set it to a shared library (.so)");
    if (path.ends_with(".py"))
      throw config_error(msg("rlflow::rewards::CustomScore: custom_reward_function.path=", path,
                             " is a Python file; rlflow loads a C/C++ shared library: build one exporting extern \"C\" double ",
                             name, "(const char*, const char*, const char*, const char*)"));
    dlerror();
    void* h = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
    if (!h) {
      char const* e = dlerror();
      throw config_error(msg("rlflow::rewards::CustomScore: cannot load custom_reward_function.path=", path, " (",
                             e ? e : "unknown dlopen error", "); check the path and that the library's dependencies resolve"));
    }
    handle_ = std::shared_ptr<void>(h, [](void* p) { ::dlclose(p); });
    dlerror();
    void* sym = ::dlsym(h, name.c_str());
    if (!sym)
      throw config_error(msg("rlflow::rewards::CustomScore: ", path, " has no symbol '", name,
                             "' (custom_reward_function.name); export it as extern \"C\" double ", name,
                             "(const char* data_source, const char* solution_str, const char* ground_truth, "
                             "const char* extra_info_json)"));
    fn_ = reinterpret_cast<custom_score_fn>(sym);
  }

  double operator()(std::string const& data_source, std::string const& solution, std::string const& ground_truth,
                    std::string const& extra_info_json = "") const {
    return fn_(data_source.c_str(), solution.c_str(), ground_truth.c_str(), extra_info_json.c_str());
  }
  std::string const& path() const { return path_; }
  std::string const& name() const { return name_; }

 private:
  std::string path_, name_;
  std::shared_ptr<void> handle_;
  custom_score_fn fn_ = nullptr;
};

}  // namespace rlflow::rewards
