/**
 * The import rules of the house (docs/architecture.md, STYLE.md "The shape of Skylark"), checked
 * by `npm run lint:imports` as part of `npm test`. A rule names what must never import what.
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
    home('uws', 'uWebSockets\\.js', ['http/']),
    home('werift', 'werift', ['webrtc/']),
    home('better-sqlite3', 'better-sqlite3', ['db/']),
    home('jose', 'jose', ['auth/']),
    home('piscina', 'piscina', ['webhooks/']),
    home('valibot', 'valibot|@valibot', ['config/', 'api/[^/]+/schemas\\.ts$', 'api/validation\\.ts$', 'api/openapi/']),
    {
      name: 'addon-has-one-home',
      comment: 'the C++ addon is loaded only by src/native/',
      severity: 'error',
      from: { path: '^src/', pathNot: '^src/native/' },
      to: { path: '\\.node$' },
    },
    {
      name: 'media-imports-only-native',
      comment: 'media/ imports no other app folder but native/',
      severity: 'error',
      from: { path: '^src/media/' },
      to: { path: '^src/', pathNot: ['^src/media/', '^src/native/'] },
    },
    {
      name: 'native-is-a-leaf',
      comment: 'native/ (the addon loader) imports no app folder',
      severity: 'error',
      from: { path: '^src/native/' },
      to: { path: '^src/', pathNot: '^src/native/' },
    },
    {
      name: 'ingest-knows-no-services',
      comment: 'ingest/ imports native/ and media/ (and log/, limits/, config/); it defines the port that services implement',
      severity: 'error',
      from: { path: '^src/ingest/' },
      to: { path: '^src/', pathNot: ['^src/ingest/', '^src/native/', '^src/media/', '^src/log/', '^src/limits/', '^src/config/'] },
    },
    {
      name: 'services-know-no-http-nor-api',
      comment: 'services/ know no HTTP, no api/ module, no delivery room',
      severity: 'error',
      from: { path: '^src/services/' },
      to: { path: '^src/(http|api|dashboard|hls|webrtc|listen|serve|ingest/rtmp)' },
    },
    {
      name: 'db-knows-no-rules',
      comment: 'db/ holds statements only: it imports no app folder but db/',
      severity: 'error',
      from: { path: '^src/db/' },
      to: { path: '^src/', pathNot: '^src/db/' },
    },
    {
      name: 'only-api-and-delivery-mount-routes',
      comment: 'the HTTP server is used by api/ and dashboard/ (routes), the delivery rooms hls/, listen/, webrtc/, feed/, serve/ (HTTP worker threads), the OAuth pages, and the composition root',
      severity: 'error',
      from: { path: '^src/', pathNot: ['^src/(http|api|dashboard|hls|listen|webrtc|feed|oauth|serve)/', '^src/(main|context)\\.ts$', '^src/auth/guard\\.ts$'] },
      to: { path: '^src/http/', dependencyTypesNot: ['type-only'] },
    },
    {
      name: 'listeners-below-delivery',
      comment: 'listeners/ (sessions, counts, countries) is used by the delivery rooms and the API; it imports neither',
      severity: 'error',
      from: { path: '^src/listeners/' },
      to: { path: '^src/(hls|listen|webrtc|serve|api|dashboard|ingest)/', dependencyTypesNot: ['type-only'] },
    },
    {
      name: 'serve-is-delivery',
      comment: 'serve/ (HTTP worker threads: the mirror feed, the threads) is a delivery room: it knows no services, API, database or other feature',
      severity: 'error',
      from: { path: '^src/serve/' },
      to: { path: '^src/(services|api|dashboard|db|oauth|feed|webrtc|ingest|webhooks|events)/' },
    },
    {
      name: 'webhooks-deliver-only',
      comment: 'webhooks/ (the delivery engine) reads the outbox through db/; it knows no services and mounts no routes',
      severity: 'error',
      from: { path: '^src/webhooks/' },
      to: { path: '^src/(services|api|dashboard|http)/' },
    },
    {
      name: 'auth-knows-no-callers',
      comment: 'auth/ is asked by api/, dashboard/, oauth/ and the delivery rooms; it imports none of them, nor services/',
      severity: 'error',
      from: { path: '^src/auth/' },
      to: { path: '^src/(api|dashboard|oauth|services|hls|listen|webrtc|serve|ingest|media)/' },
    },
    {
      name: 'events-are-records',
      comment: 'events/ (the outbox) imports only db/',
      severity: 'error',
      from: { path: '^src/events/' },
      to: { path: '^src/', pathNot: ['^src/events/', '^src/db/', '^src/ids\\.ts$'] },
    },
    {
      name: 'nothing-imports-the-composition-root',
      comment: 'src/main.ts wires everything; only the CLI starts it',
      severity: 'error',
      from: { path: '^src/', pathNot: '^src/cli/' },
      to: { path: '^src/main\\.ts$' },
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
