// Replacing one imported libc function of one loaded shared object (its GOT slots: ELF gABI,
// "Global Offset Table"; the x86-64 and AArch64 psABIs' JUMP_SLOT and GLOB_DAT relocations), so
// that this object's calls reach our function while every other object keeps libc's. Linux/ELF
// only. No N-API, no parsing of network data.
#pragma once
#include <string>

namespace skylark::io {

// Points every GOT slot of `symbol` in the loaded object whose path ends with `object_suffix` at
// `replacement`. Returns the number of slots written (0: the object is not loaded, or it does not
// import `symbol`, or the platform is not ELF); `error` says why when 0.
int ReplaceImport(const std::string& object_suffix, const char* symbol, void* replacement, std::string* error);

}  // namespace skylark::io
