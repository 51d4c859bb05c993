/**
 * The signature scheme (spec "Signature verification", docs/behaviour.md §6): a known-answer vector
 * (computed independently with `openssl dgst -sha256 -hmac`), stripe-node's verifier
 * (`Stripe.webhooks.constructEvent`, an independent implementation of the same scheme) accepting
 * what the Piscina workers sign, the 300 s tolerance, and the worker loading from src/ and dist/.
 */
import { afterAll, describe, expect, it } from 'vitest';
import { existsSync } from 'node:fs';
import path from 'node:path';
import { pathToFileURL } from 'node:url';
import Stripe from 'stripe';
import { signPayload, signatureHeader, verifySignature, SignatureError } from '../../../../src/control/webhooks/signature.js';
import { PiscinaSigner, MainThreadSigner, signWorkerFile } from '../../../../src/control/webhooks/signer.js';
import { newSigningSecret } from '../../../../src/control/services/webhooks.js';

const KAT = {
  secret: 'whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw',
  t: 1773532800,
  body: '{"id":"evt_kat","object":"event","type":"webhook.test","created":1773532800,"livemode":false,"data":{"object":{}}}',
  v1: '9ad22257a018ded7d137f50fa26ca64fd77361ae450e90855ab93094b8837dd7',
};

const signer = new PiscinaSigner({ minThreads: 1, maxThreads: 1 });
afterAll(() => signer.close());

describe('webhook signatures', () => {
  it('match the known-answer vector on the main thread and in the Piscina worker', async () => {
    expect(signPayload(KAT.secret, KAT.t, KAT.body)).toBe(KAT.v1);
    expect(await signer.sign(KAT.secret, KAT.t, KAT.body)).toBe(KAT.v1);
    expect(await new MainThreadSigner().sign(KAT.secret, KAT.t, KAT.body)).toBe(KAT.v1);
    expect(signatureHeader(KAT.t, KAT.v1)).toBe(`t=${KAT.t},v1=${KAT.v1}`);
  });

  it('are accepted by stripe-node Stripe.webhooks.constructEvent (worker-signed, many in one batch)', async () => {
    const secrets = Array.from({ length: 20 }, () => newSigningSecret());
    expect(secrets[0]).toMatch(/^whsec_[A-Za-z0-9]{32}$/);
    const t = Math.floor(Date.now() / 1000);
    const bodies = secrets.map((_, i) => JSON.stringify({ id: `evt_${i}`, object: 'event', type: 'webhook.test', created: t, livemode: false, data: { object: { n: i, s: 'ünïcödé ✓' } } }));
    const sigs = await Promise.all(secrets.map((s, i) => signer.sign(s, t, bodies[i]!)));
    for (let i = 0; i < secrets.length; i++) {
      const header = signatureHeader(t, sigs[i]!);
      const evt = Stripe.webhooks.constructEvent(bodies[i]!, header, secrets[i]!) as unknown as { id: string };
      expect(evt.id).toBe(`evt_${i}`);
      expect(() => Stripe.webhooks.constructEvent(bodies[i]! + ' ', header, secrets[i]!)).toThrow();
      expect(() => Stripe.webhooks.constructEvent(bodies[i]!, header, secrets[(i + 1) % secrets.length]!)).toThrow();
      verifySignature(bodies[i]!, header, secrets[i]!);
    }
  });

  it('our verifier enforces the 300 s tolerance and rejects tampering', () => {
    const header = signatureHeader(KAT.t, KAT.v1);
    verifySignature(KAT.body, header, KAT.secret, KAT.t + 300);
    verifySignature(KAT.body, header, KAT.secret, KAT.t - 300);
    const code = (f: () => void) => {
      try {
        f();
      } catch (e) {
        return (e as SignatureError).code;
      }
      return 'accepted';
    };
    expect(code(() => verifySignature(KAT.body, header, KAT.secret, KAT.t + 301))).toBe('timestamp_out_of_tolerance');
    expect(code(() => verifySignature(KAT.body.replace('kat', 'kau'), header, KAT.secret, KAT.t))).toBe('no_matching_signature');
    expect(code(() => verifySignature(KAT.body, 'v1=abc', KAT.secret, KAT.t))).toBe('malformed_header');
    // stripe-node applies the same 300 s default tolerance to our header.
    expect(() => Stripe.webhooks.constructEvent(KAT.body, header, KAT.secret)).toThrow(/tolerance/i);
  });

  it('the worker file resolves from src/ and, when built, from dist/', async () => {
    expect(signWorkerFile()).toMatch(/src[/\\]control[/\\]webhooks[/\\]sign-worker\.mjs$/);
    const dist = path.resolve(import.meta.dirname, '..', '..', '..', '..', 'dist', 'control', 'webhooks', 'signer.js');
    if (!existsSync(dist)) return; // `npm test` builds first; a bare vitest run may not have dist/
    const mod = (await import(pathToFileURL(dist).href)) as typeof import('../../../../src/control/webhooks/signer.js');
    expect(mod.signWorkerFile()).toMatch(/sign-worker\.mjs$/);
    const s = new mod.PiscinaSigner({ minThreads: 1, maxThreads: 1 });
    try {
      expect(await s.sign(KAT.secret, KAT.t, KAT.body)).toBe(KAT.v1);
    } finally {
      await s.close();
    }
  });
});
