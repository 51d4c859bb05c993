/**
 * Headless Chromium for the WHEP tests (playwright-core with the system /usr/bin/chromium, a fresh
 * profile dir) and the WHEP player page, served from a tiny node:http server on 127.0.0.1 (so the
 * WHEP POST is cross-origin and exercises CORS like a real web player).
 */
import { chromium, type BrowserContext, type Page } from 'playwright-core';
import http from 'node:http';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';

const PAGE = `<!doctype html><meta charset="utf-8"><title>WHEP player</title>
<script>
window.whep = async (endpoint, token) => {
  const pc = new RTCPeerConnection();
  window.pc = pc;
  pc.addTransceiver('audio', { direction: 'recvonly' });
  pc.ontrack = (e) => {
    const a = new Audio();
    a.srcObject = e.streams[0] || new MediaStream([e.track]);
    a.muted = false;
    document.body.appendChild(a);
    a.play().catch((err) => (window.playError = String(err)));
  };
  await pc.setLocalDescription(await pc.createOffer());
  await new Promise((r) => {
    if (pc.iceGatheringState === 'complete') return r();
    pc.addEventListener('icegatheringstatechange', () => pc.iceGatheringState === 'complete' && r());
    setTimeout(r, 3000);
  });
  const headers = { 'Content-Type': 'application/sdp' };
  if (token) headers.Authorization = 'Bearer ' + token;
  const res = await fetch(endpoint, { method: 'POST', headers, body: pc.localDescription.sdp });
  const body = await res.text();
  if (res.status !== 201) return { status: res.status, body };
  window.session = new URL(res.headers.get('Location'), endpoint).href;
  await pc.setRemoteDescription({ type: 'answer', sdp: body });
  return { status: res.status, location: window.session, contentType: res.headers.get('Content-Type'), etag: res.headers.get('ETag') };
};
window.inbound = async () => {
  if (!window.pc) return null;
  const r = await window.pc.getStats();
  for (const s of r.values()) if (s.type === 'inbound-rtp' && s.kind === 'audio')
    return { packetsReceived: s.packetsReceived, packetsLost: s.packetsLost, audioLevel: s.audioLevel ?? 0, totalAudioEnergy: s.totalAudioEnergy ?? 0, bytesReceived: s.bytesReceived, state: window.pc.connectionState };
  return { packetsReceived: 0, audioLevel: 0, totalAudioEnergy: 0, state: window.pc.connectionState };
};
window.hangUp = async () => {
  const res = await fetch(window.session, { method: 'DELETE' });
  window.pc.close();
  return res.status;
};
</script><body></body>`;

export interface TestBrowser {
  page: Page;
  /** The player page's URL (another origin than the Skylark server). */
  pageUrl: string;
  close(): Promise<void>;
}

/** Launches headless Chromium with a fresh profile and opens the WHEP player page. */
export async function openPlayer(): Promise<TestBrowser> {
  const server = http.createServer((_req, res) => {
    res.writeHead(200, { 'Content-Type': 'text/html; charset=utf-8' });
    res.end(PAGE);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as { port: number }).port;
  const profile = mkdtempSync(path.join(tmpdir(), 'skylark-chromium-'));
  let browser: BrowserContext | null = null;
  try {
    // A persistent context on a fresh profile dir is playwright's way of passing --user-data-dir.
    browser = await chromium.launchPersistentContext(profile, {
      executablePath: '/usr/bin/chromium',
      headless: true,
      args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-quic', '--no-first-run', '--disable-background-networking', '--disable-component-update',
        '--disable-sync', '--autoplay-policy=no-user-gesture-required',
        // Loopback ICE without mDNS-obfuscated host candidates.
        '--allow-loopback-in-peer-connection', '--disable-features=WebRtcHideLocalIpsWithMdns'],
      timeout: 30_000,
    });
    const page = browser.pages()[0] ?? (await browser.newPage());
    const pageUrl = `http://127.0.0.1:${port}/`;
    await page.goto(pageUrl);
    const b = browser;
    return {
      page,
      pageUrl,
      async close() {
        await b.close().catch(() => {});
        server.close();
        rmSync(profile, { recursive: true, force: true });
      },
    };
  } catch (e) {
    await browser?.close().catch(() => {});
    server.close();
    rmSync(profile, { recursive: true, force: true });
    throw e;
  }
}
