/**
 * The media registry tells its own watchers of every hub it opens (`MediaRegistry.onOpen`): the
 * readers that follow a hub's layers — the HTTP threads' mirror, the native parts store — watch
 * each new hub once, and a hub that is open already is not announced again.
 */
import { afterEach, describe, expect, it } from 'vitest';
import type { StreamHub } from '../../../../src/live/media/hub.js';
import type { HubOptions } from '../../../../src/live/media/hub-types.js';
import { MediaRegistry } from '../../../../src/live/media/registry.js';

const OPTS: HubOptions = { codec: 'aac', targetDurationMs: 2000, partTargetMs: 500, windowSegments: 3, ladder: [128] };

describe('MediaRegistry.onOpen', () => {
  let media: MediaRegistry;
  afterEach(async () => {
    await media.close();
  });

  it('calls every watcher once with each hub it creates, in order, and not for an open one', () => {
    media = new MediaRegistry();
    const seen: Array<[string, StreamHub]> = [];
    media.onOpen((hub) => seen.push(['a', hub]));
    media.onOpen((hub) => seen.push(['b', hub]));
    const first = media.open('stm_one', OPTS);
    expect(seen).toEqual([['a', first], ['b', first]]);
    expect(media.open('stm_one', OPTS)).toBe(first);
    expect(seen).toHaveLength(2);
    const other = media.open('stm_two', OPTS);
    expect(seen.slice(2)).toEqual([['a', other], ['b', other]]);
  });

  it('announces the new hub of a stream whose hub ended', () => {
    media = new MediaRegistry();
    const seen: StreamHub[] = [];
    const first = media.open('stm_one', OPTS);
    media.onOpen((hub) => seen.push(hub));
    media.end('stm_one');
    const next = media.open('stm_one', OPTS);
    expect(next).not.toBe(first);
    expect(seen).toEqual([next]);
  });
});
