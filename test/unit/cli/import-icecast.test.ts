/**
 * What `skylark import-icecast` reads of an Icecast configuration (src/cli/import-icecast.ts): the
 * mounts of test/fixtures/icecast/icecast.xml with their station identity, codec and password;
 * the codec from `<type>`, else the mount name's extension, else mp3 (said so); `type="default"`
 * templates skipped; and the refusals — not well-formed XML (a truncated file, with its line), not
 * Icecast's, no mount, a mount without a name, a mount the API would refuse, a mount twice.
 */
import { describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { codecOf, ImportError, isStreamKeyFormat, planIcecast } from '../../../src/cli/import-icecast.js';

const FIXTURE = readFileSync(path.join(import.meta.dirname, '..', '..', 'fixtures', 'icecast', 'icecast.xml'), 'utf8');
const wrap = (mounts: string, auth = '') => `<?xml version="1.0"?>\n<icecast>${auth}${mounts}</icecast>`;

describe('planIcecast', () => {
  it('reads the mounts of an Icecast 2.4 icecast.xml', () => {
    const plan = planIcecast(FIXTURE);
    expect(plan.streams).toEqual([
      {
        mount: '/stream',
        input: { title: 'Night Radio', codec: 'mp3', metadata: { description: 'Jazz & blues all night', genre: 'Jazz', url: 'https://radio.example/' }, icecastMount: '/stream' },
        codecFrom: 'type audio/mpeg',
        password: 'hackme',
      },
      {
        mount: '/lounge.ogg',
        input: { title: 'Lounge <24/7>', codec: 'opus', metadata: {}, icecastMount: '/lounge.ogg' },
        codecFrom: 'the .ogg of the mount name; Ogg Opus: a Vorbis source is cut with stream.error codec_mismatch',
        password: 'loungepass',
      },
    ]);
  });

  it('skips type="default" templates and says so; decodes character references', () => {
    const plan = planIcecast(wrap('<mount type="default"><public>0</public></mount><mount type="normal"><mount-name>/a.aac</mount-name><stream-name>Caf&#233; &amp; Co</stream-name></mount>'));
    expect(plan.streams.map((s) => [s.mount, s.input.codec, s.input.title])).toEqual([['/a.aac', 'aac', 'Café & Co']]);
    expect(plan.notes[0]).toMatch(/type="default".*template.*skipped/);
  });

  it.each([
    ['<icecast><mount><mount-name>/a</mount-name></mount><mount><mount-name>/b', /not well-formed XML \(line 1/],
    ['<icecast><mount><mount-name>/a</mount-name></mount></icecast><extra/>', /more than one root element \(<icecast>, <extra>\)/],
    ['<ezstream><mount><mount-name>/a</mount-name></mount></ezstream>', /root element is <ezstream>/],
    ['', /not well-formed XML \(line 1\): Start tag expected/],
    [wrap(''), /no <mount>/],
    [wrap('<mount><stream-name>x</stream-name></mount>'), /<mount> #1 has no <mount-name>/],
    [wrap('<mount><mount-name>/live/stm_x</mount-name></mount>'), /"\/live\/stm_x": a mount must not be \/live/],
    [wrap('<mount><mount-name>/admin/stats</mount-name></mount>'), /\/admin/],
    [wrap('<mount><mount-name>stream</mount-name></mount>'), /must start with \//],
    [wrap('<mount><mount-name>/a</mount-name></mount><mount><mount-name>/a</mount-name></mount>'), /\/a is in the file twice/],
  ])('refuses %j', (xml, message) => {
    expect(() => planIcecast(xml)).toThrow(ImportError);
    expect(() => planIcecast(xml)).toThrow(message);
  });
});

describe('codecOf', () => {
  it('takes <type> first, then the extension, else mp3 and says why', () => {
    expect(codecOf('audio/mpeg', '/x.ogg')).toEqual({ codec: 'mp3', from: 'type audio/mpeg' });
    expect(codecOf('audio/aacp', '/x')).toMatchObject({ codec: 'aac' });
    expect(codecOf('application/ogg', '/x')).toMatchObject({ codec: 'opus' });
    expect(codecOf(null, '/x.opus')).toMatchObject({ codec: 'opus' });
    expect(codecOf(null, '/x.AAC')).toMatchObject({ codec: 'aac' });
    expect(codecOf(null, '/x.mp3')).toMatchObject({ codec: 'mp3', from: 'the .mp3 of the mount name' });
    expect(codecOf(null, '/stream').from).toMatch(/^not stated: mp3/);
    expect(codecOf('video/webm', '/stream')).toMatchObject({ codec: 'mp3' });
    expect(codecOf('video/webm', '/stream').from).toMatch(/type video\/webm is none Skylark takes/);
  });
});

describe('isStreamKeyFormat', () => {
  it('takes sk_<region code>_<32+ base62> only', () => {
    expect(isStreamKeyFormat(`sk_euw1_${'a'.repeat(40)}`)).toBe(true);
    expect(isStreamKeyFormat(`sk_apse1_${'B1'.repeat(16)}`)).toBe(true);
    expect(isStreamKeyFormat('hackme')).toBe(false);
    expect(isStreamKeyFormat(`sk_euw1_${'a'.repeat(31)}`)).toBe(false);
    expect(isStreamKeyFormat(`sk_mars1_${'a'.repeat(40)}`)).toBe(false);
    expect(isStreamKeyFormat(`sk_euw1_${'a'.repeat(39)}!`)).toBe(false);
  });
});
