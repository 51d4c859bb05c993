/**
 * HLS probes for the ingest bench: "does this stream produce HLS" checks, and the poller that
 * times publish start → first playable segment (the playlist lists a segment AND that segment
 * answers 200), and → first LL-HLS part.
 *
 * FIRST LL-HLS PART HOOK: `pollFirstPlayable` parses `#EXT-X-PART` (RFC 8216bis §4.4.4.9) in every
 * media playlist it polls, from the first poll. When a playlist lists a part, the part's URI is
 * fetched (with a Range header when it has BYTERANGE) and the first 200/206 sets `firstPartMs`.
 * Until Skylark's playlists carry parts, `firstPartMs` stays null and the bench prints "no
 * EXT-X-PART yet"; nothing needs to change here when LL-HLS lands.
 */
import { get } from './http-check.js';

const text = (b: Uint8Array) => Buffer.from(b).toString('utf8');

/** URIs of the variants and renditions of a multivariant playlist (EXT-X-STREAM-INF lines' URIs, EXT-X-MEDIA URI=…). */
export function variantUris(multivariant: string): string[] {
  const out: string[] = [];
  const lines = multivariant.split('\n').map((l) => l.trim());
  for (let i = 0; i < lines.length; i++) {
    const l = lines[i]!;
    if (l.startsWith('#EXT-X-STREAM-INF')) {
      const uri = lines.slice(i + 1).find((x) => x && !x.startsWith('#'));
      if (uri) out.push(uri);
    } else if (l.startsWith('#EXT-X-MEDIA:')) {
      const m = /URI="([^"]+)"/.exec(l);
      if (m) out.push(m[1]!);
    }
  }
  return [...new Set(out)];
}

/** A media playlist: its segment URIs (in order) and its LL-HLS parts (EXT-X-PART, in order). */
export function parseMedia(playlist: string): { segments: string[]; parts: Array<{ uri: string; range: string | null }> } {
  const segments: string[] = [];
  const parts: Array<{ uri: string; range: string | null }> = [];
  let inf = false;
  for (const raw of playlist.split('\n')) {
    const l = raw.trim();
    if (l.startsWith('#EXTINF:')) inf = true;
    else if (l.startsWith('#EXT-X-PART:')) {
      const uri = /URI="([^"]+)"/.exec(l)?.[1];
      const br = /BYTERANGE="?(\d+)(?:@(\d+))?"?/.exec(l);
      if (uri) parts.push({ uri, range: br ? `bytes=${br[2] ?? 0}-${Number(br[2] ?? 0) + Number(br[1]) - 1}` : null });
    } else if (l && !l.startsWith('#') && inf) {
      segments.push(l);
      inf = false;
    }
  }
  return { segments, parts };
}

/** Whether a Skylark stream's HLS works: multivariant → media playlist lists ≥ 1 segment → the newest segment answers 200 with bytes. */
export async function skylarkHlsOk(hlsUrl: string): Promise<{ ok: boolean; segments: number; why?: string }> {
  try {
    const mv = await get(hlsUrl);
    if (mv.status !== 200) return { ok: false, segments: 0, why: `multivariant ${mv.status}` };
    const uri = variantUris(text(mv.body))[0];
    if (!uri) return { ok: false, segments: 0, why: 'no variant in the multivariant playlist' };
    const mediaUrl = new URL(uri, hlsUrl).toString();
    const mp = await get(mediaUrl);
    if (mp.status !== 200) return { ok: false, segments: 0, why: `media playlist ${mp.status}` };
    const { segments } = parseMedia(text(mp.body));
    if (!segments.length) return { ok: false, segments: 0, why: 'media playlist lists no segment' };
    const seg = await get(new URL(segments[segments.length - 1]!, mediaUrl).toString());
    if (seg.status !== 200 || seg.body.byteLength === 0) return { ok: false, segments: segments.length, why: `segment ${seg.status}` };
    return { ok: true, segments: segments.length };
  } catch (e) {
    return { ok: false, segments: 0, why: (e as Error).message };
  }
}

