/**
 * Progressive (Icecast-style) listening (docs/behaviour.md §10 "Listening", §13):
 * - `GET|HEAD /listen/<stream_id>.<ext>` — the passthrough layer (the ingest, not re-encoded);
 * - `GET|HEAD /listen/<stream_id>/<kbps>.<ext>` — a ladder layer by its nominal bitrate;
 * `ext` is the stream's codec: `mp3` (`audio/mpeg`), `aac` (`audio/aac`, ADTS), `opus`
 * (`audio/ogg`, Ogg Opus); another one is 404. One long response per listener from a shared
 * mount per layer (src/delivery/progressive/mount.ts): a 2–4 s burst, then real time; ICY metadata with
 * `Icy-MetaData: 1`. Every answer carries `icy-name` (the stream's title), `icy-br` (the layer's
 * kbps), `Cache-Control: no-cache, no-store` and `Access-Control-Allow-Origin: *`.
 *
 * The same handlers serve on the main thread (`registerListenRoutes`,
 * src/delivery/progressive/main-routes.ts: the hubs themselves, the registry) and on a worker
 * thread (`registerListenHandlers` with the worker's mirror, its mounts over the main thread's
 * shared chunk queues, its session batches: src/delivery/threads/worker.ts); the connection caps
 * are counted node-wide in shared memory (src/delivery/listeners/shared-counter.ts).
 *
 * 404 before the stream's passthrough layer has audio and after the stream ended. `playback:
 * "token"` streams need `?token=<listener token>` (401 without, 403 invalid/expired/other stream).
 * Each GET is a listener (`protocol: "icecast"`) in the registry from connect to close, with its
 * country and user agent. Connections are capped per client address and in total
 * (`listenMaxConnectionsPerIp`, `listenMaxConnections`: 429 with `Retry-After`). A listener more
 * than 10 s behind is disconnected (`listen_slow_client`). A connection that stops qualifying is
 * closed within a few seconds (docs/listeners.md "Connections that stop qualifying"): its stream
 * was deleted, or it turned to `playback: "token"` and the connection brought no valid token, or
 * its token expired.
 */
import type { BlockList } from 'node:net';
import type { HttpServer, ProgressiveAnswer, ProgressiveClient, ProgressiveRequest, ProgressiveSink, RawReply } from '../../base/http/server.js';
import { errorBody, NO_CLIENT, statusLine, streamedResponse, YIELD } from '../../base/http/server.js';
import { ApiError } from '../../base/errors/errors.js';
import type { ErrorCode } from '../../base/errors/codes.js';
import type { Limits } from '../../base/limits/limits.js';
import type { Logger } from '../../base/logger.js';
import { tokenAdmitted, type ListenerTokens } from '../../base/auth/listener-tokens.js';
import { PUBLISHABLE_REFUSED, queryParam, type StreamPolicy } from '../listeners/hls-access.js';
import { clientAddress } from '../../base/http/client-address.js';
import { ownString, TooManyListenersError } from '../listeners/session.js';
import type { SharedAddressCounter } from '../listeners/shared-counter.js';
import { ICY_METAINT } from './icy.js';
import { Mount, MountListener, OWNER_FLAG, type LeaveReason, type ListenSink } from './mount.js';

/** One layer as listening sees it. */
export interface ListenLayerView {
  readonly name: string;
  /** Nominal bitrate (kbps): the `/<kbps>.<ext>` of its URL. */
  readonly kbps: number;
  readonly ready: boolean;
  readonly ended: boolean;
  readonly failed: boolean;
}

/** One stream as listening sees it. */
export interface ListenStreamView {
  readonly ended: boolean;
  /** The ingest codec: the one extension served. */
  readonly codec: string;
  /** The top (passthrough) layer has audio. */
  readonly playable: boolean;
  /** Top first. */
  layers(): Iterable<ListenLayerView>;
}

/**
 * What the listening handlers need of the thread they run on. `S` is a listening connection's
 * session as the thread keeps it: the registry's `Session` on the main thread, a handle in the
 * batches on a worker thread (src/delivery/listeners/remote.ts); the connection keeps it as it is
 * (no wrapper object per listener).
 */
