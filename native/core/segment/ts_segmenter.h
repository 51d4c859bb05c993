// The AAC → MPEG-TS segmenter the server used before `Segmenter` (docs/native-api.md "TsSegmenter"):
// a Segmenter with container MPEG-TS that takes AAC only (other codecs: unsupported_codec), kept so
// existing callers keep working unchanged. Timing, cutting, sequence headers and errors: segmenter.h.
#pragma once
#include "core/segment/segmenter.h"

namespace skylark::segment {

class TsSegmenter : public Segmenter {
 public:
  explicit TsSegmenter(uint32_t target_duration_ms = kDefaultTargetDurationMs)
      : Segmenter(legacy_options(target_duration_ms)) {}

 private:
  static SegmenterOptions legacy_options(uint32_t target_duration_ms) {
    SegmenterOptions o;
    o.container = Container::kTs;
    o.target_duration_ms = target_duration_ms;
    o.aac_only = true;
    return o;
  }
};

}  // namespace skylark::segment
