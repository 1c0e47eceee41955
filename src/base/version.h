#pragma once
// What this binary is: the release version (project(VERSION) in CMakeLists.txt), the git commit it
// was built from ("abc1234", "abc1234+dirty" when tracked files had changes, "unknown" without git)
// and whether the CUDA backend is compiled in (not whether a GPU is usable: see device_memory).
// Only version.cc sees the generated header, so a new commit recompiles that one file.
#include <string>

namespace sanctum::build {

const char* version();
const char* commit();
bool cuda_built();
// "sanctum 0.4.0 (abc1234)": the first line of `sanctum --version`.
std::string describe();

}  // namespace sanctum::build