export interface ListenContext<S = unknown> {
  log: Logger;
  limits: Pick<Limits, 'hit'>;
  /** Connections per client address and in total, node-wide. */
  caps: SharedAddressCounter;
  trusted: BlockList;
  tokens: ListenerTokens;
  policy(streamId: string): StreamPolicy | null;
  /**
   * The station identity headers of a stream (docs/icecast.md "Station identity"): `icy-name` =
   * its title, `icy-description`/`icy-genre`/`icy-url` from its metadata when set.
   */
  station(streamId: string): ReadonlyArray<readonly [string, string]>;
  stream(streamId: string): ListenStreamView | undefined;
  /** The open mount of a layer (made on first use). */
  mount(streamId: string, layer: ListenLayerView): Mount;
  /** The node tracks MAX_LISTENERS already. */
  full(): boolean;
  /** A listening connection's session opens (`key` '': see `JoinInfo.key`). @throws TooManyListenersError when the node is full */
  open(j: { streamId: string; accountId: string; key: string; ip: string; userAgent: string | null }): S;
  /** The listener of session `s` took audio. */
  seen(s: S): void;
  /** The connection of session `s` closed. */
  close(s: S): void;
  /** Counts the requests answered (tests: which thread served). */
  counts?: { listen: number };
  /** Answers `?start=<t>` (progressive catch-up, src/delivery/catch-up/progressive.ts); absent: the request is left to the main thread. */
  catchUp?: ((req: ProgressiveRequest, id: string, kbps: number | null, ext: string) => ProgressiveAnswer) | undefined;
}

const CONTENT_TYPES: Record<string, string> = { mp3: 'audio/mpeg', aac: 'audio/aac', opus: 'audio/ogg' };
const JSON_HEADERS = [['Content-Type', 'application/json; charset=utf-8'], ['Cache-Control', 'no-cache, no-store'], ['Access-Control-Allow-Origin', '*']] as const;
/** Seconds a client over a connection cap is told to wait. */
const RETRY_AFTER_S = '5';
/** How often open connections are checked against their stream's playback rule (ms). */
export const QUALIFY_SWEEP_MS = 1000;

/** Header values are sent as they are: no control characters (no header injection). */
const headerSafe = (s: string) => s.replace(/[\u0000-\u001f\u007f]/g, ' ');

const refuse = (status: number, code: ErrorCode, message: string, requestId: string, extra: ReadonlyArray<readonly [string, string]> = []): RawReply => ({
  status: statusLine(status),
  headers: [...JSON_HEADERS, ...extra],
  body: Buffer.from(JSON.stringify(errorBody(new ApiError(code, message, { status }), requestId))),
});

/**
 * The listening of one thread: its context and the mounts its connections were added to (the
 * qualify sweep walks their listeners: no set of connections of its own).
 */
interface ListenRoom<S> {
  readonly c: ListenContext<S>;
  readonly mounts: Set<Mount>;
}

/**
 * Registers the listening routes of `c` on `http` (either thread). Returns what stops the sweep
 * that closes connections which no longer qualify (see the file comment).
 */
export function registerListenHandlers<S>(http: HttpServer, c: ListenContext<S>): { close(): void } {
  const room: ListenRoom<S> = { c, mounts: new Set() };
  const timer = setInterval(() => {
    if (room.mounts.size > 0) sweepQualified(room);
  }, QUALIFY_SWEEP_MS);
  timer.unref();

  const file = /^([A-Za-z0-9_-]{1,64})\.([a-z0-9]{1,8})$/;
  http.progressive('/listen/:file', (req) => {
    const m = file.exec(req.params[0]!);
    if (!m) return refuse(404, 'resource_missing', 'No such listening URL.', req.requestId);
    return listenAnswer(room, req, m[1]!, null, m[2]!);
  });
  http.progressive('/listen/:id/:file', (req) => {
    const m = file.exec(req.params[1]!);
    const id = req.params[0]!;
    if (!m || !/^\d{1,5}$/.test(m[1]!) || !/^[A-Za-z0-9_-]{1,64}$/.test(id)) return refuse(404, 'resource_missing', 'No such listening URL.', req.requestId);
    return listenAnswer(room, req, id, Number(m[1]), m[2]!);
  });
  return {
    close() {
      clearInterval(timer);
      room.mounts.clear();
    },
  };
}

