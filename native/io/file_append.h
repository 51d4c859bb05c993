// Appending to files at known offsets, for the catch-up archive's layer-hours
// (src/delivery/catch-up/hour-store.ts, docs/decisions.md "Catch-up storage"): a segment's bytes,
// then its sidecar record, in one call from JS. Only the writes: no format, no state. No N-API here.
#pragma once
#include <sys/types.h>
#include <sys/uio.h>

#include <cstddef>

namespace skylark::io {

// Writes `pieces[0..n)` one after the other at byte `at` of `fd` (pwritev, again from where a short
// write stopped, again after EINTR, IOV_MAX pieces at a time). Returns 0, or the errno of the write
// that failed (what was written before it stays; the caller writes over it next time).
int WriteAllAt(int fd, const iovec* pieces, size_t n, off_t at);

// A segment's append: `data` at `data_at` of `data_fd`, then (only once all of it is written)
// `records` at `records_at` of `records_fd`. Returns 0, or the errno of the first failed write.
int AppendRecorded(int data_fd, const iovec* data, size_t data_n, off_t data_at, int records_fd, const iovec* records, size_t records_n,
                   off_t records_at);

}  // namespace skylark::io
