import { parseStackConfig, type StackConfig } from '../../infra/common/config.js';
import { DEFAULT_ARCHIVE_DIR } from '../../infra/common/packaging.js';
import { loadStackFile } from '../../infra/preflight/stack-file.js';

/**
 * Stack files as the tests read them. The reader itself is
 * infra/preflight/stack-file.ts, shared with `tessera preflight`.
 */
export { EXAMPLE_STACK_FILES, loadStackFile, type StackFile } from '../../infra/preflight/stack-file.js';

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
