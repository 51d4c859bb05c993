/**
 * The Janus peer of the WebRTC listener bench (bench/listeners.bench.ts, part `webrtc`): Debian's
 * `janus` (Janus WebRTC Server) with only its streaming plugin and its plain HTTP transport, one
 * RTP mountpoint fanning one Opus RTP source (payload type 111, fed by FFmpeg) out to WebRTC
 * viewers. Its HTTP API and the RTP input listen on 127.0.0.1; its ICE candidates are on the box's
 * first non-loopback IPv4 address (Janus leaves loopback interfaces out of ICE), a local address
 * whose traffic the kernel routes through the loopback device all the same. The configuration is
 * written at run time to a scratch directory.
 *
 * `janusWatch` is the viewer's signalling over Janus's own HTTP API (janus.conf.meetecho.com/docs/rest.html,
 * the streaming plugin's "watch" flow): `create` a session, `attach` the streaming plugin, send
 * `{request: "watch", id}`, long-poll the session for the event carrying Janus's SDP offer, answer
 * it with `{request: "start"}` and the viewer's SDP answer (non-trickle: the candidates are in the
 * answer, then end-of-candidates). Every request is bounded in time; `hangup` destroys the session.
 */
import { spawn, type ChildProcess } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { networkInterfaces } from 'node:os';
import path from 'node:path';
import { freePort, have, sleep } from './proc.js';

/** Whether the Janus binary is installed (Debian package `janus`). */
export const janusInstalled = () => have('janus');

/** Janus's plugin and transport folders on Debian (multi-arch). */
const LIBDIR = (() => {
  const arch = process.arch === 'arm64' ? 'aarch64-linux-gnu' : 'x86_64-linux-gnu';
  return `/usr/lib/${arch}/janus`;
})();

export interface JanusPeer {
  child: ChildProcess;
  /** Base URL of the HTTP API (`http://127.0.0.1:PORT/janus`). */
  api: string;
  /** UDP port on 127.0.0.1 the mountpoint reads Opus RTP from (payload type 111). */
  rtpPort: number;
  /** The mountpoint's id. */
  mountpoint: number;
}

/**
 * Writes the configuration into `dir` and starts Janus; resolves once its HTTP API answers
 * `info`. `eventLoops`: Janus's `event_loops` (a fixed pool of media threads instead of one
 * thread per handle). @throws Error when Janus does not answer within 15 s
 */
export async function startJanus(dir: string, eventLoops: number): Promise<JanusPeer> {
  mkdirSync(dir, { recursive: true });
  const local = Object.values(networkInterfaces()).flat().find((a) => a && a.family === 'IPv4' && !a.internal)?.address;
  if (!local) throw new Error('janus needs a non-loopback IPv4 address for its ICE candidates');
  const httpPort = await freePort();
  const rtpPort = await freePort(); // a TCP port free now; UDP on the same number is very likely free too
  const mountpoint = 1;
  writeFileSync(
    path.join(dir, 'janus.jcfg'),
    `general: {
  configs_folder = "${dir}"
  plugins_folder = "${LIBDIR}/plugins"
  transports_folder = "${LIBDIR}/transports"
  events_folder = "${LIBDIR}/events"
  loggers_folder = "${LIBDIR}/loggers"
  debug_level = 2
  session_timeout = 0
  event_loops = ${eventLoops}
  protected_folders = []
}
media: {
  ipv6 = false
  rtp_port_range = "20000-40000"
}
nat: {
  nice_debug = false
  ice_enforce_list = "${local}"
  ignore_mdns = true
}
plugins: { disable = "libjanus_audiobridge.so,libjanus_duktape.so,libjanus_echotest.so,libjanus_lua.so,libjanus_nosip.so,libjanus_recordplay.so,libjanus_sip.so,libjanus_textroom.so,libjanus_videocall.so,libjanus_videoroom.so,libjanus_voicemail.so" }
transports: { disable = "libjanus_websockets.so,libjanus_pfunix.so,libjanus_mqtt.so,libjanus_nanomsg.so,libjanus_rabbitmq.so" }
loggers: { disable = "libjanus_jsonlog.so" }
events: { broadcast = false }
`,
  );
  writeFileSync(
    path.join(dir, 'janus.transport.http.jcfg'),
    `general: {\n  json = "plain"\n  base_path = "/janus"\n  http = true\n  port = ${httpPort}\n  ip = "127.0.0.1"\n  https = false\n}\nadmin: { admin_http = false }\n`,
  );
  writeFileSync(
    path.join(dir, 'janus.plugin.streaming.jcfg'),
    `general: { }\nbench: {\n  type = "rtp"\n  id = ${mountpoint}\n  description = "bench Opus"\n  audio = true\n  audioport = ${rtpPort}\n  audioiface = "127.0.0.1"\n  audiopt = 111\n  audiocodec = "opus"\n}\n`,
  );
  const child = spawn('janus', ['-C', path.join(dir, 'janus.jcfg'), '-F', dir, '-L', path.join(dir, 'janus.log')], { stdio: 'ignore' });
  const api = `http://127.0.0.1:${httpPort}/janus`;
  for (let i = 0; i < 150; i++) {
    if (child.exitCode !== null) throw new Error(`janus exited (${child.exitCode}); see its log`);
    try {
      const r = await fetch(`${api}/info`, { signal: AbortSignal.timeout(1000) });
      if (r.ok) return { child, api, rtpPort, mountpoint };
    } catch {
      /* not up yet */
    }
    await sleep(100);
  }
  child.kill('SIGKILL');
  throw new Error('janus did not answer on its HTTP API within 15 s');
}

