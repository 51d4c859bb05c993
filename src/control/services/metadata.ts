/**
 * Metadata updates shared by every resource that has `metadata` (spec "Stream" metadata; docs/behaviour.md
 * §2 and §5): keys given as `null` are removed, the others set, and the result must still fit the
 * key limit.
 */
import { paramInvalid } from '../../base/errors/errors.js';

/**
 * Applies `patch` to the stored metadata JSON and returns the new JSON.
 * @throws ApiError 400 `parameter_invalid` (param `metadata`) when more than `maxKeys` keys remain
 */
export function mergeMetadata(storedJson: string, patch: Record<string, string | null>, maxKeys: number): string {
  const metadata = JSON.parse(storedJson) as Record<string, string>;
  for (const [k, value] of Object.entries(patch)) {
    if (value === null) delete metadata[k];
    else metadata[k] = value;
  }
  if (Object.keys(metadata).length > maxKeys) throw paramInvalid('metadata', `metadata may hold at most ${maxKeys} keys after the update.`);
  return JSON.stringify(metadata);
}
