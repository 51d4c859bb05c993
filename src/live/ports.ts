/**
 * The live plane's public surface (docs/architecture.md "Planes and import rules"): what the
 * control plane's stream lifecycle needs to know of ingest and media, and the Icecast port's
 * listener contract the delivery plane implements — nothing of their internals. The ingest port
 * itself (what ingest asks of the node) is ./ingest/port.ts.
 */
export type { Recording } from './media/recorder.js';
export { isAudioCodec, type AudioCodec } from './media/codec.js';
export type { IcecastListenAnswer, IcecastListenRequest, IcecastListenSink, IcecastListening } from './ingest/port.js';
export type { IngestPort, NowPlaying, PublishDecision, PublishGrant, StreamError, StreamSource, SourceChangeReason, FallbackSetting, LoudnessReading } from './ingest/port.js';
export type { FallbackItem, FallbackPlan } from './ingest/fallback.js';
