// See segment_writer.h.
#include "core/mux/ts/segment_writer.h"

#include "core/mux/ts/packetizer.h"
#include "core/mux/ts/pes.h"
#include "core/mux/ts/psi.h"
#include "core/util/bytes.h"

namespace skylark::mux::ts {

std::vector<uint8_t> TsSegmentWriter::write(const TsAudioFormat& format, const AudioFrames& frames,
                                            const FrameClock& clock, const TsMetadata* metadata,
                                            size_t metadata_count) {
  const size_t prefix = format.adts ? codec::kAdtsHeaderSize : 0;
  const bool id3 = format.timed_metadata && metadata_pid_ != 0;
  // 1. Sizes: ADTS frame sizes and times, the tags written, the PES plan, the TS packet count.
  const size_t n = frames.count;
  es_sizes_.resize(n);
  pts_.resize(n);
  for (size_t i = 0; i < n; ++i) {
    es_sizes_[i] = frames.sizes[i] + static_cast<uint32_t>(prefix);
    pts_[i] = clock.pts_of(i);
  }
  tags_.clear();
  if (id3)
    for (size_t k = 0; k < metadata_count; ++k) {
      const TsMetadata& m = metadata[k];
      if (m.frame < n && (tags_.empty() || m.frame >= tags_.back()->frame) && m.size <= kPesMaxPayload)
        tags_.push_back(&m);
    }
  const uint64_t frame90k = uint64_t{clock.samples_per_frame} * 90000 / clock.sample_rate;
  const uint64_t max_pcr90k = uint64_t{kMaxPcrIntervalMs} * 90;
  // A PCR goes in the first packet whose audio is this much newer than the last PCR; packet times
  // step by one frame, so PCRs end up less than kMaxPcrIntervalMs apart.
  const uint64_t pcr_interval90k = frame90k < max_pcr90k ? max_pcr90k - frame90k : 0;
  size_t max_frames = static_cast<size_t>(uint64_t{kMaxPesDurationMs} * 90 / (frame90k ? frame90k : 1));
  if (max_frames == 0) max_frames = 1;
  planner_.plan(es_sizes_.data(), pts_.data(), n, max_frames, kMaxPesBytes, pcr_interval90k, counts_);
  size_t packets = 2;  // PAT, PMT
  for (size_t f = 0, p = 0; p < counts_.size(); f += counts_[p++])
    packets += count_pes_packets(kPesHeaderSize, PesFrames{&es_sizes_[f], &pts_[f], counts_[p]}, pcr_interval90k);
  for (const TsMetadata* m : tags_) packets += count_plain_pes_packets(kPesHeaderSize + m->size);

  // 2. One allocation, then write.
  std::vector<uint8_t> out(packets * kPacketSize);
  util::ByteWriter w(out.data(), out.size());
  write_pat_packet(w, pmt_pid_, pat_cc_.next());
  write_pmt_packet(w, pmt_pid_, audio_pid_, pmt_cc_.next(), format.stream_type, id3 ? metadata_pid_ : 0);
  PacketizeParams params;
  params.pid = audio_pid_;
  params.pcr_lead90k = kPcrLead90k;
  params.pcr_interval90k = pcr_interval90k;
  const uint8_t* raw = frames.data;
  size_t f = 0, t = 0;
  for (size_t p = 0; p < counts_.size(); ++p) {
    const uint32_t k = counts_[p];
    for (; t < tags_.size() && tags_[t]->frame < f + k; ++t) {  // the tags of this PES's frames
      const TsMetadata& m = *tags_[t];
      pes_.resize(kPesHeaderSize + m.size);
      util::ByteWriter pw(pes_.data(), pes_.size());
      write_pes_header(pw, m.size, pts_[m.frame], kStreamIdPrivate1);
      pw.bytes(m.tag, m.size);
      packetize_plain_pes(w, metadata_cc_, metadata_pid_, pes_.data(), pes_.size());
    }
    const PesFrames pf{&es_sizes_[f], &pts_[f], k};
    size_t es_bytes = 0;
    for (uint32_t j = 0; j < k; ++j) es_bytes += es_sizes_[f + j];
    pes_.resize(kPesHeaderSize + es_bytes);  // capacity is kept: no churn after the first segments
    util::ByteWriter pw(pes_.data(), pes_.size());
    write_pes_header(pw, es_bytes, pts_[f]);
    for (uint32_t j = 0; j < k; ++j, ++f) {
      const uint32_t size = frames.sizes[f];
      if (format.adts)
        if (uint8_t* h = pw.reserve(codec::kAdtsHeaderSize)) codec::write_adts_header(h, *format.adts, size);
      pw.bytes(raw, size);
      raw += size;
    }
    params.random_access = p == 0;
    packetize_pes(w, audio_cc_, pes_.data(), kPesHeaderSize, pf, params);
  }
  if (!w.ok() || w.size() != out.size()) out.clear();  // cannot happen: sizes were computed above
  return out;
}

}  // namespace skylark::mux::ts
