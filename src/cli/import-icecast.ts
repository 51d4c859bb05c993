/**
 * `skylark import-icecast icecast.xml [--keep-passwords] [--account ACCT] [--json]` (docs/cli.md
 * "import-icecast", docs/icecast.md "Moving from Icecast"): one stream per `<mount>` of an Icecast
 * 2.4 configuration file, with that mount as the stream's `icecastMount`, so that players, apps and
 * directory listings keep their URLs and DJ software only changes its password.
 *
 * - The file is checked and parsed by fast-xml-parser: a file that is not well-formed XML is
 *   refused with the line and column at fault (xmlbuilder2, the project's XML writer, reads end
 *   tags without matching them, so a truncated file would lose its last mounts silently). Entities
 *   and character references are decoded, CDATA read as text. It must be Icecast's: root `<icecast>`.
 * - Per `<mount>` (those of `type="default"` are templates for other mounts, not mounts: skipped and
 *   said so): `<mount-name>` → `icecastMount`; `<stream-name>` → `title` (else the mount name);
 *   `<stream-description>`, `<genre>`, `<stream-url>` → the metadata keys `description`, `genre`,
 *   `url` (the station identity, docs/icecast.md "Station identity"); the codec from `<type>` (the
 *   content type) or else the mount name's extension, else `mp3`, as most Icecast stations send —
 *   each choice is printed with what it came from.
 * - Passwords: the mount's `<password>` (else `<authentication><source-password>`) is not reused:
 *   every stream gets a new stream key. With `--keep-passwords` a password that already is a stream
 *   key (`sk_<region code>_<32+ letters and digits>`, docs/behaviour.md §2) becomes the stream's key;
 *   any other password cannot (Icecast's `hackme` is no key: the key format is what the API
 *   answers, what the logs redact, and its length is what makes a key unguessable), and the
 *   import stops before creating anything, naming the mounts.
 * - Everything is checked first (mount names by the API's rule, mounts already on the node,
 *   mounts twice in the file), then every stream is created in one transaction: all or nothing.
 *
 * Exit 0 with the streams printed (`--json`: `{ streams: [...], notes: [...] }`); 1 for a file that
 * cannot be imported (with the reason); 2 for bad arguments.
 */
import { readFileSync, statSync } from 'node:fs';
import { parseArgs } from 'node:util';
import { XMLParser, XMLValidator } from 'fast-xml-parser';
import { ConfigError, loadConfig, resolvePublicUrls, type Config } from '../base/config.js';
import { flagsWithConfigFile, readConfigFile } from '../base/config-file.js';
import { openDatabase } from '../base/db/database.js';
import { AccountsRepo } from '../base/db/accounts-repo.js';
import { StreamsRepo } from '../base/db/streams-repo.js';
import { loadNodeSecret } from '../base/auth/secrets.js';
import { REGIONS } from '../control/services/accounts.js';
import { icecastMountProblem, StreamsService, type CreateStreamInput } from '../control/services/streams.js';

/** Largest configuration file read (bytes): an Icecast configuration is a few KiB. */
export const MAX_CONFIG_BYTES = 1024 * 1024;
/** Most mounts imported from one file. */
export const MAX_MOUNTS = 1000;
const TITLE_MAX = 200;
const METADATA_MAX_VALUE = 512;

const USAGE = `usage: skylark import-icecast icecast.xml [--keep-passwords] [--account ACCT] [--json]
  creates one stream per <mount> of an Icecast 2.4 configuration, with that mount name;
  each stream gets a new stream key unless --keep-passwords (then a mount's password is kept
  when it already is a stream key, sk_<region code>_<32+ letters and digits>)
`;

/** A refusal of the file: exit 1 with the message. */
export class ImportError extends Error {}

/** One mount as the file describes it, and the stream it becomes. */
export interface PlannedStream {
  mount: string;
  input: CreateStreamInput & { title: string; codec: 'aac' | 'opus' | 'mp3' };
  /** Where the codec came from, e.g. `type audio/mpeg`, `the .ogg of the mount name`, `not stated: mp3`. */
  codecFrom: string;
  /** The source password the file gives the mount (its own, else the global one), or null. */
  password: string | null;
}

