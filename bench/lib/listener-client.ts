/**
 * A load-client process for bench/listeners.bench.ts: simulates many audio listeners over raw
 * keep-alive TCP sockets with a minimal HTTP/1.1 client (no per-request allocation beyond the
 * playlist text), so one process holds thousands of listeners.
 *
 * - `hls`: like a live player: GET the multivariant playlist once (the server mints the session id
 *   into the variant URI), then every `pollMs` GET the media playlist and every segment not yet
 *   fetched (starting at the live edge), on the same connection. Records when each segment's body
 *   was complete.
 * - `icecast`: GET the mount, count body bytes inside the measuring window.
 *
 * Config: one JSON argument {mode, url, count, rampPerSec, pollMs, from, to, exitAt}. Prints one
 * JSON line at the end: per listener, `[seq, doneAtMs]` pairs (hls) or bytes and seconds measured
 * (icecast: from 5 s after the listener's first byte, so the burst-on-connect is left out), plus
 * errors. Run with `node --import tsx bench/lib/listener-client.ts '<json>'` under a raised fd limit.
 */
import net from 'node:net';

interface Cfg {
  mode: 'hls' | 'icecast';
  url: string;
  count: number;
  rampPerSec: number;
  pollMs: number;
  from: number;
  to: number;
  exitAt: number;
}

const cfg = JSON.parse(process.argv[2]!) as Cfg;
const u = new URL(cfg.url);
const host = u.hostname;
const port = Number(u.port);
const errors: Record<string, number> = {};
const err = (k: string) => (errors[k] = (errors[k] ?? 0) + 1);

class HlsListener {
  sock!: net.Socket;
  buf: Buffer | null = null;
  need = -1; // body bytes still expected for the current response (-1: reading headers)
  bodyChunks: Buffer[] = [];
  keepBody = false;
  onDone: ((status: number, body: string) => void) | null = null;
  status = 0;
  mediaPath = '';
  mediaDir = '';
  lastSeq = -1;
  /** seq, uri pairs still to fetch. */
  queue: Array<number | string> = [];
  done: number[] = []; // seq, doneAt, seq, doneAt …
  timer: NodeJS.Timeout | null = null;
  dead = false;

  start() {
    this.dead = false;
    this.buf = null;
    this.need = -1;
    this.lastSeq = -1;
    this.queue = [];
    this.sock = net.connect(port, host);
    connecting++;
    this.pending = true;
    this.sock.once('connect', () => this.connected());
    this.sock.setNoDelay(true);
    this.sock.on('error', () => this.fail('socket'));
    this.sock.on('close', () => this.fail('closed'));
    this.sock.on('data', (d) => this.data(d));
    this.get(u.pathname + u.search, true, (st, body) => {
      if (st !== 200) return this.fail(`multivariant ${st}`);
      const variant = body.split('\n').find((l) => l && !l.startsWith('#'));
      if (!variant) return this.fail('no variant');
      const m = new URL(variant, cfg.url);
      this.mediaPath = m.pathname + m.search;
      this.mediaDir = m.pathname.slice(0, m.pathname.lastIndexOf('/') + 1);
      this.poll();
    });
  }

  pending = false;
  connected() {
    if (this.pending) connecting--;
    this.pending = false;
  }

  fail(why: string) {
    if (this.dead) return;
    this.dead = true;
    this.connected();
    if (this.timer) clearTimeout(this.timer);
    this.sock.destroy();
    if (Date.now() < cfg.from - 3000) return retry(this); // like a player, reconnect (before the window)
    if (Date.now() < cfg.exitAt) err(why);
  }

  get(path: string, keepBody: boolean, cb: (status: number, body: string) => void) {
    this.keepBody = keepBody;
    this.onDone = cb;
    this.need = -1;
    this.sock.write(`GET ${path} HTTP/1.1\r\nHost: ${host}:${port}\r\nUser-Agent: skylark-bench\r\n\r\n`);
  }

  data(d: Buffer) {
    if (this.need < 0) {
      this.buf = this.buf ? Buffer.concat([this.buf, d]) : d;
      const end = this.buf.indexOf('\r\n\r\n');
      if (end < 0) return;
      const head = this.buf.toString('latin1', 0, end);
      this.status = Number(head.slice(9, 12));
      const m = /content-length:\s*(\d+)/i.exec(head);
      this.need = m ? Number(m[1]) : 0;
      d = this.buf.subarray(end + 4);
      this.buf = null;
      this.bodyChunks = [];
    }
    const take = Math.min(d.length, this.need);
    if (this.keepBody && take > 0) this.bodyChunks.push(d.subarray(0, take));
    this.need -= take;
    if (this.need === 0) {
      const cb = this.onDone!;
      const body = this.keepBody ? Buffer.concat(this.bodyChunks).toString('latin1') : '';
      this.need = -1;
      this.bodyChunks = [];
      const rest = d.subarray(take);
      cb(this.status, body);
      if (rest.length) this.data(rest);
    }
  }

