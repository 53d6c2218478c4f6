import { readFileSync } from 'node:fs';
import { basename, join } from 'node:path';
import { parse } from 'yaml';
import { parseStackConfig, type StackConfig } from '../../infra/common/config.js';
import { DEFAULT_ARCHIVE_DIR, REPO_ROOT } from '../../infra/common/packaging.js';

/**
 * Reading `Pulumi.<stack>.yaml` files the way Pulumi hands them to a program:
 * a flat map of `namespace:key` to string (numbers and booleans as their text,
 * objects as JSON). Shared by the infra tests and by anything that writes
 * stack files (`tessera choose --write-stack`) and wants to check them.
 */

export interface StackFile {
  /** The stack name, from the file name (`Pulumi.aws-eu-west-1.yaml` -> `aws-eu-west-1`). */
  readonly stack: string;
  readonly config: Readonly<Record<string, string>>;
}

/** The example stacks this repository ships (repository-relative paths). */
export const EXAMPLE_STACK_FILES = ['Pulumi.aws-eu-west-1.yaml', 'Pulumi.gcp-europe-west1.yaml', 'Pulumi.azure-westeurope.yaml'] as const;

/** Load a stack file (absolute, or relative to the repository root). */
export function loadStackFile(path: string): StackFile {
  const file = path.startsWith('/') ? path : join(REPO_ROOT, path);
  const match = /^Pulumi\.(.+)\.ya?ml$/.exec(basename(file));
  if (!match?.[1]) throw new Error(`${file} is not a stack file: the name must be Pulumi.<stack>.yaml`);
  const doc = parse(readFileSync(file, 'utf8')) as { config?: Record<string, unknown> } | null;
  const config: Record<string, string> = {};
  for (const [key, value] of Object.entries(doc?.config ?? {})) {
    if (value === null || value === undefined) continue;
    if (typeof value === 'object') {
      // A secure value (`{ secure: ... }`) cannot be decrypted here; the program sees ciphertext only under Pulumi.
      config[key] = JSON.stringify(value);
    } else {
      config[key] = String(value);
    }
  }
  return { stack: match[1], config };
}

/**
 * Parse a stack file's configuration with the program's own validation
 * (infra/common/config.ts): throws StackConfigError naming every problem.
 * Cheap (no Pulumi runtime, no cloud SDK); the infra tests additionally run
 * the whole program on each example stack.
 */
export function checkStackFile(path: string): StackConfig {
  const { stack, config } = loadStackFile(path);
  return parseStackConfig(config, { stack, defaultArchiveDir: DEFAULT_ARCHIVE_DIR });
}
