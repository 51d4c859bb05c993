/**
 * Webhook destinations over the real API (docs/behaviour.md §6, docs/webhooks.md "Destinations"): a URL
 * whose literal address is not global unicast is refused at create and at PATCH with 400
 * `url_not_allowed` (`param: "url"`), one address per refused range; global unicast literals pass.
 */
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { api, startInProcess, type TestServer } from '../../helpers/server.js';

let t: TestServer;
beforeAll(async () => {
  t = await startInProcess();
});
afterAll(async () => {
  await t?.close();
});

const REFUSED = [
  '0.1.2.3', '100.64.0.1', '198.18.0.1', '192.0.0.8', '192.88.99.1', '203.0.113.7', '239.255.255.250', '240.0.0.1', '255.255.255.255',
  '[::127.0.0.1]', '[::ffff:7f00:1]', '[::ffff:0:7f00:1]', '[64:ff9b::a9fe:a9fe]', '[64:ff9b:1::808:808]', '[100::1]',
  '[2001:0:4136:e378:8000:63bf:3fff:fdd2]', '[2001:2::1]', '[2001:db8::1]', '[2002:7f00:1::1]', '[2620:4f:8000::1]', '[3fff::1]',
  '[5f00::1]', '[fd12:3456::1]', '[fe80::1]', '[fec0::1]', '[ff02::1]',
];

describe('webhook destinations over the API', () => {
  it('refuses every non-global-unicast literal at create with 400 url_not_allowed', async () => {
    for (const host of REFUSED) {
      const r = await api(t.http, t.secretKey, 'POST', '/v2/webhooks', { url: `http://${host}:8080/hook`, events: ['*'] });
      expect(r.status, `${host}: ${r.text}`).toBe(400);
      expect(r.json.error.code, host).toBe('url_not_allowed');
      expect(r.json.error.param, host).toBe('url');
    }
  });

  it('accepts global unicast literals, and refuses a PATCH to a refused one', async () => {
    for (const host of ['8.8.8.8', '[2606:4700:4700::1111]', '[64:ff9b::808:808]']) {
      const r = await api(t.http, t.secretKey, 'POST', '/v2/webhooks', { url: `https://${host}/hook`, events: ['*'] });
      expect(r.status, `${host}: ${r.text}`).toBe(201);
    }
    const ok = await api(t.http, t.secretKey, 'POST', '/v2/webhooks', { url: 'https://[2a00:1450:4001:80b::200e]/hook', events: ['*'] });
    expect(ok.status).toBe(201);
    const patch = await api(t.http, t.secretKey, 'PATCH', `/v2/webhooks/${ok.json.id}`, { url: 'http://[2002:a00:1::1]/hook' });
    expect(patch.status).toBe(400);
    expect(patch.json.error.code).toBe('url_not_allowed');
  });
});
