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

// Connections the HTTP server accepted through the hooks and has not closed yet, on every HTTP
// thread (0 while the hooks are not installed). Thread-safe.
uint64_t OpenHttpConnections();

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

// Blocking playlist reloads held here (docs/http.md "Blocking reloads held in native code").
// Where a public LL-HLS layer is, as Layer.reached reads it (rfc8216bis §6.2.5.2).
struct HeldReloadState {
  uint64_t next_sequence = 0;   // media sequence number of the segment in progress
  uint32_t open_parts = 0;      // its parts listed
  uint32_t previous_parts = 0;  // parts of the segment before it (0 when none)
  uint32_t timeout_ms = 0;      // a held reload's wait (3 target durations), 1..60,000
};
// One reload answered or held here whose session the server must count.
struct HeldReloadSession {
  std::string path;        // the layer's playlist path (/hls/<stream>/<layer>/index.m3u8)
  std::string sid;         // the query's `sid`
  std::string address;     // the client's address (the connection's peer), as text
  std::string user_agent;  // '' when absent
};
struct HeldReloadCounts {
  uint64_t hits = 0;      // answered with what they asked for (at once or when it was listed)
  uint64_t held = 0;      // held here (each later answered, timed out, or ended by its client)
  uint64_t timeouts = 0;  // answered when the wait ran out (or the layer was withdrawn)
  uint64_t cut = 0;       // answers the kernel took only part of (the connection was closed)
  uint64_t broken = 0;    // holds ended by a read on their connection (the connection was closed)
  uint64_t waiting = 0;   // held now
  uint64_t layers = 0;    // layers published now
};

// Publishes (or replaces) the layer at `path` (".../index.m3u8"): where it is and its four answers,
// each a head (status line and header fields up to the request id's prefix, as PutHttpObject) and a
// body: [0] the playlist and [1] its delta update answered with what was asked for, [2] and [3] the
// same answered when the wait ran out. Held reloads the layer now reaches are answered from here,
// on this thread. False for a path outside the prefix, a timeout out of range, or 4,096 layers.
bool PutHeldReload(std::string_view path, const HeldReloadState& at, const std::string_view heads[4], const std::string_view bodies[4]);

// Withdraws the layer at `path`: its held reloads are answered with `final_head` + `final_body`
// (the ended layer's final playlist), or, when `final_head` is empty, as timed out. Later reloads
// go to the HTTP server. Returns whether it was published.
bool DeleteHeldReload(std::string_view path, std::string_view final_head, std::string_view final_body);

// Turns holding and answering reloads here on or off (off by default), keeping what is published.
void SetHeldReloads(bool on);

// The held-request caps: `cells` is the server's node-wide counter ([0] the total, then per-address
// cells; `count` Int32 cells, kept alive by the caller), `max_total` and `max_per_address` its caps.
// Until it is set nothing is held here. False on a bad argument.
bool SetHeldReloadCaps(int32_t* cells, size_t count, int32_t max_total, int32_t max_per_address);

// The two counter cells of the address group of `address` (IPv4 or IPv6 text), as the server's
// counter picks them. False on a bad address or cell.
bool PutHeldReloadCells(std::string_view address, int32_t a, int32_t b);

// The server's listener count (an Int32 it keeps current, kept alive by the caller) and the most
// listeners it tracks. Until it is set no reload with a `sid` is answered here. False on a bad argument.
bool SetHeldReloadListeners(const int32_t* count, int32_t max);

// Takes the sessions queued since the last call, and the addresses whose cells are wanted.
void DrainHeldReloadSessions(std::vector<HeldReloadSession>* sessions, std::vector<std::string>* wanted);

HeldReloadCounts GetHeldReloadCounts();

}  // namespace skylark::io
