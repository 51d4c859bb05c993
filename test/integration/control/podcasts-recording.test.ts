/**
 * Episodes recorded from streams (docs/behaviour.md §3 "Recording", §5): what the recording side calls
 * when a stream with `recording.podcastId` ends — the file becomes a draft episode with
 * `sourceStreamId`, probed and moved into the media store; a missing podcast or non-audio refuses.
 * Services over a real SQLite file and a real FFmpeg-made file (no HTTP needed).
 */
import { afterAll, describe, expect, it } from 'vitest';
import { execFileSync } from 'node:child_process';
import { existsSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { openDatabase } from '../../../src/base/db/database.js';
import { EventsRepo } from '../../../src/base/db/events-repo.js';
import { PodcastsRepo } from '../../../src/base/db/podcasts-repo.js';
import { Outbox } from '../../../src/base/outbox.js';
import { EpisodesService } from '../../../src/control/services/episodes.js';
import { PodcastsService, recordingPodcastCheck } from '../../../src/control/services/podcasts.js';
import { MediaStore } from '../../../src/control/episode-audio/store.js';
import { ApiError } from '../../../src/base/errors/errors.js';
import { tempDir } from '../../helpers/server.js';
import { ffmpegPath } from '../../helpers/ffmpeg.js';

const tmp = tempDir();
const db = openDatabase(tmp.dir);
afterAll(() => {
  db.close();
  tmp.cleanup();
});

describe('episodes from stream recordings', () => {
  it('creates a draft with sourceStreamId and probed audio; checks recording.podcastId', async () => {
    const urls = { baseUrl: 'http://h/v2', authUrl: 'http://h', ingestUrl: 'h:1935', icecastUrl: 'h:8000', cdnUrl: 'http://cdn' };
    db.prepare("INSERT INTO accounts (id, name, plan, default_region, created_at) VALUES ('acct_a', 'A', 'paid', 'eu-west-1', 0), ('acct_b', 'B', 'paid', 'eu-west-1', 0)").run();
    const repo = new PodcastsRepo(db);
    const media = new MediaStore(tmp.dir);
    const podcasts = new PodcastsService({ repo, urls: () => urls, now: Date.now });
    const episodes = new EpisodesService({ repo, outbox: new Outbox(new EventsRepo(db)), media, urls: () => urls, now: Date.now });
    const pod = podcasts.create('acct_a', { title: 'Recorded show' });

    const check = recordingPodcastCheck(repo);
    expect(() => check('acct_a', pod.id)).not.toThrow();
    for (const [acct, id] of [['acct_b', pod.id], ['acct_a', 'pod_nope']] as const) {
      try {
        check(acct, id);
        expect.unreachable();
      } catch (e) {
        expect(e).toBeInstanceOf(ApiError);
        expect((e as ApiError).status).toBe(400);
        expect((e as ApiError).param).toBe('recording.podcastId');
      }
    }

    const rec = path.join(tmp.dir, 'recording.m4a');
    execFileSync(ffmpegPath(), ['-hide_banner', '-loglevel', 'error', '-y', '-f', 'lavfi', '-i', 'sine=duration=2', '-c:a', 'aac', rec], { timeout: 30_000 });
    const ep = await episodes.createFromRecording({ accountId: 'acct_a', podcastId: pod.id, streamId: 'stm_live1', title: 'Live show, recorded', filePath: rec });
    expect(ep).toMatchObject({ status: 'draft', sourceStreamId: 'stm_live1', title: 'Live show, recorded', podcastId: pod.id });
    expect(ep.audio?.mimeType).toBe('audio/x-m4a');
    expect(ep.audio?.durationSeconds).toBeGreaterThan(1.5);
    expect(existsSync(rec)).toBe(false); // moved into the store
    expect(podcasts.get('acct_a', pod.id).episodeCount).toBe(1);

    const junk = path.join(tmp.dir, 'junk.bin');
    writeFileSync(junk, 'not audio at all');
    await expect(episodes.createFromRecording({ accountId: 'acct_a', podcastId: pod.id, streamId: 'stm_x', title: 'x', filePath: junk })).rejects.toMatchObject({ status: 415 });
    expect(podcasts.get('acct_a', pod.id).episodeCount).toBe(1); // the failed one left no row
    podcasts.update('acct_a', pod.id, { status: 'archived' });
    expect(() => check('acct_a', pod.id)).toThrow(ApiError);
  });
});