/** What the file holds: the streams to create and what was noticed on the way. */
export interface IcecastPlan {
  streams: PlannedStream[];
  notes: string[];
}

/** An element as fast-xml-parser gives it: text, or its children and `@` attributes by name. */
type XmlValue = string | { [name: string]: XmlValue | XmlValue[] };

/** The text of element value `v` (its `#text` when it has attributes or children), trimmed; null when absent. */
function textOf(v: XmlValue | XmlValue[] | undefined): string | null {
  if (v === undefined) return null;
  if (Array.isArray(v)) return textOf(v[0]);
  if (typeof v === 'string') return v.trim();
  const t = v['#text'];
  return typeof t === 'string' ? t.trim() : '';
}

/** The child element `name` of `el` (the first when repeated), or undefined. */
function child(el: XmlValue | undefined, name: string): XmlValue | undefined {
  if (!el || typeof el === 'string') return undefined;
  const c = el[name];
  return Array.isArray(c) ? c[0] : c;
}

const parser = new XMLParser({
  ignoreAttributes: false,
  attributeNamePrefix: '@',
  // Every value stays the text the file has (no numbers, no booleans); entities and character
  // references decoded, CDATA read as text.
  parseTagValue: false,
  parseAttributeValue: false,
  trimValues: true,
  htmlEntities: true,
  isArray: (_name, jpath) => jpath === 'icecast.mount',
});

const TYPE_CODECS: Record<string, 'aac' | 'opus' | 'mp3'> = {
  'audio/mpeg': 'mp3',
  'audio/mp3': 'mp3',
  'audio/aac': 'aac',
  'audio/aacp': 'aac',
  'audio/x-aac': 'aac',
  'audio/ogg': 'opus',
  'application/ogg': 'opus',
  'audio/opus': 'opus',
};
const EXT_CODECS: Record<string, 'aac' | 'opus' | 'mp3'> = { mp3: 'mp3', aac: 'aac', aacp: 'aac', ogg: 'opus', oga: 'opus', opus: 'opus' };

/** The codec of a mount: its `<type>`, else its name's extension, else mp3 — and what told. */
export function codecOf(type: string | null, mount: string): { codec: 'aac' | 'opus' | 'mp3'; from: string } {
  const t = type?.toLowerCase().split(';')[0]!.trim();
  if (t && TYPE_CODECS[t]) return { codec: TYPE_CODECS[t], from: `type ${t}${TYPE_CODECS[t] === 'opus' ? '; Ogg Opus: a Vorbis source is cut with stream.error codec_mismatch' : ''}` };
  const ext = /\.([A-Za-z0-9]+)$/.exec(mount)?.[1]?.toLowerCase();
  if (ext && EXT_CODECS[ext]) return { codec: EXT_CODECS[ext], from: `the .${ext} of the mount name${ext === 'ogg' || ext === 'oga' ? '; Ogg Opus: a Vorbis source is cut with stream.error codec_mismatch' : ''}` };
  return { codec: 'mp3', from: t ? `type ${t} is none Skylark takes: mp3, as most Icecast stations send` : 'not stated: mp3, as most Icecast stations send' };
}

/**
 * Reads an Icecast 2.4 configuration (the text of icecast.xml) into the streams it describes.
 * @throws ImportError when it is not XML, not Icecast's, has no mount, a mount without a name, a
 *   name the API would refuse, or a name twice
 */
