/**
 * A stream's fallback audio (docs/streams.md "Fallback"): episode files played in a loop, in real
 * time, one episode per run, the next run starting as the last ends, as the stream's ingest codec
 * at its top bitrate in the byte stream an Icecast source sends (ADTS, MP3 or Ogg Opus), at the
 * sample rate and channel count of the stream's last live source (../media/audio-format.ts: a
 * switch between live and fallback never changes the format on `/listen`, the Icecast port or
 * HLS; 48 kHz stereo before any live source published; Opus is always 48 kHz). An episode
 * whose rendition is cached (./fallback-cache.ts) is read from that file and paced in JS
 * (./rendition-pacer.ts: no process, no decode, no encode); one not cached yet is encoded from the
 * episode file by ONE FFmpeg process (`ffmpeg -re`, stdout) as its rendition is built for a later
 * run. Either byte stream goes through the native Icecast source parser (src/native/icecast-source.ts,
 * as an Icecast source's body does in ./icecast-server.ts) and the audio messages it makes reach
 * the stream's media hub like a publisher's; the ladder encodes the lower layers from them as for
 * live audio.
 */
import { spawn } from 'node:child_process';
import { IcecastSource, type IcecastSourceEvent } from '../../native/icecast-source.js';
import { readAudioTag, type AudioCodec } from '../media/codec.js';
import type { AudioFormat } from '../media/audio-format.js';
import type { MediaConnection, MediaLog, PublishInput } from '../media/hub-types.js';
import { paceRendition } from './rendition-pacer.js';

/** One episode of a fallback: its id, its audio file (absolute path) and its title (the stream's `nowPlaying` while it plays). */
export interface FallbackItem {
  id: string;
  path: string;
  title: string;
}

/** One rendition: episode `episodeId`'s audio file `path` as `codec` at `kbps` (kbps), in `format` (the stream's live format). */
export interface RenditionWant {
  episodeId: string;
  path: string;
  codec: AudioCodec;
  kbps: number;
  format: AudioFormat;
}

/** Cached renditions of episodes (./fallback-cache.ts `FallbackCache`, docs/streams.md "Fallback"). */
export interface FallbackRenditions {
  /** The complete rendition's file (absolute path), or null (the run encodes live; the rendition is queued). */
  rendition(want: RenditionWant): string | null;
  /** A rendition that did not play: not used again. */
  unusable(file: string): void;
  /** The renditions a plan will play: those missing (new audio since) are queued. */
  prepare(wants: RenditionWant[]): void;
}

/** What a stream's fallback plays (docs/streams.md "Fallback"). `silenceSeconds`: 5–300, or null (no silence detection). */
export interface FallbackPlan {
  items: FallbackItem[];
  order: 'sequential' | 'shuffle';
  silenceSeconds: number | null;
}

/** Settings of one stream's fallback source. Bitrate in kbps. */
export interface FallbackSourceOptions {
  streamId: string;
  ffmpeg: string;
  codec: AudioCodec;
  kbps: number;
  /** The sample rate and channels to encode at: the stream's last live source's (docs/streams.md "Fallback"). */
  format: AudioFormat;
  /** The plan now (read again before each episode: episodes deleted meanwhile are left out); null: stop. */
  plan(): FallbackPlan | null;
  /** An episode started playing: its title. */
  title(title: string): void;
  log: MediaLog;
  /** Cached renditions to copy from; none: every run encodes. */
  renditions?: FallbackRenditions;
}

/** Opus decodes at 48 kHz whatever the input's rate (RFC 7845 §5.1): its fallback is always encoded so. */
const OPUS_RATE = 48000;
/** The wait before the next episode after a run that failed (ms): a broken file does not spin. */
const RETRY_MS = 1000;
/** After this many failed runs in a row the wait grows to FAILED_WAIT_MS. */
const MAX_FAILED_RUNS = 5;
const FAILED_WAIT_MS = 10_000;

