/**
 * A WHIP publisher's receive path in one process (docs/bench/whip.md "Where the time went"): two
 * werift peers on loopback (test/helpers/werift-pair.ts), the sending one writing SRTP with
 * Skylark's own sender (src/delivery/webrtc/rtp-sender.ts, the same cost in every case); the
 * receiving one either hands each packet to a subscriber through werift's own receive path
 * (SRTP decrypt, `RtpPacket`, router, receiver statistics, `onReceiveRtp`), or through
 * src/delivery/webrtc/rtp-receive.ts. Process CPU (user + system) per packet over
 * BENCH_WHIP_RX_PACKETS (20,000) packets sent in bursts of 50 every 5 ms, after 2,000 of warm-up;
 * three rounds, the two paths alternating, the median of each. werift's peers negotiate
 * AEAD_AES_128_GCM. The difference of the two rows is what the receive path saves per packet.
 */
import type { BenchRow } from './lib/report.js';
import { envNum } from './http-segments.js';
import { RtpSender } from '../src/delivery/webrtc/rtp-sender.js';
import { RtpReceive } from '../src/delivery/webrtc/rtp-receive.js';
import { connectWeriftPair, until } from '../test/helpers/werift-pair.js';

const GROUP = 'WHIP receive path, in process (per Opus packet)';

async function measure(mode: 'werift' | 'skylark', n: number): Promise<number> {
  const pair = await connectWeriftPair();
  try {
    const sender = RtpSender.attach(pair.transceiver)!;
    const receiving = pair.client.getTransceivers().find((t) => t.kind === 'audio')!;
    // werift: the pair's own subscriber counts (`pair.received`); Skylark: the handler below.
    let got = 0;
    const rx = mode === 'skylark' ? RtpReceive.attach(receiving, 111, 48000, () => void got++) : null;
    const count = () => (mode === 'skylark' ? got : pair.received.length);
    const payload = Buffer.alloc(240, 7);
    // Warm-up, then the measured run.
    for (const [total, timed] of [[2000, false], [n, true]] as const) {
      got = 0;
      pair.received.length = 0;
      const t0 = process.cpuUsage();
      for (let i = 0; i < total; i += 50) {
        for (let j = 0; j < 50; j++) sender.send((i + j) & 0xffff, (i + j) * 960, payload, false);
        await new Promise((r) => setTimeout(r, 5));
      }
      await until(() => count() >= total * 0.99, 10_000, 'packets received');
      const d = process.cpuUsage(t0);
      if (timed) {
        rx?.close();
        return (d.user + d.system) / total;
      }
    }
    return NaN;
  } finally {
    await pair.close();
  }
}

const median = (xs: number[]) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]!;

export async function run(): Promise<BenchRow[]> {
  const n = envNum('BENCH_WHIP_RX_PACKETS', 20_000);
  // Three rounds, the two paths alternating (a shared box drifts); the median of each.
  const w: number[] = [];
  const o: number[] = [];
  for (let r = 0; r < 3; r++) {
    w.push(await measure('werift', n));
    o.push(await measure('skylark', n));
  }
  process.stderr.write(`[whip-receive] werift ${w.map((x) => x.toFixed(1)).join(' ')} µs; skylark ${o.map((x) => x.toFixed(1)).join(' ')} µs\n`);
  const werift = median(w);
  const ours = median(o);
  return [
    { group: GROUP, name: 'send + receive, werift receive path', value: Number(werift.toFixed(1)), unit: 'µs CPU', note: `${n} packets of 240 bytes; the sender is Skylark's in both rows` },
    { group: GROUP, name: 'send + receive, Skylark receive path', value: Number(ours.toFixed(1)), unit: 'µs CPU', peer: { name: 'werift receive path', value: Number(werift.toFixed(1)) } },
  ];
}
