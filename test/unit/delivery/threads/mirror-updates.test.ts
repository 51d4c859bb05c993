/**
 * The worker threads' mirror (src/delivery/threads/mirror-updates.ts → src/delivery/hls/mirror.ts) over a real hub (the native
 * Segmenter fed the AAC fixture, LL-HLS parts): every message crosses a structured clone as a
 * thread's `postMessage` does. The mirror serves what the hub serves — the same playlist bytes per
 * version, segments, parts, init section, `has` — from SharedArrayBuffers copied once each (a new
 * worker's snapshot reuses them); a held request in the mirror is answered when the message with
 * its part arrives; segments and parts the hub let go are let go; the stream's end answers every
 * held request.
 */
import { describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { FlvReader } from '../../../../src/live/media/flv.js';
import { StreamHub } from '../../../../src/live/media/hub.js';
import { HubSource } from '../../../../src/delivery/hls/source.js';
import { MirrorSource } from '../../../../src/delivery/hls/mirror.js';
import { MirrorUpdates, type MirrorMessage } from '../../../../src/delivery/threads/mirror-updates.js';
import { MediaRegistry } from '../../../../src/live/media/registry.js';

const tags = new FlvReader().push(readFileSync(path.resolve(import.meta.dirname, '../../../fixtures/aac/sine48k_stereo_128k.flv')));
const header = tags.find((t) => t.body[0]! >> 4 === 10 && t.body[1] === 0)!;
const frames = tags.filter((t) => t !== header);

function setup() {
  const hub = new StreamHub('stm_mirror', { codec: 'aac', targetDurationMs: 2000, partTargetMs: 500, windowSegments: 3, ladder: [128] });
  const media = new MediaRegistry();
  const source = new HubSource(media, true);
  const posted: MirrorMessage[] = [];
  const mirror = new MirrorSource();
  const updates = new MirrorUpdates({
    source,
    current: () => hub,
    policy: () => ({ accountId: 'acct_x', playback: 'public', publishableKeyTokens: false, codec: 'aac' }),
    station: () => [['icy-name', 'Mirror']],
    post: (m) => {
      posted.push(m);
      const c = structuredClone(m);
      if (c.t === 'stream') mirror.apply(c.u);
      else if (c.t === 'drop') mirror.drop(c.id, c.gen);
    },
  });
  let i = 0;
  let ts = 0;
  hub.pushAudio(0, header.body);
  /** Pushes `ms` of audio (looping the fixture), then lets the updates post (a microtask). */
  const push = async (ms: number) => {
    const until = ts + ms;
    while (ts < until) {
      hub.pushAudio(Math.round(ts), frames[i % frames.length]!.body);
      i++;
      ts += 1024 / 48;
    }
    await Promise.resolve();
  };
  return { hub, source, updates, mirror, posted, push };
}

const shared = (b: Uint8Array | undefined) => b !== undefined && b.buffer instanceof SharedArrayBuffer;
/** Whether `a` and `b` are views of the same memory (a write through one shows in the other). */
function sameMemory(a: Uint8Array, b: Uint8Array): boolean {
  const was = a[0]!;
  a[0] = was ^ 0xff;
  const same = b[0] === a[0];
  a[0] = was;
  return same;
}

describe('MirrorUpdates → MirrorSource', () => {
  it('mirrors the hub: the same playlists, segments, parts and init section, in shared memory', async () => {
    const { hub, source, updates, mirror, push } = setup();
    updates.watch(hub);
    await push(20_000);
    const view = source.view(hub);
    const lv = view.layer('a128')!;
    const ml = mirror.get('stm_mirror')!.layer('a128')!;
    expect(mirror.get('stm_mirror')!.playable).toBe(true);
    expect(ml.version).toBe(lv.version);
    expect(Buffer.from(ml.playlist().plain).equals(Buffer.from(lv.playlist().plain))).toBe(true);
    expect(sameMemory(ml.playlist().plain, lv.playlist().plain)).toBe(true); // rendered once, shared
    expect(Buffer.from(mirror.get('stm_mirror')!.multivariant()!.plain).equals(Buffer.from(view.multivariant()!.plain))).toBe(true);
    expect(ml.nextSequence).toBe(lv.nextSequence);
    expect(ml.openParts).toBe(lv.openParts);
    expect(Buffer.from(ml.init!).equals(Buffer.from(lv.init!))).toBe(true);
    expect(ml.initId).toBe(lv.initId); // the name its URI carries (init-<id>.mp4)
    expect(ml.initId).toMatch(/^[0-9a-f]{16}$/);
    expect(shared(ml.init!)).toBe(true);
    for (const s of hub.top.segments) {
      const mine = ml.segment(s.sequence);
      expect(shared(mine)).toBe(true);
      expect(Buffer.from(mine!).equals(Buffer.from(s.data))).toBe(true);
      for (const p of s.parts) expect(Buffer.from(ml.part(s.sequence, p.index)!).equals(Buffer.from(p.data))).toBe(true);
    }
    for (const p of hub.top.openParts) expect(Buffer.from(ml.part(p.sequence, p.index)!).equals(Buffer.from(p.data))).toBe(true);
    for (let msn = 0; msn <= lv.nextSequence + 1; msn++) for (const part of [undefined, 0, 1, 2, 3, 4]) expect(ml.has(msn, part)).toBe(lv.has(msn, part));
    // Let go of what the hub let go of (the window of 3 + 4 retained).
    const first = hub.top.segments[0]!.sequence;
    expect(first).toBeGreaterThan(0);
    expect(ml.segment(first - 1)).toBeUndefined();
    expect(ml.part(first - 1, 0)).toBeUndefined();
  });

  it("gives a new worker the state as it is, reusing the shared copies (no second copy)", async () => {
    const { hub, source, updates, posted, push } = setup();
    updates.watch(hub);
    await push(5000);
    const firstSeg = (posted.flatMap((m) => (m.t === 'stream' ? m.u.layers.flatMap((l) => l.segments) : [])))[0]!;
    const snap = updates.snapshot();
    const again = snap.flatMap((m) => (m.t === 'stream' ? m.u.layers.flatMap((l) => l.segments) : [])).find(([seq]) => seq === firstSeg[0])!;
    expect(again[1].buffer).toBe(firstSeg[1].buffer);
    const fresh = new MirrorSource();
    for (const m of snap) if (m.t === 'stream') fresh.apply(structuredClone(m.u));
    const ml = fresh.get('stm_mirror')!.layer('a128')!;
    expect(sameMemory(ml.playlist().plain, source.view(hub).layer('a128')!.playlist().plain)).toBe(true);
    expect(ml.nextSequence).toBe(hub.top.nextSequence);
    for (const s of hub.top.segments) expect(Buffer.from(ml.segment(s.sequence)!).equals(Buffer.from(s.data))).toBe(true);
  });

  it('answers a held request in the mirror when the message with its part arrives, and every one at the end', async () => {
    const { hub, updates, mirror, push } = setup();
    updates.watch(hub);
    await push(3000);
    const ml = mirror.get('stm_mirror')!.layer('a128')!;
    const next = { msn: ml.nextSequence, part: ml.openParts };
    let answered = false;
    ml.waitFor(next.msn, next.part, () => (answered = true));
    expect(ml.waiting).toBe(1);
    await push(100);
    if (!ml.has(next.msn, next.part)) {
      expect(answered).toBe(false);
      await push(600);
    }
    expect(answered).toBe(true);
    expect(ml.waiting).toBe(0);
    let atEnd = false;
    ml.waitFor(ml.nextSequence + 1, undefined, () => (atEnd = true));
    hub.end();
    await Promise.resolve();
    expect(atEnd).toBe(true);
    expect(ml.ended).toBe(true);
    expect(Buffer.from(ml.playlist().plain).toString()).toContain('#EXT-X-ENDLIST');
  });
});
