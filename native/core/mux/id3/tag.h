// ID3v2.4 tags (id3v2.4.0-structure, id3v2.4.0-frames) as timed metadata carries them: in an
// MPEG-TS PES on its own PID (Apple "Timed Metadata for HTTP Live Streaming") and as the
// message_data of an fMP4 `emsg` box (AOM "Carriage of ID3 Timed Metadata in CMAF").
//
// One writer per part, each paired with a size function (size first, allocate once, write):
//   tag header  "ID3", version 4.0, flags 0 (no unsynchronisation, extended header, footer or
//               experimental bit), the size of what follows as a 28-bit sync-safe integer (§3.1)
//   frames      10-byte header: ID, sync-safe size (v2.4: frame sizes are sync-safe too, §4.1),
//               flags 0
//   text frame  §4.2 (TIT2 title, TPE1 artist, TALB album): encoding 0x03 (UTF-8), the text, no
//               terminator (the frame size ends it, §4.2)
//   WXXX        §4.3.2 user URL: encoding 0x03, the description and its 0x00 terminator, the URL
//               (ISO-8859-1: clean_url keeps it printable ASCII)
// No padding: what hls.js reads (`getId3Frames` walks frames while a 10-byte header fits) is
// exactly the frames we wrote.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

#include "core/mux/id3/text.h"
#include "core/util/bytes.h"

namespace skylark::mux::id3 {

inline constexpr size_t kTagHeaderSize = 10;
inline constexpr size_t kFrameHeaderSize = 10;
inline constexpr uint8_t kEncodingUtf8 = 0x03;
/** Largest value a 4-byte sync-safe integer holds (28 bits). */
inline constexpr uint32_t kMaxSyncsafe = 0x0FFFFFFF;

/** Writes `v` (<= kMaxSyncsafe) as 4 bytes of 7 bits each, most significant first (§6.2). */
void write_syncsafe32(util::ByteWriter& w, uint32_t v);

/** Writes the 10-byte tag header for `frames_size` bytes of frames. */
void write_tag_header(util::ByteWriter& w, size_t frames_size);

/** A text information frame with `text` (UTF-8). */
constexpr size_t text_frame_size(std::string_view text) { return kFrameHeaderSize + 1 + text.size(); }
/** Writes it; `id` is the 4-character frame ID ("TIT2", "TPE1", "TALB", ...). */
void write_text_frame(util::ByteWriter& w, const char (&id)[5], std::string_view text);

/** A WXXX frame: `description` (UTF-8, no NUL inside) and `url` (printable ASCII). */
constexpr size_t wxxx_frame_size(std::string_view description, std::string_view url) {
  return kFrameHeaderSize + 1 + description.size() + 1 + url.size();
}
void write_wxxx_frame(util::ByteWriter& w, std::string_view description, std::string_view url);

/** Now-playing fields, UTF-8 (any bytes: they are cleaned, text.h). Empty = absent, except the
 *  title, which is always written (TIT2). */
struct NowPlaying {
  std::string_view title, artist, album, url;
};

/** The tag: TIT2, then TPE1, TALB, WXXX (empty description) for the fields that are present; each
 *  string cut to kMaxChars characters. */
std::vector<uint8_t> now_playing_tag(const NowPlaying& fields);

/** The largest tag now_playing_tag returns (3 text frames of kMaxChars 4-byte characters and a
 *  WXXX of a fully percent-encoded URL): 6199 bytes. */
inline constexpr size_t kMaxNowPlayingTagSize = kTagHeaderSize + 3 * (kFrameHeaderSize + 1 + max_text_bytes(kMaxChars)) +
                                                kFrameHeaderSize + 1 + 1 + max_url_bytes(kMaxChars);

}  // namespace skylark::mux::id3
