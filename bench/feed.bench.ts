/**
 * Feed render time for a podcast with 1,000 published episodes: a real SQLite
 * file with the podcast and its episodes, then (a) a full render — the published episodes read
 * from SQLite and the RSS document built with xmlbuilder2 — as the feed route does whenever
 * anything in the feed changed, and (b) the cached answer the route gives while nothing changed
 * (the change check and the cache lookup). `npx tsx bench/feed.bench.ts` prints the rows.
 */
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import { Bench } from 'tinybench';
import { openDatabase } from '../src/base/db/database.js';
import { PodcastsRepo, type EpisodeRow } from '../src/base/db/podcasts-repo.js';
import { FeedService } from '../src/control/feed/feed-service.js';
import { renderFeed } from '../src/control/feed/render.js';
import { podcastGuidFor } from '../src/control/services/podcasts.js';
import type { BenchRow } from './lib/report.js';

const GROUP = 'Podcast feed (1,000 episodes)';
const EPISODES = 1000;

export async function run(): Promise<BenchRow[]> {
  const dir = mkdtempSync(path.join(tmpdir(), 'skylark-bench-feed-'));
  const db = openDatabase(dir);
  try {
    const repo = new PodcastsRepo(db);
    const urls = { baseUrl: 'https://api.example.com/v2', authUrl: 'https://api.example.com', ingestUrl: 'ingest.example.com:1935', icecastUrl: 'ingest.example.com:8000', cdnUrl: 'https://cdn.example.com' };
    const now = Date.now();
    db.prepare("INSERT INTO accounts (id, name, plan, default_region, created_at) VALUES ('acct_bench', 'Bench', 'paid', 'eu-west-1', ?)").run(now);
    const feedUrl = `${urls.cdnUrl}/feed/pod_bench.xml`;
    repo.insertPodcast({
      id: 'pod_bench', account_id: 'acct_bench', title: 'Bench show', description: 'A show with a long back catalogue. '.repeat(10),
      author: 'Bench Radio', language: 'en', category: 'Technology', explicit: 0, image_url: 'https://example.com/cover.jpg',
      owner_email: 'owner@example.com', owner_name: 'Owner', link: null, type: 'episodic', locked: 0, metadata: '{}', status: 'published',
      podcast_guid: podcastGuidFor(feedUrl), feed_url: feedUrl, created_at: now, updated_at: now,
    });
    repo.tx(() => {
      for (let i = 0; i < EPISODES; i++) {
        const row: EpisodeRow = {
          id: `ep_bench${i}`, account_id: 'acct_bench', podcast_id: 'pod_bench', title: `Episode ${i}: a title of typical length`,
          description: 'Show notes with a few sentences about the guests, the topics & the links. '.repeat(6), status: 'published',
          audio_file: `ep_bench${i}-abcdefgh.mp3`, audio_mime: 'audio/mpeg', audio_size: 40_000_000 + i, audio_duration: 3600 + i,
          audio_updated_at: now, guid: `00000000-0000-4000-8000-${String(i).padStart(12, '0')}`, season: 1 + Math.floor(i / 100),
          episode_number: i + 1, episode_type: 'full', explicit: 0, publish_at: null, published_at: now - (EPISODES - i) * 86_400_000,
          source_stream_id: null, chapters: null, created_at: now, updated_at: now,
        };
        repo.insertEpisode(row);
      }
    });
    const podcast = repo.getPodcastAny('pod_bench')!;
    const feed = new FeedService({ repo, recordingStreams: () => [], urls: () => urls, now: Date.now });
    const first = feed.answer('pod_bench.xml');
    if (first.kind !== 'bytes') throw new Error('the bench feed did not render');
    const bytes = first.body.byteLength;

    const bench = new Bench({ time: 3000, warmupTime: 500 });
    bench.add('render (SQLite read + xmlbuilder2)', () => {
      renderFeed({
        podcast,
        feedUrl,
        episodes: repo.publishedEpisodes('pod_bench'),
        audioUrl: (e) => `${urls.cdnUrl}/media/pod_bench/${e.audio_file}`,
        liveItems: [],
        lastModified: now,
      });
    });
    bench.add('cached answer (change check + cache hit)', () => {
      feed.answer('pod_bench.xml');
    });
    await bench.run();
    const rows: BenchRow[] = [];
    for (const t of bench.tasks) {
      const r = t.result as unknown as { latency?: { mean: number; p99?: number }; mean?: number; p99?: number };
      const mean = r.latency?.mean ?? r.mean ?? NaN;
      const p99 = r.latency?.p99 ?? r.p99 ?? NaN;
      rows.push({ group: GROUP, name: `${t.name}, mean`, value: mean, unit: 'ms', note: `p99 ${p99.toFixed(3)} ms; feed ${Math.round(bytes / 1024)} KiB` });
    }
    return rows;
  } finally {
    db.close();
    rmSync(dir, { recursive: true, force: true });
  }
}

if (import.meta.url === pathToFileURL(process.argv[1] ?? '').href) {
  for (const r of await run()) console.log(`${r.group} | ${r.name}: ${r.value.toFixed(3)} ${r.unit} (${r.note ?? ''})`);
}
