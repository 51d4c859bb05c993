/**
 * Episode chapters as `PUT /v2/podcasts/{id}/episodes/{eid}/chapters` takes them (docs/podcasts.md
 * "Chapters"): a Podcasting 2.0 JSON chapters document (the podcast namespace's
 * `chapters/jsonChapters.md`, `application/json+chapters`; `application/json` is taken too),
 * checked by `ChaptersJson` in ./schemas.ts with positions from `jsonc-parser`, as transcripts are
 * (./transcript.ts). A refusal is 400 `parameter_invalid` whose `param` is the JSON path of the bad
 * value (`chapters.2.startTime`) and whose message names its line.
 */
import { ApiError } from '../../../base/errors/errors.js';
import { ChaptersJson } from './schemas.js';
import { checkJsonDocument } from './transcript.js';

/** Largest chapters document accepted (bytes): 1 MB, far above a thousand chapters with images and links. */
export const CHAPTERS_MAX_BYTES = 1_000_000;

/** The media types the chapters route takes. */
export const CHAPTERS_UPLOAD_TYPES = ['application/json+chapters', 'application/json'] as const;

/** Whether a request's `Content-Type` (parameters such as `charset` ignored) is one the chapters route takes. */
export function isChaptersType(contentType: string): boolean {
  const t = contentType.split(';')[0]!.trim().toLowerCase();
  return (CHAPTERS_UPLOAD_TYPES as readonly string[]).includes(t);
}

/**
 * Checks a chapters document and returns the text to store (UTF-8, a leading BOM removed).
 * Besides the shape: each `endTime` is not before its `startTime`, and chapters come in order of
 * `startTime` (players list them as given).
 * @throws ApiError 400 `parameter_invalid` (not UTF-8, not JSON, a bad or missing value), `body_missing` (empty)
 */
export function checkChapters(bytes: Uint8Array): string {
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    throw new ApiError('parameter_invalid', 'The chapters document must be UTF-8 text.', { param: 'body' });
  }
  if (text.charCodeAt(0) === 0xfeff) text = text.slice(1);
  if (text.trim() === '') throw new ApiError('body_missing', 'The chapters document is empty.');
  const doc = checkJsonDocument(text, ChaptersJson, 'chapters document');
  const chapters = doc.value.chapters;
  for (let i = 0; i < chapters.length; i++) {
    const c = chapters[i]!;
    if (c.endTime !== undefined && c.endTime < c.startTime) throw doc.invalidAt(['chapters', i, 'endTime'], 'endTime is before startTime.');
    if (i > 0 && c.startTime < chapters[i - 1]!.startTime) throw doc.invalidAt(['chapters', i, 'startTime'], 'chapters must be in order of startTime.');
  }
  return text;
}
