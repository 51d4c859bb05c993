// A minimal test harness for the C++ core tests (no external framework: nothing to download).
//   TEST(name) { CHECK(cond); CHECK_EQ(a, b); }
//   int main() { return skylark_test::run_all(); }   -- or define SKYLARK_TEST_MAIN before including
#pragma once
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <iterator>
#include <string>
#include <vector>

namespace skylark_test {
struct Case { const char* name; std::function<void()> fn; };
inline std::vector<Case>& cases() { static std::vector<Case> c; return c; }
inline int& failures() { static int f = 0; return f; }
struct Register { Register(const char* n, std::function<void()> f) { cases().push_back({n, std::move(f)}); } };

inline std::vector<unsigned char> read_fixture(const std::string& rel) {
  std::string path = std::string(SKYLARK_FIXTURES) + "/" + rel;
  std::ifstream in(path, std::ios::binary);
  if (!in) { std::fprintf(stderr, "missing fixture %s\n", path.c_str()); std::exit(2); }
  return std::vector<unsigned char>(std::istreambuf_iterator<char>(in), {});
}

inline int run_all() {
  int passed = 0, failed = 0;
  for (auto& c : cases()) {
    int before = failures();
    c.fn();
    if (failures() == before) { ++passed; std::printf("ok   %s\n", c.name); }
    else { ++failed; std::printf("FAIL %s\n", c.name); }
  }
  std::printf("%d passed, %d failed\n", passed, failed);
  return failed == 0 ? 0 : 1;
}
}  // namespace skylark_test

#define SKYLARK_CAT2(a, b) a##b
#define SKYLARK_CAT(a, b) SKYLARK_CAT2(a, b)
#define TEST(name)                                                              \
  static void name();                                                           \
  static skylark_test::Register SKYLARK_CAT(reg_, name)(#name, name);           \
  static void name()
#define CHECK(cond)                                                             \
  do { if (!(cond)) { ++skylark_test::failures();                               \
    std::fprintf(stderr, "%s:%d: CHECK(%s) failed\n", __FILE__, __LINE__, #cond); } } while (0)
#define CHECK_EQ(a, b)                                                          \
  do { auto _a = (a); auto _b = (b); if (!(_a == _b)) { ++skylark_test::failures(); \
    std::fprintf(stderr, "%s:%d: CHECK_EQ(%s, %s) failed: %lld vs %lld\n", __FILE__, __LINE__, #a, #b, \
      (long long)_a, (long long)_b); } } while (0)
#define TEST_MAIN int main() { return skylark_test::run_all(); }
