/**
 * The listener objects of the API (docs/behaviour.md §4, §9): the shapes the listeners room
 * (src/delivery/listeners/registry.ts) makes and the control plane's listeners service
 * (src/control/services/listeners.ts) shows. Declared here, in base, because both planes speak
 * them and neither may import the other.
 */

/** How a listener listens: an HLS session, a WebRTC (WHEP) peer, or a progressive (Icecast-style) connection. */
export type ListenerProtocol = 'hls' | 'webrtc' | 'icecast';

/** The listener object of the API (`lst_…`). Times ISO 8601. */
export interface ListenerObject {
  id: string;
  object: 'listener';
  streamId: string;
  protocol: ListenerProtocol;
  country: string | null;
  connectedAt: string;
  lastSeenAt: string;
  durationSeconds: number;
  userAgent: string | null;
  /** `catch_up` for a listener of the catch-up playlists (docs/behaviour.md §17), else `live`. */
  mode: 'live' | 'catch_up';
}

/** `/stats` (`object: "stream_stats"`). Countries of the current listeners, most first. */
export interface StreamStats {
  object: 'stream_stats';
  streamId: string;
  listenerCount: number;
  peakListenerCount: number;
  countries: Array<{ country: string | null; listeners: number }>;
  averageListenDurationSeconds: number;
  totalListeners: number;
}
