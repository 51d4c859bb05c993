/**
 * The light listener load client of bench/players.bench.ts: many simulated audio players in one
 * process, each behaving like a real player of one kind, so that the client is not what fails
 * first (one process holds thousands of listeners at a fraction of the server's CPU).
 *
 * How it stays light:
 * - raw `net.Socket` keep-alive connections, one request at a time per connection (no pipelining);
 * - request bytes built once per listener (the playlist and stream GETs are fixed `Buffer`s; a
 *   part's or segment's request is one short latin1 string from pre-built pieces);
 * - a minimal HTTP/1.1 response reader: the status digits, `Content-Length`, `Transfer-Encoding:
 *   chunked`, or a body until close (HTTP/1.0 streams); no header objects; a body is kept only for
 *   playlists, media bodies are only counted;
 * - one timer wheel (`TimerWheel`, 10 ms ticks) for every listener's waits, not a timer each;
 * - progressive streams (`icecast` mode) read into one shared buffer per process (`net.connect`'s
 *   `onread`: no Buffer allocated per read) and, with `readMs` > 0, about once per `readMs` per
 *   listener: the socket stops reading (libuv `readStop`) and one interval timer (`ReadPacer`)
 *   resumes a tenth of the stopped sockets every `readMs / 10`. The bytes wait in the kernel's
 *   receive buffer meanwhile (8 KB per 500 ms at 128 kbit/s, far below its size, so the server
 *   never sees back-pressure). After a resume the socket takes what waited (a "drained" read:
 *   those bytes arrived at unknown times since the read before; a first read later than a pacer
 *   tick after the resume found nothing waiting and is timed) and keeps reading until the next
 *   read that is not the first after a resume (an arrival, timed when it came), then stops again:
 *   two reads per `readMs` instead of one per write of the server (Icecast writes every MP3
 *   frame, ~38 a second), and a timed arrival per `readMs` for the rate measurement;
 * - arrivals spread evenly over a ramp, and players act at their own phases (a classic player's
 *   first reload comes at a random point of its target duration), unlike wrk's lock-step loops.
 *
 * Modes (what each listener does):
 * - `classic`: like a non-LL HLS player (hls.js without lowLatencyMode, AVPlayer on a classic
 *   stream, RFC 8216 §6.3.4): the multivariant playlist (the server mints `?sid=` into the variant
 *   URI), then the media playlist every target duration (half of it when the playlist had not
 *   changed, §6.3.4), parsing only `#EXT-X-TARGETDURATION`, the last `#EXT-X-MEDIA-SEQUENCE` and
 *   the segment URI lines; every new segment is fetched in order on the same connection. It starts
 *   3 segments back from the live edge.
 * - `hlsjs-ll`: like hls.js 1.x with `lowLatencyMode` on an LL-HLS playlist
 *   (src/controller/base-playlist-controller.ts): after the first media playlist, a blocking reload
 *   `?<sid>&_HLS_msn=M&_HLS_part=P` for the part after the last one listed (the next segment's
 *   part 0 when the last part closes a segment) is sent as soon as the previous reload answers; the
 *   parts each reload newly lists are fetched, by their URIs as listed (no session query: a
 *   relative URI does not inherit the playlist URL's query), on a second connection (a browser's
 *   second HTTP/1.1 connection to the host). hls.js parses `EXT-X-PRELOAD-HINT` but never requests it;
 *   with `hints` the hinted part is also requested at once, in parallel with the reload, as
 *   players that use hints do (AVPlayer). It starts 3 parts back from the live edge. Once a
 *   playlist advertises `CAN-SKIP-UNTIL`, every blocking reload also carries `&_HLS_skip=YES`
 *   (hls.js `getSkipValue`, src/types/level.ts; rfc8216bis §6.2.5.1), so the server answers its
 *   delta update; `noDelta` leaves it out (a player without delta updates).
 * - `icecast`: one GET of a progressive stream (an Icecast mount, or any endpoint sending a body
 *   until close or chunked), counting body bytes; every read goes to the listener's
 *   `ListenerMeter` (bench/lib/listener-rate.ts: the rate over whole arrivals and the lag behind
 *   real time of the window).
 *
 * With `forwardedFor`, each listener sends `X-Forwarded-For: <its address>` on every request: the
 * client address a trusting server or edge (nginx realip) takes for it, e.g. for countries.
 *
 * A `probe` run (one listener in the bench process) records when each segment or part is first
 * listed: a classic probe polls the playlist every 100 ms, an LL probe chains blocking reloads;
 * neither fetches media.
 *
 * Times are `Date.now()` milliseconds (the bench process and the client processes share the
 * clock). The report's times are ms relative to `from`, the start of the measuring window.
 */
import http from 'node:http';
import net from 'node:net';
import { monitorEventLoopDelay } from 'node:perf_hooks';
import { groupMsFor, ListenerMeter, streamFigures } from './listener-rate.js';

export type PlayerMode = 'classic' | 'hlsjs-ll' | 'icecast';

/** One client process's work (one JSON argument of bench/lib/player-client-child.ts). */
export interface PlayerConfig {
  mode: PlayerMode;
  /** classic / hlsjs-ll: the multivariant playlist URL; icecast: the stream URL. */
  url: string;
  /** Listeners in this process. */
  count: number;
  /** This process's place in the arrival order of all processes: listener i arrives as number `i * stride + index`. */
  index: number;
  stride: number;
  /** Listeners across all processes (spreads arrivals over `rampMs`). */
  total: number;
  /** When arrivals begin (epoch ms) and over how long they spread (ms). */
  startAt: number;
  rampMs: number;
  /** The measuring window (epoch ms). */
  from: number;
  to: number;
  /** When the process reports and exits (epoch ms). */
  exitAt: number;
  /** hlsjs-ll: also request each preload-hinted part at once. */
  hints?: boolean;
  /** hlsjs-ll: never ask for delta updates (`_HLS_skip`), as hls.js does when the server advertises them. */
  noDelta?: boolean;
  /**
   * hlsjs-ll: which client. `raw` (default): the light client above (two raw connections per
   * listener, reloads and parts in parallel). `node`: one `node:http` keep-alive connection per
   * listener (an `Agent` with `maxSockets: 1`, Node's default request headers and a `User-Agent`):
   * the multivariant playlist, the media playlist and the init section once, then for ever a
   * blocking reload for the next part (never `_HLS_skip`) and a GET of each part it newly lists.
   */
  llClient?: 'raw' | 'node';
  /**
   * Every listener connects from its own loopback address (127.10.x.y, by its place in the arrival
   * order) instead of all from 127.0.0.1: a crowd of separate clients rather than one behind a NAT.
   */
  ownAddresses?: boolean;
  /** A probe: media is not fetched, classic polls every 100 ms, failures always reconnect. */
  probe?: boolean;
  /** Connects in flight at most (a burst of SYNs beyond a server's listen backlog only causes retransmits). */
  maxConnecting?: number;
  /**
   * `X-Forwarded-For` per listener: listener number `order` (its place in the arrival order of all
   * processes) sends `forwardedFor[order % length]` on every request — public client addresses
   * for a server or edge that trusts this client's address (countries behind a proxy).
   */
  forwardedFor?: string[];
  /**
   * `icecast`: read each stream at most once per `readMs` (ms; what arrived meanwhile waits in the
   * kernel's receive buffer). 0 or absent: read on every arrival.
   */
  readMs?: number;
  /** `icecast`: the stream's rate (B/s; 16,000 when absent), what each listener's lag is measured against. */
  streamBytesPerS?: number;
}

