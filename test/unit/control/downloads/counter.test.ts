/**
 * The download counter on a real SQLite file (docs/podcasts.md "Download counting"): clients are
 * grouped by address (IPv6 by /64, IPv4-mapped IPv6 as IPv4) plus User-Agent; bytes of one
 * client's responses add up; probes add nothing; a new counter on the same file (a restart) keeps
 * the day's clients; a response running past midnight counts its later bytes on the new day. And
 * the first-minute size of a file with an ID3v2 tag.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { writeFileSync } from 'node:fs';
import path from 'node:path';
import { openDatabase } from '../../../../src/base/db/database.js';
import { DownloadsRepo } from '../../../../src/base/db/downloads-repo.js';
import { DownloadCounter, utcDay } from '../../../../src/control/downloads/counter.js';
import { minuteBytes } from '../../../../src/control/episode-audio/minute-bytes.js';
import { createLogger } from '../../../../src/base/logger.js';
import { tempDir } from '../../../helpers/server.js';

const tmp = tempDir('skylark-counter-');
const db = openDatabase(tmp.dir);
const repo = new DownloadsRepo(db);
const log = createLogger('error');
const now = Date.parse('2026-05-01T12:00:00Z');
const UA = 'Overcast/3.0 (+http://overcast.fm/; iOS podcast app)';
const MINUTE = 1000;

afterAll(() => {
  db.close();
  tmp.cleanup();
});

/** Sends `bytes` to `ip` as one response through `c`. */
function send(c: DownloadCounter, ip: string, bytes: number, episodeId = 'ep_1', ua = UA): void {
  const sink = c.request({ podcastId: 'pod_1', episodeId, minuteBytes: MINUTE, ip, userAgent: ua }, 'GET')?.(bytes);
  sink?.(bytes);
}

const total = (episodeId = 'ep_1') => repo.stats({ podcastId: 'pod_1', episodeId, from: utcDay(now), to: utcDay(now) }).downloads;

