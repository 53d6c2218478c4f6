// One contender in a cross-PROCESS race on the local backend: its own SQLite connections, in its
// own OS process. It says `ready`, waits for `go` (every contender released together), then either
// claims one job or receives from the queue until it is empty, and sends what it got.
import { SqliteClaimStore } from '../../../functions/local/adapters/sqlite-claim-store.js';
import { SqliteJobQueue } from '../../../functions/local/adapters/sqlite-job-queue.js';
import { systemClock } from '../../../shared/app/telemetry.js';

interface Task {
  kind: 'claim' | 'receive';
  file: string;
  id: string;
  owner: string;
}

const task = JSON.parse(process.argv[2] ?? '{}') as Task;
const claims = task.kind === 'claim' ? new SqliteClaimStore(task.file) : undefined;
const queue = task.kind === 'receive' ? new SqliteJobQueue(task.file, { clock: systemClock }) : undefined;
const go = new Promise<void>((resolve) => process.once('message', () => resolve()));
process.send?.('ready');
await go;
let result: unknown;
if (claims) {
  const now = Date.now();
  result = (await claims.claim({ jobId: task.id, owner: task.owner, now, leaseUntil: now + 60_000, expiresAt: now + 3_600_000 })).kind;
} else if (queue) {
  const got: string[] = [];
  // An hour's visibility: nothing this race receives may come back to another contender.
  for (let batch = await queue.receive(1, 3_600_000); batch.length > 0; batch = await queue.receive(1, 3_600_000)) {
    for (const d of batch) got.push(d.body);
  }
  result = got;
}
process.send?.(result, () => {
  claims?.close();
  queue?.close();
  process.disconnect();
});
