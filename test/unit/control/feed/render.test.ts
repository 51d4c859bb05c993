/**
 * The feed renderer and its helpers, without a server: Apple categories, `podcast:guid` (UUIDv5),
 * escaping of hostile text (the output stays well-formed XML), item order and optional tags.
 */
import { describe, expect, it } from 'vitest';
import { parseFeed } from 'podcast-partytime';
import { renderFeed } from '../../../../src/control/feed/render.js';
import { isAppleCategory, splitCategory } from '../../../../src/control/feed/categories.js';
import { podcastGuidFor, uuidV5 } from '../../../../src/control/services/podcasts.js';
import type { EpisodeRow, PodcastRow } from '../../../../src/base/db/podcasts-repo.js';

const podcast = (over: Partial<PodcastRow> = {}): PodcastRow => ({
  id: 'pod_1', account_id: 'acct_1', title: 'T', description: '', author: null, language: 'en', category: null, explicit: 0,
  image_url: null, owner_email: null, owner_name: null, link: null, type: 'episodic', locked: 0, metadata: '{}', status: 'published',
  podcast_guid: podcastGuidFor('https://cdn.example.com/feed/pod_1.xml'), feed_url: 'https://cdn.example.com/feed/pod_1.xml', created_at: 0, updated_at: 0,
  ...over,
});
const episode = (i: number, over: Partial<EpisodeRow> = {}): EpisodeRow => ({
  id: `ep_${i}`, account_id: 'acct_1', podcast_id: 'pod_1', title: `E${i}`, description: '', status: 'published', audio_file: `ep_${i}-abcdefgh.mp3`,
  audio_mime: 'audio/mpeg', audio_size: 1000 + i, audio_duration: 61.6, audio_updated_at: 0, guid: `g-${i}`, season: null, episode_number: null,
  episode_type: 'full', explicit: 0, publish_at: null, published_at: 1_700_000_000_000 - i * 1000, source_stream_id: null, chapters: null, created_at: 0, updated_at: 0,
  ...over,
});
const render = (p: PodcastRow, eps: EpisodeRow[]) =>
  Buffer.from(renderFeed({ podcast: p, feedUrl: p.feed_url, episodes: eps, audioUrl: (e) => `https://cdn.example.com/media/pod_1/${e.audio_file}`, liveItems: [], lastModified: 1_700_000_000_000 })).toString('utf8');

describe('categories', () => {
  it('accepts Apple names with an optional subcategory, exactly spelled', () => {
    expect(isAppleCategory('Technology')).toBe(true);
    expect(isAppleCategory('Society & Culture > Documentary')).toBe(true);
    expect(isAppleCategory('Society & Culture>Documentary')).toBe(true);
    expect(isAppleCategory('technology')).toBe(false);
    expect(isAppleCategory('Technology > Documentary')).toBe(false);
    expect(isAppleCategory('constructor')).toBe(false);
    expect(isAppleCategory('Arts > Books > More')).toBe(false);
    expect(splitCategory('Arts > Books')).toEqual(['Arts', 'Books']);
  });
});

describe('podcast:guid', () => {
  it('is the UUIDv5 of the feed URL without scheme and trailing slash (the Podcasting 2.0 example)', () => {
    // The podcast namespace's documented example: mp3s.nashownotes.com/pc20rss.xml
    expect(podcastGuidFor('https://mp3s.nashownotes.com/pc20rss.xml')).toBe('917393e3-1b1e-5cef-ace4-edaa54e1f810');
    expect(podcastGuidFor('http://mp3s.nashownotes.com/pc20rss.xml/')).toBe('917393e3-1b1e-5cef-ace4-edaa54e1f810');
    // RFC 9562 appendix example: DNS namespace, www.example.com
    expect(uuidV5('www.example.com', '6ba7b810-9dad-11d1-80b4-00c04fd430c8')).toBe('2ed6657d-e927-568b-95e1-2665a8aea6a2');
  });
});

describe('renderFeed', () => {
  it('escapes hostile text and drops characters XML forbids', () => {
    const xml = render(podcast({ title: 'A <b> & "c" \u0001\uFFFF', description: ']]> <!-- x' }), [episode(1, { title: '</item><item>', description: '\u0000bad' })]);
    const f = parseFeed(xml)!;
    expect(f.title).toBe('A <b> & "c"');
    expect(f.items).toHaveLength(1);
    expect(f.items[0]!.title).toBe('</item><item>');
    expect(xml).not.toMatch(/[\u0000\u0001\uFFFF]/);
  });

  it('lists items in the given order with rounded durations and leaves out empty optional tags', () => {
    const xml = render(podcast(), [episode(1), episode(2, { season: 2, episode_number: 5, episode_type: 'bonus', explicit: 1, audio_duration: null })]);
    const f = parseFeed(xml)!;
    expect(f.items.map((i) => i.guid)).toEqual(['g-1', 'g-2']);
    expect(f.items[0]!.duration).toBe(62);
    expect(f.items[1]!).toMatchObject({ itunesSeason: 2, itunesEpisode: 5, itunesEpisodeType: 'bonus', explicit: true });
    expect(xml).not.toContain('<itunes:image');
    expect(xml).not.toContain('<itunes:complete');
    expect(xml).toContain('<podcast:locked>no</podcast:locked>');
    expect(render(podcast({ status: 'archived', locked: 1, owner_email: 'a@b.c' }), [])).toContain('<itunes:complete>Yes</itunes:complete>');
  });
});
