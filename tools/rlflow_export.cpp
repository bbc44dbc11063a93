// rlflow_export: an rlflow checkpoint as a Hugging Face folder of its family (GPT-2, Llama, Qwen2, Qwen3).
//   rlflow_export CHECKPOINT OUT_DIR [--dtype float32|bfloat16|float16] [--tokenizer DIR] [--peft [--base NAME]]
// CHECKPOINT: <trainer.default_local_dir>/global_step_N (its actor.safetensors) or a .safetensors
// file written by rlflow. OUT_DIR gets config.json + model.safetensors (+ the tokenizer files); a
// LoRA actor's checkpoint gives its merged weights. --peft: the LoRA adapters only, as a PEFT
// folder (adapter_config.json + adapter_model.safetensors; --base: its base_model_name_or_path).
#include <cstdio>
#include <exception>
#include <string>

#include <rlflow/engine/hf_export.hpp>
#include <rlflow/engine/peft.hpp>  // export_peft

int main(int argc, char** argv) {
  std::string in, out, tok, base;
  bool peft = false;
  rlflow::DType dt = rlflow::DType::float32;
  auto usage = [] {
    std::fprintf(stderr, "usage: rlflow_export CHECKPOINT OUT_DIR [--dtype float32|bfloat16|float16] [--tokenizer DIR] [--peft [--base NAME]]\n");
    return 2;
  };
  for (int i = 1; i < argc; ++i) {
    std::string const a = argv[i];
    if (a == "--help" || a == "-h") return usage(), 0;
    if (a == "--peft") {
      peft = true;
    } else if (a == "--dtype" || a == "--tokenizer" || a == "--base") {
      if (i + 1 >= argc) return usage();
      std::string const v = argv[++i];
      if (a == "--tokenizer") tok = v;
      else if (a == "--base") base = v;
      else if (v == "float32") dt = rlflow::DType::float32;
      else if (v == "bfloat16") dt = rlflow::DType::bfloat16;
      else if (v == "float16") dt = rlflow::DType::float16;
      else return std::fprintf(stderr, "rlflow_export: --dtype %s: use float32, bfloat16 or float16\n", v.c_str()), 2;
    } else if (in.empty()) in = a;
    else if (out.empty()) out = a;
    else return usage();
  }
  if (in.empty() || out.empty()) return usage();
  try {
    if (peft) {
      rlflow::engine::export_peft(in, out, base);
      std::printf("rlflow_export: wrote %s/adapter_config.json and %s/adapter_model.safetensors\n", out.c_str(), out.c_str());
    } else {
      rlflow::engine::export_hf(in, out, dt, tok);
      std::printf("rlflow_export: wrote %s/config.json and %s/model.safetensors\n", out.c_str(), out.c_str());
    }
  } catch (std::exception const& e) {
    std::fprintf(stderr, "rlflow_export: %s\n", e.what());
    return 1;
  }
  return 0;
}
