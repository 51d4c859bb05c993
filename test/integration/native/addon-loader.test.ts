// Loading the addon: which file src/native/addon.ts picks (Release, else Debug, or SKYLARK_ADDON)
// and the error that names what it looked for; and the per-instance addon state with its cleanup
// hook — the addon loads in worker threads, each with its own classes, and a worker's listener
// is closed when the worker ends.
import net from 'node:net';
import path from 'node:path';
import { Worker } from 'node:worker_threads';
import { describe, expect, it } from 'vitest';
import { AddonNotFoundError, addonPath, resolveAddonPath } from '../../../src/native/addon.js';

const root = '/srv/skylark';
const release = path.join(root, 'build', 'Release', 'skylark.node');
const debug = path.join(root, 'build', 'Debug', 'skylark.node');
const having = (...files: string[]) => (p: string) => files.includes(p);

describe('resolveAddonPath', () => {
  it('prefers build/Release, takes build/Debug when only that exists', () => {
    expect(resolveAddonPath(root, {}, having(release, debug))).toBe(release);
    expect(resolveAddonPath(root, {}, having(debug))).toBe(debug);
  });

  it('takes the file SKYLARK_ADDON names (relative to the current directory), even over a Release build', () => {
    const named = path.resolve('some/where/skylark.node');
    expect(resolveAddonPath(root, { SKYLARK_ADDON: 'some/where/skylark.node' }, having(named, release))).toBe(named);
  });

  it('names what it looked for when nothing is there', () => {
    let error: unknown;
    try {
      resolveAddonPath(root, {}, having());
    } catch (e) {
      error = e;
    }
    expect(error).toBeInstanceOf(AddonNotFoundError);
    expect(error).toMatchObject({ code: 'addon_not_found', tried: [release, debug] });
    expect((error as Error).message).toContain(release);
    expect((error as Error).message).toContain(debug);
    expect(() => resolveAddonPath(root, { SKYLARK_ADDON: '/nope/skylark.node' }, having(release))).toThrow(
      /SKYLARK_ADDON names \/nope\/skylark\.node, which does not exist/,
    );
  });

  it('this process loaded an existing addon file', () => {
    expect(path.basename(addonPath)).toBe('skylark.node');
    expect(resolveAddonPath(path.resolve(path.dirname(addonPath), '..', '..'), {})).toBe(addonPath);
  });
});

/** Runs `code` (CommonJS) in a worker with the addon path as workerData; resolves with its messages once it exits. */
function inWorker(code: string, onMessage: (m: unknown) => void = () => {}): Promise<{ messages: unknown[]; exitCode: number }> {
  return new Promise((resolve, reject) => {
    const messages: unknown[] = [];
    const w = new Worker(code, { eval: true, workerData: addonPath });
    w.on('message', (m) => {
      messages.push(m);
      onMessage(m);
    });
    w.on('error', reject);
    w.on('exit', (exitCode) => resolve({ messages, exitCode }));
  });
}

const connectRefused = (port: number) =>
  new Promise<boolean>((resolve) => {
    const s = net.connect({ host: '127.0.0.1', port });
    s.once('connect', () => {
      s.destroy();
      resolve(false);
    });
    s.once('error', () => resolve(true));
  });

describe('per-instance addon state (worker threads)', () => {
  it('two workers each get their own classes: a Segmenter routes in its own thread, not across', async () => {
    const code = `
      const { workerData, parentPort } = require('node:worker_threads');
      const addon = require(workerData);
      const seg = new addon.Segmenter({ container: 'ts' });
      const server = new addon.RtmpAddon({}, () => {});
      server.route(12345, seg, false, false); // an unknown id: ignored, but the segmenter is recognised
      let foreign = 'accepted';
      try { server.route(12345, { pushAudio() {} }, false, false); } catch (e) { foreign = e.constructor.name; }
      const events = seg.pushAudio(0, Buffer.from([0xaf, 0x00, 0x11, 0x90]));
      parentPort.postMessage({ foreign, config: events[0] && events[0].codecs });
      server.close();
    `;
    const [a, b] = await Promise.all([inWorker(code), inWorker(code)]);
    for (const r of [a, b]) {
      expect(r.exitCode).toBe(0);
      expect(r.messages).toEqual([{ foreign: 'TypeError', config: 'mp4a.40.2' }]);
    }
  });

  it("a worker's listener is closed by the cleanup hook when the worker ends", async () => {
    const code = `
      const { workerData, parentPort } = require('node:worker_threads');
      const addon = require(workerData);
      const server = new addon.RtmpAddon({}, () => {});
      parentPort.postMessage(server.listen('127.0.0.1', 0, 16));
      parentPort.once('message', () => process.exit(0)); // ends the worker with the listener open
    `;
    const worker = new Worker(code, { eval: true, workerData: addonPath });
    const exited = new Promise<number>((resolve, reject) => {
      worker.on('error', reject);
      worker.on('exit', resolve);
    });
    const port = await new Promise<number>((resolve) => worker.once('message', resolve));
    expect(port).toBeGreaterThan(0);
    expect(await connectRefused(port)).toBe(false); // listening while the worker runs
    worker.postMessage('exit');
    expect(await exited).toBe(0);
    expect(await connectRefused(port)).toBe(true);
  });
});
