/**
 * Fallback switching (docs/behaviour.md §2 "Fallback", docs/streams.md "Fallback"): what a stream with a
 * fallback plays while no live audio is on air — before its first broadcast, once its publisher
 * left, or while the live audio is silent — and the switches between the two, each told to the
 * port as the stream's `source` (a switch to or from the fallback is a `stream.source_changed`).
 * The fallback is encoded at the stream's last live format (kept through the port across
 * restarts), and the rendition cache follows the plans. Publishing (./publishing.ts) owns the
 * per-stream entries; this file switches their source.
 */
import type { Logger } from '../../base/logger.js';
import type { MediaRegistry } from '../media/registry.js';
import type { AudioTag } from '../media/codec.js';
import { audioFormatOf, DEFAULT_AUDIO_FORMAT, type AudioFormat } from '../media/audio-format.js';
import type { FallbackSetting, IngestPort, NowPlaying, PublishGrant, SourceChangeReason, StreamSource } from './port.js';
import { FallbackSource, type RenditionWant } from './fallback.js';
import { sameSettings, type PublishingOptions, type StreamIngest } from './publish-entry.js';

/** What the switch reads and asks of publishing. */
export interface FallbackSwitchDeps {
  /** Publishing's entries, by stream id (shared: the switch reads and changes their source). */
  streams: Map<string, StreamIngest>;
  port: IngestPort;
  media: MediaRegistry;
  log: Logger;
  options: PublishingOptions;
  now: () => number;
  /** A new entry and hub for the stream (one made for the fallback does not record). */
  openIngest(grant: PublishGrant, recording: boolean): StreamIngest;
  /** Ends the entry's hub (made with settings no longer the stream's) and forgets the entry. */
  retire(streamId: string, s: StreamIngest): undefined;
  /** What plays now changed (the live source's title goes back on air with its audio). */
  nowPlaying(streamId: string, np: NowPlaying | null): void;
  /** An episode's title, through the title cap (docs/listeners.md "Title changes"). */
  offerTitle(streamId: string, np: NowPlaying): void;
}

/** Plays and stops the streams' fallbacks, and tells the port where each stream's audio comes from. */
export class FallbackSwitch {
  /** The format of each stream's last live source seen by this process (the port keeps it across restarts). */
  private readonly liveFormats = new Map<string, AudioFormat>();

  constructor(private readonly d: FallbackSwitchDeps) {}

  /**
   * The stream's fallback was set, changed or removed, or the stream was deleted: read again
   * through the port (docs/streams.md "Fallback"). While no live audio is on air the fallback plays
   * (from its next episode, the stream's HLS and `/listen` on air from now, also before a first
   * broadcast); removed, it stops, and a stream that is not live goes off air. Live audio on air
   * goes on: the plan is read again when the fallback next plays.
   */
  changed(streamId: string): void {
    if (!this.d.port.streamState(streamId)) this.liveFormats.delete(streamId);
    this.played(streamId);
    this.syncCache();
  }

  /** What the stream's fallback plays now (diagnostics, tests: docs/streams.md "Fallback"): the episode, from its cached rendition or the live encode; null when none plays. */
  playing(streamId: string): { episodeId: string; from: 'rendition' | 'encode' } | null {
    return this.d.streams.get(streamId)?.fallback?.playing() ?? null;
  }

  /** The stream's fallback as it is now: played (unless live audio is on air) or stopped. */
  played(streamId: string): void {
    const f = this.d.port.fallback?.(streamId) ?? null;
    const s = this.d.streams.get(streamId);
    if (!f) return this.removed(streamId, s);
    if (s?.publisher && !s.fallback) return;
    this.play(streamId, s, f, null);
  }

  /**
   * The rendition cache holds what the plans name now (docs/streams.md "Fallback"): every
   * stream's playable episodes at the stream's codec and top bitrate (and at those of a hub
   * still playing with earlier settings); every other entry is removed, missing ones are built.
   */
  syncCache(): void {
    const cache = this.d.options.fallbackCache;
    if (!cache || !this.d.port.fallback || !this.d.port.fallbackStreamIds) return;
    const wanted: RenditionWant[] = [];
    for (const streamId of this.d.port.fallbackStreamIds()) {
      const f = this.d.port.fallback(streamId);
      if (!f) continue;
      const grants = [f.grant];
      const st = this.d.streams.get(streamId);
      if (st?.fallback && !sameSettings(st.grant, f.grant)) grants.push(st.grant);
      const format = this.format(streamId, f);
      for (const g of grants) for (const item of f.plan.items) wanted.push({ episodeId: item.id, path: item.path, codec: g.codec, kbps: g.ladderKbps[0]!, format });
    }
    cache.sync(wanted);
  }

