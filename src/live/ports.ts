/**
 * The live plane's public surface for the control plane (docs/architecture.md "Planes and import
 * rules"): what a stream lifecycle needs to know of ingest and media, and nothing of their
 * internals. The ingest port itself (what ingest asks of the node) is ./ingest/port.ts.
 */
export type { Recording } from './media/recorder.js';
export { isAudioCodec, type AudioCodec } from './media/codec.js';
export type { IngestPort, NowPlayingUpdate, PublishDecision, PublishGrant, StreamError, StreamSource, SourceChangeReason, FallbackSetting, LoudnessReading } from './ingest/port.js';
export type { FallbackItem, FallbackPlan } from './ingest/fallback.js';
