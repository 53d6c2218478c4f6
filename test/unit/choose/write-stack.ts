import { mkdtemp, readdir, readFile } from 'node:fs/promises';
import { join } from 'node:path';
import { expect } from 'vitest';
import { chooseCommand } from '../../../cli/commands/choose.js';

/** A stack file written by `tessera choose --write-stack`. */
export interface WrittenStack {
  /** `Pulumi.<cloud>-<region>.yaml` */
  readonly file: string;
  readonly path: string;
  readonly text: string;
}

/**
 * Run `tessera choose <argv> --write-stack` into a fresh folder under `dir`
 * and return the one file it wrote; fails the test if the command does not
 * succeed or writes anything else.
 */
export async function writeChosenStack(dir: string, argv: readonly string[]): Promise<WrittenStack> {
  const out = await mkdtemp(join(dir, 'case-'));
  let stderr = '';
  const code = await chooseCommand([...argv, '--write-stack', '--out-dir', out], {
    stdout: () => {},
    stderr: (s) => (stderr += s),
    cwd: dir,
  });
  expect(code, stderr).toBe(0);
  const files = await readdir(out);
  expect(files).toHaveLength(1);
  const file = files[0] as string;
  const path = join(out, file);
  return { file, path, text: await readFile(path, 'utf8') };
}
