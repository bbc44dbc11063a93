# Dependencies of the rlflow INTERFACE target (also found again by rlflowConfig.cmake).
find_package(Threads REQUIRED)
set(BLA_VENDOR OpenBLAS)
find_package(BLAS REQUIRED)
find_package(nlohmann_json 3.10 REQUIRED)
find_package(yaml-cpp 0.7 REQUIRED)  # config files (rlflow/detail/yaml.hpp)
find_package(OpenMP)
# PCRE2 (8-bit) runs the pre-tokenizer regexes of Hugging Face tokenizer.json files
# (rlflow/model/hf_tokenizer.hpp); Debian's libpcre2-dev, found through pkg-config.
find_package(PkgConfig REQUIRED)
pkg_check_modules(RLFLOW_PCRE2 REQUIRED IMPORTED_TARGET GLOBAL libpcre2-8)