/** Closes the open connections whose stream was deleted, or needs a token they do not carry (any more). */
function sweepQualified<S>(room: ListenRoom<S>): void {
  const { c } = room;
  const now = Date.now();
  const policies = new Map<string, StreamPolicy | null>();
  for (const m of [...room.mounts]) {
    if (!m.open) {
      room.mounts.delete(m);
      continue;
    }
    if (m.size === 0) continue; // lingering without listeners: nothing to judge
    let pol = policies.get(m.streamId);
    try {
      if (pol === undefined) policies.set(m.streamId, (pol = c.policy(m.streamId)));
    } catch (e) {
      // The policy could not be read (database): judged again at the next sweep.
      c.log.warn('listening: stream policy unreadable', { streamId: m.streamId, err: (e as Error).message });
      return;
    }
    if (pol && pol.playback !== 'token') continue;
    for (const l of m.clients()) {
      if (!(l instanceof ListenConnection)) continue;
      if (!pol || l.tokenExpiresAt === null || l.tokenExpiresAt <= now || (l.tokenPublishable && !pol.publishableKeyTokens)) l.close();
    }
  }
}

/** The layer `kbps` names (null: the passthrough, top layer) when it can be listened to now, else undefined. */
function listenLayer(s: ListenStreamView | undefined, kbps: number | null, ext: string): ListenLayerView | undefined {
  if (!s || s.ended || !s.playable || CONTENT_TYPES[ext] === undefined || s.codec !== ext) return undefined;
  for (const l of s.layers()) {
    if (kbps === null || (l.kbps === kbps && !l.failed)) return l.ready && !l.ended ? l : undefined;
  }
  return undefined;
}

/**
 * The `?token=` check of a stream (docs/behaviour.md §3, §13): a refusal, or when the valid
 * listener token the URL carried expires (ms since the epoch; null: none — a public stream needs
 * none) and whether it was minted with a publishable key (a token stream refuses those unless it
 * allows them).
 */
export function tokenCheck<S>(c: ListenContext<S>, req: ProgressiveRequest, id: string, pol: StreamPolicy): { refused: RawReply } | { expiresAt: number | null; publishable: boolean } {
  const { requestId } = req;
  const token = queryParam(req.query, 'token');
  if (pol.playback === 'token') {
    if (token === '') return { refused: refuse(401, 'missing_token', 'This stream needs a listener token: add ?token=<token> to the URL.', requestId, [['WWW-Authenticate', 'Bearer realm="listener"']]) };
    const r = c.tokens.verifySync(token);
    if (!r.ok && r.reason === 'expired') return { refused: refuse(403, 'token_expired', 'The listener token has expired; get a new one.', requestId) };
    if (!r.ok) return { refused: refuse(403, 'invalid_token', 'The listener token is malformed or its signature is invalid.', requestId) };
    if (r.claims.streamId !== id) return { refused: refuse(403, 'invalid_token', 'The listener token is for another stream.', requestId) };
    if (!tokenAdmitted(r.claims, pol.publishableKeyTokens)) return { refused: refuse(403, 'invalid_token', PUBLISHABLE_REFUSED, requestId) };
    return { expiresAt: r.claims.expiresAt, publishable: !tokenAdmitted(r.claims, false) };
  }
  if (token === '') return { expiresAt: null, publishable: false };
  // A public stream needs none, but a valid one keeps the connection if the stream turns to tokens.
  const r = c.tokens.verifySync(token);
  const valid = r.ok && r.claims.streamId === id;
  return { expiresAt: valid ? r.claims.expiresAt : null, publishable: valid && !tokenAdmitted(r.claims, false) };
}