  /** The fallback plays in place of whatever is on air (a silent publisher stays attached, muted). */
  play(streamId: string, s: StreamIngest | undefined, f: FallbackSetting, reason: SourceChangeReason | null): void {
    const ffmpeg = this.d.options.ffmpeg();
    if (!ffmpeg) {
      this.d.log.error('no ffmpeg: the fallback cannot play', { streamId });
      return;
    }
    let st = s;
    const source = st?.source ?? null;
    if (st && (st.hub.ended || (!st.publisher && !st.liveTriggered && !sameSettings(st.grant, f.grant)))) st = this.d.retire(streamId, st);
    if (!st) {
      st = this.d.openIngest(f.grant, false);
      st.source = source;
    }
    const old = st.fallback;
    const src: FallbackSource = new FallbackSource({
      streamId,
      ffmpeg,
      codec: st.grant.codec,
      kbps: st.grant.ladderKbps[0]!,
      format: this.format(streamId, f),
      plan: () => this.d.port.fallback?.(streamId)?.plan ?? null,
      title: (title) => this.title(streamId, src, title),
      log: this.d.log,
      renditions: this.d.options.fallbackCache,
    });
    st.fallback = src;
    old?.close();
    src.start(st.publisher ? st.hub.muteFor(src) : st.hub.attach(src, { fallback: true }));
    this.setSource(streamId, st, 'fallback', reason);
  }

  /**
   * Reads the live source's format from `tag` (an AAC or Opus sequence header, an MP3 frame): a
   * new one is remembered and told to the port (the fallback plays at it from its next start, and
   * the rendition cache is brought to it).
   */
  liveFormat(streamId: string, s: StreamIngest, tag: AudioTag): void {
    const format = audioFormatOf(tag);
    if (!format) return;
    s.sawFormat = true;
    const was = this.liveFormats.get(streamId);
    if (was?.sampleRate === format.sampleRate && was.channels === format.channels) return;
    this.liveFormats.set(streamId, format);
    this.d.port.onLiveFormat?.(streamId, format);
    // The stream's renditions in the new format are built now; those in the old one go.
    if (this.d.port.fallback?.(streamId)) this.syncCache();
  }

  /** The format the stream's fallback is encoded at: its last live source's, else 48 kHz stereo (docs/streams.md "Fallback"). */
  private format(streamId: string, f: FallbackSetting): AudioFormat {
    return this.liveFormats.get(streamId) ?? f.liveFormat ?? DEFAULT_AUDIO_FORMAT;
  }

  /** The fallback is gone: a muted publisher is on air again; else the stream goes off air unless a broadcast holds it. */
  private removed(streamId: string, s: StreamIngest | undefined): void {
    if (!s?.fallback) return;
    if (this.returnToLive(streamId, s)) return;
    s.fallback.close();
    s.fallback = null;
    this.setSource(streamId, s, null, null);
    // A publish not live yet, or a reconnect window: the hub waits as it would without a fallback.
    if (s.publisher || this.d.port.streamState(streamId)?.status === 'live') return;
    this.d.streams.delete(streamId);
    this.d.media.end(streamId);
  }

  /** A muted publisher goes back on air (its audio returned, or the fallback was removed); false when none is muted. */
  private returnToLive(streamId: string, s: StreamIngest): boolean {
    const src = s.fallback;
    if (!src || !s.hub.unmute()) return false;
    s.fallback = null;
    src.close();
    this.setSource(streamId, s, 'live', 'audio_returned');
    this.d.nowPlaying(streamId, s.liveTitle);
    return true;
  }

  /** The publisher's audio fell silent for the fallback's `silenceSeconds`, or sound returned (docs/streams.md "Fallback"). */
  silence(streamId: string, silent: boolean): void {
    const s = this.d.streams.get(streamId);
    if (!s?.publisher) return;
    if (!silent) {
      if (this.returnToLive(streamId, s)) this.d.log.info('live audio returned: fallback off', { streamId });
      return;
    }
    const f = s.fallback ? null : (this.d.port.fallback?.(streamId) ?? null);
    if (!f) return;
    this.d.log.info('live audio silent: fallback on', { streamId });
    this.play(streamId, s, f, 'silence');
  }

  /** An episode of the fallback started: it is what plays now (the hub's timed metadata and the stream's `nowPlaying`). */
  private title(streamId: string, src: FallbackSource, title: string): void {
    if (this.d.streams.get(streamId)?.fallback !== src) return;
    this.d.offerTitle(streamId, { title: title.slice(0, 256), fallback: true, startedAtMs: this.d.now() });
  }

  /**
   * Tells the port of a change of the stream's `source` (none when it is the same). Only a switch
   * to or from the fallback is an event (docs/streams.md "Fallback"): without one, going live and
   * idle is told by `stream.started` and `stream.ended`.
   */
  setSource(streamId: string, s: StreamIngest, source: StreamSource, reason: SourceChangeReason | null): void {
    const was = s.source;
    if (was === source) return;
    s.source = source;
    this.d.port.onSourceChanged?.(streamId, source, was === 'fallback' || source === 'fallback' ? reason : null);
  }
}
