// See file_append.h.
#include "io/file_append.h"

#include <unistd.h>

#include <cerrno>
#include <climits>
#include <vector>

namespace skylark::io {

namespace {
constexpr size_t kOnStack = 16;  // pieces copied without an allocation (a segment has one, or its parts)
}  // namespace

int WriteAllAt(int fd, const iovec* pieces, size_t n, off_t at) {
  // A copy, advanced in place after a short write.
  iovec stack[kOnStack];
  std::vector<iovec> heap;
  iovec* left = stack;
  if (n > kOnStack) {
    heap.assign(pieces, pieces + n);
    left = heap.data();
  } else {
    for (size_t k = 0; k < n; k++) stack[k] = pieces[k];
  }
  size_t i = 0;
  while (i < n) {
    if (left[i].iov_len == 0) {
      ++i;
      continue;
    }
    const size_t batch = n - i < static_cast<size_t>(IOV_MAX) ? n - i : static_cast<size_t>(IOV_MAX);
    const ssize_t w = pwritev(fd, &left[i], static_cast<int>(batch), at);
    if (w < 0) {
      if (errno == EINTR) continue;
      return errno;
    }
    if (w == 0) return EIO;  // nothing written and no error: would loop for ever
    at += w;
    size_t done = static_cast<size_t>(w);
    while (done > 0 && i < n) {
      if (done >= left[i].iov_len) {
        done -= left[i].iov_len;
        ++i;
      } else {
        left[i].iov_base = static_cast<char*>(left[i].iov_base) + done;
        left[i].iov_len -= done;
        done = 0;
      }
    }
  }
  return 0;
}

int AppendRecorded(int data_fd, const iovec* data, size_t data_n, off_t data_at, int records_fd, const iovec* records, size_t records_n,
                   off_t records_at) {
  const int err = WriteAllAt(data_fd, data, data_n, data_at);
  if (err != 0) return err;
  return WriteAllAt(records_fd, records, records_n, records_at);
}

}  // namespace skylark::io