/** What a client process reports (one JSON line on stdout). */
export interface PlayerReport {
  mode: PlayerMode;
  count: number;
  /** Listeners whose first response arrived. */
  started: number;
  /** Listeners still connected at the report. */
  alive: number;
  /** Listeners that failed inside the measuring period (from 3 s before the window). */
  dropped: number;
  /** Reconnects before the measuring period (a player retrying). */
  retries: number;
  /** Error counts by kind (`segment 404`, `closed`, …). */
  errors: Record<string, number>;
  /** Responses completed inside the window (a progressive stream counts once, at its header). */
  requests: number;
  /** Body bytes received inside the window. */
  bytes: number;
  /** This process's CPU time over the window (µs, user + system). */
  cpuUs: number;
  /** Event-loop delay over the window, p99 and max (ms): how far behind the client itself ran. */
  lagP99Ms: number;
  lagMaxMs: number;
  /** classic: target duration; hlsjs-ll: part target (ms), as the playlists state them. */
  targetMs: number;
  /** Flat [key, t, …]: when each object was first listed in this process (t: ms from `from`). classic key: media sequence; hlsjs-ll key: msn × 1000 + part index. */
  seen: number[];
  /** Per listener, flat [key, t, …]: when each object's body completed (t: ms from `from`; from 5 s before the window). */
  done: number[][];
  /** icecast: per listener, body bytes/s over whole arrivals of the window (bench/lib/listener-rate.ts; -1: none measured). */
  rates: number[];
  /** icecast: per listener, seconds that rate spans. */
  spans: number[];
  /** icecast: per listener, the largest lag of the audio received behind the time elapsed since the window's first arrival (ms; null: none measured). */
  lags: Array<number | null>;
  /** icecast: per listener, arrivals begun in the window; and 1 when its first byte came too late to be measured from the window's start. */
  arrivals: number[];
  late: number[];
}

// ── One timer wheel for every listener ──────────────────────────────────────────────────────────

/** Something the wheel wakes: `wakeAt` is its pending due time (0: none). */
export interface Timed {
  wakeAt: number;
  wake(now: number): void;
}

/**
 * A hashed timer wheel: `slots` buckets of `tickMs`, driven by ONE timer that is armed for the next
 * non-empty bucket only (an idle wheel does not wake the process: on a VM every wakeup costs tens
 * of µs). An entry due beyond the wheel's span stays in its bucket and is skipped until its round
 * comes. Rescheduling a `Timed` leaves its old entry behind as stale (recognised by its due time),
 * so cancelling is free: set `wakeAt = 0`.
 */
export class TimerWheel {
  private readonly objs: Timed[][];
  private readonly ats: number[][];
  /** The next tick to visit. */
  private cursor: number;
  /** Entries in the buckets (stale ones included). */
  private size = 0;
  private timer: NodeJS.Timeout | null = null;
  /** The tick the timer is armed for. */
  private armedFor = Infinity;
  private stopped = false;
  private turning = false;

  constructor(
    private readonly tickMs = 10,
    private readonly slots = 1024,
  ) {
    this.objs = Array.from({ length: slots }, () => []);
    this.ats = Array.from({ length: slots }, () => []);
    this.cursor = Math.floor(Date.now() / tickMs);
  }

  /** Wakes `t` at `at` (epoch ms; past times wake on the next tick). */
  schedule(t: Timed, at: number): void {
    t.wakeAt = at;
    // While a bucket is being visited, its tick is over: the earliest is the next one.
    const tick = Math.max(Math.floor(at / this.tickMs), this.turning ? this.cursor + 1 : this.cursor);
    this.put(t, at, tick);
    if (tick < this.armedFor) this.arm(tick);
  }

  private put(t: Timed, at: number, tick: number): void {
    const s = tick % this.slots;
    this.objs[s]!.push(t);
    this.ats[s]!.push(at);
    this.size++;
  }

  private arm(tick: number): void {
    if (this.stopped) return;
    if (this.timer) clearTimeout(this.timer);
    this.armedFor = tick;
    this.timer = setTimeout(() => this.turn(), Math.max(0, tick * this.tickMs - Date.now()));
  }

  private turn(): void {
    this.timer = null;
    this.armedFor = Infinity;
    const now = Date.now();
    const last = Math.floor(now / this.tickMs);
    this.turning = true;
    for (; this.cursor <= last; this.cursor++) {
      const s = this.cursor % this.slots;
      const objs = this.objs[s]!;
      if (objs.length === 0) continue;
      const ats = this.ats[s]!;
      this.objs[s] = [];
      this.ats[s] = [];
      this.size -= objs.length;
      for (let i = 0; i < objs.length; i++) {
        const t = objs[i]!;
        const at = ats[i]!;
        if (t.wakeAt !== at) continue; // cancelled or rescheduled
        const tick = Math.floor(at / this.tickMs);
        if (tick > this.cursor) {
          this.put(t, at, tick); // a later round of the wheel
          continue;
        }
        t.wakeAt = 0;
        try {
          t.wake(now);
        } catch (e) {
          process.stderr.write(`player-client: ${(e as Error).stack ?? String(e)}\n`);
        }
      }
    }
    this.turning = false;
    // Arm for the next non-empty bucket (the callbacks above may have armed an earlier one).
    if (this.size > 0 && this.armedFor === Infinity) {
      let k = this.cursor;
      while (this.objs[k % this.slots]!.length === 0 && k < this.cursor + this.slots) k++;
      this.arm(k);
    }
  }

  stop(): void {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
  }
}

// ── Paced reads of progressive streams ─────────────────────────────────────────────────────────

/**
 * Resumes stopped sockets in 10 slices: every `periodMs / 10` one interval timer resumes the
 * sockets parked in the next slice, so each is read about once per `periodMs`. A connection keeps
 * its slice (given when it is made); it parks itself after each read.
 */
export class ReadPacer {
  private static readonly SLICES = 10;
  private readonly parked: HttpConn[][] = Array.from({ length: ReadPacer.SLICES }, () => []);
  private cursor = 0;
  private nextSlice = 0;
  private readonly timer: NodeJS.Timeout;

  /** A read this soon after its socket's resume (ms) took what waited in the kernel (a drained read); a later one is a new arrival. */
  readonly drainMs: number;

  constructor(periodMs: number) {
    this.drainMs = Math.max(10, periodMs / ReadPacer.SLICES);
    this.timer = setInterval(() => this.tick(), Math.max(1, periodMs / ReadPacer.SLICES));
    this.timer.unref();
  }

