/**
 * The webhook signature scheme (spec "Signature verification", docs/behaviour.md §6):
 * `Service-Signature: t=<unix seconds>,v1=<lowercase hex HMAC-SHA256(secret, "<t>.<raw body>")>`,
 * keyed with the full `whsec_…` string — the scheme of Stripe's `Stripe-Signature`, so stripe-node's
 * `Stripe.webhooks.constructEvent` verifies it. Pure functions on the main thread; delivery signs in
 * Piscina workers (src/control/webhooks/sign-worker.mjs computes exactly `signPayload`).
 */
import { createHmac, timingSafeEqual } from 'node:crypto';

/** Receivers reject a signature whose `t` is further than this from their clock (seconds; spec "Limits"). */
export const SIGNATURE_TOLERANCE_S = 300;

/** Lowercase hex HMAC-SHA256 of `<t>.<body>` keyed with `secret` (the whole `whsec_…` string). */
export function signPayload(secret: string, t: number, body: string | Buffer): string {
  return createHmac('sha256', secret).update(`${t}.`).update(body).digest('hex');
}

/** The header value `t=<t>,v1=<hex>` (no spaces). */
export function signatureHeader(t: number, v1: string): string {
  return `t=${t},v1=${v1}`;
}

/** Why a signature was refused by `verifySignature`. */
export class SignatureError extends Error {
  constructor(readonly code: 'malformed_header' | 'timestamp_out_of_tolerance' | 'no_matching_signature', message: string) {
    super(message);
    this.name = 'SignatureError';
  }
}

/**
 * Verifies a `Service-Signature` header against the raw body (what a receiver does; used by tests and
 * the README example). Accepts several `v1=` entries (any may match).
 * @param nowS the receiver's clock, Unix seconds
 * @throws SignatureError when the header is malformed, `t` is more than `toleranceS` from `nowS`, or no `v1` matches
 */
export function verifySignature(body: string | Buffer, header: string, secret: string, nowS = Math.floor(Date.now() / 1000), toleranceS = SIGNATURE_TOLERANCE_S): void {
  let t: number | undefined;
  const v1: string[] = [];
  for (const part of header.split(',')) {
    const i = part.indexOf('=');
    if (i < 0) continue;
    const k = part.slice(0, i).trim();
    const v = part.slice(i + 1).trim();
    if (k === 't' && /^\d+$/.test(v)) t = Number(v);
    else if (k === 'v1') v1.push(v);
  }
  if (t === undefined || v1.length === 0) throw new SignatureError('malformed_header', 'The header needs t=<unix seconds> and v1=<hex>.');
  if (Math.abs(nowS - t) > toleranceS) throw new SignatureError('timestamp_out_of_tolerance', `t is more than ${toleranceS} s from now.`);
  const expected = Buffer.from(signPayload(secret, t, body), 'hex');
  const ok = v1.some((s) => {
    const got = Buffer.from(s, 'hex');
    return got.length === expected.length && timingSafeEqual(got, expected);
  });
  if (!ok) throw new SignatureError('no_matching_signature', 'No v1 signature matches the body.');
}
