/**
 * The import rules of the house (docs/architecture.md "Planes and import rules"), checked by
 * `npm run lint:imports` as part of `npm test`. A rule names what must never import what. Type-only
 * imports count like any other: a plane that names another plane's types depends on it.
 *
 * Planes: base (infrastructure, no plane), live (ingest, media), delivery (HLS, progressive,
 * WebRTC, listeners, HTTP threads), control (API, dashboard, OAuth, services, feed, webhooks,
 * downloads, episode audio). src/native/ (the addon loader and one wrapper per native class) is
 * plane-free, importable by every plane like base. The composition root (src/main.ts, src/app/)
 * and the CLI (src/cli/) sit on top.
 */
const lib = (name) => `(^|/)node_modules/(${name})/`;

/** A runtime library may be imported only from its one home folder. */
const home = (name, library, folders) => ({
  name: `${name}-has-one-home`,
  comment: `${library} is imported only from ${folders.join(', ')}`,
  severity: 'error',
  from: { path: '^src/', pathNot: folders.map((f) => `^src/${f}`) },
  to: { path: lib(library) },
});

module.exports = {
  forbidden: [
    home('uws', 'uWebSockets\\.js|uws-pack|@trufflesuite/uws-js-unofficial', ['base/http/']),
    home('werift', 'werift', ['delivery/webrtc/']),
    home('better-sqlite3', 'better-sqlite3', ['base/db/']),
    home('jose', 'jose', ['base/auth/']),
    home('piscina', 'piscina', ['control/webhooks/']),
    home('prom-client', 'prom-client', ['base/metrics/']),
    home('valibot', 'valibot|@valibot', ['base/config\\.ts$', 'control/api/[^/]+/schemas\\.ts$', 'control/api/validation\\.ts$', 'control/api/openapi/']),
    {
      name: 'addon-has-one-home',
      comment: 'the C++ addon is loaded only by src/native/',
      severity: 'error',
      from: { path: '^src/', pathNot: '^src/native/' },
      to: { path: '\\.node$' },
    },
    // ── Planes ──────────────────────────────────────────────────────────────────────────────
    {
      name: 'base-imports-no-plane',
      comment: 'base/ (HTTP, database, config, errors, log, limits, auth) imports no plane, no composition root, no CLI',
      severity: 'error',
      from: { path: '^src/base/' },
      to: { path: '^src/', pathNot: '^src/base/' },
    },
    {
      name: 'live-imports-only-base',
      comment: 'live/ (native addon, ingest, media) imports base/ only: delivery and control come to it through its ports',
      severity: 'error',
      from: { path: '^src/live/' },
      to: { path: '^src/', pathNot: ['^src/live/', '^src/base/', '^src/native/'] },
    },
    {
      name: 'delivery-never-imports-control',
      comment: 'delivery/ (HLS, progressive, WebRTC, listeners, HTTP threads) reads the live hub and base/; it never imports control/',
      severity: 'error',
      from: { path: '^src/delivery/' },
      to: { path: '^src/(control|app|cli)/|^src/main\\.ts$' },
    },
    {
      name: 'delivery-reads-live-media-only',
      comment: 'delivery/ reads what live/media/ publishes (the hub, its layers, codecs, containers) and the live port (src/live/ports.ts: the Icecast port\'s listener contract); it never drives ingest',
      severity: 'error',
      from: { path: '^src/delivery/' },
      to: { path: '^src/live/', pathNot: ['^src/live/media/', '^src/live/ports\\.ts$'] },
    },
    {
      name: 'control-never-imports-delivery',
      comment: 'control/ (API, dashboard, services, webhooks, …) never imports delivery/: what it reads of the listeners room comes through its own port (src/control/services/listeners.ts), shapes both speak live in base/',
      severity: 'error',
      from: { path: '^src/control/' },
      to: { path: '^src/delivery/' },
    },
    {
      name: 'control-uses-live-ports-only',
      comment: 'control/ uses live/ through its ports (src/live/ports.ts, the ingest port) and never its internals',
      severity: 'error',
      from: { path: '^src/control/' },
      to: { path: '^src/live/', pathNot: ['^src/live/ports\\.ts$', '^src/live/ingest/port\\.ts$'] },
    },
    {
      name: 'nothing-imports-the-composition-root',
      comment: 'src/main.ts and src/app/ wire everything; only the CLI starts them',
      severity: 'error',
      from: { path: '^src/', pathNot: ['^src/cli/', '^src/main\\.ts$', '^src/app/'] },
      to: { path: '^src/main\\.ts$|^src/app/' },
    },
    // ── The composition root, plane by plane ────────────────────────────────────────────────
    {
      name: 'app-base-builds-base-only',
      comment: 'src/app/base.ts builds the base plane from base/ alone',
      severity: 'error',
      from: { path: '^src/app/base\\.ts$' },
      to: { path: '^src/', pathNot: '^src/base/' },
    },
    {
      name: 'app-live-builds-live-only',
      comment: 'src/app/live.ts builds the live plane from live/, base/ and src/native/ (and the built base plane); other planes reach it through src/main.ts',
      severity: 'error',
      from: { path: '^src/app/live\\.ts$' },
      to: { path: '^src/', pathNot: ['^src/live/', '^src/base/', '^src/native/', '^src/app/base\\.ts$'] },
    },
    {
      name: 'app-delivery-builds-delivery-only',
      comment: 'src/app/delivery.ts builds the delivery plane from delivery/, base/, src/native/ and what delivery itself reads of live (live/media/, the live port)',
      severity: 'error',
      from: { path: '^src/app/delivery\\.ts$' },
      to: { path: '^src/', pathNot: ['^src/delivery/', '^src/base/', '^src/native/', '^src/live/media/', '^src/live/ports\\.ts$', '^src/app/base\\.ts$'] },
    },
    {
      name: 'app-control-builds-control-only',
      comment: 'src/app/control.ts builds the control plane from control/, base/, src/native/ and the live ports; it never names delivery or live internals',
      severity: 'error',
      from: { path: '^src/app/control\\.ts$' },
      to: { path: '^src/', pathNot: ['^src/control/', '^src/base/', '^src/native/', '^src/live/ports\\.ts$', '^src/live/ingest/port\\.ts$', '^src/app/base\\.ts$'] },
    },
    // ── Inside the planes ───────────────────────────────────────────────────────────────────
    {
      name: 'native-is-a-leaf',
      comment: 'src/native/ (the addon loader and one wrapper per native class) imports nothing of the planes, the composition root or the CLI',
      severity: 'error',
      from: { path: '^src/native/' },
      to: { path: '^src/', pathNot: '^src/native/' },
    },
    {
      name: 'media-knows-no-ingest',
      comment: 'live/media/ (hub, layers, segmenting, recording) imports src/native/ and base/ only',
      severity: 'error',
      from: { path: '^src/live/media/' },
      to: { path: '^src/', pathNot: ['^src/live/media/', '^src/native/', '^src/base/'] },
    },
    {
      name: 'db-knows-no-rules',
      comment: 'base/db/ holds statements and the write retry only: it imports nothing else of the app but the log, the limits counter and the disk reserve (the write retry reports through them)',
      severity: 'error',
      from: { path: '^src/base/db/' },
      to: { path: '^src/', pathNot: ['^src/base/db/', '^src/base/logger\\.ts$', '^src/base/limits/limits\\.ts$', '^src/base/disk-reserve\\.ts$'] },
    },
    {
      name: 'services-know-no-http',
      comment: 'control/services/ know no HTTP, no API module, no dashboard, no delivery room',
      severity: 'error',
      from: { path: '^src/control/services/' },
      to: { path: '^src/(base/http|control/api|control/dashboard|control/oauth|delivery)/' },
    },
    {
      name: 'routes-do-not-open-transactions',
      comment: 'API, dashboard and OAuth routes call services; database handles and transactions stay in services and repos',
      severity: 'error',
      from: { path: '^src/control/(api|dashboard|oauth)/', pathNot: '(service|store)\\.ts$' },
      to: { path: '^src/base/db/database\\.ts$' },
    },
    {
      name: 'webhooks-deliver-only',
      comment: 'control/webhooks/ (the delivery engine) knows no services, API or dashboard',
      severity: 'error',
      from: { path: '^src/control/webhooks/' },
      to: { path: '^src/control/(services|api|dashboard|oauth)/' },
    },
    {
      name: 'threads-are-delivery',
      comment: 'delivery/threads/ (HTTP worker threads and their mirror) knows no database',
      severity: 'error',
      from: { path: '^src/delivery/threads/' },
      to: { path: '^src/base/db/' },
    },
    {
      name: 'repositories-are-built-by-the-root',
      comment:
        'repositories are constructed by the composition root (src/main.ts, src/app/) or the CLI and handed over; elsewhere they are named as types only. ' +
        'Exceptions: the stores that own a private table (download counts, idempotency keys, sign-in sessions)',
      severity: 'error',
      from: {
        path: '^src/',
        pathNot: ['^src/main\\.ts$', '^src/app/', '^src/cli/', '^src/base/db/', '^src/control/downloads/counting\\.ts$', '^src/base/http/idempotency\\.ts$', '^src/base/auth/sessions\\.ts$'],
      },
      to: { path: '^src/base/db/[^/]+-repo\\.ts$', dependencyTypesNot: ['type-only'] },
    },
    {
      name: 'no-cycles',
      comment: 'imports form no cycle',
      severity: 'error',
      from: { path: '^src/' },
      to: { circular: true },
    },
  ],
  options: {
    doNotFollow: { path: 'node_modules' },
    tsPreCompilationDeps: true,
    tsConfig: { fileName: 'tsconfig.json' },
    enhancedResolveOptions: { exportsFields: ['exports'], conditionNames: ['import', 'require', 'node', 'default'], extensions: ['.ts', '.js', '.mjs', '.cjs', '.json', '.node'] },
    exclude: { path: '^(dist|build)/' },
  },
};