  /** A slice for a new connection (round robin). */
  slice(): number {
    const s = this.nextSlice;
    this.nextSlice = (s + 1) % ReadPacer.SLICES;
    return s;
  }

  park(c: HttpConn, slice: number): void {
    this.parked[slice]!.push(c);
  }

  private tick(): void {
    const list = this.parked[this.cursor]!;
    if (list.length > 0) {
      this.parked[this.cursor] = [];
      for (let i = 0; i < list.length; i++) list[i]!.resumeRead();
    }
    this.cursor = (this.cursor + 1) % ReadPacer.SLICES;
  }

  stop(): void {
    clearInterval(this.timer);
  }
}

/** How a progressive connection reads: into `buf` (shared by every connection of the process), paced by `pacer` (null: on every arrival). */
export interface SharedRead {
  buf: Buffer;
  pacer: ReadPacer | null;
}

// ── A minimal HTTP/1.1 response reader on a raw socket ─────────────────────────────────────────

/** Called when a response completes: its status and, when kept, its body (latin1). */
type Done = (status: number, body: string) => void;

const CR = 13;
const LF = 10;
const lower = (c: number) => (c >= 65 && c <= 90 ? c + 32 : c);

/** Index just after `\n<name>:` (name lowercase) in buf[0, end), or -1. Header names match case-insensitively. */
function headerValue(buf: Buffer, end: number, name: string): number {
  const n = name.length;
  for (let i = buf.indexOf(LF); i >= 0 && i < end; i = buf.indexOf(LF, i + 1)) {
    let j = 0;
    while (j < n && i + 1 + j < end && lower(buf[i + 1 + j]!) === name.charCodeAt(j)) j++;
    if (j === n && buf[i + 1 + n] === 58) return i + 2 + n;
  }
  return -1;
}

const enum St {
  Head,
  Length,
  ChunkSize,
  ChunkData,
  ChunkEnd,
  Trailer,
  UntilClose,
}

/** Counters every connection of a run adds to. */
export interface WireStats {
  from: number;
  to: number;
  requests: number;
  bytes: number;
}

/**
 * One keep-alive connection with at most one request in flight. `onBytes` (when set) hears every
 * body chunk's length as it arrives (progressive streams); `onClose` hears the end of the socket.
 * With `shared`, it reads into the shared buffer (bodies cannot be kept) and, with a pacer, stops
 * reading after each read until the pacer resumes it.
 */
export class HttpConn {
  readonly sock: net.Socket;
  private st = St.Head;
  private head: Buffer | null = null;
  private need = 0;
  private keep = false;
  private parts: Buffer[] = [];
  private status = 0;
  private done: Done | null = null;
  private chunkLine = 0;
  private closed = false;
  /** `drained`: the bytes came in the first read after a pacer's resume (arrived at unknown times since the read before). */
  onBytes: ((n: number, now: number, drained: boolean) => void) | null = null;
  /** A progressive stream: a chunked response is answered at its head, as one until close is. */
  progressive = false;

  /** Counts this connection while its connect is in flight (`inFlight(+1)` now, `inFlight(-1)` once on connect or close). */
  private connecting = true;
  /** The time of the read being parsed (one `Date.now()` per read). */
  private now = 0;
  /** Its pacer's slice, and whether it waits there to be resumed. */
  private slice = 0;
  private parked = false;
  /** The next read is the first after a resume; the read being parsed is one. */
  private afterResume = false;
  private resumedAt = 0;
  private drained = false;

  constructor(
    port: number,
    host: string,
    private readonly wire: WireStats,
    onConnect: () => void,
    private readonly onClose: (why: string) => void,
    private readonly inFlight: (d: number) => void = () => {},
    private readonly shared: SharedRead | null = null,
    localAddress?: string,
  ) {
    inFlight(1);
    if (shared) {
      const buf = shared.buf;
      this.slice = shared.pacer ? shared.pacer.slice() : 0;
      this.sock = net.connect({ port, host, localAddress, onread: { buffer: buf, callback: (n) => this.sharedRead(buf, n) } });
      // Flowing, so that the end of the stream is seen ('end', then 'close'); no 'data' is emitted with `onread`.
      this.sock.resume();
    } else {
      this.sock = net.connect({ port, host, localAddress });
      this.sock.on('data', (d: Buffer) => this.data(d, d.length));
    }
    this.sock.setNoDelay(true);
    this.sock.once('connect', () => {
      this.settle();
      onConnect();
    });
    this.sock.on('error', (e: NodeJS.ErrnoException) => this.close(e.code ?? 'socket error'));
    this.sock.on('close', () => this.close(this.st === St.UntilClose ? 'stream ended' : 'closed'));
  }

  get busy(): boolean {
    return this.done !== null;
  }

  /** Sends one request; `done` hears the response. `keepBody`: collect the body as text. */
  send(req: string | Buffer, keepBody: boolean, done: Done): void {
    if (keepBody && this.shared) throw new Error('HttpConn: a body cannot be kept when reading into the shared buffer');
    this.keep = keepBody;
    this.done = done;
    this.st = St.Head;
    if (typeof req === 'string') this.sock.write(req, 'latin1');
    else this.sock.write(req);
  }

  destroy(): void {
    this.settle();
    this.closed = true;
    this.done = null;
    this.sock.destroy();
  }

  /**
   * `onread`: parses `n` bytes of the shared buffer. With a pacer: after the first read since a
   * resume (what waited) it keeps reading; after any other read (an arrival) it stops reading
   * (returns false) until the pacer resumes it.
   */
  private sharedRead(buf: Buffer, n: number): boolean {
    const now = Date.now();
    // What waited comes in the first read after the resume, at once; a first read that comes later
    // is bytes that arrived after the resume (nothing had waited), timed like any arrival.
    this.drained = this.afterResume && now - this.resumedAt < this.shared!.pacer!.drainMs;
    this.afterResume = false;
    this.data(buf, n, now);
    const pacer = this.shared!.pacer;
    if (!pacer || this.closed || this.drained) return true;
    if (!this.parked) {
      this.parked = true;
      pacer.park(this, this.slice);
    }
    return false;
  }

  /** The pacer's turn: read again (what waited in the kernel comes in the next read). */
  resumeRead(): void {
    this.parked = false;
    this.afterResume = true;
    this.resumedAt = Date.now();
    if (!this.closed && !this.sock.destroyed) this.sock.resume();
  }

  private settle(): void {
    if (!this.connecting) return;
    this.connecting = false;
    this.inFlight(-1);
  }

  private close(why: string): void {
    this.settle();
    if (this.closed) return;
    this.closed = true;
    this.done = null;
    this.sock.destroy();
    this.onClose(why);
  }

  private body(d: Buffer, from: number, to: number): void {
    const n = to - from;
    if (n <= 0) return;
    const now = this.now;
    if (now >= this.wire.from && now <= this.wire.to) this.wire.bytes += n;
    if (this.keep) this.parts.push(d.subarray(from, to));
    if (this.onBytes) this.onBytes(n, now, this.drained);
  }