/** Whether an nginx-rtmp stream's HLS works: `<base>/<name>.m3u8` lists ≥ 1 segment and the newest answers 200. */
export async function nginxHlsOk(playlistUrl: string): Promise<{ ok: boolean; segments: number; why?: string }> {
  try {
    const mp = await get(playlistUrl);
    if (mp.status !== 200) return { ok: false, segments: 0, why: `playlist ${mp.status}` };
    const { segments } = parseMedia(text(mp.body));
    if (!segments.length) return { ok: false, segments: 0, why: 'playlist lists no segment' };
    const seg = await get(new URL(segments[segments.length - 1]!, playlistUrl).toString());
    if (seg.status !== 200 || seg.body.byteLength === 0) return { ok: false, segments: segments.length, why: `segment ${seg.status}` };
    return { ok: true, segments: segments.length };
  } catch (e) {
    return { ok: false, segments: 0, why: (e as Error).message };
  }
}

/** Runs `fn` over `items` with at most `n` at a time. */
export async function mapLimit<T, R>(items: T[], n: number, fn: (t: T, i: number) => Promise<R>): Promise<R[]> {
  const out: R[] = new Array(items.length);
  let next = 0;
  await Promise.all(
    Array.from({ length: Math.min(n, items.length) }, async () => {
      while (next < items.length) {
        const i = next++;
        out[i] = await fn(items[i]!, i);
      }
    }),
  );
  return out;
}

/** What `pollFirstPlayable` saw, in ms from `t0`. */
export interface FirstPlayable {
  /** A media playlist first listed a segment. */
  playlistMs: number | null;
  /** That segment first answered 200 (the "first playable segment"). */
  segmentMs: number | null;
  /** First LL-HLS part listed (EXT-X-PART) AND fetched (200/206); null while playlists carry no parts. */
  firstPartMs: number | null;
  polls: number;
}

/**
 * Polls until a segment is playable (or `timeoutMs`), every `everyMs`. `entry` is either a
 * multivariant playlist (Skylark: `/hls/<id>/index.m3u8`, variants are followed) or a media
 * playlist (nginx-rtmp: `<name>.m3u8`), by `kind`.
 */
export async function pollFirstPlayable(entry: string, kind: 'multivariant' | 'media', t0: number, timeoutMs = 10_000, everyMs = 10): Promise<FirstPlayable> {
  const r: FirstPlayable = { playlistMs: null, segmentMs: null, firstPartMs: null, polls: 0 };
  let mediaUrls: string[] | null = kind === 'media' ? [entry] : null;
  const deadline = t0 + timeoutMs;
  const since = () => performance.now() - t0;
  const fetchOk = async (url: string, range: string | null) => {
    try {
      const res = await fetch(url, { headers: range ? { Range: range } : {}, signal: AbortSignal.timeout(2000) });
      await res.arrayBuffer();
      return res.status === 200 || res.status === 206;
    } catch {
      return false;
    }
  };
  while (performance.now() < deadline && r.segmentMs === null) {
    r.polls++;
    try {
      if (!mediaUrls) {
        const mv = await get(entry, 2000);
        if (mv.status === 200) {
          const uris = variantUris(text(mv.body));
          if (uris.length) mediaUrls = uris.map((u) => new URL(u, entry).toString());
        }
      }
      for (const mediaUrl of mediaUrls ?? []) {
        const mp = await get(mediaUrl, 2000);
        if (mp.status !== 200) continue;
        const { segments, parts } = parseMedia(text(mp.body));
        if (r.firstPartMs === null && parts.length) {
          const part = parts[0]!;
          if (await fetchOk(new URL(part.uri, mediaUrl).toString(), part.range)) r.firstPartMs = since();
        }
        if (segments.length) {
          r.playlistMs ??= since();
          if (await fetchOk(new URL(segments[0]!, mediaUrl).toString(), null)) {
            r.segmentMs = since();
            break;
          }
        }
      }
    } catch {
      /* not there yet */
    }
    if (r.segmentMs === null) await new Promise((res) => setTimeout(res, everyMs));
  }
  return r;
}