let tx = 0;
/** One request to the Janus HTTP API, bounded by `timeoutMs`. @throws Error on an error answer or timeout */
async function call(url: string, body: Record<string, unknown>, timeoutMs: number): Promise<any> {
  const r = await fetch(url, { method: 'POST', body: JSON.stringify({ ...body, transaction: `t${++tx}` }), signal: AbortSignal.timeout(timeoutMs) });
  const j = (await r.json()) as any;
  if (j.janus === 'error') throw new Error(`janus: ${j.error?.reason ?? 'error'}`);
  return j;
}

/**
 * Watches mountpoint `id` of the Janus at `api`: `answer` turns Janus's SDP offer into the viewer's
 * complete (non-trickle) SDP answer. Resolves once Janus took the answer; `hangup` destroys the
 * session. @throws Error when a step fails or the whole setup takes longer than `timeoutMs`
 */
export async function janusWatch(api: string, id: number, answer: (offerSdp: string) => Promise<string>, timeoutMs = 10_000): Promise<{ hangup: () => Promise<void> }> {
  const deadline = Date.now() + timeoutMs;
  const left = () => Math.max(1, deadline - Date.now());
  const session = (await call(api, { janus: 'create' }, left())).data.id as number;
  const sessionUrl = `${api}/${session}`;
  const hangup = async () => {
    await call(sessionUrl, { janus: 'destroy' }, 5000).catch(() => {});
  };
  try {
    const handle = (await call(sessionUrl, { janus: 'attach', plugin: 'janus.plugin.streaming' }, left())).data.id as number;
    const handleUrl = `${sessionUrl}/${handle}`;
    await call(handleUrl, { janus: 'message', body: { request: 'watch', id } }, left());
    let offer: string | null = null;
    while (!offer) {
      // Long poll: one event per GET (the ack came with the POST; the offer comes as an event).
      const r = await fetch(`${sessionUrl}?maxev=1&rid=${Date.now()}`, { signal: AbortSignal.timeout(left()) });
      const ev = (await r.json()) as any;
      const evs = Array.isArray(ev) ? ev : [ev];
      for (const e of evs) {
        if (e.plugindata?.data?.error) throw new Error(`janus streaming: ${e.plugindata.data.error}`);
        if (e.jsep?.type === 'offer') offer = e.jsep.sdp as string;
      }
    }
    const sdp = await answer(offer);
    await call(handleUrl, { janus: 'message', body: { request: 'start' }, jsep: { type: 'answer', sdp } }, left());
    await call(handleUrl, { janus: 'trickle', candidate: { completed: true } }, left());
    return { hangup };
  } catch (e) {
    await hangup();
    throw e;
  }
}
