/**
 * The dashboard's static assets, every one served by Skylark (no CDN): the stylesheet and the small
 * page scripts from `src/control/dashboard/assets/`, and hls.js from `node_modules/hls.js/dist/hls.min.js`.
 * They are read once at start, and served at content-hashed URLs
 * (`/dashboard/assets/<name>.<hash>.<ext>`) with `Cache-Control: immutable`: a page load after the
 * first costs one HTML request. Bytes are pre-encoded once (uWS rule 5).
 */
import { createHash } from 'node:crypto';
import { existsSync, readFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import type { HttpServer, RawReply } from '../../base/http/server.js';
import type { Logger } from '../../base/logger.js';

/** The URL of each asset, as pages link them. */
export interface AssetUrls {
  css: string;
  common: string;
  stream: string;
  webhooks: string;
  upload: string;
  /** The site icon (SVG), linked by every page and also answered at `/favicon.ico`. */
  icon: string;
  /** "Go live from this browser" (WHIP) on the stream page. */
  golive: string;
  hls: string;
}

const FILES: Record<Exclude<keyof AssetUrls, 'hls'>, string> = {
  css: 'dashboard.css',
  common: 'common.js',
  stream: 'stream.js',
  webhooks: 'webhooks.js',
  upload: 'upload.js',
  icon: 'icon.svg',
  golive: 'golive.js',
};

const TYPES: Record<string, string> = { '.css': 'text/css; charset=utf-8', '.js': 'text/javascript; charset=utf-8', '.svg': 'image/svg+xml' };

/**
 * The folder holding the asset sources: next to this module when run from `src/` (tests, tsx), or
 * `src/control/dashboard/assets` of the checkout when run from the compiled `dist/`.
 */
function assetsDir(): string {
  const here = path.dirname(fileURLToPath(import.meta.url));
  const beside = path.join(here, 'assets');
  if (existsSync(path.join(beside, FILES.css))) return beside;
  return path.resolve(here, '..', '..', '..', 'src', 'control', 'dashboard', 'assets');
}

/** hls.js's minified browser build from node_modules. @throws Error when hls.js is not installed */
function hlsPath(): string {
  return createRequire(import.meta.url).resolve('hls.js/dist/hls.min.js');
}

/**
 * Reads every asset, registers `GET /dashboard/assets/:file` (and `/favicon.ico`) and returns their URLs. A missing
 * hls.js only disables the player (logged).
 * @throws Error when one of the dashboard's own assets is missing (a broken checkout fails at start, not per request)
 */
export function registerAssets(http: HttpServer, log: Logger): AssetUrls {
  const byName = new Map<string, { type: string; body: Uint8Array }>();
  const add = (file: string, body: Uint8Array): string => {
    const ext = path.extname(file);
    const hash = createHash('sha256').update(body).digest('hex').slice(0, 12);
    const name = `${path.basename(file, ext)}.${hash}${ext}`;
    byName.set(name, { type: TYPES[ext] ?? 'application/octet-stream', body });
    return `/dashboard/assets/${name}`;
  };
  const dir = assetsDir();
  const urls = {} as AssetUrls;
  for (const [key, file] of Object.entries(FILES) as Array<[keyof typeof FILES, string]>) urls[key] = add(file, readFileSync(path.join(dir, file)));
  let hls: Uint8Array;
  try {
    hls = readFileSync(hlsPath());
  } catch (e) {
    // hls.js missing (an install without it): the dashboard still works, its player says why not.
    log.warn('hls.js not found: the dashboard player is disabled', { err: e instanceof Error ? e.message : String(e) });
    hls = Buffer.from('/* hls.js is not installed: the dashboard player cannot play. */\n');
  }
  urls.hls = add('hls.min.js', hls);

  const notFound: RawReply = { status: '404 Not Found', headers: [['Content-Type', 'text/plain; charset=utf-8'], ['Cache-Control', 'no-store']], body: Buffer.from('Not found\n') };
  const replies = new Map<string, RawReply>();
  for (const [name, a] of byName) {
    replies.set(name, {
      status: '200 OK',
      headers: [
        ['Content-Type', a.type],
        ['Cache-Control', 'public, max-age=31536000, immutable'],
        ['X-Content-Type-Options', 'nosniff'],
      ],
      body: a.body,
    });
  }
  http.raw('get', '/dashboard/assets/:file', (params) => replies.get(params[0] ?? '') ?? notFound);
  registerFavicon(http, byName.get(path.basename(urls.icon))!.body);
  return urls;
}

/**
 * `GET /favicon.ico`: browsers ask for it on any page they show (an API answer, the OAuth pages),
 * whatever the page links. It answers the site icon as SVG (`image/svg+xml`, which browsers accept
 * under that name), cached for a day: not a 404 in every browser console.
 */
function registerFavicon(http: HttpServer, svg: Uint8Array): void {
  const reply: RawReply = {
    status: '200 OK',
    headers: [
      ['Content-Type', 'image/svg+xml'],
      ['Cache-Control', 'public, max-age=86400'],
      ['X-Content-Type-Options', 'nosniff'],
    ],
    body: svg,
  };
  http.raw('get', '/favicon.ico', () => reply);
}