/** The answer to one `GET|HEAD /listen/…`: a refusal, or the response headers and what opens the listener. */
function listenAnswer<S>(room: ListenRoom<S>, req: ProgressiveRequest, id: string, kbps: number | null, ext: string): ProgressiveAnswer {
  const { c } = room;
  const { requestId } = req;
  if (queryParam(req.query, 'start') !== '') return c.catchUp ? c.catchUp(req, id, kbps, ext) : YIELD;
  if (c.counts) c.counts.listen++;
  const notFound = () => refuse(404, 'resource_missing', `No live listening stream at this URL for stream '${id}'.`, requestId);
  const layer = listenLayer(c.stream(id), kbps, ext);
  if (!layer) return notFound();
  const pol = c.policy(id);
  if (!pol) return notFound();
  const tok = tokenCheck(c, req, id, pol);
  if ('refused' in tok) return tok.refused;
  const icy = req.header('icy-metadata') === '1';
  const headers: Array<readonly [string, string]> = [
    ['Content-Type', CONTENT_TYPES[ext]!],
    ['Cache-Control', 'no-cache, no-store'],
    ['Access-Control-Allow-Origin', '*'],
    ['Access-Control-Expose-Headers', 'icy-name, icy-description, icy-genre, icy-url, icy-br, icy-metaint'],
    ...c.station(id),
    ['icy-br', String(layer.kbps)],
  ];
  if (icy) headers.push(['icy-metaint', String(ICY_METAINT)]);
  if (req.method === 'HEAD') return { stream: { headers, open: () => NO_CLIENT } };

  // A copy of its own: the cap's table and the connection keep it (a slice would keep the header's text).
  const ip = ownString(clientAddress(req.remoteAddress, req.header('x-forwarded-for'), c.trusted));
  const cap = c.caps.tryAcquire(ip);
  if (cap !== 'ok') {
    c.limits.hit(cap === 'total' ? 'listen_connections' : 'listen_connections_per_ip', ip);
    const which = cap === 'total' ? 'This node has as many listening connections as it takes' : 'This address has as many listening connections as it may';
    return refuse(429, 'too_many_connections', `${which}; retry later.`, requestId, [['Retry-After', RETRY_AFTER_S]]);
  }
  if (c.full()) {
    c.caps.release(ip);
    return refuse(503, 'listener_capacity', 'This node serves as many listeners as it can; try again later.', requestId);
  }
  const listener: Admitted = { streamId: id, accountId: pol.accountId, layer, icy, ip, userAgent: req.header('user-agent') || null, tokenExpiresAt: tok.expiresAt, tokenPublishable: tok.publishable };
  return { stream: { headers, sink: () => new HttpListenConnection(room, listener), open: (sink) => openListener(room, listener, sink) } };
}

/** A listener admitted by `listenAnswer` (its connection cap taken), before its body starts. */
interface Admitted {
  streamId: string;
  accountId: string;
  layer: ListenLayerView;
  icy: boolean;
  ip: string;
  userAgent: string | null;
  tokenExpiresAt: number | null;
  /** Its token was minted with a publishable key (docs/behaviour.md §13). */
  tokenPublishable: boolean;
}

/** The connection's flags above the mount's (`MountListener.flags`). */
const ICY = OWNER_FLAG;
const PUBLISHABLE = OWNER_FLAG << 1;
/** `finish` ran: what the connection took was given back. */
const DONE = OWNER_FLAG << 2;

/**
 * One listening connection from its body's start to its end, as one object with its methods on
 * the prototype (a listener lives for hours, and every object or closure per listener is memory
 * per listener: docs/bench/listener-memory.md): the mount's listener (`MountListener`: position
 * and ICY state), the HTTP layer's client (`ProgressiveClient`: gone, writable), what the qualify
 * sweep reads (its token's expiry), and what it took (a session, a connection cap), given back
 * once by `finish`. Its stream id is its mount's. Where its bytes go is its subclass's: the HTTP
 * response it is itself (`HttpListenConnection`), or a sink it was given (`SinkListenConnection`,
 * the Icecast port's sockets). The session is the thread's `S` (see `ListenContext`).
 */
