/**
 * The downloads card of a podcast's dashboard page (docs/podcasts.md "Download counting",
 * docs/dashboard.md): totals, downloads per day as an inline SVG bar chart rendered on the server
 * (readable without JavaScript: each bar carries its day and count in a `<title>`), and the top
 * episodes, apps and countries as meter bars. No inline styles (the dashboard's CSP forbids them):
 * SVG geometry is attributes, looks are classes of dashboard.css.
 */
import type { PodcastStats } from '../services/podcast-stats.js';
import { esc } from './html.js';

/** Rows of each top list. */
const TOP = 8;
/** The chart's drawing box (SVG user units). */
const W = 600;
const H = 180;
const PAD = { left: 36, right: 8, top: 12, bottom: 22 };

/** A round upper bound of the y axis (1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8 × 10^n, whole) at or above `max`. */
function niceMax(max: number): number {
  if (max <= 1) return 1;
  const p = 10 ** Math.floor(Math.log10(max));
  for (const m of [1, 1.2, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10]) if (Math.ceil(m * p) >= max) return Math.ceil(m * p);
  return 10 * p;
}

/** `2026-03-10` → `Mar 10`. */
const shortDay = (d: string) => new Date(`${d}T00:00:00Z`).toLocaleDateString('en-US', { month: 'short', day: 'numeric', timeZone: 'UTC' });

/** The per-day bar chart of `byDay` (oldest first), as an SVG element. */
export function downloadsChart(byDay: PodcastStats['byDay']): string {
  const max = niceMax(Math.max(0, ...byDay.map((d) => d.downloads)));
  const plotW = W - PAD.left - PAD.right;
  const plotH = H - PAD.top - PAD.bottom;
  const step = plotW / Math.max(1, byDay.length);
  const gap = step > 6 ? Math.min(4, step * 0.2) : 0;
  const y = (v: number) => PAD.top + plotH - (v / max) * plotH;
  const grid = [0, 0.5, 1]
    .map((f) => {
      const v = Math.round(max * f);
      return `<line class="${f === 0 ? 'axis' : 'grid'}" x1="${PAD.left}" x2="${W - PAD.right}" y1="${y(v).toFixed(1)}" y2="${y(v).toFixed(1)}"/><text x="${PAD.left - 6}" y="${(y(v) + 4).toFixed(1)}" text-anchor="end">${v}</text>`;
    })
    .join('');
  const bars = byDay
    .map((d, i) => {
      const x = PAD.left + i * step + gap / 2;
      const h = (d.downloads / max) * plotH;
      return `<rect class="bar" x="${x.toFixed(1)}" y="${(PAD.top + plotH - h).toFixed(1)}" width="${Math.max(1, step - gap).toFixed(1)}" height="${h.toFixed(1)}"><title>${esc(d.date)}: ${d.downloads} download${d.downloads === 1 ? '' : 's'}</title></rect>`;
    })
    .join('');
  const first = byDay[0];
  const last = byDay.at(-1);
  const labels =
    first && last
      ? `<text x="${PAD.left}" y="${H - 6}">${esc(shortDay(first.date))}</text><text x="${W - PAD.right}" y="${H - 6}" text-anchor="end">${esc(shortDay(last.date))}</text>`
      : '';
  const total = byDay.reduce((n, d) => n + d.downloads, 0);
  const label = `Downloads per day from ${first?.date ?? ''} to ${last?.date ?? ''}: ${total} in all, at most ${Math.max(0, ...byDay.map((d) => d.downloads))} a day.`;
  return `<svg class="downloads-chart" viewBox="0 0 ${W} ${H}" role="img" aria-label="${esc(label)}">${grid}${bars}${labels}</svg>`;
}

/** A top list as meter bars, or a muted line when empty. */
function bars(rows: Array<{ label: string; downloads: number }>, empty: string): string {
  if (rows.length === 0) return `<p class="muted">${esc(empty)}</p>`;
  const max = Math.max(...rows.map((r) => r.downloads));
  return `<ul class="bars bars-wide">${rows
    .slice(0, TOP)
    .map((r) => `<li><span class="bar-label" title="${esc(r.label)}">${esc(r.label)}</span><meter min="0" max="${max}" value="${r.downloads}" aria-label="${esc(r.label)}">${r.downloads}</meter><span class="bar-value">${r.downloads}</span></li>`)
    .join('')}</ul>`;
}

/**
 * The downloads card for podcast statistics `s`; `titles` names episodes by id (an episode deleted
 * since shows its id).
 */
export function downloadsCard(s: PodcastStats, titles: ReadonlyMap<string, string>): string {
  const days = s.byDay.length;
  return `<section class="card" aria-labelledby="downloads">
<h2 id="downloads">Downloads</h2>
<div class="stats">
<div class="stat"><span class="stat-value">${s.downloads}</span><span class="stat-label">downloads, last ${days} days</span></div>
<div class="stat"><span class="stat-value">${s.byDay.at(-1)?.downloads ?? 0}</span><span class="stat-label">today (UTC, so far)</span></div>
<div class="stat"><span class="stat-value">${s.botRequests}</span><span class="stat-label">bot requests</span></div>
</div>
<figure class="chart">
${downloadsChart(s.byDay)}
<figcaption class="muted small">Downloads per UTC day: one per listener (address and app) that got at least the first minute of an episode that day.</figcaption>
</figure>
<div class="downloads-tops">
<div><h3>Top episodes</h3>${bars(s.byEpisode.map((e) => ({ label: titles.get(e.episodeId) ?? e.episodeId, downloads: e.downloads })), 'No downloads yet.')}</div>
<div><h3>Apps</h3>${bars(s.byApp.map((a) => ({ label: a.app ?? 'Unknown', downloads: a.downloads })), 'No downloads yet.')}</div>
<div><h3>Countries</h3>${bars(s.byCountry.map((c) => ({ label: c.country ?? 'Unknown', downloads: c.downloads })), 'No downloads yet.')}</div>
</div>
<p class="muted small downloads-api">Also in the API: <code>GET /v2/podcasts/${esc(s.podcastId)}/stats</code> (JSON, or CSV with <code>Accept: text/csv</code>).</p>
</section>`;
}
