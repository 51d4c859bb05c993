/**
 * The settings of the feed-update notifications (docs/podcasts.md "Feed-update notifications"):
 * `SKYLARK_FEED_NOTIFY_URLS` entries are `<url>` or `<url>|<bearer token>`, comma-separated; a
 * malformed entry stops the start with a message naming it and never the token;
 * `SKYLARK_WEBSUB_HUB` must be an http(s) URL.
 */
import { describe, expect, it } from 'vitest';
import { ConfigError, loadConfig, parseFeedNotifyUrls } from '../../../../src/base/config.js';

describe('SKYLARK_FEED_NOTIFY_URLS', () => {
  it('parses URLs with and without a bearer token', () => {
    expect(parseFeedNotifyUrls('')).toEqual([]);
    expect(parseFeedNotifyUrls(' https://podping.example/?medium=podcast|abc-DEF_1.2~3+4/5== , http://n.example/ping ')).toEqual([
      { url: 'https://podping.example/?medium=podcast', token: 'abc-DEF_1.2~3+4/5==' },
      { url: 'http://n.example/ping' },
    ]);
  });

  it('refuses other forms, masking the token', () => {
    for (const bad of ['ftp://x.example/', 'podping.example', 'https://u:p@x.example/', 'https://x.example/#frag', 'https://x.example/|', 'https://x.example/|to ken', 'https://x.example/|a|b']) {
      expect(() => parseFeedNotifyUrls(bad), bad).toThrow(ConfigError);
    }
    try {
      parseFeedNotifyUrls('https://x.example/|sec ret');
    } catch (e) {
      expect(String(e)).toContain("'https://x.example/|***'");
      expect(String(e)).not.toContain('sec');
    }
  });

  it('reaches the configuration from the environment, with SKYLARK_WEBSUB_HUB', () => {
    const c = loadConfig({ SKYLARK_WEBSUB_HUB: 'https://hub.example/', SKYLARK_FEED_NOTIFY_URLS: 'https://a.example/p|t0k' });
    expect(c.websubHub).toBe('https://hub.example/');
    expect(c.feedNotifyUrls).toEqual([{ url: 'https://a.example/p', token: 't0k' }]);
    expect(loadConfig({}).feedNotifyUrls).toEqual([]);
    expect(loadConfig({}).websubHub).toBeUndefined();
    expect(() => loadConfig({ SKYLARK_WEBSUB_HUB: 'mailto:x@example.com' })).toThrow(/SKYLARK_WEBSUB_HUB/);
  });
});
