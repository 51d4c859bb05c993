// See boxes.h. Box layouts follow ISO/IEC 14496-12:2015 (§4.3 ftyp, §8.2.2 mvhd, §8.3.2 tkhd,
// §8.6.5/§8.6.6 edts/elst, §8.4.2 mdhd, §8.4.3 hdlr, §8.4.5.3 smhd, §8.7.1-2 dinf/dref, §8.5.2 stsd,
// §8.6.1.2 stts, §8.7.4 stsc, §8.7.3 stsz, §8.7.5 stco, §8.9.3 sgpd, §8.9.2 sbgp, §8.8.1 mvex,
// §8.8.3 trex, §8.8.4 moof, §8.8.5 mfhd, §8.8.6 traf, §8.8.7 tfhd, §8.8.12 tfdt, §8.8.8 trun,
// §8.1.1 mdat; §12.2.3 AudioSampleEntry), ISO/IEC 14496-14 §5.6 esds with ISO/IEC 14496-1 §7.2.6
// descriptors, the Opus-in-ISOBMFF spec §4.3.1-4.3.2 (Opus sample entry, dOps), and ISO/IEC 23009-1
// §5.10.3.3 emsg.
#include "core/mux/fmp4/boxes.h"

#include <iterator>

namespace skylark::mux::fmp4 {
namespace {

using util::ByteWriter;

constexpr size_t kBox = 8, kFullBox = 12;

void box(ByteWriter& w, size_t size, const char (&type)[5]) {
  w.be32(static_cast<uint32_t>(size));
  w.bytes(type, 4);
}
void full_box(ByteWriter& w, size_t size, const char (&type)[5], uint8_t version, uint32_t flags) {
  box(w, size, type);
  w.u8(version);
  w.be24(flags);
}
void matrix(ByteWriter& w) {  // unity matrix (§8.2.2.3)
  const uint32_t m[9] = {0x00010000, 0, 0, 0, 0x00010000, 0, 0, 0, 0x40000000};
  for (uint32_t v : m) w.be32(v);
}

// ---- ftyp: major 'iso6', compatible 'iso6' 'cmfc' (CMAF track file: fragmented, tfdt, one track).
constexpr char kBrands[][5] = {"iso6", "cmfc"};
constexpr size_t ftyp_size() { return kBox + 8 + 4 * std::size(kBrands); }
void write_ftyp(ByteWriter& w) {
  box(w, ftyp_size(), "ftyp");
  w.bytes("iso6", 4);
  w.be32(0);  // minor_version
  for (const auto& b : kBrands) w.bytes(b, 4);
}

// ---- mvhd (version 0): timescale 1000, duration 0 (fragmented: unknown), next_track_ID.
constexpr size_t mvhd_size() { return kFullBox + 96; }
void write_mvhd(ByteWriter& w, uint32_t next_track_id) {
  full_box(w, mvhd_size(), "mvhd", 0, 0);
  w.be32(0);           // creation_time
  w.be32(0);           // modification_time
  w.be32(1000);        // timescale
  w.be32(0);           // duration
  w.be32(0x00010000);  // rate 1.0
  w.be16(0x0100);      // volume 1.0
  w.fill(0, 2 + 8);    // reserved
  matrix(w);
  w.fill(0, 24);       // pre_defined
  w.be32(next_track_id);
}

// ---- tkhd (version 0): enabled | in_movie, duration 0, audio volume 1.0, no width/height.
constexpr size_t tkhd_size() { return kFullBox + 80; }
void write_tkhd(ByteWriter& w, uint32_t track_id) {
  full_box(w, tkhd_size(), "tkhd", 0, 0x000003);
  w.be32(0);  // creation_time
  w.be32(0);  // modification_time
  w.be32(track_id);
  w.be32(0);  // reserved
  w.be32(0);  // duration
  w.fill(0, 8);   // reserved
  w.be16(0);      // layer
  w.be16(0);      // alternate_group
  w.be16(0x0100); // volume
  w.be16(0);      // reserved
  matrix(w);
  w.be32(0);  // width
  w.be32(0);  // height
}

// ---- edts/elst: one edit (segment_duration 0 = the whole media, media_time, rate 1).
constexpr size_t elst_size() { return kFullBox + 4 + 12; }
constexpr size_t edts_size() { return kBox + elst_size(); }
void write_edts(ByteWriter& w, uint32_t media_time) {
  box(w, edts_size(), "edts");
  full_box(w, elst_size(), "elst", 0, 0);
  w.be32(1);           // entry_count
  w.be32(0);           // segment_duration
  w.be32(media_time);  // media_time
  w.be16(1);           // media_rate_integer
  w.be16(0);           // media_rate_fraction
}

// ---- mdhd (version 0): timescale, duration 0, language 'und'.
constexpr size_t mdhd_size() { return kFullBox + 20; }
void write_mdhd(ByteWriter& w, uint32_t timescale) {
  full_box(w, mdhd_size(), "mdhd", 0, 0);
  w.be32(0);  // creation_time
  w.be32(0);  // modification_time
  w.be32(timescale);
  w.be32(0);  // duration
  w.be16(0x55C4);  // pad 0, language 'und' (ISO-639-2/T packed 5-bit letters)
  w.be16(0);       // pre_defined
}

// ---- hdlr: 'soun', name "SoundHandler".
constexpr char kHandlerName[] = "SoundHandler";  // written with its NUL
constexpr size_t hdlr_size() { return kFullBox + 4 + 4 + 12 + sizeof kHandlerName; }
void write_hdlr(ByteWriter& w) {
  full_box(w, hdlr_size(), "hdlr", 0, 0);
  w.be32(0);  // pre_defined
  w.bytes("soun", 4);
  w.fill(0, 12);  // reserved
  w.bytes(kHandlerName, sizeof kHandlerName);
}

// ---- smhd, dinf/dref/url (self-contained).
constexpr size_t smhd_size() { return kFullBox + 4; }
void write_smhd(ByteWriter& w) {
  full_box(w, smhd_size(), "smhd", 0, 0);
  w.be16(0);  // balance
  w.be16(0);  // reserved
}
constexpr size_t url_size() { return kFullBox; }
constexpr size_t dref_size() { return kFullBox + 4 + url_size(); }
constexpr size_t dinf_size() { return kBox + dref_size(); }
void write_dinf(ByteWriter& w) {
  box(w, dinf_size(), "dinf");
  full_box(w, dref_size(), "dref", 0, 0);
  w.be32(1);
  full_box(w, url_size(), "url ", 0, 0x000001);  // media data in the same file
}

// ---- esds (ISO/IEC 14496-14 §5.6): ES_Descriptor { DecoderConfigDescriptor { DecoderSpecificInfo },
// SLConfigDescriptor }. Descriptor lengths use 1 byte below 128, else the 4-byte 0x80-continued form.
constexpr size_t desc_len_size(size_t n) { return n < 128 ? 1 : 4; }
void write_desc(ByteWriter& w, uint8_t tag, size_t n) {
  w.u8(tag);
  if (n < 128) {
    w.u8(static_cast<uint8_t>(n));
  } else {
    w.u8(static_cast<uint8_t>(0x80 | ((n >> 21) & 0x7F)));
    w.u8(static_cast<uint8_t>(0x80 | ((n >> 14) & 0x7F)));
    w.u8(static_cast<uint8_t>(0x80 | ((n >> 7) & 0x7F)));
    w.u8(static_cast<uint8_t>(n & 0x7F));
  }
}
size_t dcd_payload(const AudioTrack& t) {
  const size_t dsi = t.decoder_specific_size;
  return 13 + (dsi ? 1 + desc_len_size(dsi) + dsi : 0);
}
size_t es_payload(const AudioTrack& t) {
  const size_t dcd = dcd_payload(t);
  return 3 + 1 + desc_len_size(dcd) + dcd + 3;
}
size_t esds_size(const AudioTrack& t) {
  const size_t es = es_payload(t);
  return kFullBox + 1 + desc_len_size(es) + es;
}
void write_esds(ByteWriter& w, const AudioTrack& t) {
  full_box(w, esds_size(t), "esds", 0, 0);
  write_desc(w, 0x03, es_payload(t));  // ES_DescrTag
  w.be16(static_cast<uint16_t>(t.track_id));  // ES_ID
  w.u8(0);                                    // no stream dependence, URL, OCR
  write_desc(w, 0x04, dcd_payload(t));  // DecoderConfigDescrTag
  w.u8(t.object_type_indication);
  w.u8(0x15);       // streamType 5 (audio) << 2, upStream 0, reserved 1
  w.be24(0);        // bufferSizeDB
  w.be32(t.max_bitrate);
  w.be32(t.avg_bitrate);
  if (t.decoder_specific_size) {
    write_desc(w, 0x05, t.decoder_specific_size);  // DecSpecificInfoTag
    w.bytes(t.decoder_specific, t.decoder_specific_size);
  }
  write_desc(w, 0x06, 1);  // SLConfigDescrTag
  w.u8(0x02);              // predefined: reserved for MP4 files
}

// ---- dOps (Opus Specific Box, big-endian, Version 0).
size_t dops_size(const codec::OpusHead& h) {
  return kBox + 11 + (h.mapping_family != 0 ? 2u + h.channels : 0u);
}
void write_dops(ByteWriter& w, const codec::OpusHead& h) {
  box(w, dops_size(h), "dOps");
  w.u8(0);  // Version
  w.u8(h.channels);  // OutputChannelCount
  w.be16(h.pre_skip);
  w.be32(h.input_sample_rate);
  w.be16(static_cast<uint16_t>(h.output_gain));
  w.u8(h.mapping_family);
  if (h.mapping_family != 0) {
    w.u8(h.stream_count);
    w.u8(h.coupled_count);
    w.bytes(h.mapping, h.channels);
  }
}

// ---- AudioSampleEntry ('mp4a' + esds, or 'Opus' + dOps).
constexpr size_t kAudioSampleEntryFields = 28;  // SampleEntry (8) + AudioSampleEntry (20)
size_t sample_entry_size(const AudioTrack& t) {
  return kBox + kAudioSampleEntryFields + (t.kind == AudioTrack::Kind::kOpus ? dops_size(t.opus) : esds_size(t));
}
void write_sample_entry(ByteWriter& w, const AudioTrack& t) {
  const bool opus = t.kind == AudioTrack::Kind::kOpus;
  box(w, sample_entry_size(t), opus ? "Opus" : "mp4a");
  w.fill(0, 6);    // reserved
  w.be16(1);       // data_reference_index
  w.fill(0, 8);    // reserved (version, revision, vendor)
  w.be16(t.channels);
  w.be16(16);      // samplesize
  w.be16(0);       // pre_defined
  w.be16(0);       // reserved
  w.be32(t.sample_rate <= 0xFFFF ? t.sample_rate << 16 : 0);
  if (opus) write_dops(w, t.opus);
  else write_esds(w, t);
}

// ---- stbl: stsd with the one entry, empty stts/stsc/stsz/stco, optional sgpd 'roll'.
size_t stsd_size(const AudioTrack& t) { return kFullBox + 4 + sample_entry_size(t); }
constexpr size_t empty_table_size() { return kFullBox + 4; }  // stts, stsc, stco: entry_count 0
constexpr size_t stsz_size() { return kFullBox + 8; }
constexpr size_t sgpd_size() { return kFullBox + 4 + 4 + 4 + 2; }
size_t stbl_size(const AudioTrack& t) {
  return kBox + stsd_size(t) + 3 * empty_table_size() + stsz_size() + (t.roll_distance ? sgpd_size() : 0);
}
void write_stbl(ByteWriter& w, const AudioTrack& t) {
  box(w, stbl_size(t), "stbl");
  full_box(w, stsd_size(t), "stsd", 0, 0);
  w.be32(1);
  write_sample_entry(w, t);
  full_box(w, empty_table_size(), "stts", 0, 0);
  w.be32(0);
  full_box(w, empty_table_size(), "stsc", 0, 0);
  w.be32(0);
  full_box(w, stsz_size(), "stsz", 0, 0);
  w.be32(0);  // sample_size
  w.be32(0);  // sample_count
  full_box(w, empty_table_size(), "stco", 0, 0);
  w.be32(0);
  if (t.roll_distance) {
    full_box(w, sgpd_size(), "sgpd", 1, 0);  // version 1: default_length
    w.bytes("roll", 4);
    w.be32(2);  // default_length: an AudioRollRecoveryEntry is one int16
    w.be32(1);  // entry_count
    w.be16(static_cast<uint16_t>(t.roll_distance));
  }
}

size_t minf_size(const AudioTrack& t) { return kBox + smhd_size() + dinf_size() + stbl_size(t); }
size_t mdia_size(const AudioTrack& t) { return kBox + mdhd_size() + hdlr_size() + minf_size(t); }
size_t trak_size(const AudioTrack& t) {
  return kBox + tkhd_size() + (t.edit_media_time ? edts_size() : 0) + mdia_size(t);
}
constexpr size_t trex_size() { return kFullBox + 20; }
constexpr size_t mvex_size() { return kBox + trex_size(); }
size_t moov_size(const AudioTrack& t) { return kBox + mvhd_size() + trak_size(t) + mvex_size(); }

void write_moov(ByteWriter& w, const AudioTrack& t) {
  box(w, moov_size(t), "moov");
  write_mvhd(w, t.track_id + 1);
  box(w, trak_size(t), "trak");
  write_tkhd(w, t.track_id);
  if (t.edit_media_time) write_edts(w, t.edit_media_time);
  box(w, mdia_size(t), "mdia");
  write_mdhd(w, t.timescale);
  write_hdlr(w);
  box(w, minf_size(t), "minf");
  write_smhd(w);
  write_dinf(w);
  write_stbl(w, t);
  box(w, mvex_size(), "mvex");
  full_box(w, trex_size(), "trex", 0, 0);
  w.be32(t.track_id);
  w.be32(1);  // default_sample_description_index
  w.be32(0);  // default_sample_duration
  w.be32(0);  // default_sample_size
  w.be32(kAudioSampleFlags);  // default_sample_flags
}

// ---- moof: mfhd, traf { tfhd, tfdt, trun, [sbgp] }; then mdat.
constexpr size_t mfhd_size() { return kFullBox + 4; }
constexpr size_t tfhd_size() { return kFullBox + 4 + 4; }  // track_ID + default_sample_flags
constexpr size_t tfdt_size() { return kFullBox + 8; }      // version 1
constexpr size_t trun_size(size_t n) { return kFullBox + 4 + 4 + 8 * n; }
constexpr size_t sbgp_size() { return kFullBox + 4 + 4 + 8; }
size_t traf_size(const Fragment& f) {
  return kBox + tfhd_size() + tfdt_size() + trun_size(f.count) + (f.roll_group ? sbgp_size() : 0);
}
size_t moof_size(const Fragment& f) { return kBox + mfhd_size() + traf_size(f); }
size_t payload_size(const Fragment& f) {
  size_t n = 0;
  for (size_t i = 0; i < f.count; ++i) n += f.sizes[i];
  return n;
}

}  // namespace

size_t emsg_size(const EventMessage& e) {
  return kFullBox + 4 + 8 + 4 + 4 + e.scheme_id_uri.size() + 1 + e.value.size() + 1 + e.message_size;
}

void write_emsg(ByteWriter& w, const EventMessage& e) {
  full_box(w, emsg_size(e), "emsg", 1, 0);
  w.be32(e.timescale);
  w.be64(e.presentation_time);
  w.be32(e.event_duration);
  w.be32(e.id);
  w.str(e.scheme_id_uri);
  w.u8(0);
  w.str(e.value);
  w.u8(0);
  w.bytes(e.message_data, e.message_size);
}

size_t init_segment_size(const AudioTrack& t) { return ftyp_size() + moov_size(t); }

std::vector<uint8_t> write_init_segment(const AudioTrack& t) {
  std::vector<uint8_t> out(init_segment_size(t));
  ByteWriter w(out.data(), out.size());
  write_ftyp(w);
  write_moov(w, t);
  if (!w.ok() || w.size() != out.size()) out.clear();  // cannot happen: sizes were computed above
  return out;
}

size_t fragment_size(const Fragment& f) {
  size_t events = 0;
  for (size_t i = 0; i < f.event_count; ++i) events += emsg_size(f.events[i]);
  return events + moof_size(f) + kBox + payload_size(f);
}

void write_fragment(ByteWriter& w, const Fragment& f) {
  for (size_t i = 0; i < f.event_count; ++i) write_emsg(w, f.events[i]);
  const size_t moof = moof_size(f);
  const size_t payload = payload_size(f);
  box(w, moof, "moof");
  full_box(w, mfhd_size(), "mfhd", 0, 0);
  w.be32(f.sequence_number);
  box(w, traf_size(f), "traf");
  // tfhd flags: default-base-is-moof (0x020000) | default-sample-flags-present (0x000020).
  full_box(w, tfhd_size(), "tfhd", 0, 0x020020);
  w.be32(f.track_id);
  w.be32(kAudioSampleFlags);
  full_box(w, tfdt_size(), "tfdt", 1, 0);
  w.be64(f.base_media_decode_time);
  // trun flags: data-offset-present (0x1) | sample-duration-present (0x100) | sample-size-present (0x200).
  full_box(w, trun_size(f.count), "trun", 0, 0x000301);
  w.be32(static_cast<uint32_t>(f.count));
  w.be32(static_cast<uint32_t>(moof + kBox));  // data_offset: from the moof start to the first sample
  for (size_t i = 0; i < f.count; ++i) {
    w.be32(f.durations[i]);
    w.be32(f.sizes[i]);
  }
  if (f.roll_group) {
    full_box(w, sbgp_size(), "sbgp", 0, 0);
    w.bytes("roll", 4);
    w.be32(1);  // entry_count
    w.be32(static_cast<uint32_t>(f.count));  // sample_count
    w.be32(1);  // group_description_index: entry 1 of the sgpd in the moov (indices <= 0x10000)
  }
  box(w, kBox + payload, "mdat");
  w.bytes(f.data, payload);
}

}  // namespace skylark::mux::fmp4
