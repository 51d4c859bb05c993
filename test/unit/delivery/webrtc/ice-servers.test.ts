/**
 * WebRTC contacts no STUN or TURN server by default (docs/listeners.md "WebRTC ICE servers"):
 * the WHEP peer configuration carries exactly the configured list — empty unless
 * `SKYLARK_ICE_SERVERS` names some — and werift then keeps it empty instead of its own default (a
 * public STUN server). `SKYLARK_ICE_SERVERS` takes `stun:host[:port]` and
 * `turn:user:pass@host[:port]` and refuses anything else at startup.
 */
import { describe, expect, it } from 'vitest';
import { RTCPeerConnection } from 'werift';
import { ConfigError, loadConfig, parseIceServers } from '../../../../src/base/config.js';
import { peerConfiguration } from '../../../../src/delivery/webrtc/whep-peer.js';

describe('WHEP peer configuration', () => {
  it('has no ICE server by default, and werift keeps none', async () => {
    const config = loadConfig({});
    expect(config.iceServers).toEqual([]);
    const cfg = peerConfiguration({ iceServers: config.iceServers, allInterfaces: false, hosts: ['127.0.0.1'] });
    expect(cfg.iceServers).toEqual([]);
    const pc = new RTCPeerConnection(cfg);
    try {
      expect(pc.config.iceServers).toEqual([]);
    } finally {
      await pc.close();
    }
    // Without the list werift would use its own public STUN server: what the default must avoid.
    const bare = new RTCPeerConnection({});
    try {
      expect(JSON.stringify(bare.config.iceServers)).toMatch(/stun:/);
    } finally {
      await bare.close();
    }
  });

  it('passes the configured servers, TURN credentials included', async () => {
    const config = loadConfig({ SKYLARK_ICE_SERVERS: 'stun:stun.example.net:3478, turn:alice:s3cret@turn.example.net:5349,stun:10.0.0.1' });
    expect(config.iceServers).toEqual([
      { urls: 'stun:stun.example.net:3478' },
      { urls: 'turn:turn.example.net:5349', username: 'alice', credential: 's3cret' },
      { urls: 'stun:10.0.0.1:3478' },
    ]);
    const pc = new RTCPeerConnection(peerConfiguration({ iceServers: config.iceServers, allInterfaces: false, hosts: ['127.0.0.1'] }));
    try {
      expect(pc.config.iceServers).toEqual(config.iceServers);
    } finally {
      await pc.close();
    }
  });

  it('refuses what is not stun:host[:port] or turn:user:pass@host[:port], without echoing a password', () => {
    for (const bad of ['stuns:x.example', 'http://x.example', 'turn:x.example:3478', 'stun:u:p@x.example', 'stun:x.example:70000', 'stun:', 'turn:u:p@']) {
      expect(() => parseIceServers(bad), bad).toThrow(ConfigError);
    }
    expect(() => loadConfig({ SKYLARK_ICE_SERVERS: 'turn:bob:hunter2@:1' })).toThrow(/SKYLARK_ICE_SERVERS/);
    try {
      loadConfig({ SKYLARK_ICE_SERVERS: 'turn:bob:hunter2@bad host' });
    } catch (e) {
      expect((e as Error).message).not.toContain('hunter2');
    }
    expect(parseIceServers('')).toEqual([]);
    expect(parseIceServers(' , ')).toEqual([]);
  });
});
