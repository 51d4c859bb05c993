// Fragmented MP4 / CMAF audio (ISO/IEC 14496-12 ISOBMFF, 14496-14 esds, ISO/IEC 23000-19 CMAF, and
// "Encapsulation of Opus in ISO Base Media File Format" for Opus/dOps): the init segment (ftyp +
// moov with one sound track, an empty sample table and mvex/trex) and media fragments (moof with
// mfhd + traf(tfhd default-base-is-moof, tfdt, trun with per-sample sizes and durations) + mdat),
// optionally preceded by event messages (emsg, ISO/IEC 23009-1 §5.10.3.3) such as timed ID3.
//
// One writer per box, named by its 4CC, each paired with a size function: sizes are computed first,
// the buffer is allocated once, then written; the written size is checked against the computed one.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "core/codec/opus.h"
#include "core/util/bytes.h"

namespace skylark::mux::fmp4 {

/** The one audio track an init segment describes. */
struct AudioTrack {
  enum class Kind : uint8_t { kAac, kMp3, kOpus } kind = Kind::kAac;
  uint32_t track_id = 1;
  uint32_t timescale = 48000;    // mdhd timescale = the sample clock (48000 for Opus)
  uint32_t sample_rate = 48000;  // AudioSampleEntry samplerate (16.16; rates above 65535 written as 0)
  uint16_t channels = 2;
  // AAC/MP3 (sample entry 'mp4a' + 'esds'): objectTypeIndication (0x40 AAC, 0x6B MPEG-1 audio,
  // 0x69 MPEG-2 audio) and the DecoderSpecificInfo (AAC: the AudioSpecificConfig; MP3: none).
  uint8_t object_type_indication = 0x40;
  const uint8_t* decoder_specific = nullptr;
  size_t decoder_specific_size = 0;
  uint32_t avg_bitrate = 0, max_bitrate = 0;  // bits/s, 0 = unknown
  // Opus (sample entry 'Opus' + 'dOps').
  codec::OpusHead opus;
  // edts/elst: one edit, segment_duration 0 (the whole, open-ended media), media_time this many
  // timescale units (Opus: the pre-skip). 0 = no edts.
  uint32_t edit_media_time = 0;
  // 'roll' sample group (sgpd in stbl, AudioRollRecoveryEntry): roll_distance in samples (packets),
  // negative = pre-roll; 0 = none. Fragments then map their samples to it with an sbgp.
  int16_t roll_distance = 0;
};

/** The whole init segment. */
std::vector<uint8_t> write_init_segment(const AudioTrack& track);
size_t init_segment_size(const AudioTrack& track);

/** emsg event_duration when the event lasts until further notice (ISO/IEC 23009-1 §5.10.3.3.4). */
inline constexpr uint32_t kEventDurationUnknown = 0xFFFFFFFF;
/** scheme_id_uri of ID3v2.4 timed metadata (AOM "Carriage of ID3 Timed Metadata in CMAF" §2.2.3). */
inline constexpr std::string_view kId3EventScheme = "https://aomedia.org/emsg/ID3";

/** One DASHEventMessageBox, version 1 (ISO/IEC 23009-1 §5.10.3.3.3): an absolute presentation time
 *  in the track's media timeline (what AOM's ID3-in-CMAF requires, and what hls.js `parseEmsg`
 *  reads as `presentationTime`). */
struct EventMessage {
  uint32_t timescale = 0;                          // ticks per second of presentation_time / event_duration
  uint64_t presentation_time = 0;                  // in timescale units
  uint32_t event_duration = kEventDurationUnknown; // in timescale units
  uint32_t id = 0;                                 // the same id = the same event (a repeat)
  std::string_view scheme_id_uri;                  // written NUL-terminated; must hold no NUL
  std::string_view value;                          // likewise
  const uint8_t* message_data = nullptr;           // e.g. a whole ID3 tag
  size_t message_size = 0;
};

/** Bytes of the emsg box of `e`. */
size_t emsg_size(const EventMessage& e);
/** Writes the emsg box (exactly emsg_size(e) bytes). */
void write_emsg(util::ByteWriter& w, const EventMessage& e);

/** One fragment: samples stored back to back, each with its size and duration (timescale units). */
struct Fragment {
  uint32_t sequence_number = 1;  // mfhd: increases by one per fragment of the track
  uint32_t track_id = 1;
  uint64_t base_media_decode_time = 0;  // tfdt (version 1, 64-bit)
  const uint8_t* data = nullptr;
  const uint32_t* sizes = nullptr;
  const uint32_t* durations = nullptr;
  size_t count = 0;
  bool roll_group = false;  // add sbgp 'roll': every sample in group 1 of the moov's sgpd
  // Event messages written before the moof, in this order (their presentation times should fall
  // within the fragment: AOM ID3-in-CMAF §2.2.3). The trun data_offset counts from the moof, so
  // they move nothing inside the fragment.
  const EventMessage* events = nullptr;
  size_t event_count = 0;
};

/** [emsg...] + moof + mdat bytes of `f`. */
size_t fragment_size(const Fragment& f);
/** Writes [emsg...] + moof + mdat (exactly fragment_size(f) bytes). */
void write_fragment(util::ByteWriter& w, const Fragment& f);

/** tfhd default_sample_flags: sample_depends_on = 2 (an audio sample depends on no other sample),
 *  sample_is_non_sync_sample = 0. */
inline constexpr uint32_t kAudioSampleFlags = 0x02000000;

}  // namespace skylark::mux::fmp4