  private complete(): void {
    const done = this.done;
    if (!done) return;
    const now = this.now;
    if (now >= this.wire.from && now <= this.wire.to) this.wire.requests++;
    const body = this.keep ? (this.parts.length === 1 ? this.parts[0]!.toString('latin1') : Buffer.concat(this.parts).toString('latin1')) : '';
    this.parts = [];
    this.done = null;
    this.st = St.Head;
    done(this.status, body);
  }

  /** Parses d[0, n) (a read's bytes; with the shared buffer, what follows them is stale). */
  private data(d: Buffer, n: number, now = Date.now()): void {
    this.now = now;
    let i = 0;
    while (i < n && !this.closed) {
      switch (this.st) {
        case St.Head: {
          let buf = d;
          let start = i;
          if (this.head) {
            buf = Buffer.concat([this.head, d.subarray(i, n)]);
            start = 0;
          }
          const end = buf.indexOf('\r\n\r\n', start, 'latin1');
          // In `d` itself only a match inside d[0, n) counts (the first match past it is stale bytes).
          if (end < 0 || end + 4 > (buf === d ? n : buf.length)) {
            this.head = buf === d ? Buffer.from(d.subarray(i, n)) : buf;
            return;
          }
          // Where the body starts in `d` (the bytes of `buf` after the head are the tail of d[0, n)).
          i = buf === d ? end + 4 : n - (buf.length - (end + 4));
          this.head = null;
          const h = buf.subarray(start, end);
          this.status = (h[9]! - 48) * 100 + (h[10]! - 48) * 10 + (h[11]! - 48);
          const cl = headerValue(h, h.length, 'content-length');
          this.parts = [];
          if (cl >= 0) {
            let v = 0;
            for (let k = cl; k < h.length; k++) {
              const c = h[k]!;
              if (c >= 48 && c <= 57) v = v * 10 + c - 48;
              else if (c !== 32) break;
            }
            this.need = v;
            this.st = St.Length;
            if (v === 0) this.complete();
          } else if (headerValue(h, h.length, 'transfer-encoding') >= 0) {
            this.st = St.ChunkSize;
            this.need = 0;
            this.chunkLine = 0;
            if (this.progressive) {
              // A chunked progressive stream (Skylark /listen) counts as answered at its head too.
              const now = this.now;
              if (now >= this.wire.from && now <= this.wire.to) this.wire.requests++;
              const done = this.done;
              this.done = null;
              done?.(this.status, '');
            }
          } else if (this.status === 204 || this.status === 304) {
            this.complete();
          } else {
            // An HTTP/1.0-style stream (Icecast): the body runs until the socket closes. The
            // response counts as answered at its head.
            this.st = St.UntilClose;
            const now = this.now;
            if (now >= this.wire.from && now <= this.wire.to) this.wire.requests++;
            this.done?.(this.status, '');
          }
          break;
        }
        case St.Length: {
          const take = Math.min(this.need, n - i);
          this.body(d, i, i + take);
          i += take;
          this.need -= take;
          if (this.need === 0) this.complete();
          break;
        }
        case St.ChunkSize: {
          // HEX[;extension]\r\n — chunkLine: 0 while reading hex digits, 1 after them.
          const c = d[i++]!;
          if (c === LF) {
            this.st = this.need === 0 ? St.Trailer : St.ChunkData;
            this.chunkLine = 0;
          } else if (this.chunkLine === 0) {
            const v = c >= 48 && c <= 57 ? c - 48 : c >= 97 && c <= 102 ? c - 87 : c >= 65 && c <= 70 ? c - 55 : -1;
            if (v >= 0) this.need = this.need * 16 + v;
            else this.chunkLine = 1;
          }
          break;
        }
        case St.ChunkData: {
          const take = Math.min(this.need, n - i);
          this.body(d, i, i + take);
          i += take;
          this.need -= take;
          if (this.need === 0) {
            this.st = St.ChunkEnd;
            this.chunkLine = 0;
          }
          break;
        }
        case St.ChunkEnd: {
          // The CRLF after a chunk's data.
          if (d[i++] === LF) {
            this.st = St.ChunkSize;
            this.need = 0;
            this.chunkLine = 0;
          }
          break;
        }
        case St.Trailer: {
          // Trailer lines until an empty one.
          const c = d[i++]!;
          if (c === LF) {
            if (this.chunkLine === 0) this.complete();
            this.chunkLine = 0;
          } else if (c !== CR) this.chunkLine++;
          break;
        }
        case St.UntilClose: {
          this.body(d, i, n);
          i = n;
          break;
        }
      }
    }
  }
}

// ── Listeners ───────────────────────────────────────────────────────────────────────────────────

/** Shared state of one run (one client process, or the bench process's probe). */
class Run {
  readonly wheel = new TimerWheel();
  readonly wire: WireStats;
  readonly host: string;
  readonly port: number;
  readonly path: string;
  readonly hostHeader: string;
  readonly errors: Record<string, number> = {};
  /** First time each object was listed in this run (epoch ms), by key. */
  readonly seen = new Map<number, number>();
  readonly listeners: Listener[] = [];
  connecting = 0;
  /** Connects in flight: +1 when one starts, −1 when it connects or fails. */
  readonly inFlight = (d: number) => {
    this.connecting += d;
  };
  retries = 0;
  dropped = 0;
  targetMs = 0;
  /** The multivariant (or stream) GET, built once. */
  readonly entryReq: Buffer;
  /** `icecast`: the read buffer every stream of this process shares, and the pacer of their reads. */
  readonly shared: SharedRead | null;

  constructor(readonly cfg: PlayerConfig) {
    const u = new URL(cfg.url);
    this.host = u.hostname;
    this.port = Number(u.port) || 80;
    this.path = u.pathname + u.search;
    this.hostHeader = `${this.host}:${this.port}`;
    this.wire = { from: cfg.from, to: cfg.to, requests: 0, bytes: 0 };
    this.entryReq = Buffer.from(this.request(this.path), 'latin1');
    this.shared = cfg.mode === 'icecast' ? { buf: Buffer.allocUnsafe(64 * 1024), pacer: (cfg.readMs ?? 0) > 0 ? new ReadPacer(cfg.readMs!) : null } : null;
  }

  /** The request bytes of a GET of `path` on a keep-alive connection; `extra`: more header lines, each ending in CRLF. */
  request(path: string, extra = ''): string {
    return `GET ${path} HTTP/1.1\r\nHost: ${this.hostHeader}\r\nUser-Agent: skylark-bench-player\r\n${extra}\r\n`;
  }

  err(kind: string): void {
    this.errors[kind] = (this.errors[kind] ?? 0) + 1;
  }

  see(key: number, now: number): void {
    if (!this.seen.has(key)) this.seen.set(key, now);
  }
}

