// Records the raw client→server bytes of a real FFmpeg RTMP publish into test/fixtures/rtmp/.
// A node:net server on 127.0.0.1:0 keeps every byte the client sends and passes the connection on
// to the native ingest listener (RtmpListener, which answers the handshake and commands and
// accepts the publish), then writes the bytes to the fixture file.
//
//   node --import tsx scripts/record-rtmp-fixture.mjs     # all fixtures
// Needs the addon built (npm run build:native) and ffmpeg on PATH (or FFMPEG=/path/to/ffmpeg).
import { spawn } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { RtmpListener } from '../src/native/rtmp-listener.ts';

const root = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const ffmpeg = process.env.FFMPEG ?? 'ffmpeg';
const MAX_FIXTURE_BYTES = 200 * 1024;

// The brief's command line: lavfi 'sine' is mono, so the first fixture is 48 kHz mono too.
const fixtures = [
  { file: 'ffmpeg-aac-48k.bin', extra: [] },
  { file: 'ffmpeg-aac-44k-mono.bin', extra: ['-ac', '1', '-ar', '44100'] },
  // Timestamps from 20000 s on (above 0xFFFFFF ms): the jump from the sequence header at 0 is
  // a delta that needs the extended timestamp field.
  { file: 'ffmpeg-aac-48k-extts.bin', extra: ['-output_ts_offset', '20000'] },
];

function record({ file, extra }) {
  return new Promise((resolve, reject) => {
    const received = [];
    const counts = { audio: 0, events: [] };
    let serverClosed = false;
    let onServerClosed = () => {};
    const listener = new RtmpListener({}, (conn) => ({
      audio: () => counts.audio++,
      event: (ev) => {
        counts.events.push(ev.type === 'error' ? `error:${ev.code}` : ev.type);
        if (ev.type === 'publish') conn.acceptPublish();
        if (ev.type === 'error') conn.close();
      },
      timeout: () => {},
      closed: () => {},
    }));
    const upstream = listener.listen('127.0.0.1', 0);
    const server = net.createServer((socket) => {
      const rtmp = net.connect({ host: '127.0.0.1', port: upstream });
      socket.on('data', (chunk) => {
        received.push(Buffer.from(chunk));
        rtmp.write(chunk);
      });
      rtmp.pipe(socket);
      socket.on('error', () => {});
      rtmp.on('error', () => {});
      socket.on('close', () => {
        rtmp.destroy();
        listener.close();
        server.close();
      });
    });
    server.on('close', () => { serverClosed = true; onServerClosed(); });
    server.listen(0, '127.0.0.1', () => {
      const { port } = server.address();
      const args = ['-hide_banner', '-loglevel', 'error', '-re', '-f', 'lavfi', '-i', 'sine=frequency=440:sample_rate=48000',
        '-t', '3', ...extra, '-c:a', 'aac', '-b:a', '128k', '-f', 'flv', `rtmp://127.0.0.1:${port}/live/stm_test/sk_euw1_testkey`];
      const child = spawn(ffmpeg, args, { stdio: ['ignore', 'inherit', 'inherit'] });
      child.on('exit', (code) => {
        if (code !== 0) return reject(new Error(`ffmpeg exited with ${code}`));
        onServerClosed = () => {
          const bytes = Buffer.concat(received);
          if (bytes.length > MAX_FIXTURE_BYTES) return reject(new Error(`${file}: ${bytes.length} bytes > 200 KB`));
          writeFileSync(path.join(root, 'test/fixtures/rtmp', file), bytes);
          console.log(`${file}: ${bytes.length} bytes, ${counts.audio} audio messages, events ${counts.events.join(',')}`);
          resolve();
        };
        if (serverClosed) onServerClosed();
      });
    });
  });
}

for (const f of fixtures) await record(f);