/** FFmpeg output options per codec: the byte streams an Icecast source sends (ADTS, MP3, Ogg Opus). */
const OUTPUT: Record<AudioCodec, string[]> = {
  aac: ['-c:a', 'aac', '-f', 'adts'],
  mp3: ['-c:a', 'libmp3lame', '-write_xing', '0', '-id3v2_version', '0', '-f', 'mp3'],
  opus: ['-c:a', 'libopus', '-f', 'ogg', '-page_duration', '20000'],
};

/**
 * FFmpeg output options that encode the first audio stream as `codec` at `kbps`, resampled and
 * remixed to `format` (Opus: 48 kHz, `format`'s channels), in its Icecast byte stream (no output named).
 */
export function fallbackOutputArgs(codec: AudioCodec, kbps: number, format: AudioFormat): string[] {
  const rate = codec === 'opus' ? OPUS_RATE : format.sampleRate;
  return ['-vn', '-map', '0:a:0', '-ac', String(format.channels), '-ar', String(rate), '-b:a', `${kbps}k`, ...OUTPUT[codec]];
}

/** The FFmpeg arguments that play `file` in real time as `codec` at `kbps` in `format` on stdout (exported for tests and docs). */
export function fallbackArgs(file: string, codec: AudioCodec, kbps: number, format: AudioFormat): string[] {
  return ['-hide_banner', '-loglevel', 'error', '-nostdin', '-re', '-i', file, ...fallbackOutputArgs(codec, kbps, format), 'pipe:1'];
}


/**
 * The fallback audio of one stream, as a connection of its media hub (`MediaConnection`: read in
 * JS, never routed natively). `start(input)` plays the plan's episodes one after another, in a
 * loop (`sequential`: in the plan's order; `shuffle`: each round in a new random order), on one
 * continuous clock; `close()` stops the running run (its FFmpeg process is killed). Never throws
 * once started: a run that fails is logged and the next episode follows.
 */
export class FallbackSource implements MediaConnection {
  /** The run playing now: its episode, where its audio comes from, and how to stop it. */
  private current: { episodeId: string; from: 'rendition' | 'encode'; stop(): void } | null = null;
  private input: PublishInput | null = null;
  private closed = false;
  private timer: NodeJS.Timeout | null = null;
  /** The clock of the audio handed on (ms): each run's timestamps continue from the last one's. */
  private offsetMs = 0;
  private lastTs = 0;
  private next = 0;
  private queue: number[] = [];
  private failedRuns = 0;

  constructor(private readonly o: FallbackSourceOptions) {}

  /** Never routed: every message goes through `PublishInput.audio`. */
  route(): void {}

  /** The bitrate watch does not apply to the fallback (its bytes are ours). */
  audioBytes(): number {
    return 0;
  }

  /** Starts playing into `input`. */
  start(input: PublishInput): void {
    this.input = input;
    this.playNext();
  }

  /** Stops: the run ends (its FFmpeg process is killed) and the hub's input detached. */
  close(): void {
    if (this.closed) return;
    this.closed = true;
    if (this.timer) clearTimeout(this.timer);
    this.current?.stop();
    this.current = null;
    this.input?.detach();
  }

  /** What plays now (diagnostics, tests): the episode and its source (its cached rendition, or the live encode); null between runs. */
  playing(): { episodeId: string; from: 'rendition' | 'encode' } | null {
    return this.current ? { episodeId: this.current.episodeId, from: this.current.from } : null;
  }

  /** The index of the next episode of a plan of `n` (the plan may have changed since the last one). */
  private pick(plan: FallbackPlan): number {
    const n = plan.items.length;
    if (plan.order === 'sequential') {
      const i = this.next % n;
      this.next = i + 1;
      return i;
    }
    this.queue = this.queue.filter((i) => i < n);
    if (this.queue.length === 0) {
      this.queue = [...Array(n).keys()];
      for (let i = n - 1; i > 0; i--) {
        const j = Math.floor(Math.random() * (i + 1));
        [this.queue[i], this.queue[j]] = [this.queue[j]!, this.queue[i]!];
      }
    }
    return this.queue.shift()!;
  }