describe('DownloadCounter', () => {
  it('groups IPv6 clients by /64 and IPv4-mapped addresses as IPv4', () => {
    const c = new DownloadCounter({ repo, log, now: () => now });
    send(c, '2001:db8:aa:bb::1', 600);
    send(c, '2001:0db8:00aa:00bb:ffff:ffff:ffff:ffff', 600); // same /64: the sum passes the minute
    send(c, '2001:db8:aa:bb::2', 2000); // counted already
    send(c, '2001:db8:aa:bc::1', 999); // another /64, short of the minute
    send(c, '192.0.2.7', 500);
    send(c, '::ffff:192.0.2.7', 500); // the same IPv4 client
    c.flush();
    expect(total()).toBe(2);
  });

  it('adds nothing for probes and keeps the day’s clients across a new counter on the same file', () => {
    const c = new DownloadCounter({ repo, log, now: () => now });
    for (let i = 0; i < 600; i++) expect(c.request({ podcastId: 'pod_1', episodeId: 'ep_2', minuteBytes: MINUTE, ip: '198.51.100.1', userAgent: UA }, 'GET')?.(2)).toBeNull();
    send(c, '198.51.100.1', 900, 'ep_2');
    c.close();
    expect(total('ep_2')).toBe(0);
    const again = new DownloadCounter({ repo, log, now: () => now });
    send(again, '198.51.100.1', 100, 'ep_2'); // 900 before the restart + 100
    send(again, '198.51.100.1', 5000, 'ep_2'); // counted already
    again.close();
    expect(total('ep_2')).toBe(1);
  });

  it('a response running past midnight adds its later bytes to the new day (the day the minute is reached)', () => {
    let clock = Date.parse('2026-05-02T23:59:00Z');
    const c = new DownloadCounter({ repo, log, now: () => clock });
    const sink = c.request({ podcastId: 'pod_1', episodeId: 'ep_4', minuteBytes: MINUTE, ip: '203.0.113.9', userAgent: UA }, 'GET')!(5000)!;
    sink(600);
    clock = Date.parse('2026-05-03T00:00:10Z');
    sink(600); // 600 on each day: neither day had a minute
    c.flush();
    const day = (d: string) => repo.stats({ podcastId: 'pod_1', episodeId: 'ep_4', from: d, to: d }).downloads;
    expect([day('2026-05-02'), day('2026-05-03')]).toEqual([0, 0]);
    sink(500); // 1,100 on the new day
    c.close();
    expect([day('2026-05-02'), day('2026-05-03')]).toEqual([0, 1]);
  });

  it('tracks at most maxClientsPerDay clients a day: made-up User-Agents past it are served uncounted', () => {
    const c = new DownloadCounter({ repo, log, now: () => now, flushMs: 60_000, maxClientsPerDay: 3 });
    for (let i = 0; i < 10; i++) send(c, '198.51.100.9', MINUTE, 'ep_cap', `Overcast/${i}.0 (+http://overcast.fm/; iOS podcast app)`);
    c.close();
    expect(total('ep_cap')).toBe(3);
  });

  it('one address with more than 10 User-Agents on one episode in a day is one client; 10 or fewer are as many', () => {
    const c = new DownloadCounter({ repo, log, now: () => now, flushMs: 60_000 });
    const ua = (i: number) => `Overcast/${i}.0 (+http://overcast.fm/; iOS podcast app)`;
    for (let i = 0; i < 6; i++) send(c, '198.51.100.20', MINUTE, 'ep_ua6', ua(i));
    for (let i = 0; i < 10; i++) send(c, '198.51.100.21', MINUTE, 'ep_ua', ua(i));
    c.flush();
    expect(total('ep_ua6')).toBe(6);
    expect(total('ep_ua')).toBe(10);
    send(c, '198.51.100.21', MINUTE, 'ep_ua', ua(10)); // the 11th: the address is one client
    c.flush();
    expect(total('ep_ua')).toBe(1);
    const again = new DownloadCounter({ repo, log, now: () => now, flushMs: 60_000 }); // a restart the same day
    for (let i = 0; i < 30; i++) send(again, '198.51.100.21', MINUTE, 'ep_ua', ua(i));
    for (let i = 0; i < 30; i++) send(again, '198.51.100.22', 100, 'ep_ua', ua(i)); // 30 × 100 bytes: one client past the minute
    again.close();
    expect(total('ep_ua')).toBe(2);
  });

  it('shares the daily client cap fairly per podcast: one podcast\'s flood does not stop another\'s counting', () => {
    const day = Date.parse('2026-05-07T12:00:00Z'); // a day of its own: no clients of the other tests
    const c = new DownloadCounter({ repo, log, now: () => day, flushMs: 60_000, maxClientsPerDay: 20 });
    // Podcast 1 fills the cap with clients that never reach the first minute.
    for (let i = 0; i < 40; i++) send(c, `203.0.113.${i}`, 10, 'ep_flood');
    const sink = (ip: string) => c.request({ podcastId: 'pod_2', episodeId: 'ep_other', minuteBytes: MINUTE, ip, userAgent: UA }, 'GET')!(5000)!;
    for (let i = 0; i < 5; i++) sink(`192.0.2.${100 + i}`)(MINUTE);
    c.close();
    expect(repo.stats({ podcastId: 'pod_2', episodeId: 'ep_other', from: utcDay(day), to: utcDay(day) }).downloads).toBe(5);
  });

  it('counts bots as bot requests', () => {
    const c = new DownloadCounter({ repo, log, now: () => now });
    expect(c.request({ podcastId: 'pod_1', episodeId: 'ep_3', minuteBytes: MINUTE, ip: '192.0.2.1', userAgent: 'curl/8.5.0' }, 'GET')).toBeUndefined();
    expect(c.request({ podcastId: 'pod_1', episodeId: 'ep_3', minuteBytes: MINUTE, ip: '192.0.2.1', userAgent: '' }, 'HEAD')).toBeUndefined();
    c.close();
    expect(repo.stats({ podcastId: 'pod_1', episodeId: 'ep_3', from: utcDay(now), to: utcDay(now) })).toMatchObject({ downloads: 0, botRequests: 2 });
  });
});

describe('minuteBytes', () => {
  it('is the ID3v2 tag plus 60 s at the average bitrate, capped at the size', () => {
    const tag = Buffer.alloc(10 + 300);
    tag.write('ID3', 0, 'latin1');
    tag[3] = 3;
    tag[9] = 300 & 0x7f; // synchsafe 300 = 0x02 0x2c
    tag[8] = 300 >> 7;
    const file = path.join(tmp.dir, 'tagged.mp3');
    writeFileSync(file, Buffer.concat([tag, Buffer.alloc(120 * 1000, 0xff)])); // 120 s of 1,000 bytes/s after the tag
    expect(minuteBytes(file, 310 + 120_000, 120)).toBe(310 + 60_000);
    expect(minuteBytes(file, 310 + 120_000, 30)).toBe(310 + 120_000); // a half-minute file: all of it
    expect(minuteBytes(file, 310 + 120_000, null)).toBe(310 + 120_000);
  });
});
