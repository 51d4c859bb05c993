/** One number that `npm run bench` prints. `peer` is the same measure for the peer (e.g. nginx) in the same run. */
export interface BenchRow {
  group: string;
  name: string;
  value: number;
  unit: string;
  peer?: { name: string; value: number };
  note?: string;
  /** The row's group is printed first in the report (the headline numbers). */
  headline?: boolean;
}

/** A bench file's entry point: `export async function run(): Promise<BenchRow[]>`. */
export type BenchRun = () => Promise<BenchRow[]>;
