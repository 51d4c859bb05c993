/**
 * The Icecast port's listening side (src/delivery/progressive/icecast-port.ts, docs/icecast.md): station identity
 * headers from a stream's title and metadata; the status JSON lists live public streams with
 * audio only, always as an array, rebuilt at most once per STATUS_TTL_MS; a listener's request
 * reaches the `/listen/:file` handler as `<id>.<codec>` and its answer gets the station identity.
 */
import { describe, expect, it } from 'vitest';
import { icecastListening, stationHeaders, STATUS_TTL_MS, type StationRow } from '../../../../src/delivery/progressive/icecast-port.js';
import { NO_CLIENT, type ProgressiveRequest } from '../../../../src/base/http/server.js';

const row = (id: string, extra: Partial<StationRow> = {}): StationRow => ({ id, title: `Station ${id}`, metadata: '{}', now_playing: null, started_at: Date.UTC(2026, 10, 27, 13, 0, 0), playback: 'public', codec: 'mp3', ...extra });

describe('stationHeaders', () => {
  it('icy-name from the title; description, genre, url from metadata when non-empty strings; control characters as spaces', () => {
    expect(stationHeaders('FM\r\nX-Evil: 1', JSON.stringify({ description: 'Songs', genre: '', url: 'https://fm.example/', other: 'x' }))).toEqual([
      ['icy-name', 'FM  X-Evil: 1'],
      ['icy-description', 'Songs'],
      ['icy-url', 'https://fm.example/'],
    ]);
    expect(stationHeaders('FM', '{"genre": 5}')).toEqual([['icy-name', 'FM']]);
    expect(stationHeaders('FM', 'not json')).toEqual([['icy-name', 'FM']]);
    expect(stationHeaders('FM', '["genre"]')).toEqual([['icy-name', 'FM']]);
    expect(stationHeaders('x'.repeat(300), null)[0]![1]).toHaveLength(256);
  });
});

describe('icecastListening', () => {
  const rows = [
    row('stm_a', { metadata: JSON.stringify({ genre: 'Jazz', description: 'D' }), now_playing: JSON.stringify({ title: 'Tune', artist: 'Trio' }) }),
    row('stm_tok', { playback: 'token' }),
    row('stm_silent'),
  ];
  let now = 1_000_000;
  let builds = 0;
  let seen: ProgressiveRequest | null = null;
  const port = icecastListening({
    handler: () => (req) => {
      seen = req;
      if (req.params[0] === 'stm_a.mp3') return { stream: { headers: [['Content-Type', 'audio/mpeg'], ['icy-name', 'Tune'], ['icy-br', '128']], open: () => NO_CLIENT } };
      return { status: '404 Not Found', headers: [['Content-Type', 'application/json']], body: Buffer.from('{}') };
    },
    row: (id) => rows.find((r) => r.id === id),
    onAir: () => {
      builds++;
      return rows;
    },
    layer: (id) => (id === 'stm_silent' ? null : { kbps: 128 }),
    stats: () => ({ listeners: 2, peak: 5 }),
    icecastUrl: () => 'radio.example:8000',
    now: () => now,
  });

  it('lists the live public streams with audio, always as an array, rebuilt at most once per STATUS_TTL_MS', () => {
    const j = JSON.parse(port.statusJson()) as { icestats: { host: string; source: Array<Record<string, unknown>> } };
    expect(j.icestats.host).toBe('radio.example');
    expect(j.icestats.source).toEqual([
      {
        audio_info: 'bitrate=128',
        bitrate: 128,
        listener_peak: 5,
        listeners: 2,
        listenurl: 'http://radio.example:8000/live/stm_a',
        server_name: 'Station stm_a',
        server_type: 'audio/mpeg',
        stream_start: 'Fri, 27 Nov 2026 13:00:00 +0000',
        stream_start_iso8601: '2026-11-27T13:00:00+0000',
        server_description: 'D',
        genre: 'Jazz',
        title: 'Tune',
        artist: 'Trio',
      },
    ]);
    port.statusJson();
    expect(builds).toBe(1);
    now += STATUS_TTL_MS;
    port.statusJson();
    expect(builds).toBe(2);
  });

  it('a listener of the bare mount asks /listen for <id>.<codec>, .ogg for .opus; the answer carries the station identity', () => {
    const a = port.listen({ method: 'GET', streamId: 'stm_a', ext: null, query: 'token=t', header: () => '', remoteAddress: '10.0.0.1' });
    expect(seen).toMatchObject({ method: 'GET', params: ['stm_a.mp3'], query: 'token=t', remoteAddress: '10.0.0.1' });
    expect('stream' in a && a.stream.headers).toEqual([
      ['Content-Type', 'audio/mpeg'],
      ['icy-br', '128'],
      ['icy-name', 'Station stm_a'],
      ['icy-description', 'D'],
      ['icy-genre', 'Jazz'],
      ['Access-Control-Expose-Headers', 'icy-name, icy-description, icy-genre, icy-url, icy-br, icy-metaint'],
    ]);
    const r = port.listen({ method: 'HEAD', streamId: 'stm_a', ext: 'ogg', query: '', header: () => '', remoteAddress: '10.0.0.1' });
    expect(seen).toMatchObject({ method: 'HEAD', params: ['stm_a.opus'] });
    expect(r).toEqual({ refuse: { status: '404 Not Found', headers: [['Content-Type', 'application/json']], body: Buffer.from('{}') } });
  });
});
