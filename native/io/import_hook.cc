#include "io/import_hook.h"

#if defined(__linux__)
#include <elf.h>
#include <link.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cstdint>
#include <cstring>

namespace skylark::io {
namespace {

#if defined(__x86_64__)
constexpr uint32_t kJumpSlot = R_X86_64_JUMP_SLOT;
constexpr uint32_t kGlobDat = R_X86_64_GLOB_DAT;
#elif defined(__aarch64__)
constexpr uint32_t kJumpSlot = R_AARCH64_JUMP_SLOT;
constexpr uint32_t kGlobDat = R_AARCH64_GLOB_DAT;
#else
constexpr uint32_t kJumpSlot = 0xffffffffu;
constexpr uint32_t kGlobDat = 0xffffffffu;
#endif

struct Search {
  const std::string* suffix;
  const char* symbol;
  void* replacement;
  int written = 0;
  bool found = false;
};

bool EndsWith(const char* s, const std::string& suffix) {
  const size_t n = std::strlen(s);
  return n >= suffix.size() && std::memcmp(s + n - suffix.size(), suffix.data(), suffix.size()) == 0;
}

// Writes `value` at `slot`, making its page writable for the write when it lies in the object's
// RELRO segment (read-only after relocation), and read-only again after.
bool WriteSlot(void** slot, void* value, uintptr_t relro_start, uintptr_t relro_end) {
  const auto at = reinterpret_cast<uintptr_t>(slot);
  const bool in_relro = at >= relro_start && at < relro_end;
  if (!in_relro) {
    __atomic_store_n(slot, value, __ATOMIC_SEQ_CST);
    return true;
  }
  const auto page = static_cast<uintptr_t>(sysconf(_SC_PAGESIZE));
  void* base = reinterpret_cast<void*>(at & ~(page - 1));
  if (mprotect(base, page, PROT_READ | PROT_WRITE) != 0) return false;
  __atomic_store_n(slot, value, __ATOMIC_SEQ_CST);
  mprotect(base, page, PROT_READ);
  return true;
}

int Visit(struct dl_phdr_info* info, size_t, void* data) {
  auto* s = static_cast<Search*>(data);
  if (!info->dlpi_name || !EndsWith(info->dlpi_name, *s->suffix)) return 0;
  s->found = true;
  const ElfW(Addr) base = info->dlpi_addr;
  const ElfW(Dyn)* dyn = nullptr;
  uintptr_t relro_start = 0, relro_end = 0;
  for (int i = 0; i < info->dlpi_phnum; ++i) {
    const ElfW(Phdr)& ph = info->dlpi_phdr[i];
    if (ph.p_type == PT_DYNAMIC) dyn = reinterpret_cast<const ElfW(Dyn)*>(base + ph.p_vaddr);
    if (ph.p_type == PT_GNU_RELRO) {
      relro_start = base + ph.p_vaddr;
      relro_end = relro_start + ph.p_memsz;
    }
  }
  if (!dyn) return 1;
  const ElfW(Sym)* symtab = nullptr;
  const char* strtab = nullptr;
  const ElfW(Rela)* jmprel = nullptr;
  size_t jmprel_size = 0;
  const ElfW(Rela)* rela = nullptr;
  size_t rela_size = 0;
  bool rela_kind = true;
  // The dynamic loader has already relocated these d_ptr values to run-time addresses.
  for (const ElfW(Dyn)* d = dyn; d->d_tag != DT_NULL; ++d) {
    switch (d->d_tag) {
      case DT_SYMTAB: symtab = reinterpret_cast<const ElfW(Sym)*>(d->d_un.d_ptr); break;
      case DT_STRTAB: strtab = reinterpret_cast<const char*>(d->d_un.d_ptr); break;
      case DT_JMPREL: jmprel = reinterpret_cast<const ElfW(Rela)*>(d->d_un.d_ptr); break;
      case DT_PLTRELSZ: jmprel_size = d->d_un.d_val; break;
      case DT_RELA: rela = reinterpret_cast<const ElfW(Rela)*>(d->d_un.d_ptr); break;
      case DT_RELASZ: rela_size = d->d_un.d_val; break;
      case DT_PLTREL: rela_kind = d->d_un.d_val == DT_RELA; break;
      default: break;
    }
  }
  if (!symtab || !strtab || !rela_kind) return 1;
  auto scan = [&](const ElfW(Rela)* table, size_t bytes) {
    if (!table) return;
    for (size_t i = 0; i < bytes / sizeof(ElfW(Rela)); ++i) {
      const uint32_t type = ELF64_R_TYPE(table[i].r_info);
      if (type != kJumpSlot && type != kGlobDat) continue;
      const ElfW(Sym)& sym = symtab[ELF64_R_SYM(table[i].r_info)];
      if (std::strcmp(strtab + sym.st_name, s->symbol) != 0) continue;
      auto** slot = reinterpret_cast<void**>(base + table[i].r_offset);
      if (WriteSlot(slot, s->replacement, relro_start, relro_end)) ++s->written;
    }
  };
  scan(jmprel, jmprel_size);
  scan(rela, rela_size);
  return 1;
}

}  // namespace

int ReplaceImport(const std::string& object_suffix, const char* symbol, void* replacement, std::string* error) {
#if defined(__x86_64__) || defined(__aarch64__)
  Search s{&object_suffix, symbol, replacement};
  dl_iterate_phdr(Visit, &s);
  if (!s.found) {
    if (error) *error = "not loaded: " + object_suffix;
    return 0;
  }
  if (s.written == 0 && error) *error = std::string("no import of ") + symbol + " in " + object_suffix;
  return s.written;
#else
  if (error) *error = "unsupported architecture";
  return 0;
#endif
}

}  // namespace skylark::io

#else  // not Linux

namespace skylark::io {
int ReplaceImport(const std::string&, const char*, void*, std::string* error) {
  if (error) *error = "unsupported platform (ELF only)";
  return 0;
}
}  // namespace skylark::io

#endif