  poll() {
    if (this.dead) return;
    const t0 = Date.now();
    this.get(this.mediaPath, true, (st, body) => {
      if (st !== 200) return this.fail(`playlist ${st}`);
      // Segment URI lines start with a digit; a live player starts at the newest one.
      const uris: string[] = [];
      let i = 0;
      while (i < body.length) {
        let e = body.indexOf('\n', i);
        if (e < 0) e = body.length;
        const c = body.charCodeAt(i);
        if (c >= 48 && c <= 57) uris.push(body.slice(i, e));
        i = e + 1;
      }
      if (this.lastSeq < 0 && uris.length) this.lastSeq = parseInt(uris[uris.length - 1]!, 10) - 1;
      for (const uri of uris) {
        const seq = parseInt(uri, 10);
        if (seq > this.lastSeq) {
          this.queue.push(seq, uri);
          this.lastSeq = seq;
        }
      }
      this.segments(t0);
    });
  }

  segments(t0: number) {
    if (this.queue.length === 0) {
      const wait = Math.max(10, cfg.pollMs - (Date.now() - t0));
      this.timer = setTimeout(() => this.poll(), wait);
      return;
    }
    const seq = this.queue.shift() as number;
    const uri = this.queue.shift() as string;
    this.get(this.mediaDir + uri, false, (st) => {
      if (st !== 200) err(`segment ${st}`);
      else this.done.push(seq, Date.now());
      this.segments(t0);
    });
  }
}

class IcecastListener {
  sock!: net.Socket;
  headerDone = false;
  bytes = 0;
  firstByteAt = 0;
  measureFrom = 0;
  dead = false;
  start() {
    this.dead = false;
    this.headerDone = false;
    this.sock = net.connect(port, host);
    connecting++;
    this.pending = true;
    this.sock.once('connect', () => this.connected());
    this.sock.on('error', () => this.fail('socket'));
    this.sock.on('close', () => this.fail('closed'));
    this.sock.on('connect', () => this.sock.write(`GET ${u.pathname} HTTP/1.0\r\nHost: ${host}\r\nUser-Agent: skylark-bench\r\n\r\n`));
    this.sock.on('data', (d: Buffer) => {
      let n = d.length;
      if (!this.headerDone) {
        const end = d.indexOf('\r\n\r\n');
        if (end < 0) return;
        this.headerDone = true;
        n -= end + 4;
      }
      // Per listener, the window starts 5 s after its first byte (the 64 KB burst-on-connect is not the steady rate).
      const now = Date.now();
      if (this.firstByteAt === 0) this.firstByteAt = now;
      const start = Math.max(cfg.from, this.firstByteAt + 5000);
      if (now >= start && now < cfg.to) {
        if (this.measureFrom === 0) this.measureFrom = start;
        this.bytes += n;
      }
    });
  }
  pending = false;
  connected() {
    if (this.pending) connecting--;
    this.pending = false;
  }

  fail(why: string) {
    if (this.dead) return;
    this.dead = true;
    this.connected();
    this.sock.destroy();
    if (Date.now() < cfg.from - 3000) return retry(this);
    if (Date.now() < cfg.exitAt) err(why);
  }
}

/** Connects in flight (a burst of SYNs beyond a server's listen backlog only causes retransmits). */
let connecting = 0;
const MAX_CONNECTING = 200;
let retries = 0;
function retry(l: { start(): void }) {
  retries++;
  setTimeout(() => l.start(), 250);
}

const listeners: Array<HlsListener | IcecastListener> = [];
let started = 0;
const t0 = Date.now();
const ramp = setInterval(() => {
  const target = Math.min(cfg.count, Math.ceil(((Date.now() - t0) / 1000) * cfg.rampPerSec));
  while (started < target && connecting < MAX_CONNECTING) {
    const l = cfg.mode === 'hls' ? new HlsListener() : new IcecastListener();
    // Spread the players' poll phases: each starts at its own moment inside the ramp.
    listeners.push(l);
    l.start();
    started++;
  }
  if (started >= cfg.count) clearInterval(ramp);
}, 20);

setTimeout(() => {
  const out =
    cfg.mode === 'hls'
      ? { mode: 'hls', started, retries, alive: listeners.filter((l) => !l.dead).length, errors, done: listeners.map((l) => (l as HlsListener).done) }
      : { mode: 'icecast', started, retries, alive: listeners.filter((l) => !l.dead).length, errors, bytes: listeners.map((l) => (l as IcecastListener).bytes), seconds: listeners.map((l) => ((l as IcecastListener).measureFrom ? (cfg.to - (l as IcecastListener).measureFrom) / 1000 : 0)) };
  process.stdout.write(JSON.stringify(out) + '\n', () => process.exit(0));
}, Math.max(0, cfg.exitAt - Date.now()));
