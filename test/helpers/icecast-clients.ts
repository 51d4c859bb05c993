/**
 * Clients of the Icecast port for tests: a raw one-request exchange, ezstream (libshout) as a
 * source, any command run to its end, and HTTP Basic credentials.
 */
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { writeFileSync } from 'node:fs';
import net from 'node:net';
import path from 'node:path';
import { exited } from './publish.js';
import { ffmpegPath } from './ffmpeg.js';

/** One raw exchange with the Icecast port: resolves to the head and body that came back until close (or `limit` bytes). */
export function rawIcecast(port: number, request: string, limit = Infinity): Promise<{ head: string; body: Buffer }> {
  return new Promise((resolve, reject) => {
    const sock = net.connect(port, '127.0.0.1', () => sock.write(request));
    const chunks: Buffer[] = [];
    let size = 0;
    const done = () => {
      const all = Buffer.concat(chunks);
      const end = all.indexOf('\r\n\r\n');
      resolve({ head: end < 0 ? all.toString('latin1') : all.subarray(0, end).toString('latin1'), body: end < 0 ? Buffer.alloc(0) : all.subarray(end + 4) });
    };
    sock.on('data', (d: Buffer) => {
      chunks.push(d);
      size += d.length;
      if (size >= limit) {
        sock.destroy();
        done();
      }
    });
    sock.on('close', done);
    sock.on('error', reject);
    setTimeout(() => sock.destroy(), 10_000).unref();
  });
}

/** Runs `cmd` to its end (killed after 40 s); resolves to its exit code and output (stdout and stderr). */
export function runCommand(cmd: string, args: string[]): Promise<{ code: number | string | null; out: string }> {
  const p = spawn(cmd, args, { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  p.stdout!.on('data', (d) => (out += d));
  p.stderr!.on('data', (d) => (out += d));
  const timer = setTimeout(() => p.kill('SIGKILL'), 40_000);
  return exited(p).then((code) => {
    clearTimeout(timer);
    return { code, out };
  });
}

/** `Basic <base64 user:password>` (RFC 7617). */
export const basicAuth = (user: string, password: string) => `Basic ${Buffer.from(`${user}:${password}`).toString('base64')}`;

/**
 * ezstream publishing `seconds` of a 440 Hz MP3 tone (44.1 kHz stereo, 128 kbps, made with FFmpeg
 * in `dir`) to `mount` on 127.0.0.1:`port`, user `source`, password `key`; `err()` is its stderr so far.
 */
export function ezstreamSource(dir: string, port: number, mount: string, key: string, seconds: number): { p: ChildProcess; err: () => string } {
  const mp3 = path.join(dir, `ez-${seconds}.mp3`);
  spawnSync(ffmpegPath(), ['-hide_banner', '-loglevel', 'error', '-y', '-f', 'lavfi', '-i', `sine=frequency=440:duration=${seconds}`, '-ac', '2', '-ar', '44100', '-c:a', 'libmp3lame', '-b:a', '128k', mp3]);
  const conf = path.join(dir, `ezstream-${mount.replace(/\W/g, '_')}.xml`);
  writeFileSync(
    conf,
    `<ezstream>
  <servers><server><protocol>HTTP</protocol><hostname>127.0.0.1</hostname><port>${port}</port><user>source</user><password>${key}</password></server></servers>
  <streams><stream><mountpoint>${mount}</mountpoint><format>MP3</format></stream></streams>
  <intakes><intake><type>file</type><filename>${mp3}</filename><stream_once>yes</stream_once></intake></intakes>
</ezstream>
`,
    { mode: 0o600 },
  );
  const p = spawn('ezstream', ['-c', conf], { stdio: ['ignore', 'ignore', 'pipe'] });
  let err = '';
  p.stderr!.on('data', (d) => (err += d));
  return { p, err: () => err };
}