export function planIcecast(xml: string): IcecastPlan {
  const valid = XMLValidator.validate(xml);
  if (valid !== true) throw new ImportError(`not well-formed XML (line ${valid.err.line}${valid.err.col ? `, column ${valid.err.col}` : ''}): ${valid.err.msg}`);
  const doc = parser.parse(xml) as Record<string, XmlValue | XmlValue[]>;
  const roots = Object.keys(doc).filter((k) => !k.startsWith('?') && !k.startsWith('!'));
  if (roots.length > 1) throw new ImportError(`not well-formed XML: more than one root element (<${roots.join('>, <')}>)`);
  const rootName = roots[0];
  if (rootName !== 'icecast') throw new ImportError(`not an Icecast configuration: the root element is <${rootName ?? ''}>, not <icecast>`);
  const root = doc.icecast as XmlValue;
  const globalPassword = textOf(child(child(root, 'authentication'), 'source-password')) || null;
  const notes: string[] = [];
  const streams: PlannedStream[] = [];
  const seen = new Set<string>();
  const mounts = typeof root === 'string' ? [] : ((root.mount ?? []) as XmlValue[]);
  if (mounts.length > MAX_MOUNTS) throw new ImportError(`the file has ${mounts.length} mounts; at most ${MAX_MOUNTS} are imported at once`);
  for (const [i, m] of mounts.entries()) {
    const name = textOf(child(m, 'mount-name'));
    if (typeof m !== 'string' && m['@type'] === 'default') {
      notes.push(`<mount type="default"> #${i + 1}${name ? ` (${name})` : ''} is a template for other mounts, not a mount: skipped`);
      continue;
    }
    if (!name) throw new ImportError(`<mount> #${i + 1} has no <mount-name>`);
    const problem = icecastMountProblem(name);
    if (problem) throw new ImportError(`mount ${JSON.stringify(name.slice(0, 80))}: a mount ${problem}`);
    if (seen.has(name)) throw new ImportError(`mount ${name} is in the file twice`);
    seen.add(name);
    streams.push(plannedStream(m, name, globalPassword));
  }
  if (streams.length === 0) throw new ImportError('the file has no <mount> to import');
  return { streams, notes };
}

/** The stream one `<mount>` named `name` becomes. */
function plannedStream(m: XmlValue, name: string, globalPassword: string | null): PlannedStream {
  const { codec, from } = codecOf(textOf(child(m, 'type')), name);
  const metadata: Record<string, string> = {};
  for (const [tag, key] of [
    ['stream-description', 'description'],
    ['genre', 'genre'],
    ['stream-url', 'url'],
  ] as const) {
    const v = textOf(child(m, tag));
    if (v) metadata[key] = v.slice(0, METADATA_MAX_VALUE);
  }
  const title = (textOf(child(m, 'stream-name')) || name).slice(0, TITLE_MAX);
  const password = textOf(child(m, 'password')) || globalPassword || null;
  return { mount: name, input: { title, codec, metadata, icecastMount: name }, codecFrom: from, password };
}

/** Whether `s` is a stream key Skylark could have made (`sk_<region code>_<32+ base62>`). */
export function isStreamKeyFormat(s: string): boolean {
  return new RegExp(`^sk_(?:${Object.values(REGIONS).join('|')})_[A-Za-z0-9]{32,}$`).test(s);
}

/** Parses the arguments. @throws ConfigError on a bad or missing one */
function parse(args: string[]): { file: string; keep: boolean; account: string | undefined; json: boolean; config: Config } | null {
  const { values, positionals } = parseArgs({
    args,
    options: {
      'keep-passwords': { type: 'boolean', default: false },
      account: { type: 'string' },
      json: { type: 'boolean', default: false },
      'data-dir': { type: 'string' },
      config: { type: 'string' },
      help: { type: 'boolean', default: false },
    },
    allowPositionals: true,
    strict: true,
  });
  if (values.help) return null;
  if (positionals.length !== 1) throw new ConfigError(`import-icecast takes one file, the Icecast configuration (icecast.xml)\n${USAGE}`);
  const flags: Record<string, string | undefined> = { 'data-dir': values['data-dir'] };
  const file = values.config || process.env.SKYLARK_CONFIG;
  const config = loadConfig(process.env, file ? flagsWithConfigFile(readConfigFile(file), process.env, flags) : flags);
  return { file: positionals[0]!, keep: values['keep-passwords'], account: values.account, json: values.json, config };
}