abstract class Listener implements Timed {
  wakeAt = 0;
  dead = false;
  started = false;
  /** Flat [key, t − from, …] of completed media objects. */
  readonly done: number[] = [];
  /** Header lines this listener adds to every request ('' or `X-Forwarded-For: …\r\n`). */
  protected readonly hdr: string;
  /** The multivariant (or stream) GET of this listener. */
  protected readonly entryReq: Buffer;
  /** The local address its connections bind (`ownAddresses`), or undefined (the kernel's choice, 127.0.0.1 on loopback). */
  protected readonly local: string | undefined;

  /** `order`: this listener's place in the arrival order of all processes. */
  constructor(
    protected readonly run: Run,
    order: number,
  ) {
    this.local = run.cfg.ownAddresses && !run.cfg.probe ? ownAddress(order) : undefined;
    const ff = run.cfg.forwardedFor;
    this.hdr = ff && ff.length > 0 ? `X-Forwarded-For: ${ff[order % ff.length]}\r\n` : '';
    this.entryReq = this.hdr ? Buffer.from(run.request(run.path, this.hdr), 'latin1') : run.entryReq;
  }

  /** This listener's GET of `path`. */
  protected req(path: string): string {
    return this.run.request(path, this.hdr);
  }

  abstract start(): void;
  abstract wake(now: number): void;
  /** Closes its connections. */
  abstract teardown(): void;

  /** A new connection, counted against the run's connects in flight; `shared`: it reads into the run's shared buffer, paced (progressive streams). */
  protected connect(onConnect: () => void, shared = false): HttpConn {
    return new HttpConn(this.run.port, this.run.host, this.run.wire, onConnect, (why) => this.fail(why), this.run.inFlight, shared ? this.run.shared : null, this.local);
  }

  protected record(key: number, now: number): void {
    const t = now - this.run.cfg.from;
    if (t >= -5000) this.done.push(key, t);
  }

  /** Ends this listener; before the measuring period it reconnects like a player would. */
  fail(why: string): void {
    if (this.dead) return;
    this.dead = true;
    this.wakeAt = 0;
    this.teardown();
    const now = Date.now();
    if (this.run.cfg.probe || now < this.run.cfg.from - 3000) {
      this.run.retries++;
      const again: Timed = {
        wakeAt: 0,
        wake: () => {
          this.dead = false;
          this.start();
        },
      };
      this.run.wheel.schedule(again, now + 250);
      return;
    }
    if (now < this.run.cfg.exitAt) {
      this.run.dropped++;
      this.run.err(why);
    }
  }
}

/** Listener `order`'s own loopback address (Linux routes all of 127.0.0.0/8 to lo): 127.10.x.y, 250 per /24, y never 0 or 255. */
export function ownAddress(order: number): string {
  return `127.${10 + Math.floor(order / 64_000)}.${Math.floor(order / 250) % 256}.${(order % 250) + 1}`;
}

/** Media directory (`/hls/<id>/<layer>/`) and the session query of a variant URI. */
function variantOf(run: Run, body: string): { dir: string; query: string } | null {
  let line = '';
  for (const l of body.split('\n')) {
    const t = l.trim();
    if (t && !t.startsWith('#')) {
      line = t;
      break;
    }
  }
  if (!line) return null;
  const u = new URL(line, run.cfg.url);
  return { dir: u.pathname.slice(0, u.pathname.lastIndexOf('/') + 1), query: u.search.slice(1) };
}

/** Lines of a playlist, without allocating an array: calls `f(start, end)` per line. */
function eachLine(s: string, f: (a: number, b: number) => void): void {
  let i = 0;
  const n = s.length;
  while (i < n) {
    let e = s.indexOf('\n', i);
    if (e < 0) e = n;
    f(i, e > i && s.charCodeAt(e - 1) === CR ? e - 1 : e);
    i = e + 1;
  }
}

const startsAt = (s: string, i: number, p: string) => s.startsWith(p, i);
const intAt = (s: string, i: number) => {
  let v = 0;
  let any = false;
  for (; i < s.length; i++) {
    const c = s.charCodeAt(i);
    if (c < 48 || c > 57) break;
    v = v * 10 + c - 48;
    any = true;
  }
  return any ? v : -1;
};

/** classic: poll per target duration, fetch every new segment. */
class ClassicListener extends Listener {
  private conn: HttpConn | null = null;
  private dir = '';
  private playlistReq: Buffer | null = null;
  private lastSeq = -1;
  private targetMs = 2000;
  private pollStart = 0;
  private updated = false;
  private queue: string[] = [];
  private queueSeq: number[] = [];
  private first = true;
  private phased = false;

  start(): void {
    this.first = true;
    this.phased = false;
    this.lastSeq = -1;
    this.queue = [];
    this.queueSeq = [];
    this.conn = this.connect(() =>
      this.conn!.send(this.entryReq, true, (st, body) => {
        if (st !== 200) return this.fail(`multivariant ${st}`);
        const v = variantOf(this.run, body);
        if (!v) return this.fail('no variant');
        this.dir = v.dir;
        this.playlistReq = Buffer.from(this.req(`${v.dir}index.m3u8${v.query ? `?${v.query}` : ''}`), 'latin1');
        this.started = true;
        this.poll();
      }),
    );
  }

  teardown(): void {
    this.conn?.destroy();
  }

  wake(): void {
    if (!this.dead) this.poll();
  }

  private poll(): void {
    this.pollStart = Date.now();
    this.conn!.send(this.playlistReq!, true, (st, body) => {
      if (st !== 200) {
        this.run.err(`playlist ${st}`);
        return this.next();
      }
      this.parse(body);
      this.fetch();
    });
  }

  private parse(s: string): void {
    let media = -1;
    let n = 0;
    const now = Date.now();
    const uris: string[] = [];
    eachLine(s, (a, b) => {
      if (b <= a) return;
      if (s.charCodeAt(a) === 35 /* # */) {
        if (startsAt(s, a, '#EXT-X-MEDIA-SEQUENCE:')) media = intAt(s, a + 22);
        else if (startsAt(s, a, '#EXT-X-TARGETDURATION:')) this.targetMs = intAt(s, a + 22) * 1000;
        return;
      }
      uris.push(s.slice(a, b));
      n++;
    });
    if (media < 0) return;
    this.run.targetMs = this.targetMs;
    this.updated = false;
    // A player starting on a live playlist begins 3 target durations from the end (RFC 8216 §6.3.3).
    const firstNew = this.first ? Math.max(0, n - 3) : 0;
    this.first = false;
    for (let i = 0; i < n; i++) {
      const seq = media + i;
      this.run.see(seq, now);
      if (seq > this.lastSeq) {
        this.updated = true;
        this.lastSeq = seq;
        if (i >= firstNew && !this.run.cfg.probe) {
          this.queue.push(uris[i]!);
          this.queueSeq.push(seq);
        }
      }
    }
  }

  private fetch(): void {
    if (this.dead) return;
    const uri = this.queue.shift();
    if (uri === undefined) return this.next();
    const seq = this.queueSeq.shift()!;
    this.conn!.send(this.req(this.dir + uri), false, (st) => {
      if (st !== 200) this.run.err(`segment ${st}`);
      else this.record(seq, Date.now());
      this.fetch();
    });
  }

