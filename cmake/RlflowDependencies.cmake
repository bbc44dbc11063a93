# Dependencies of the rlflow INTERFACE target (also found again by rlflowConfig.cmake).
find_package(Threads REQUIRED)
set(BLA_VENDOR OpenBLAS)
find_package(BLAS REQUIRED)
find_package(nlohmann_json 3.10 REQUIRED)
find_package(yaml-cpp 0.7 REQUIRED)  # config files (rlflow/detail/yaml.hpp)
find_package(OpenMP)
