/**
 * Plays a cached fallback rendition (./fallback-cache.ts, docs/streams.md "Fallback") in real
 * time without a process: the file — ADTS, MP3 or Ogg Opus as FFmpeg wrote it — is read ahead by
 * at most READ_AHEAD_MS of audio, split into audio messages by the native Icecast source parser
 * (src/native/icecast-source.ts, the parser of an Icecast source's body), and each message is handed
 * on once its timestamp is due on the run's clock (checked every PACE_MS), as `ffmpeg -re` paces
 * its output. Memory per run: the read buffer plus ~READ_AHEAD_MS of audio.
 */
import { open, type FileHandle } from 'node:fs/promises';
import { IcecastSource, type IcecastSourceEvent } from '../../native/icecast-source.js';
import type { AudioCodec } from '../media/codec.js';

/** Where a paced run's audio goes. */
export interface PacedSink {
  /** One audio message (FLV AUDIODATA body), `timestampMs` from the run's start (ms). */
  audio(timestampMs: number, body: Buffer): void;
  /** The run ended: null when the file played to its end; else why it stopped (a read or parse error). */
  end(error: string | null): void;
}

/** How far the reading runs ahead of the clock (ms of audio). */
const READ_AHEAD_MS = 1000;
/** How often due messages are handed on (ms). */
const PACE_MS = 50;
/** Bytes per read (~4 s of 128 kbps audio at most). */
const READ_BYTES = 64 * 1024;

/**
 * Starts playing `file` (a rendition of `codec`) into `sink` in real time; `stop()` ends it
 * without a call to `sink.end`. Never throws: errors end the run through `sink.end(error)`.
 */
export function paceRendition(file: string, codec: AudioCodec, sink: PacedSink): { stop(): void } {
  const parser = new IcecastSource(codec, { maxFrameBytes: 65536 });
  const queue: Array<{ ts: number; body: Buffer }> = [];
  const buf = Buffer.allocUnsafe(READ_BYTES);
  const start = performance.now();
  let fh: FileHandle | null = null;
  let pos = 0;
  let stopped = false;
  let reading = false;
  let eof = false;
  let error: string | null = null;
  const handler = {
    audio: (ts: number, body: Buffer) => void queue.push({ ts, body }),
    event: (e: IcecastSourceEvent) => {
      if (e.type === 'error') error ??= `${e.code}: ${e.message}`;
    },
  };
  const ahead = () => (queue.length ? queue[queue.length - 1]!.ts : 0) - (performance.now() - start);

  const closeFile = (): void => {
    const h = fh;
    fh = null;
    void h?.close().catch(() => {});
  };

  const fill = async (): Promise<void> => {
    reading = true;
    try {
      fh ??= await open(file, 'r');
      while (!stopped && !eof && !error && ahead() < READ_AHEAD_MS) {
        const { bytesRead } = await fh.read(buf, 0, READ_BYTES, pos);
        if (stopped) break;
        if (bytesRead === 0) eof = true;
        else parser.pushTo(buf.subarray(0, bytesRead), handler);
        pos += bytesRead;
      }
    } catch (e) {
      error ??= (e as Error).message;
    } finally {
      reading = false;
      // A stop during a read closes the file here, once the read is done with it.
      if (stopped || eof) closeFile();
    }
  };

  const stop = (): void => {
    if (stopped) return;
    stopped = true;
    clearInterval(timer);
    if (!reading) closeFile();
  };

  const tick = (): void => {
    if (stopped) return;
    const now = performance.now() - start;
    let i = 0;
    while (i < queue.length && queue[i]!.ts <= now) {
      const m = queue[i++]!;
      sink.audio(m.ts, m.body);
      if (stopped) return;
    }
    if (i) queue.splice(0, i);
    if (error || (eof && queue.length === 0)) {
      stop();
      return sink.end(error);
    }
    if (!reading) void fill();
  };

  const timer = setInterval(tick, PACE_MS);
  timer.unref();
  void fill().then(tick);
  return { stop };
}
