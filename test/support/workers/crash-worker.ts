// A local worker process that stops dead at one crash point of its first job, for a
// test to SIGKILL it there: it reports where it is, then hangs (the parent kills it).
// config.data: { victim: owner of the worker that crashes, at: the crash point }.
import { runWorkerChild, type WorkerChildContext } from '../../../functions/local/worker-child.js';

export type CrashPoint = 'afterClaim' | 'afterWrite' | 'beforeAck';

export interface CrashData {
  readonly victim: string;
  readonly at: CrashPoint;
}

/** What the victim reports at its crash point, just before the parent kills it. */
export interface CrashReport {
  readonly at: CrashPoint;
  readonly jobKey: string;
}

let crashed = false;
const hang = () => new Promise<never>(() => {});

async function crashHere(context: WorkerChildContext, at: CrashPoint, jobKey: string): Promise<void> {
  const data = context.config.data as CrashData;
  if (crashed || data.victim !== context.config.owner || data.at !== at) return;
  crashed = true;
  await context.report({ at, jobKey } satisfies CrashReport);
  await hang();
}

await runWorkerChild({
  hooks: (context) => ({
    afterClaim: (job) => crashHere(context, 'afterClaim', job.jobKey),
    afterWrite: (job) => crashHere(context, 'afterWrite', job.jobKey),
  }),
  beforeSettle: (delivery, _verdict, context) => crashHere(context, 'beforeAck', delivery.jobKey),
});