  private next(): void {
    if (this.dead) return;
    let at: number;
    if (this.run.cfg.probe) at = this.pollStart + 100;
    else if (!this.phased) {
      // The first reload comes at a random phase of the target duration.
      this.phased = true;
      at = Date.now() + Math.random() * this.targetMs;
    } else at = this.pollStart + (this.updated ? this.targetMs : this.targetMs / 2); // RFC 8216 §6.3.4: half when unchanged
    this.run.wheel.schedule(this, at);
  }
}

/** The init section's place in an LL listener's fetch queue. */
const INIT = -1;

/** hlsjs-ll: chained blocking reloads for the next part, each newly listed part fetched on a second connection. */
class LlListener extends Listener {
  private pl: HttpConn | null = null;
  private media: HttpConn | null = null;
  private mediaUp = false;
  private dir = '';
  /** `GET <dir>index.m3u8?<sid>&_HLS_msn=` */
  private reloadHead = '';
  /** The newest part queued for fetching (a hinted part is queued before it is listed). */
  private lastKey = -1;
  /** The newest part the last playlist listed. */
  private lastListed = -1;
  private msn = -1;
  private part = -1;
  private queue: number[] = [];
  private initUri = '';
  /** The query the listed part URIs carry ('' for a public stream; `?token=…` for a token stream). */
  private partQuery = '';
  private partTargetMs = 1000;
  private first = true;
  /**
   * `&_HLS_skip=YES` once a playlist advertised `CAN-SKIP-UNTIL` (and `v2` with
   * `CAN-SKIP-DATERANGES=YES`), as hls.js's `getSkipValue` adds it to every blocking reload of a
   * playlist loaded less than half the skip boundary ago (ours are always that fresh); '' before.
   */
  private skip = '';

  start(): void {
    this.first = true;
    this.skip = '';
    this.lastKey = -1;
    this.lastListed = -1;
    this.queue = [];
    this.mediaUp = false;
    this.pl = this.connect(() =>
      this.pl!.send(this.entryReq, true, (st, body) => {
        if (st !== 200) return this.fail(`multivariant ${st}`);
        const v = variantOf(this.run, body);
        if (!v) return this.fail('no variant');
        this.dir = v.dir;
        this.reloadHead = `GET ${v.dir}index.m3u8?${v.query ? `${v.query}&` : ''}_HLS_msn=`;
        this.started = true;
        this.pl!.send(this.req(`${v.dir}index.m3u8${v.query ? `?${v.query}` : ''}`), true, (st2, b2) => this.playlist(st2, b2));
      }),
    );
    if (!this.run.cfg.probe)
      this.media = this.connect(() => {
        this.mediaUp = true;
        this.pump();
      });
  }

  teardown(): void {
    this.pl?.destroy();
    this.media?.destroy();
  }

  wake(): void {
    if (!this.dead) this.reload();
  }

  private reload(): void {
    const tail = `${this.part >= 0 ? `${this.msn}&_HLS_part=${this.part}` : `${this.msn}`}${this.skip}`;
    this.pl!.send(`${this.reloadHead}${tail} HTTP/1.1\r\nHost: ${this.run.hostHeader}\r\nUser-Agent: skylark-bench-player\r\n${this.hdr}\r\n`, true, (st, body) => this.playlist(st, body));
  }

  private playlist(st: number, s: string): void {
    if (this.dead) return;
    if (st !== 200) {
      this.run.err(`playlist ${st}`);
      return this.run.wheel.schedule(this, Date.now() + this.partTargetMs);
    }
    const now = Date.now();
    let endSn = -1;
    let lastPartKey = -1;
    let hint = -1;
    let map = '';
    const keys: number[] = [];
    eachLine(s, (a, b) => {
      if (b <= a) return;
      if (s.charCodeAt(a) !== 35) {
        const sn = intAt(s, a);
        if (sn >= 0) endSn = sn;
        return;
      }
      if (startsAt(s, a, '#EXT-X-PART:')) {
        const u = s.indexOf('URI="', a);
        if (u < 0 || u > b) return;
        const m = intAt(s, u + 5);
        const dot = s.indexOf('.', u + 5);
        const p = intAt(s, dot + 1);
        if (m < 0 || p < 0) return;
        if (keys.length === 0) {
          // Part URIs are resolved against the playlist URL, whose query they do not inherit: as listed.
          const end = s.indexOf('"', u + 5);
          const q = s.indexOf('?', u + 5);
          this.partQuery = q >= 0 && q < end ? s.slice(q, end) : '';
        }
        lastPartKey = m * 1000 + p;
        keys.push(lastPartKey);
      } else if (startsAt(s, a, '#EXT-X-PRELOAD-HINT:')) {
        const u = s.indexOf('URI="', a);
        if (u < 0 || u > b) return;
        const m = intAt(s, u + 5);
        const p = intAt(s, s.indexOf('.', u + 5) + 1);
        if (m >= 0 && p >= 0) hint = m * 1000 + p;
      } else if (this.first && startsAt(s, a, '#EXT-X-MAP:')) {
        const u = s.indexOf('URI="', a);
        if (u >= 0 && u < b) map = s.slice(u + 5, s.indexOf('"', u + 5));
      } else if (this.skip === '' && !this.run.cfg.noDelta && startsAt(s, a, '#EXT-X-SERVER-CONTROL:')) {
        const line = s.slice(a, b);
        if (line.includes('CAN-SKIP-UNTIL=')) this.skip = line.includes('CAN-SKIP-DATERANGES=YES') ? '&_HLS_skip=v2' : '&_HLS_skip=YES';
      } else if (startsAt(s, a, '#EXT-X-PART-INF:')) {
        const t = s.indexOf('PART-TARGET=', a);
        if (t >= 0 && t < b) this.partTargetMs = Math.round(Number(s.slice(t + 12, b).split(',')[0]) * 1000) || this.partTargetMs;
      }
    });
    this.run.targetMs = this.partTargetMs;
    if (lastPartKey < 0) {
      // No parts (not an LL-HLS layer, or none yet): the next segment, as hls.js asks.
      this.msn = endSn + 1;
      this.part = -1;
      this.run.err('no parts listed');
      return this.run.wheel.schedule(this, now + this.partTargetMs);
    }
    // A player fetches the init section (EXT-X-MAP) once before the first part.
    if (map && !this.run.cfg.probe) {
      this.initUri = map;
      this.queue.push(INIT);
    }
    // Advanced: the playlist lists a part the previous one did not (hls.js `details.advanced`).
    const advanced = lastPartKey > this.lastListed;
    this.lastListed = lastPartKey;
    const firstNew = this.first ? Math.max(0, keys.length - 3) : 0; // start at PART-HOLD-BACK (3 parts) from the edge
    for (let i = 0; i < keys.length; i++) {
      const k = keys[i]!;
      this.run.see(k, now);
      if (k > this.lastKey) {
        this.lastKey = k;
        if (i >= firstNew && !this.run.cfg.probe) this.queue.push(k);
      }
    }
    this.first = false;
    const lastSn = Math.floor(lastPartKey / 1000);
    if (lastSn === endSn) {
      this.msn = endSn + 1;
      this.part = 0;
    } else {
      this.msn = lastSn;
      this.part = (lastPartKey % 1000) + 1;
    }
    if (this.run.cfg.hints && hint > this.lastKey && !this.run.cfg.probe) {
      this.lastKey = hint;
      this.queue.push(hint);
    }
    this.pump();
    if (!advanced) {
      // Answered without the part (the wait timed out, or the server could not hold it): retry shortly.
      this.run.err('reload not advanced');
      return this.run.wheel.schedule(this, now + this.partTargetMs / 2);
    }
    this.reload();
  }

