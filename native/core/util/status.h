// Stable error codes of the native core. The string form is the `code` JS sees in
// `{type: 'error', code, message}` events (docs/native-api.md); never rename one.
#pragma once
#include <cstdint>
#include <string_view>

namespace skylark::util {

enum class Status : uint8_t {
  kOk = 0,
  kNeedMore,             // not an error: the input ended inside a unit; feed more bytes
  kHandshakeInvalid,     // handshake_invalid
  kChunkSizeInvalid,     // chunk_size_invalid
  kMessageTooLarge,      // message_too_large
  kChunkStreamLimit,     // chunk_stream_limit
  kAmf0Invalid,          // amf0_invalid
  kAmf0TooDeep,          // amf0_too_deep
  kCommandInvalid,       // command_invalid
  kStreamNameTooLong,    // stream_name_too_long
  kProtocolViolation,    // protocol_violation
  kOutputOverflow,       // output_overflow (peer never reads our replies)
  kPrePublishLimit,      // prepublish_limit (more bytes held before the publish was accepted than allowed)
};

/** The stable snake_case code of `s` ("ok" / "need_more" for the non-errors). */
constexpr std::string_view status_code(Status s) {
  switch (s) {
    case Status::kOk: return "ok";
    case Status::kNeedMore: return "need_more";
    case Status::kHandshakeInvalid: return "handshake_invalid";
    case Status::kChunkSizeInvalid: return "chunk_size_invalid";
    case Status::kMessageTooLarge: return "message_too_large";
    case Status::kChunkStreamLimit: return "chunk_stream_limit";
    case Status::kAmf0Invalid: return "amf0_invalid";
    case Status::kAmf0TooDeep: return "amf0_too_deep";
    case Status::kCommandInvalid: return "command_invalid";
    case Status::kStreamNameTooLong: return "stream_name_too_long";
    case Status::kProtocolViolation: return "protocol_violation";
    case Status::kOutputOverflow: return "output_overflow";
    case Status::kPrePublishLimit: return "prepublish_limit";
  }
  return "unknown";
}

}  // namespace skylark::util
