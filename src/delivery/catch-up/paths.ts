/**
 * The paths the catch-up routes answer (src/delivery/catch-up/routes.ts). Worker threads forward
 * them to the main thread, which reads the catch-up index and the disk: registered there, they
 * win over the live HLS pattern `/hls/:id/:layer/:file` (a static segment beats a parameter).
 */
export const CATCH_UP_PATTERNS = [
  '/hls/:id/rewind.m3u8',
  '/hls/:id/rewind/:file',
  '/hls/:id/from/:file',
  '/hls/:id/from/:t/:file',
  '/hls/:id/archive/:file',
  '/hls/:id/archive/:span/:file',
  '/hls/:id/broadcasts/:file',
  '/hls/:id/broadcasts/:brd/:file',
  '/hls/:id/catchup/:layer/:file',
] as const;