  /** Fetches queued parts one at a time on the media connection. */
  private pump(): void {
    if (this.dead || !this.mediaUp || !this.media || this.media.busy) return;
    const key = this.queue.shift();
    if (key === undefined) return;
    const uri = key === INIT ? this.dir + this.initUri : `${this.dir}${Math.floor(key / 1000)}.${key % 1000}.m4s${this.partQuery}`;
    this.media.send(this.req(uri), false, (st) => {
      if (st !== 200) this.run.err(`${key === INIT ? 'init' : 'part'} ${st}`);
      else if (key !== INIT) this.record(key, Date.now());
      this.pump();
    });
  }
}

/** What an LL-HLS media playlist lists, as `NodeLlListener` reads it. */
interface LlListing {
  /** The last full segment's sequence number (-1: none). */
  endSn: number;
  /** Every part listed, as msn × 1000 + part index, in order. */
  keys: number[];
  /** The query the part URIs carry ('' for a public stream). */
  partQuery: string;
  /** The `EXT-X-MAP` URI ('' when absent). */
  map: string;
  /** `PART-TARGET` (ms; 0 when absent). */
  partTargetMs: number;
}

/** Reads the parts, the last segment, the map and the part target of an LL-HLS media playlist. */
function llListing(s: string): LlListing {
  const out: LlListing = { endSn: -1, keys: [], partQuery: '', map: '', partTargetMs: 0 };
  eachLine(s, (a, b) => {
    if (b <= a) return;
    if (s.charCodeAt(a) !== 35) {
      const sn = intAt(s, a);
      if (sn >= 0) out.endSn = sn;
      return;
    }
    if (startsAt(s, a, '#EXT-X-PART:')) {
      const u = s.indexOf('URI="', a);
      if (u < 0 || u > b) return;
      const m = intAt(s, u + 5);
      const p = intAt(s, s.indexOf('.', u + 5) + 1);
      if (m < 0 || p < 0) return;
      if (out.keys.length === 0) {
        const end = s.indexOf('"', u + 5);
        const q = s.indexOf('?', u + 5);
        out.partQuery = q >= 0 && q < end ? s.slice(q, end) : '';
      }
      out.keys.push(m * 1000 + p);
    } else if (startsAt(s, a, '#EXT-X-MAP:')) {
      const u = s.indexOf('URI="', a);
      if (u >= 0 && u < b) out.map = s.slice(u + 5, s.indexOf('"', u + 5));
    } else if (startsAt(s, a, '#EXT-X-PART-INF:')) {
      const t = s.indexOf('PART-TARGET=', a);
      if (t >= 0 && t < b) out.partTargetMs = Math.round(Number(s.slice(t + 12, b).split(',')[0]) * 1000) || 0;
    }
  });
  return out;
}

/**
 * hlsjs-ll with `llClient: 'node'`: one `node:http` keep-alive connection per listener (an `Agent`
 * with `maxSockets: 1`; Node's default request headers — `Host`, `Connection: keep-alive` — and a
 * `User-Agent`), every request in turn on it. The multivariant playlist, the top variant's media
 * playlist and its init section once; then for ever a blocking reload
 * `?<sid>&_HLS_msn=M&_HLS_part=P` for the part after the last one listed (never `_HLS_skip`), and a
 * GET of each part that reload newly lists. A reload answered without a new part (a timeout, a
 * 503) is sent again half a part target later.
 */
class NodeLlListener extends Listener {
  private agent: http.Agent | null = null;
  private dir = '';
  /** `<dir>index.m3u8?<sid>&_HLS_msn=` */
  private reloadHead = '';
  private partQuery = '';
  private partTargetMs = 1000;
  /** The newest part listed so far (msn × 1000 + part), and the parts still to fetch. */
  private lastKey = -1;
  private queue: number[] = [];
  private msn = -1;
  private part = 0;

  start(): void {
    this.lastKey = -1;
    this.queue = [];
    this.agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
    this.get(this.run.path, true, (st, body) => {
      if (st !== 200) return this.fail(`multivariant ${st}`);
      const v = variantOf(this.run, body);
      if (!v) return this.fail('no variant');
      this.dir = v.dir;
      this.reloadHead = `${v.dir}index.m3u8?${v.query ? `${v.query}&` : ''}_HLS_msn=`;
      this.started = true;
      this.get(`${v.dir}index.m3u8${v.query ? `?${v.query}` : ''}`, true, (st2, b2) => this.first(st2, b2));
    });
  }

  teardown(): void {
    this.agent?.destroy();
    this.agent = null;
  }

  wake(): void {
    if (!this.dead) this.reload();
  }

  /** One GET on the listener's connection; `done` hears its status and (with `keep`) its body. */
  private get(path: string, keep: boolean, done: Done): void {
    const wire = this.run.wire;
    const req = http.request({ host: this.run.host, port: this.run.port, path, agent: this.agent!, localAddress: this.local, headers: { 'User-Agent': 'skylark-bench-player (node:http)' } }, (res) => {
      const parts: Buffer[] = [];
      res.on('data', (d: Buffer) => {
        const now = Date.now();
        if (now >= wire.from && now <= wire.to) wire.bytes += d.length;
        if (keep) parts.push(d);
      });
      res.on('end', () => {
        if (this.dead) return;
        const now = Date.now();
        if (now >= wire.from && now <= wire.to) wire.requests++;
        done(res.statusCode ?? 0, keep ? Buffer.concat(parts).toString('latin1') : '');
      });
      res.on('error', (e: NodeJS.ErrnoException) => this.fail(e.code ?? 'response error'));
    });
    req.on('error', (e: NodeJS.ErrnoException) => this.fail(e.code ?? 'request error'));
    req.end();
  }

  /** The first media playlist: the init section once, then the chain of reloads from the next part. */
  private first(st: number, s: string): void {
    if (this.dead) return;
    if (st !== 200) return this.fail(`playlist ${st}`);
    const l = llListing(s);
    if (l.keys.length === 0) return this.fail('no parts listed');
    if (l.partTargetMs) this.partTargetMs = this.run.targetMs = l.partTargetMs;
    this.partQuery = l.partQuery;
    const now = Date.now();
    for (const k of l.keys) this.run.see(k, now);
    this.advance(l);
    if (!l.map) return this.reload();
    this.get(this.dir + l.map, false, (st2) => {
      if (st2 !== 200) this.run.err(`init ${st2}`);
      if (!this.dead) this.reload();
    });
  }

