/**
 * The only module that loads the C++ addon (`build/Release/skylark.node`). See docs/native-api.md.
 * Both classes are sans-I/O: bytes in, events out; protocol problems come back as `error` events.
 */
import { createRequire } from 'node:module';
import { fileURLToPath } from 'node:url';
import path from 'node:path';

/** Events of one RTMP connection (see docs/native-api.md). */
export type RtmpEvent =
  | { type: 'connect'; app: string; tcUrl: string; flashVer: string; fourCcList: string[] }
  | { type: 'publish'; streamName: string; publishType: string; streamId: number }
  | { type: 'unpublish'; streamId: number }
  | { type: 'metadata'; values: Record<string, number | string | boolean> }
  | { type: 'audio'; timestamp: number; data: Buffer }
  | { type: 'error'; code: string; message: string };

/** Sans-I/O RTMP server session: handshake, chunk streams, AMF0 commands (one per TCP connection). */
export interface RtmpSession {
  /** Feeds socket bytes; returns the events they completed. Never throws for bad input. */
  push(data: Uint8Array): RtmpEvent[];
  /** Bytes to write to the socket, or null when there are none. */
  takeOutput(): Buffer | null;
  /** Answers the pending publish with NetStream.Publish.Start. */
  acceptPublish(): void;
  /** Answers the pending (or refuses the running) publish with an error onStatus, e.g.
   *  NetStream.Publish.BadName or NetStream.Publish.Rejected. Write takeOutput(), then end the socket. */
  rejectPublish(code: string, description: string): void;
  /**
   * The socket closed: returns `[{type:'error', code:'protocol_violation'|'handshake_invalid'}]`
   * when the peer vanished mid-message or mid-handshake, else `[]`.
   */
  end(): RtmpEvent[];
  /** Bytes received so far. */
  readonly bytesIn: number;
}

/** Events of the AAC → MPEG-TS segmenter (see docs/native-api.md). */
export type SegmentEvent =
  | { type: 'config'; codec: 'aac'; codecs: string; sampleRate: number; channels: number; audioObjectType: number }
  | {
      type: 'segment';
      sequence: number;
      data: Buffer;
      durationMs: number;
      pts90k: number;
      discontinuity: boolean;
      frames: number;
    }
  | { type: 'error'; code: string; message: string };

/** Per-stream segmenter: FLV AAC audio in, MPEG-TS segments cut on audio duration out. */
export interface TsSegmenter {
  pushAudio(timestampMs: number, data: Uint8Array): SegmentEvent[];
  flush(): SegmentEvent[];
  discontinuity(): void;
}

interface Addon {
  RtmpSession: new (options?: { maxMessageBytes?: number }) => RtmpSession;
  TsSegmenter: new (options?: { targetDurationMs?: number }) => TsSegmenter;
  abiVersion: number;
}

const here = path.dirname(fileURLToPath(import.meta.url));
// src/native or dist/native → repository root is two levels up.
const addonPath = path.resolve(here, '..', '..', 'build', 'Release', 'skylark.node');
const addon = createRequire(import.meta.url)(addonPath) as Addon;

/** Constructor of RtmpSession. `maxMessageBytes` (bytes) caps any one RTMP message (default 1 MiB). */
export const RtmpSession = addon.RtmpSession;
/** Constructor of TsSegmenter. `targetDurationMs` (ms) is the segment target (default 2000). */
export const TsSegmenter = addon.TsSegmenter;