/** The file's text. @throws ImportError when it cannot be read or is too large */
function readConfig(file: string): string {
  try {
    const size = statSync(file).size;
    if (size > MAX_CONFIG_BYTES) throw new ImportError(`${file} is ${size} bytes; an Icecast configuration is at most ${MAX_CONFIG_BYTES} here`);
    return readFileSync(file, 'utf8');
  } catch (e) {
    if (e instanceof ImportError) throw e;
    throw new ImportError(`cannot read ${file}: ${(e as Error).message}`);
  }
}

/** The stream keys the streams get: null (a new key) unless `keep`. @throws ImportError naming the mounts whose password cannot be a key */
function keysOf(plan: IcecastPlan, keep: boolean): Array<string | null> {
  if (!keep) {
    if (plan.streams.some((s) => s.password !== null)) plan.notes.push('source passwords are not reused: each stream has a new stream key (--keep-passwords keeps a password that is a stream key)');
    return plan.streams.map(() => null);
  }
  const bad = plan.streams.filter((s) => s.password === null || !isStreamKeyFormat(s.password)).map((s) => s.mount);
  if (bad.length > 0) {
    throw new ImportError(
      `--keep-passwords: the source password of ${bad.join(', ')} cannot be a stream key — a stream key is sk_<region code>_<32 or more letters and digits> ` +
        '(sk_euw1_…, sk_apse1_…), which an Icecast password is not. Nothing was created; run without --keep-passwords to give each stream a new key.',
    );
  }
  return plan.streams.map((s) => s.password);
}

/** The account the streams go to: `--account`, or the node's only account. @throws ImportError */
function accountOf(accounts: AccountsRepo, asked: string | undefined): string {
  if (asked) {
    if (!accounts.get(asked)) throw new ImportError(`no such account: ${asked}`);
    return asked;
  }
  const only = accounts.soleAccountId();
  if (!only) throw new ImportError('the node has more than one account (or none): name one with --account');
  return only;
}

/** `import-icecast`: see the file comment. Resolves to the exit code. @throws ConfigError on bad arguments (exit 2) */
export function importIcecast(args: string[]): number {
  const a = parse(args);
  if (!a) {
    process.stdout.write(USAGE);
    return 0;
  }
  try {
    const plan = planIcecast(readConfig(a.file));
    const keys = keysOf(plan, a.keep);
    const db = openDatabase(a.config.dataDir);
    try {
      const streams = new StreamsRepo(db);
      const accounts = new AccountsRepo(db);
      const accountId = accountOf(accounts, a.account);
      const taken = plan.streams.filter((s) => streams.byIcecastMount(s.mount)).map((s) => s.mount);
      if (taken.length > 0) throw new ImportError(`already the Icecast mount of a stream on this node: ${taken.join(', ')}. Nothing was created.`);
      const urls = resolvePublicUrls(a.config, a.config.httpPort, a.config.rtmpPort, a.config.icecastPort);
      const service = new StreamsService({
        streams,
        accounts,
        nodeSecret: loadNodeSecret(a.config.dataDir),
        urls: () => urls,
        live: { listenerCount: () => 0, endNow: () => {}, disconnectPublisher: () => {}, nowPlaying: () => {} },
      });
      const created = db.transaction(() => plan.streams.map((s, i) => service.create(accountId, s.input, keys[i] ?? undefined).value))();
      const out = created.map((s, i) => ({ id: s.id, icecastMount: s.icecastMount, streamKey: s.streamKey, codec: s.codec, codecFrom: plan.streams[i]!.codecFrom, title: s.title, icecastUrl: `http://${urls.icecastUrl}${s.icecastMount}` }));
      if (a.json) process.stdout.write(JSON.stringify({ streams: out, notes: plan.notes }) + '\n');
      else {
        for (const s of out) process.stdout.write(`${s.id} ${s.icecastMount} ${s.streamKey} ${s.codec} (${s.codecFrom})\n`);
        for (const n of plan.notes) process.stderr.write(`note: ${n}\n`);
      }
      return 0;
    } finally {
      db.close();
    }
  } catch (e) {
    if (!(e instanceof ImportError) && !(e as { status?: number }).status) throw e;
    process.stderr.write(`skylark: import-icecast: ${(e as Error).message}\n`);
    return 1;
  }
}
