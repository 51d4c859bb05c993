/**
 * The request body reader of every HTTP route that reads one (JSON API, form/web, rawBody/WHEP,
 * streamed uploads): one byte cap, one abort flag, and one way to refuse a body so that the
 * answer reaches the client.
 *
 * Why refusing needs care: uWS's `end(body, true)` shuts the socket down and closes it at once. A
 * client still sending then gets a TCP reset, and Node's `http` client, browsers and `fetch` report
 * EPIPE/ECONNRESET instead of reading the 413 that was sent. So a refused body is *drained*: the
 * rest of it is read and thrown away, and the answer goes out once the body has ended — on a
 * connection that is still in step, kept alive. Draining is bounded like nginx's lingering close
 * (`lingering_time`): at most `drainAllowance(cap)` more bytes and `DRAIN_MAX_MS` after the refusal;
 * past either bound the answer is sent and the connection closed (a client that keeps sending is
 * cut off; what it sees then is up to its TCP stack). A `Content-Length` that already says the
 * body cannot end within the bound is answered and closed at once.
 *
 * uWS rules (docs/architecture.md): a `RequestBody` is created synchronously in the route handler (it copies
 * the framing headers and registers `onAborted` and `onData`, each exactly once: uWS keeps one
 * handler per response, and replacing one from inside itself is not safe); chunks are copied before
 * the `onData` callback returns (uWS neuters its ArrayBuffer); after an abort nothing is called.
 */
import type uWS from 'uWebSockets.js';
import { ApiError } from '../errors/errors.js';

/** Longest a refused body is drained before the answer is sent with the connection closed (ms). */
export const DRAIN_MAX_MS = 5_000;
/** Smallest drain allowance (bytes): under small caps (a 64 KiB form) a body of a few MB still gets its answer. */
export const DRAIN_MIN_BYTES = 8 * 1024 * 1024;
/** Largest drain allowance (bytes): a huge cap (uploads) does not let a client make the node read gigabytes for nothing. */
export const DRAIN_MAX_BYTES = 32 * 1024 * 1024;

/**
 * Bytes read and discarded after a body under cap `maxBytes` (bytes) was refused: 8 × the cap,
 * at least `DRAIN_MIN_BYTES`, at most `DRAIN_MAX_BYTES`.
 */
export function drainAllowance(maxBytes: number): number {
  return Math.min(DRAIN_MAX_BYTES, Math.max(DRAIN_MIN_BYTES, 8 * maxBytes));
}

/** 413 `body_too_large` for a body over `max` bytes. */
export const tooLarge = (max: number) => new ApiError('body_too_large', `The request body is larger than the limit of ${max} bytes.`);

/**
 * Whether a request announces a body (`Content-Length` other than 0, or any `Transfer-Encoding`).
 * Reads two headers: call it synchronously in the route handler.
 */
export function announcesBody(req: uWS.HttpRequest): boolean {
  const cl = req.getHeader('content-length');
  return (cl !== '' && cl !== '0') || req.getHeader('transfer-encoding') !== '';
}

/** Where a streamed body goes (`RequestBody.stream`). */
export interface BodySink {
  /**
   * Takes one chunk (a copy: the sink may keep it). Returns false to have the socket paused until
   * `RequestBody.resume()`. May call `RequestBody.refuse` (e.g. the disk is full): nothing more is
   * written to the sink then.
   */
  write(chunk: Buffer): boolean;
  /** The body ended; `sizeBytes` in all were written. */
  end(sizeBytes: number): void;
  /** The reader refused the rest of the body (over the cap): drop what was written. Not called on abort (see `onAbort`). */
  cancel(): void;
}

/**
 * Answers a refused or failed body: called once the drain is over (or at once when there was
 * nothing to drain), never after an abort. `close`: the body did not end within the drain bounds,
 * so the answer must close the connection (`res.end(body, true)`); false: the connection is in
 * step and may be kept alive.
 */
export type BodyAnswer = (close: boolean) => void;

type Mode = 'idle' | 'buffer' | 'stream' | 'drain' | 'done';

/** Options of a `RequestBody`. */
export interface RequestBodyOptions {
  /** The cap (bytes): a body larger than this is refused with 413 `body_too_large`. */
  maxBytes: number;
  /** Called when the client goes away (before the answer); `res` is dead from then on. */
  onAbort?: () => void;
  /** Called once when the body turns out larger than `maxBytes` (count the limit hit here). */
  onTooLarge?: () => void;
  /** Bytes drained after a refusal (default `drainAllowance(maxBytes)`). */
  drainBytes?: number;
}

/**
 * One request's body, read under a byte cap. Create it synchronously in the uWS route handler,
 * then call exactly one of `buffer`, `stream` or `refuse` (a `stream` may still `refuse` later).
 */
export class RequestBody {
  /** Whether the request announces a body (`Content-Length` > 0 or `Transfer-Encoding`). */
  readonly announced: boolean;
  /** The announced `Content-Length` (bytes), or null when absent or unreadable (chunked). */
  readonly contentLength: number | null;
  /** The client went away: never touch the response again. */
  aborted = false;
  /** Body bytes received so far (read, streamed or drained). */
  received = 0;

  private mode: Mode = 'idle';
  private ended = false;
  private paused = false;
  private chunks: Buffer[] = [];
  private done: ((body: Buffer) => void) | null = null;
  private sink: BodySink | null = null;
  private fail: ((e: unknown, close: boolean) => void) | null = null;
  private answer: BodyAnswer | null = null;
  private drained = 0;
  private readonly drainBytes: number;
  private timer: NodeJS.Timeout | null = null;

