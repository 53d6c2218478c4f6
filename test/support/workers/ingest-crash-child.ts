// A `tessera ingest` that stops dead at one crash point, for a test to SIGKILL it there:
// it prints `AT <point>` on stdout, then hangs until the parent kills it.
// argv[2]: JSON { dir, cwd, request, at }.
import { createLocalBackend, localIngestDeps } from '../../../functions/local/compose.js';
import { type ArtefactRequest, type IngestHooks, ingestArtefact } from '../../../shared/app/ingest.js';

export type IngestCrashPoint = keyof IngestHooks;

export interface IngestCrashArgs {
  readonly dir: string;
  readonly cwd: string;
  readonly request: ArtefactRequest;
  readonly at: IngestCrashPoint;
}

const args = JSON.parse(process.argv[2] as string) as IngestCrashArgs;
const backend = createLocalBackend(args.dir);
const stop = async (): Promise<void> => {
  process.stdout.write(`AT ${args.at}\n`);
  await new Promise<never>(() => {
    setInterval(() => {}, 1_000);
  });
};
await ingestArtefact(localIngestDeps(backend, args.cwd), args.request, { hooks: { [args.at]: stop } });
process.stdout.write('FINISHED\n');
