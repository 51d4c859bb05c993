/**
 * How every `skylark` command reads its configuration (docs/behaviour.md §1, docs/configuration.md
 * "Configuration file"): flags, then the environment, then the configuration file
 * (`--config FILE` or SKYLARK_CONFIG).
 */
import { loadConfig, ALL_ENV_NAMES, type Config } from '../base/config.js';
import { flagsWithConfigFile, readConfigFile } from '../base/config-file.js';

/** The `serve` flags: one per setting (`httpPort` → `--http-port`), each a string, for node:util parseArgs. */
export const CONFIG_FLAGS = Object.fromEntries(
  Object.keys(ALL_ENV_NAMES).map((k) => [k.replace(/[A-Z]/g, (c) => `-${c.toLowerCase()}`), { type: 'string' as const }]),
);

/**
 * The configuration from the flags in `values`, the environment and the configuration file
 * (`values.config`, else SKYLARK_CONFIG), in that order of precedence.
 * @throws ConfigError naming the flag, variable, or file, line and key at fault
 */
export function settings(values: Record<string, unknown>): Config {
  const flags: Record<string, string | undefined> = {};
  for (const [k, v] of Object.entries(values)) if (k !== 'config' && typeof v === 'string') flags[k] = v;
  const file = (values.config as string | undefined) || process.env.SKYLARK_CONFIG;
  return loadConfig(process.env, file ? flagsWithConfigFile(readConfigFile(file), process.env, flags) : flags);
}

/** The data dir of `--data-dir`, else SKYLARK_DATA_DIR, else the configuration file's, else ./data. @throws ConfigError */
export function dataDirOf(values: { 'data-dir'?: string | undefined; config?: string | undefined }): string {
  return settings({ 'data-dir': values['data-dir'], config: values.config }).dataDir;
}
