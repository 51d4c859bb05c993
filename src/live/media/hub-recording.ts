/**
 * The recording of a stream's hub (docs/behaviour.md §3 "Recording", §13 for the disk floor): opens
 * the stream's `Recorder` (src/live/media/recorder.ts) — new or resuming a file an earlier run left —
 * takes the publisher's frames, reports a stop as `recording_stopped`, and hands the finished file
 * to the hub's owner (`HubEvents.recording`). Owned by src/live/media/hub.ts.
 */
import { Recorder, type RecordingStop } from './recorder.js';
import type { AudioTag } from './codec.js';
import type { HubEvents, HubOptions, RecordingTarget } from './hub-types.js';

/** The recording of one hub: at most one `Recorder` at a time. */
export class HubRecording {
  private recorder: Recorder | null = null;

  constructor(
    private readonly streamId: string,
    private readonly opts: HubOptions,
    private readonly events: HubEvents,
  ) {}

  /** Whether a recording is open (then every ingest frame must reach JS). */
  get active(): boolean {
    return this.recorder !== null;
  }

  /**
   * Starts recording into `target`; no-op while one records. A file that cannot be opened is
   * reported as `recording_stopped` (`write_failed`) and nothing records.
   */
  record(target: RecordingTarget): void {
    if (this.recorder) return;
    const o = {
      streamId: this.streamId,
      minFreeBytes: target.minFreeBytes,
      onStopped: (s: RecordingStop) => {
        const message =
          s.reason === 'disk_free'
            ? `Recording stopped: the data volume has ${s.freeBytes} bytes free, under the floor of ${s.minFreeBytes}. What was recorded is kept.`
            : `Recording stopped: a write failed (${s.message}). What was recorded is kept.`;
        this.opts.log?.error('recording stopped', { streamId: this.streamId, reason: s.reason });
        this.events.error({ code: 'recording_stopped', message, reason: s.reason });
      },
      onDrop: (why: string) => this.opts.log?.warn('recording: frame dropped (logged once per recording)', { streamId: this.streamId, why }),
    };
    try {
      // Synchronous, so that the first frames (the sequence header among them) are kept.
      this.recorder = target.resume ? Recorder.resume(target.resume, o) : Recorder.create(target.dir, target.name, this.opts.codec, o);
    } catch (e) {
      o.onStopped({ reason: 'write_failed', message: (e as Error).message });
    }
  }

  /** One ingest audio body read as `tag`, to the open recording (if any). */
  push(data: Uint8Array, tag: AudioTag): void {
    this.recorder?.push(data, tag);
  }

  /** The broadcast ended: the recording (if any) is finished and handed over (`HubEvents.recording`). */
  stop(): void {
    const rec = this.take();
    if (rec) void this.finish(rec);
  }

  /** Takes the open recorder away (null when none): it records no more and is not handed over. */
  take(): Recorder | null {
    const rec = this.recorder;
    this.recorder = null;
    return rec;
  }

  /** Stops without handing over (server shutdown): the file is closed but kept with its sidecar, for the next run. */
  async close(): Promise<void> {
    const rec = this.take();
    if (rec) await rec.finish(null).catch(() => {});
  }

  private async finish(rec: Recorder): Promise<void> {
    try {
      const done = await rec.finish(this.opts.ffmpeg?.() ?? null);
      this.events.recording?.(done);
    } catch (e) {
      this.opts.log?.error('recording failed', { streamId: this.streamId, err: (e as Error).message });
    }
  }
}

/** Removes a recording taken from a hub whose stream never went live (`HubRecording.take`). */
export function discardRecording(rec: Recorder): void {
  void rec.finish(null).then(
    (r) => r.release(),
    () => rec.discard(),
  );
}
