// Runs the stand-in provider's TypeScript (main.ts) through tsx, the way scripts/test.mjs loads TypeScript:
// the launchers in bin/ start this file on the project's pinned Node with scripts/node.mjs.
import { register } from 'tsx/esm/api';

register();
await import('./main.ts');
