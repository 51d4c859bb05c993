/**
 * Who a podcast client is, from its User-Agent (docs/podcasts.md "Download counting"): the Open
 * Podcast Analytics Working Group's list (`opawg/user-agents-v2`, MIT, shipped in data/opawg/ and
 * refreshed by scripts/refresh-opawg.mjs) matched by that list's own deterministic rule (bots,
 * then apps, then libraries, then browsers: the first entry whose pattern matches), plus `isbot`
 * for bots the list does not name. A client the list names as an app is never a bot (some apps
 * put a URL in their User-Agent, which `isbot` takes for a crawler); Skylark's own User-Agents
 * (`Skylark…`) are bots. The device is the list's first matching `devices` entry; the OS follows
 * from the device.
 */
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { isbot } from 'isbot';

/** What a User-Agent says about its client. Names are the list's (`"Apple Podcasts"`, `"Apple iPhone"`); null = unknown. */
export interface ClientKind {
  bot: boolean;
  /** App, library or browser name. */
  app: string | null;
  device: string | null;
  os: string | null;
}

interface Entry {
  name: string;
  re: RegExp;
}

// src/control/downloads or dist/control/downloads → data/opawg at the repository root (shipped, never downloaded).
const DATA = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..', '..', '..', 'data', 'opawg');

function load(file: string): Entry[] {
  const doc = JSON.parse(readFileSync(path.join(DATA, `${file}.json`), 'utf8')) as { entries: Array<{ name: string; pattern: string }> };
  return doc.entries.map((e) => ({ name: e.name, re: new RegExp(e.pattern) }));
}

let lists: { bots: Entry[]; apps: Entry[]; libraries: Entry[]; browsers: Entry[]; devices: Entry[] } | null = null;
/** Loaded on first use (a few ms): servers that never serve an episode never pay for it. */
const data = () => (lists ??= { bots: load('bots'), apps: load('apps'), libraries: load('libraries'), browsers: load('browsers'), devices: load('devices') });

/** The OS of a device of the list (its device names are stable; others: unknown). */
const OS_OF_DEVICE: Record<string, string> = {
  'Apple iPhone': 'iOS',
  'Apple iPad': 'iPadOS',
  'Apple iPod': 'iOS',
  'Apple Watch': 'watchOS',
  'Apple TV': 'tvOS',
  'Apple HomePod': 'audioOS',
  'Apple Computer': 'macOS',
  'Android Phone': 'Android',
  'Android Tablet': 'Android',
  'Google Chromebook': 'ChromeOS',
  'Windows Computer': 'Windows',
};

/** Skylark's own requests (webhooks, tools): `Skylark…`. */
const OWN = /^Skylark\b/i;

const first = (list: Entry[], ua: string) => {
  for (const e of list) if (e.re.test(ua)) return e.name;
  return null;
};

const cache = new Map<string, ClientKind>();
/** Distinct User-Agents remembered (the cache is emptied when full). */
const CACHE_MAX = 10_000;

/** Classifies `userAgent` (newlines removed, at most 1,000 characters read). Results are cached per User-Agent. */
export function classifyUserAgent(userAgent: string): ClientKind {
  const hit = cache.get(userAgent);
  if (hit) return hit;
  const ua = userAgent.slice(0, 1000).replace(/[\r\n]/g, '');
  const d = data();
  let kind: ClientKind;
  if (ua === '' || OWN.test(ua)) kind = { bot: true, app: ua === '' ? null : 'Skylark', device: null, os: null };
  else {
    const bot = first(d.bots, ua);
    const app = bot === null ? first(d.apps, ua) : null;
    if (bot !== null || (app === null && isbot(ua))) kind = { bot: true, app: bot, device: null, os: null };
    else {
      const device = first(d.devices, ua);
      kind = { bot: false, app: app ?? first(d.libraries, ua) ?? first(d.browsers, ua), device, os: device ? (OS_OF_DEVICE[device] ?? null) : null };
    }
  }
  if (cache.size >= CACHE_MAX) cache.clear();
  cache.set(userAgent, kind);
  return kind;
}
