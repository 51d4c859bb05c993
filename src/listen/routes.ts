/**
 * Progressive (Icecast-style) listening (PRODUCT.md §10 "Listening", §13):
 * - `GET|HEAD /listen/<stream_id>.<ext>` — the passthrough layer (the ingest, not re-encoded);
 * - `GET|HEAD /listen/<stream_id>/<kbps>.<ext>` — a ladder layer by its nominal bitrate;
 * `ext` is the stream's codec: `mp3` (`audio/mpeg`), `aac` (`audio/aac`, ADTS), `opus`
 * (`audio/ogg`, Ogg Opus); another one is 404. One long response per listener from a shared
 * mount per layer (src/listen/mount.ts): a 2–4 s burst, then real time; ICY metadata with
 * `Icy-MetaData: 1`. Every answer carries `icy-name` (the stream's title), `icy-br` (the layer's
 * kbps), `Cache-Control: no-cache, no-store` and `Access-Control-Allow-Origin: *`.
 *
 * 404 before the stream's passthrough layer has audio and after the stream ended. `playback:
 * "token"` streams need `?token=<listener token>` (401 without, 403 invalid/expired/other stream).
 * Each GET is a listener (`protocol: "icecast"`) in the registry from connect to close, with its
 * country and user agent. Connections are capped per client address and in total
 * (`listenMaxConnectionsPerIp`, `listenMaxConnections`: 429 with `Retry-After`). A listener more
 * than 10 s behind is disconnected (`listen_slow_client`).
 */
import type { AppContext, Feature } from '../context.js';
import type { HttpServer, ProgressiveAnswer, ProgressiveRequest, RawReply } from '../http/server.js';
import { errorBody, statusLine } from '../http/server.js';
import { ApiError } from '../errors/errors.js';
import type { ErrorCode } from '../errors/codes.js';
import type { Layer, MediaRegistry } from '../media/hub.js';
import type { Listeners } from '../listeners/feature.js';
import { queryParam } from '../listeners/hls-access.js';
import { clientAddress, countryOf } from '../listeners/geo.js';
import { MAX_LISTENERS, TooManyListenersError, type Session } from '../listeners/registry.js';
import { PerAddressCounter } from '../limits/limits.js';
import { randomBase62 } from '../ids.js';
import { ICY_METAINT } from './icy.js';
import { Mount } from './mount.js';

/** What the listening routes are given besides the HTTP server and the media. */
export interface ListenDeps {
  ctx: AppContext;
  listeners: Pick<Listeners, 'registry' | 'access' | 'tokens' | 'trusted'>;
  /**
   * The ICY title of a stream now (`<artist> - <title>`), or null for none. Default: the stream's
   * now playing (PRODUCT.md §11), else its title; a block carries it when it changed.
   */
  nowPlaying?: (streamId: string) => string | null;
}

const CONTENT_TYPES: Record<string, string> = { mp3: 'audio/mpeg', aac: 'audio/aac', opus: 'audio/ogg' };
const JSON_HEADERS = [['Content-Type', 'application/json; charset=utf-8'], ['Cache-Control', 'no-cache, no-store'], ['Access-Control-Allow-Origin', '*']] as const;
/** Seconds a client over a connection cap is told to wait. */
const RETRY_AFTER_S = '5';
/** How long a stream's title is cached (ms); a `stream.now_playing` event drops it at once. */
const TITLE_TTL_MS = 2000;
/** A mount logs its first read-back failure, then every this-many. */
const LOG_EVERY = 100;

/** Header values are sent as they are: no control characters (no header injection). */
const headerSafe = (s: string) => s.replace(/[\u0000-\u001f\u007f]/g, ' ');