  constructor(
    private readonly res: uWS.HttpResponse,
    req: uWS.HttpRequest,
    private readonly opts: RequestBodyOptions,
  ) {
    const cl = req.getHeader('content-length');
    const chunked = req.getHeader('transfer-encoding') !== '';
    this.announced = (cl !== '' && cl !== '0') || chunked;
    const n = cl === '' || chunked ? NaN : Number(cl);
    this.contentLength = Number.isSafeInteger(n) && n >= 0 ? n : null;
    this.drainBytes = opts.drainBytes ?? drainAllowance(opts.maxBytes);
    res.onAborted(() => {
      this.aborted = true;
      this.mode = 'done';
      this.clearTimer();
      this.opts.onAbort?.();
    });
    if (this.announced) res.onData((ab, isLast) => this.onData(ab, isLast));
    else this.ended = true;
  }

  /**
   * Reads the whole body into memory: `done(body)` once it ended (an empty Buffer when there is
   * none; synchronously then). Over the cap: 413 `body_too_large` to `fail`, after the drain.
   */
  buffer(done: (body: Buffer) => void, fail: (e: unknown, close: boolean) => void): void {
    if (this.mode !== 'idle') return;
    this.fail = fail;
    if (this.contentLength !== null && this.contentLength > this.opts.maxBytes) return this.overflow();
    if (this.ended) {
      this.mode = 'done';
      return done(Buffer.alloc(0));
    }
    this.mode = 'buffer';
    this.done = done;
  }

  /**
   * Streams the body into `sink` chunk by chunk (never whole in memory); the socket is paused
   * while the sink says it is full. Over the cap: `sink.cancel()` at once, then 413 to `fail`
   * after the drain.
   */
  stream(sink: BodySink, fail: (e: unknown, close: boolean) => void): void {
    if (this.mode !== 'idle') return;
    this.fail = fail;
    if (this.contentLength !== null && this.contentLength > this.opts.maxBytes) return this.overflow();
    if (this.ended) {
      this.mode = 'done';
      return sink.end(0);
    }
    this.mode = 'stream';
    this.sink = sink;
  }

  /**
   * Refuses the body (or the rest of it): stops reading it into anything, drains what is left
   * within the bounds (see the module comment), then calls `answer(close)` — at once when the
   * body already ended or none was announced. Idempotent: a second call is ignored.
   */
  refuse(answer: BodyAnswer): void {
    if (this.aborted || this.answer) return;
    this.chunks = [];
    this.done = null;
    this.sink = null;
    this.answer = answer;
    if (this.ended) return this.finish(false);
    if (this.contentLength !== null && this.contentLength - this.received > this.drainBytes) return this.finish(true);
    this.mode = 'drain';
    this.drained = 0;
    if (this.paused) this.resume();
    this.timer = setTimeout(() => {
      this.timer = null;
      if (this.mode !== 'drain') return;
      try {
        this.finish(true);
      } catch {
        // The answers given here (src/base/http/reply.ts) do not throw; nothing may escape a timer.
      }
    }, DRAIN_MAX_MS);
    this.timer.unref();
  }

  /** Pauses the socket (a streamed body whose sink is full). */
  pause(): void {
    if (this.paused || this.aborted || this.mode === 'done') return;
    this.paused = true;
    this.res.pause();
  }

  /** Resumes a paused socket. */
  resume(): void {
    if (!this.paused || this.aborted || this.mode === 'done') return;
    this.paused = false;
    this.res.resume();
  }

  private onData(ab: ArrayBuffer, isLast: boolean): void {
    // An exception escaping a uWS callback ends the process: a throwing sink or `done` answers 500.
    try {
      this.take(ab, isLast);
    } catch (e) {
      if (this.aborted) return;
      const fail = this.fail;
      try {
        this.sink?.cancel();
      } catch {
        // already failing
      }
      this.mode = 'idle';
      this.answer = null;
      if (fail) this.refuse((close) => fail(e, close));
    }
  }

  private take(ab: ArrayBuffer, isLast: boolean): void {
    if (this.mode === 'done') return;
    const n = ab.byteLength;
    this.received += n;
    if (isLast) this.ended = true;
    switch (this.mode) {
      case 'drain':
        this.drained += n;
        if (isLast) return this.finish(false);
        if (this.drained > this.drainBytes) return this.finish(true);
        return;
      case 'buffer':
        if (this.received > this.opts.maxBytes) return this.overflow();
        if (n > 0) this.chunks.push(Buffer.from(ab.slice(0))); // uWS neuters the ArrayBuffer on return: copy
        if (!isLast) return;
        this.mode = 'done';
        {
          const body = Buffer.concat(this.chunks, this.received);
          const done = this.done!;
          this.chunks = [];
          this.done = null;
          done(body);
        }
        return;
      case 'stream': {
        if (this.received > this.opts.maxBytes) return this.overflow();
        const sink = this.sink!;
        const more = n > 0 ? sink.write(Buffer.from(ab.slice(0))) : true;
        if (this.mode !== 'stream') return; // the sink refused the body (or the client left)
        if (!isLast) {
          if (!more) this.pause();
          return;
        }
        this.mode = 'done';
        this.sink = null;
        sink.end(this.received);
        return;
      }
      default:
        // 'idle': data before the route chose what to do with it (it always chooses synchronously).
        return;
    }
  }

  private overflow(): void {
    this.opts.onTooLarge?.();
    this.sink?.cancel();
    const fail = this.fail!;
    const max = this.opts.maxBytes;
    this.refuse((close) => fail(tooLarge(max), close));
  }

  private finish(close: boolean): void {
    this.mode = 'done';
    this.clearTimer();
    const answer = this.answer;
    if (!answer || this.aborted) return;
    answer(close);
  }

  private clearTimer(): void {
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
  }
}
