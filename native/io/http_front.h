// The HTTP/1.0 front (docs/http.md "HTTP/1.0"): hooks on the HTTP server's own socket calls.
// The HTTP server (uWebSockets.js) parses HTTP/1.1 only and closes a connection whose request line
// says HTTP/1.0. These hooks sit on its `accept4` and `recv` imports (io/import_hook.h): the first
// bytes a new connection sends are read as usual, and when its request line says HTTP/1.0 the
// connection is handed, with those bytes, to a handoff function (the binding passes it to
// JavaScript, where Node's HTTP/1.x server answers it), while the HTTP server is told the peer
// closed.
//
// The same reads apply the progressive listeners' send buffer cap: a connection any of whose
// request-targets starts with one of the capped prefixes gets SO_SNDBUF set, so a listener that
// stops reading is seen behind after that many bytes, not after what the kernel autotunes.
//
// The same accept4 hook remembers each connection's peer address, and hooks on the server's
// `getpeername` and `close` imports answer from it (cleared on close): the server asks for a
// request's client address (held-request caps, listener sessions) without a system call each time.
//
// And hooks on its `send`, `writev` and `shutdown` gather writes: what it sends with MSG_MORE (the
// headers of a response larger than its cork buffer) leaves with its next write on the same
// connection in one sendmsg (docs/http.md "One write per response").
//
// And a store of immutable media objects (LL-HLS parts): a read that llhttp frames as exactly one
// plain GET of a stored path, on a connection that was framed exactly so far and where the server
// has nothing outstanding, is answered here in one sendmsg without the server seeing it
// (docs/http.md "Media objects answered in native code", "Framing").
// No N-API here.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace skylark::io {

// Takes a connection whose first request is HTTP/1.0: `fd` is a duplicate of the connection's
// socket that the callee owns when it returns true (false: the caller closes it and the HTTP server
// keeps the connection). `bytes` are the `size` bytes read from it so far. Called on the thread
// that read them (any HTTP thread); must be thread-safe and must not block.
using Http10Handoff = bool (*)(int fd, const uint8_t* bytes, size_t size);

struct HttpFrontOptions {
  // Request-target prefixes (e.g. "/listen/") whose connections get `send_buffer_bytes`.
  std::vector<std::string> capped_prefixes;
  // SO_SNDBUF for those connections (bytes; the kernel doubles it for bookkeeping); 0 = leave it.
  int send_buffer_bytes = 0;
};

struct HttpFrontCounts {
  uint64_t http10 = 0;       // connections handed off
  uint64_t capped = 0;       // connections whose send buffer was capped
  uint64_t incomplete = 0;   // first reads without a whole request line (kept until it is, or handed on)
  uint64_t peer_hits = 0;    // getpeername calls answered from the address accept4 returned
  uint64_t coalesced = 0;    // gathered writes: held MSG_MORE bytes and the next write in one sendmsg
  uint64_t object_hits = 0;  // requests answered from the stored objects
  uint64_t object_cut = 0;   // stored answers only partly written (the connection was closed)
  uint64_t objects = 0;      // objects stored now
  uint64_t refused = 0;      // requests the parser refused, answered 400 here and closed
  uint64_t idle_closed = 0;  // connections shut down by the idle sweep
};

// Installs the hooks into the loaded shared object whose path ends with `object_suffix` (once per
// process; later calls only replace the handoff and options). Returns "" on success, else why not
// (the HTTP server then keeps answering HTTP/1.1 only).
std::string InstallHttpFront(const std::string& object_suffix, const HttpFrontOptions& options, Http10Handoff handoff);

// Stops handing off (nullptr) or hands off to another function; safe from any thread.
void SetHttp10Handoff(Http10Handoff handoff);

HttpFrontCounts GetHttpFrontCounts();

// Media objects answered here (docs/http.md "Media objects answered in native code"): stores (or
// replaces) the answer to a plain `GET <path>` (core/http/framing.h: Fields::kPlain) of an immutable object.
// `path` must start with "/hls/". `head` is the status line and header fields (each ending in
// CRLF) up to and including the request id field's name and the id's prefix; each answer adds the
// id's counter (base 36), Date, the HTTP library's banner field, Content-Length and `body`
// (`size` bytes, copied). Returns false for a path outside the prefix or when 65,536 objects are
// stored. Thread-safe.
bool PutHttpObject(std::string_view path, std::string_view head, const uint8_t* body, size_t size);

// Forgets the object at `path` (its next request goes to the HTTP server). Returns whether it was stored. Thread-safe.
bool DeleteHttpObject(std::string_view path);

// Whether the hooks that stored objects need are installed (else objects are stored but never answered here).
bool HttpObjectsAnswered();

// Turns answering from the store on (the default) or off, process-wide, without forgetting what
// is stored (the differential test compares answers with and without it). Thread-safe.
void SetHttpObjectsAnswering(bool on);

}  // namespace skylark::io
