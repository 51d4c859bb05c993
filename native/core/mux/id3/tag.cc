// See tag.h.
#include "core/mux/id3/tag.h"

#include <string>

namespace skylark::mux::id3 {

void write_syncsafe32(util::ByteWriter& w, uint32_t v) {
  w.u8(static_cast<uint8_t>((v >> 21) & 0x7F));
  w.u8(static_cast<uint8_t>((v >> 14) & 0x7F));
  w.u8(static_cast<uint8_t>((v >> 7) & 0x7F));
  w.u8(static_cast<uint8_t>(v & 0x7F));
}

void write_tag_header(util::ByteWriter& w, size_t frames_size) {
  w.bytes("ID3", 3);
  w.u8(0x04);  // major version 4
  w.u8(0x00);  // revision 0
  w.u8(0x00);  // flags: no unsynchronisation, extended header, experimental indicator or footer
  write_syncsafe32(w, static_cast<uint32_t>(frames_size));
}

namespace {
void write_frame_header(util::ByteWriter& w, const char (&id)[5], size_t body_size) {
  w.bytes(id, 4);
  write_syncsafe32(w, static_cast<uint32_t>(body_size));
  w.be16(0);  // frame status and format flags
}
}  // namespace

void write_text_frame(util::ByteWriter& w, const char (&id)[5], std::string_view text) {
  write_frame_header(w, id, text_frame_size(text) - kFrameHeaderSize);
  w.u8(kEncodingUtf8);
  w.str(text);
}

void write_wxxx_frame(util::ByteWriter& w, std::string_view description, std::string_view url) {
  write_frame_header(w, "WXXX", wxxx_frame_size(description, url) - kFrameHeaderSize);
  w.u8(kEncodingUtf8);
  w.str(description);
  w.u8(0x00);  // end of the description
  w.str(url);
}

std::vector<uint8_t> now_playing_tag(const NowPlaying& fields) {
  const std::string title = clean_text(fields.title);
  const std::string artist = clean_text(fields.artist);
  const std::string album = clean_text(fields.album);
  const std::string url = clean_url(fields.url);
  // 1. Sizes.
  size_t frames = text_frame_size(title);
  if (!artist.empty()) frames += text_frame_size(artist);
  if (!album.empty()) frames += text_frame_size(album);
  if (!url.empty()) frames += wxxx_frame_size({}, url);
  // 2. One allocation, then write.
  std::vector<uint8_t> out(kTagHeaderSize + frames);
  util::ByteWriter w(out.data(), out.size());
  write_tag_header(w, frames);
  write_text_frame(w, "TIT2", title);
  if (!artist.empty()) write_text_frame(w, "TPE1", artist);
  if (!album.empty()) write_text_frame(w, "TALB", album);
  if (!url.empty()) write_wxxx_frame(w, {}, url);
  if (!w.ok() || w.size() != out.size()) out.clear();  // cannot happen: sizes were computed above
  return out;
}

}  // namespace skylark::mux::id3
