// Piscina worker: signs webhook payloads (spec "Signature verification", docs/behaviour.md §6).
// Plain ESM using node:crypto only, so the same file loads under tsx/vitest (from src/) and under
// the compiled build (dist/webhooks/signer.js resolves it in src/workers/, like the migrations).
// Task: { items: Array<{ secret: string, t: number, body: string }> } → Array<string> (lowercase hex
// HMAC-SHA256 of `${t}.${body}` keyed with the whole `whsec_…` secret), same order.
import { createHmac } from 'node:crypto';

export default function sign({ items }) {
  const out = new Array(items.length);
  for (let i = 0; i < items.length; i++) {
    const { secret, t, body } = items[i];
    out[i] = createHmac('sha256', secret).update(`${t}.`).update(body).digest('hex');
  }
  return out;
}
