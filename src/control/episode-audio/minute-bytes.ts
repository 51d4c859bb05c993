/**
 * How many bytes of an episode's audio file make its first minute (docs/podcasts.md "Download
 * counting"): the bytes before the audio — an ID3v2 tag (ID3v2.4 §3.1: 10-byte header, synchsafe
 * size, optional 10-byte footer; several tags in a row are skipped), the boxes before `mdat`'s
 * payload in MP4 (ISO/IEC 14496-12 §4.2), the chunks before `data`'s payload in WAV (RIFF), the
 * metadata blocks of FLAC — plus 60 seconds at the file's average bitrate ((size − those bytes) ×
 * 8 / duration), capped at the file's size. Other containers (Ogg, WebM, ADTS without a tag) count
 * their audio from byte 0, which their headers of a few KB barely move.
 */
import { closeSync, openSync, readSync } from 'node:fs';

/** Seconds of audio a download must have been sent. */
export const MINUTE_SECONDS = 60;

function readAt(fd: number, pos: number, n: number): Buffer {
  const b = Buffer.alloc(n);
  const got = readSync(fd, b, 0, n, pos);
  return b.subarray(0, got);
}

/** Bytes before the audio of the file open at `fd` (`size` bytes); 0 when unknown. */
function audioStart(fd: number, size: number): number {
  const head = readAt(fd, 0, 12);
  if (head.length < 12) return 0;
  const tag = head.toString('latin1', 0, 4);
  if (tag === 'RIFF' && head.toString('latin1', 8, 12) === 'WAVE') {
    let pos = 12;
    for (let i = 0; i < 64 && pos + 8 <= size; i++) {
      const c = readAt(fd, pos, 8);
      if (c.length < 8) break;
      if (c.toString('latin1', 0, 4) === 'data') return pos + 8;
      pos += 8 + c.readUInt32LE(4) + (c.readUInt32LE(4) & 1);
    }
    return 0;
  }
  if (tag === 'fLaC') {
    let pos = 4;
    for (let i = 0; i < 1024 && pos + 4 <= size; i++) {
      const h = readAt(fd, pos, 4);
      if (h.length < 4) break;
      pos += 4 + ((h[1]! << 16) | (h[2]! << 8) | h[3]!);
      if (h[0]! & 0x80) return pos; // last metadata block
    }
    return 0;
  }
  if (head.toString('latin1', 4, 8) === 'ftyp') {
    let pos = 0;
    for (let i = 0; i < 64 && pos + 8 <= size; i++) {
      const b = readAt(fd, pos, 16);
      if (b.length < 8) break;
      let len = b.readUInt32BE(0);
      let hdr = 8;
      if (len === 1 && b.length >= 16) {
        len = Number(b.readBigUInt64BE(8));
        hdr = 16;
      } else if (len === 0) len = size - pos;
      if (b.toString('latin1', 4, 8) === 'mdat') return pos + hdr;
      if (len < hdr) break;
      pos += len;
    }
    return 0;
  }
  // ID3v2 tags (MP3, ADTS AAC): skip each one.
  let pos = 0;
  for (let i = 0; i < 8; i++) {
    const h = readAt(fd, pos, 10);
    if (h.length < 10 || h.toString('latin1', 0, 3) !== 'ID3') break;
    const len = ((h[6]! & 0x7f) << 21) | ((h[7]! & 0x7f) << 14) | ((h[8]! & 0x7f) << 7) | (h[9]! & 0x7f);
    pos += 10 + len + (h[5]! & 0x10 ? 10 : 0);
  }
  return pos;
}

/**
 * The bytes of `path` (`size` bytes, `durationSeconds` long, null when unknown) that make its
 * first minute: bytes before the audio + 60 s at the average bitrate, at most `size`. Without a
 * duration (or for a file of a minute or less) the whole file.
 * @throws Error when the file cannot be read
 */
export function minuteBytes(path: string, size: number, durationSeconds: number | null): number {
  if (!durationSeconds || durationSeconds <= MINUTE_SECONDS || size <= 0) return Math.max(0, size);
  const fd = openSync(path, 'r');
  try {
    const start = Math.min(audioStart(fd, size), size);
    const perSecond = (size - start) / durationSeconds;
    return Math.min(size, start + Math.ceil(perSecond * MINUTE_SECONDS));
  } finally {
    closeSync(fd);
  }
}