/** Registers the listening routes; the returned feature closes every mount at shutdown. */
export function registerListenRoutes(http: HttpServer, media: MediaRegistry, d: ListenDeps): Feature {
  const { ctx, listeners } = d;
  const { registry, access, tokens, trusted } = listeners;
  const log = ctx.log.child('listen');
  const caps = new PerAddressCounter(ctx.config.limits.listenMaxConnections, ctx.config.limits.listenMaxConnectionsPerIp);
  const mounts = new Map<Layer, Mount>();
  const titles = new Map<string, { title: string; until: number }>();

  const titleOf = (id: string): string => {
    const now = ctx.now();
    const c = titles.get(id);
    if (c && c.until > now) return c.title;
    const row = ctx.streams.getAny(id);
    const np = row?.now_playing ? (JSON.parse(row.now_playing) as { title: string; artist: string | null }) : null;
    const title = np ? (np.artist ? `${np.artist} - ${np.title}` : np.title) : (row?.title ?? '');
    if (titles.size > 10_000) titles.clear();
    titles.set(id, { title, until: now + TITLE_TTL_MS });
    return title;
  };
  const nowPlaying = d.nowPlaying ?? ((id: string) => titleOf(id) || null);
  // A change of what plays now reaches the next metadata block, not one up to TITLE_TTL_MS later.
  const unsubscribe = ctx.outbox.subscribe((e) => {
    const o = e.type === 'stream.now_playing' ? (e.data.object as { id?: unknown } | null) : null;
    if (typeof o?.id === 'string') titles.delete(o.id);
  });

  const refuse = (status: number, code: ErrorCode, message: string, requestId: string, extra: ReadonlyArray<readonly [string, string]> = []): RawReply => ({
    status: statusLine(status),
    headers: [...JSON_HEADERS, ...extra],
    body: Buffer.from(JSON.stringify(errorBody(new ApiError(code, message, { status }), requestId))),
  });

  const mountOf = (id: string, layer: Layer): Mount => {
    let m = mounts.get(layer);
    if (m?.open) return m;
    let failures = 0;
    m = new Mount({
      streamId: id,
      layer,
      nowPlaying,
      onError: (e) => {
        if (failures++ % LOG_EVERY === 0) log.warn('listening: a part/segment could not be read back; skipped', { streamId: id, layer: layer.name, err: e.message, failures });
      },
      onDispose: () => {
        if (mounts.get(layer) === m) mounts.delete(layer);
      },
    });
    if (m.open) mounts.set(layer, m);
    return m;
  };

  const handle = (req: ProgressiveRequest, id: string, kbps: number | null, ext: string): ProgressiveAnswer => {
    const { requestId } = req;
    const notFound = () => refuse(404, 'resource_missing', `No live listening stream at this URL for stream '${id}'.`, requestId);
    const hub = media.get(id);
    if (!hub || hub.ended || !hub.top.ready || CONTENT_TYPES[ext] === undefined || hub.opts.codec !== ext) return notFound();
    const layer = kbps === null ? hub.top : hub.layers.find((l) => l.o.kbps === kbps && !l.failed);
    if (!layer || !layer.ready || layer.ended) return notFound();
    const pol = access.policy(id);
    if (!pol) return notFound();
    if (pol.playback === 'token') {
      const token = queryParam(req.query, 'token');
      if (token === '') return refuse(401, 'missing_token', 'This stream needs a listener token: add ?token=<token> to the URL.', requestId, [['WWW-Authenticate', 'Bearer realm="listener"']]);
      const r = tokens.verifySync(token);
      if (!r.ok && r.reason === 'expired') return refuse(403, 'token_expired', 'The listener token has expired; get a new one.', requestId);
      if (!r.ok) return refuse(403, 'invalid_token', 'The listener token is malformed or its signature is invalid.', requestId);
      if (r.claims.streamId !== id) return refuse(403, 'invalid_token', 'The listener token is for another stream.', requestId);
    }
    const icy = req.header('icy-metadata') === '1';
    const headers: Array<readonly [string, string]> = [
      ['Content-Type', CONTENT_TYPES[ext]!],
      ['Cache-Control', 'no-cache, no-store'],
      ['Access-Control-Allow-Origin', '*'],
      ['Access-Control-Expose-Headers', 'icy-name, icy-br, icy-metaint'],
      ['icy-name', headerSafe(titleOf(id))],
      ['icy-br', String(layer.o.kbps)],
    ];
    if (icy) headers.push(['icy-metaint', String(ICY_METAINT)]);
    if (req.method === 'HEAD') return { stream: { headers, open: () => () => {} } };

    const ip = clientAddress(req.remoteAddress, req.header('x-forwarded-for'), trusted);
    const cap = caps.tryAcquire(ip);
    if (cap !== 'ok') {
      ctx.limits.hit(cap === 'total' ? 'listen_connections' : 'listen_connections_per_ip', ip);
      const which = cap === 'total' ? 'This node has as many listening connections as it takes' : 'This address has as many listening connections as it may';
      return refuse(429, 'too_many_connections', `${which}; retry later.`, requestId, [['Retry-After', RETRY_AFTER_S]]);
    }
    if (registry.total() >= MAX_LISTENERS) {
      caps.release(ip);
      return refuse(503, 'listener_capacity', 'This node serves as many listeners as it can; try again later.', requestId);
    }
    const userAgent = req.header('user-agent') || null;
    const country = countryOf(ip);
    return {
      stream: {
        headers,
        open: (sink) => {
          let session: Session | null = null;
          let done = false;
          const finish = () => {
            if (done) return;
            done = true;
            if (session) registry.leave(session);
            caps.release(ip);
          };
          try {
            session = registry.join({ streamId: id, accountId: pol.accountId, key: `icy_${randomBase62(16)}`, protocol: 'icecast', country, userAgent, timeoutMs: 0 });
          } catch (e) {
            finish();
            if (e instanceof TooManyListenersError) {
              sink.close();
              return () => {};
            }
            throw e;
          }
          const s = session;
          let h: { remove(): void };
          try {
            h = mountOf(id, layer).add({
              sink,
              icy,
              seen: () => registry.touch(id, s.key),
              left: (reason) => {
                if (reason === 'slow') ctx.limits.hit('listen_slow_client', ip, { streamId: id });
                finish();
              },
            });
          } catch (e) {
            finish();
            throw e;
          }
          return () => {
            h.remove();
            finish();
          };
        },
      },
    };
  };

  const file = /^([A-Za-z0-9_-]{1,64})\.([a-z0-9]{1,8})$/;
  http.progressive('/listen/:file', (req) => {
    const m = file.exec(req.params[0]!);
    if (!m) return refuse(404, 'resource_missing', 'No such listening URL.', req.requestId);
    return handle(req, m[1]!, null, m[2]!);
  });
  http.progressive('/listen/:id/:file', (req) => {
    const m = file.exec(req.params[1]!);
    const id = req.params[0]!;
    if (!m || !/^\d{1,5}$/.test(m[1]!) || !/^[A-Za-z0-9_-]{1,64}$/.test(id)) return refuse(404, 'resource_missing', 'No such listening URL.', req.requestId);
    return handle(req, id, Number(m[1]), m[2]!);
  });

  return {
    close() {
      unsubscribe();
      for (const m of [...mounts.values()]) m.close();
      mounts.clear();
    },
  };
}
