/**
 * Episode transcripts as `PUT /v2/podcasts/{id}/episodes/{eid}/transcript` takes them
 * (docs/podcasts.md "Transcripts"): WebVTT (`text/vtt`, checked by the W3C's `webvtt-parser`),
 * SubRip (`application/x-subrip`, checked by `srt-validator`) or the Podcasting 2.0 transcript JSON
 * (`application/json`: `{version, segments: [{startTime, endTime, body, speaker?}]}`, checked by
 * `TranscriptJson` in ./schemas.ts with positions from `jsonc-parser`). A refusal is 400
 * `parameter_invalid` (`param: "body"`, or the JSON path of the bad value) whose message names the
 * line of the first error.
 */
import { createRequire } from 'node:module';
import { findNodeAtLocation, parseTree, printParseErrorCode, type ParseError } from 'jsonc-parser';
import { ApiError, paramInvalid } from '../../../base/errors/errors.js';
import { parse } from '../validation.js';
import { TranscriptJson } from './schemas.js';

/** The MIME types of the transcript formats taken, as stored and served. */
export const TRANSCRIPT_TYPES = ['text/vtt', 'application/x-subrip', 'application/json'] as const;
export type TranscriptType = (typeof TRANSCRIPT_TYPES)[number];

/** Largest transcript accepted (bytes): 2 MB, hours of speech in any of the formats. */
export const TRANSCRIPT_MAX_BYTES = 2_000_000;

interface VttParser {
  parse(input: string, mode: 'metadata'): { cues: unknown[]; errors: Array<{ message: string; line: number; col?: number }> };
}
// Both are CommonJS (webvtt-parser without type declarations): loaded through require, typed here.
const require = createRequire(import.meta.url);
const { WebVTTParser } = require('webvtt-parser') as { WebVTTParser: new () => VttParser };
const { validator: srtValidator } = require('srt-validator') as typeof import('srt-validator');

/**
 * The transcript type a request's `Content-Type` names (parameters such as `charset` ignored;
 * `application/srt` and `text/srt` are taken as SubRip), or null when it is none of them.
 */
export function transcriptTypeOf(contentType: string): TranscriptType | null {
  const t = contentType.split(';')[0]!.trim().toLowerCase();
  if (t === 'text/vtt') return 'text/vtt';
  if (t === 'application/x-subrip' || t === 'application/srt' || t === 'text/srt') return 'application/x-subrip';
  if (t === 'application/json') return 'application/json';
  return null;
}

const invalid = (line: number, what: string, param = 'body', doc = 'transcript') => paramInvalid(param, `Invalid ${doc} at line ${line}: ${what}`);

/** 1-based line of `offset` in `text`. */
const lineAt = (text: string, offset: number) => text.slice(0, offset).split(/\r\n|\r|\n/).length;

/**
 * Checks a transcript body of `type` and returns the text to store (UTF-8, a leading BOM removed).
 * @throws ApiError 400 `parameter_invalid`: not UTF-8, empty, no cue or segment, or the format's
 * first error (its line in the message; for JSON, `param` is the path of the bad value)
 */
export function checkTranscript(type: TranscriptType, bytes: Uint8Array): string {
  let text: string;
  try {
    text = new TextDecoder('utf-8', { fatal: true }).decode(bytes);
  } catch {
    throw new ApiError('parameter_invalid', 'The transcript must be UTF-8 text.', { param: 'body' });
  }
  if (text.charCodeAt(0) === 0xfeff) text = text.slice(1);
  if (text.trim() === '') throw new ApiError('body_missing', 'The transcript is empty.');
  if (type === 'text/vtt') {
    const r = new WebVTTParser().parse(text, 'metadata');
    const e = r.errors[0];
    if (e) throw invalid(e.line, e.message);
    if (r.cues.length === 0) throw invalid(lineAt(text, text.length), 'no cue.');
  } else if (type === 'application/x-subrip') {
    const e = srtValidator(text.replace(/\r\n?/g, '\n').replace(/\n+$/, '\n'))[0];
    if (e) throw invalid(e.lineNumber, e.message);
  } else {
    checkJson(text);
  }
  return text;
}

function checkJson(text: string): void {
  const doc = checkJsonDocument(text, TranscriptJson, 'transcript');
  const i = doc.value.segments.findIndex((s) => s.endTime < s.startTime);
  if (i >= 0) throw doc.invalidAt(['segments', i, 'endTime'], 'endTime is before startTime.');
}

/** A JSON document checked by `checkJsonDocument`: its value, and a refusal naming the line of a path in it. */
export interface CheckedJson<T> {
  value: T;
  /** A 400 `parameter_invalid` whose `param` is `path` joined with dots and whose message names its line. */
  invalidAt(path: Array<string | number>, what: string): ApiError;
}

/**
 * Parses `text` as JSON (no comments, no trailing commas) and validates it with the valibot
 * `schema`. A refusal is 400 `parameter_invalid` whose message names the line of the first error
 * (`Invalid <doc> at line n: …`) and whose `param` is the JSON path of the bad value (dotted), or
 * `body` for a syntax error.
 * @throws ApiError 400 `parameter_invalid`
 */
export function checkJsonDocument<S extends Parameters<typeof parse>[0]>(text: string, schema: S, docName: string): CheckedJson<ReturnType<typeof parse<S>>> {
  const errors: ParseError[] = [];
  const tree = parseTree(text, errors, { disallowComments: true, allowTrailingComma: false, allowEmptyContent: false });
  const e = errors[0];
  if (e || !tree) throw invalid(e ? lineAt(text, e.offset) : 1, e ? `${printParseErrorCode(e.error)} (JSON syntax).` : 'not JSON.', 'body', docName);
  // The line of the value at `path`, else of the nearest enclosing one that exists (a missing key).
  const lineOf = (path: Array<string | number>) => {
    let node;
    for (let n = path.length; n >= 0 && !node; n--) node = findNodeAtLocation(tree, path.slice(0, n));
    return lineAt(text, node?.offset ?? 0);
  };
  try {
    const value = parse(schema, JSON.parse(text));
    return { value, invalidAt: (path, what) => invalid(lineOf(path), what, path.join('.'), docName) };
  } catch (err) {
    if (!(err instanceof ApiError) || !err.param) throw err;
    const path = err.param === 'body' ? [] : err.param.split('.').map((k) => (/^\d+$/.test(k) ? Number(k) : k));
    throw invalid(lineOf(path), err.message, err.param, docName);
  }
}
