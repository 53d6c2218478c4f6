import { readFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { parse } from 'yaml';
import { REPO_ROOT } from '../common/packaging.js';

/**
 * Reading `Pulumi.<stack>.yaml` files the way Pulumi hands them to a program:
 * a flat map of `namespace:key` to string (numbers and booleans as their text,
 * objects as JSON). Used by `tessera preflight` and the infra tests.
 */

export interface StackFile {
  /** The stack name, from the file name (`Pulumi.aws-eu-west-1.yaml` -> `aws-eu-west-1`). */
  readonly stack: string;
  readonly path: string;
  readonly config: Readonly<Record<string, string>>;
}

/** The example stacks this repository ships (repository-relative paths). */
export const EXAMPLE_STACK_FILES = ['Pulumi.aws-eu-west-1.yaml', 'Pulumi.gcp-europe-west1.yaml', 'Pulumi.azure-westeurope.yaml'] as const;

/** The file a stack's configuration lives in. */
export function stackFileName(stack: string): string {
  return `Pulumi.${stack}.yaml`;
}

/** Load a stack file (absolute, or relative to the repository root). */
export function loadStackFile(path: string): StackFile {
  const file = path.startsWith('/') ? path : join(REPO_ROOT, path);
  const match = /^Pulumi\.(.+)\.ya?ml$/.exec(basename(file));
  if (!match?.[1]) throw new Error(`${file} is not a stack file: the name must be Pulumi.<stack>.yaml`);
  const doc = parse(readFileSync(file, 'utf8')) as { config?: Record<string, unknown> } | null;
  const config: Record<string, string> = {};
  for (const [key, value] of Object.entries(doc?.config ?? {})) {
    if (value === null || value === undefined) continue;
    // A secure value (`{ secure: ... }`) cannot be decrypted here; the program sees ciphertext only under Pulumi.
    config[key] = typeof value === 'object' ? JSON.stringify(value) : String(value);
  }
  return { stack: match[1], path: file, config };
}