  private playNext(): void {
    this.timer = null;
    if (this.closed) return;
    const plan = this.o.plan();
    if (!plan || plan.items.length === 0) return this.wait(FAILED_WAIT_MS);
    const item = plan.items[this.pick(plan)]!;
    const { codec, kbps, format } = this.o;
    const cached = this.o.renditions?.rendition({ episodeId: item.id, path: item.path, codec, kbps, format }) ?? null;
    // Renditions of the plan's other episodes made stale meanwhile (new audio) are built before they play.
    this.o.renditions?.prepare(plan.items.map((i) => ({ episodeId: i.id, path: i.path, codec, kbps, format })));
    this.run(item, cached);
  }

  /** One run: `item` played from its cached rendition `cached` (paced in JS), or encoded from its file (null). */
  private run(item: FallbackItem, cached: string | null): void {
    let titled = false;
    const run = {
      episodeId: item.id,
      from: cached ? ('rendition' as const) : ('encode' as const),
      stop: () => {},
    };
    const audio = (ts: number, body: Buffer): void => {
      if (this.current !== run || !this.input) return;
      if (!titled) {
        titled = true;
        this.o.title(item.title);
      }
      this.lastTs = this.offsetMs + ts;
      const tag = readAudioTag(body);
      this.input.audio(this.lastTs, body, tag, false);
      if (tag.kind === 'frame') this.input.live();
    };
    const end = (ok: boolean, detail: Record<string, unknown>): void => {
      if (this.current !== run || this.closed) return;
      this.current = null;
      if (cached && !(ok && titled)) this.o.renditions?.unusable(cached);
      this.ended(ok && titled, detail);
    };
    this.current = run;
    if (cached) run.stop = paceRendition(cached, this.o.codec, { audio, end: (error) => end(error === null, { error }) }).stop;
    else run.stop = this.encode(item, audio, end);
  }

  /** Runs FFmpeg that encodes `item`'s file in real time on stdout, parsed into `audio`; `end` when it exits. Returns the kill. */
  private encode(item: FallbackItem, audio: (ts: number, body: Buffer) => void, end: (ok: boolean, detail: Record<string, unknown>) => void): () => void {
    const child = spawn(this.o.ffmpeg, fallbackArgs(item.path, this.o.codec, this.o.kbps, this.o.format), { stdio: ['ignore', 'pipe', 'pipe'] });
    const parser = new IcecastSource(this.o.codec, { maxFrameBytes: 65536 });
    let stderr = '';
    const handler = {
      audio,
      event: (e: IcecastSourceEvent) => {
        if (e.type === 'error') this.o.log.warn('fallback audio: bad output', { streamId: this.o.streamId, code: e.code, message: e.message });
      },
    };
    let killed = false;
    child.stdout!.on('data', (d: Buffer) => {
      if (!killed) parser.pushTo(d, handler);
    });
    child.stderr!.on('data', (d: Buffer) => {
      if (stderr.length < 2048) stderr += d.toString();
    });
    child.on('error', (e) => this.o.log.error('fallback audio: cannot run ffmpeg', { streamId: this.o.streamId, err: e.message }));
    child.once('close', (code) => end(code === 0, { code, stderr: stderr.trim().slice(0, 300) }));
    return () => {
      killed = true;
      child.kill('SIGKILL');
    };
  }

  /** A run ended (played through: `ok`): the next episode follows on the same clock, after a wait when it failed. */
  private ended(ok: boolean, detail: Record<string, unknown>): void {
    // The next run's clock starts one frame (at most ~26 ms) after this run's last message.
    this.offsetMs = this.lastTs + 26;
    if (ok) {
      this.failedRuns = 0;
      return this.playNext();
    }
    this.failedRuns++;
    this.o.log.warn('fallback audio: an episode could not be played', { streamId: this.o.streamId, ...detail });
    this.wait(this.failedRuns >= MAX_FAILED_RUNS ? FAILED_WAIT_MS : RETRY_MS);
  }

  private wait(ms: number): void {
    if (this.closed) return;
    this.timer = setTimeout(() => this.playNext(), ms);
    this.timer.unref();
  }
}
