// One contender in a cross-thread race on the local backend: its own SQLite
// connection or its own FsObjectStore instance, released by a shared barrier.
import { parentPort, workerData } from 'node:worker_threads';
import { FsObjectStore } from '../../../functions/local/adapters/fs-object-store.js';
import { SqliteClaimStore } from '../../../functions/local/adapters/sqlite-claim-store.js';

interface Task {
  kind: 'claim' | 'put';
  file: string;
  id: string;
  owner: string;
  barrier: SharedArrayBuffer;
  contenders: number;
}

const task = workerData as Task;
const gate = new Int32Array(task.barrier);
const claims = task.kind === 'claim' ? new SqliteClaimStore(task.file) : undefined;
const store = task.kind === 'put' ? new FsObjectStore(task.file) : undefined;
// Everyone arrives, then all go at once.
Atomics.add(gate, 0, 1);
while (Atomics.load(gate, 0) < task.contenders) Atomics.wait(gate, 0, Atomics.load(gate, 0), 5);
const now = 1_800_000_000_000;
const result = claims
  ? await claims.claim({ jobId: task.id, owner: task.owner, now, leaseUntil: now + 60_000, expiresAt: now + 3_600_000 })
  : await (store as FsObjectStore).putIfAbsent(task.id, new TextEncoder().encode(task.owner.repeat(10_000)));
parentPort?.postMessage(result.kind);
claims?.close();