abstract class ListenConnection extends MountListener implements ProgressiveClient {
  readonly tokenExpiresAt: number | null;
  /** The client address (the connection cap's key: one string per address, src/delivery/listeners/shared-counter.ts `key`). */
  private readonly ip: string;
  session: unknown = undefined;
  private readonly room: ListenRoom<unknown>;

  constructor(room: ListenRoom<unknown>, l: Admitted) {
    super();
    this.room = room;
    this.tokenExpiresAt = l.tokenExpiresAt;
    if (l.tokenPublishable) this.flags |= PUBLISHABLE;
    if (l.icy) this.flags |= ICY;
    this.ip = room.c.caps.key(l.ip);
  }

  /** Interleave ICY metadata (`Icy-MetaData: 1`). */
  get icy(): boolean {
    return (this.flags & ICY) !== 0;
  }

  /** Its token was minted with a publishable key (docs/behaviour.md §13). */
  get tokenPublishable(): boolean {
    return (this.flags & PUBLISHABLE) !== 0;
  }

  /** The qualify sweep closes it (the HTTP layer then calls `gone`). */
  abstract close(): void;

  /** The listener took audio (the mount says so). */
  override seen(): void {
    if (this.session !== undefined) this.room.c.seen(this.session);
  }

  /** The mount let the listener go. */
  left(reason: LeaveReason): void {
    if (reason === 'slow') this.room.c.limits.hit('listen_slow_client', this.ip, { streamId: this.mount?.streamId ?? '' });
    this.finish();
  }

  /** The client went away (the HTTP layer says so). */
  gone(): void {
    this.remove();
    this.finish();
  }

  /** Gives back what the connection took, once. */
  finish(): void {
    if ((this.flags & DONE) !== 0) return;
    this.flags |= DONE;
    const c = this.room.c;
    if (this.session !== undefined) c.close(this.session);
    c.caps.release(this.ip);
  }
}

/**
 * A listening connection that is its own HTTP response (`streamedResponse`): one object per
 * listener for the connection, its sink and its client (`ProgressiveStream.sink`).
 */
class HttpListenConnection extends streamedResponse(ListenConnection) {
  /** Its bytes go to the response it is. */
  get sink(): ListenSink {
    return this;
  }
}

/** A listening connection over a sink it was given (the Icecast port's sockets, src/live/ingest/icecast-listeners.ts). */
class SinkListenConnection extends ListenConnection {
  constructor(
    room: ListenRoom<unknown>,
    l: Admitted,
    readonly sink: ProgressiveSink,
  ) {
    super(room, l);
  }

  close(): void {
    this.sink.close();
  }
}

/**
 * Starts a listener's body: its session, its place on the layer's mount (where the qualify sweep
 * finds it). `sink` is the connection itself when the HTTP layer made it (the stream's `sink`
 * factory), else the sink of another transport. Returns the connection, which the HTTP layer
 * tells when the client went away; everything it took (session, cap) is given back once.
 */
function openListener<S>(room: ListenRoom<S>, l: Admitted, sink: ProgressiveSink): ProgressiveClient {
  const { c } = room;
  const conn = sink instanceof HttpListenConnection ? sink : new SinkListenConnection(room, l, sink);
  try {
    // No key: nobody looks a progressive session up by one (the registry's listener id serves as both).
    conn.session = c.open({ streamId: l.streamId, accountId: l.accountId, key: '', ip: l.ip, userAgent: l.userAgent });
  } catch (e) {
    conn.finish();
    if (e instanceof TooManyListenersError) {
      sink.close();
      return NO_CLIENT;
    }
    throw e;
  }
  try {
    const mount = c.mount(l.streamId, l.layer);
    room.mounts.add(mount);
    mount.add(conn);
  } catch (e) {
    conn.finish();
    throw e;
  }
  return conn;
}