  /** Marks the parts `l` lists after the last one seen as to fetch, and aims the next reload past them. */
  private advance(l: LlListing): boolean {
    const last = l.keys[l.keys.length - 1]!;
    if (last <= this.lastKey) return false;
    if (this.lastKey >= 0) for (const k of l.keys) if (k > this.lastKey) this.queue.push(k);
    this.lastKey = last;
    const lastSn = Math.floor(last / 1000);
    // The part after the last one listed; part 0 of the next segment when the last part closed a segment.
    if (lastSn === l.endSn) {
      this.msn = lastSn + 1;
      this.part = 0;
    } else {
      this.msn = lastSn;
      this.part = (last % 1000) + 1;
    }
    return true;
  }

  private reload(): void {
    this.get(`${this.reloadHead}${this.msn}&_HLS_part=${this.part}`, true, (st, s) => {
      if (this.dead) return;
      const now = Date.now();
      const l = st === 200 ? llListing(s) : null;
      if (!l || l.keys.length === 0 || !this.advance(l)) {
        this.run.err(st === 200 ? 'reload not advanced' : `playlist ${st}`);
        return this.run.wheel.schedule(this, now + this.partTargetMs / 2);
      }
      for (const k of l.keys) this.run.see(k, now);
      this.fetch();
    });
  }

  /** Fetches the queued parts in order, then reloads. */
  private fetch(): void {
    if (this.dead) return;
    const key = this.queue.shift();
    if (key === undefined) return this.reload();
    this.get(`${this.dir}${Math.floor(key / 1000)}.${key % 1000}.m4s${this.partQuery}`, false, (st) => {
      if (st !== 200) this.run.err(`part ${st}`);
      else this.record(key, Date.now());
      this.fetch();
    });
  }
}

/** icecast: one progressive GET, bytes counted, each read measured (bench/lib/listener-rate.ts). */
class StreamListener extends Listener {
  private conn: HttpConn | null = null;
  /** The rate over whole arrivals and the lag of this listener's current connection. */
  meter: ListenerMeter = this.newMeter();

  private newMeter(): ListenerMeter {
    const { cfg } = this.run;
    // The burst-on-connect (Icecast's 64 KB, Skylark's 2–4 s) is not the steady rate: measure from 5 s after the first byte.
    return new ListenerMeter({ bytesPerS: cfg.streamBytesPerS ?? 16_000, from: cfg.from, to: cfg.to, settleMs: 5000, groupMs: groupMsFor(cfg.readMs ?? 0) });
  }

  start(): void {
    this.meter = this.newMeter();
    this.conn = this.connect(
      () =>
        this.conn!.send(this.entryReq, false, (st) => {
          if (st !== 200) return this.fail(`stream ${st}`);
          this.started = true;
        }),
      true,
    );
    this.conn.onBytes = (n, now, drained) => this.meter.read(now, n, drained);
    this.conn.progressive = true;
  }

  teardown(): void {
    this.conn?.destroy();
  }

  wake(): void {}
}

/** A Timed that starts a listener at its arrival time (waits while too many connects are in flight). */
class Arrival implements Timed {
  wakeAt = 0;
  constructor(
    private readonly run: Run,
    private readonly l: Listener,
  ) {}
  wake(now: number): void {
    if (this.run.connecting >= (this.run.cfg.maxConnecting ?? 200)) return this.run.wheel.schedule(this, now + 20);
    this.run.listeners.push(this.l);
    this.l.start();
  }
}

/**
 * Runs `cfg.count` listeners of `cfg.mode` (arrivals from `startAt` over `rampMs`); `report()`
 * summarises them. Never throws from a socket or timer callback (errors are counted).
 */
export class PlayerRun {
  private readonly run: Run;
  private cpu0: NodeJS.CpuUsage | null = null;
  private cpuUs = 0;
  private readonly lag = monitorEventLoopDelay({ resolution: 20 });
  private readonly all: Listener[] = [];

  constructor(cfg: PlayerConfig) {
    this.run = new Run(cfg);
  }

  start(): void {
    const { cfg } = this.run;
    for (let i = 0; i < cfg.count; i++) {
      const order = i * cfg.stride + cfg.index;
      const l =
        cfg.mode === 'classic'
          ? new ClassicListener(this.run, order)
          : cfg.mode === 'hlsjs-ll'
            ? cfg.llClient === 'node' && !cfg.probe
              ? new NodeLlListener(this.run, order)
              : new LlListener(this.run, order)
            : new StreamListener(this.run, order);
      this.all.push(l);
      this.run.wheel.schedule(new Arrival(this.run, l), cfg.startAt + (order * cfg.rampMs) / Math.max(1, cfg.total));
    }
    const atFrom = Math.max(0, cfg.from - Date.now());
    setTimeout(() => {
      this.cpu0 = process.cpuUsage();
      this.lag.enable();
    }, atFrom).unref();
    setTimeout(() => {
      if (this.cpu0) {
        const d = process.cpuUsage(this.cpu0);
        this.cpuUs = d.user + d.system;
      }
      this.lag.disable();
    }, Math.max(0, cfg.to - Date.now())).unref();
  }

  /** First-listed times (epoch ms) of every object this run saw. */
  get seen(): ReadonlyMap<number, number> {
    return this.run.seen;
  }

  report(): PlayerReport {
    const { cfg } = this.run;
    const seen: number[] = [];
    for (const [k, t] of this.run.seen) if (t >= cfg.from - 10_000) seen.push(k, t - cfg.from);
    const streams = this.all as StreamListener[];
    const ns = (v: number) => (Number.isFinite(v) ? v / 1e6 : 0);
    return {
      mode: cfg.mode,
      count: cfg.count,
      started: this.all.filter((l) => l.started).length,
      alive: this.all.filter((l) => l.started && !l.dead).length,
      dropped: this.run.dropped,
      retries: this.run.retries,
      errors: this.run.errors,
      requests: this.run.wire.requests,
      bytes: this.run.wire.bytes,
      cpuUs: this.cpuUs,
      lagP99Ms: ns(this.lag.percentile(99)),
      lagMaxMs: ns(this.lag.max),
      targetMs: this.run.targetMs,
      seen,
      done: cfg.mode === 'icecast' ? [] : this.all.map((l) => l.done),
      ...streamFigures(cfg.mode === 'icecast' ? streams.map((l) => l.meter.result()) : []),
    };
  }

  /** Closes every connection and the wheel. */
  stop(): void {
    for (const l of this.all) {
      l.dead = true;
      l.wakeAt = 0;
      l.teardown();
    }
    this.run.wheel.stop();
    this.run.shared?.pacer?.stop();
  }
}
