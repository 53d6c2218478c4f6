import type { RecordedAccess } from '../../support/iam/access.js';
import { onRecorded, type RecordedRequest } from '../../support/iam/recorder.js';

/** Everything the recorder sees until `stop()`. */
export function collect(): { readonly seen: RecordedRequest[]; stop(): void } {
  const seen: RecordedRequest[] = [];
  const stop = onRecorded((r) => seen.push(r));
  return { seen, stop };
}

/** One line per access of the first alternative of each requirement: `role action resource key`, for comparisons. */
export function lines(seen: readonly RecordedRequest[]): string[] {
  return seen.flatMap((r) => {
    if (r.classified.kind === 'not-cloud') return [];
    if (r.classified.kind === 'unrecognised') return [`${r.wire.role} UNRECOGNISED ${r.classified.why}`];
    return r.classified.required.map((req) => req.anyOf.map((alt) => alt.map(line).join(' + ')).join(' | '));
  });
}

export function line(a: RecordedAccess): string {
  return `${a.role} ${a.action} ${a.resource}${a.key === undefined ? '' : ` ${a.list ? 'list:' : ''}${a.key}`}`;
}

/** Every access of every requirement (all alternatives), flattened. */
export function accesses(seen: readonly RecordedRequest[]): RecordedAccess[] {
  return seen.flatMap((r) => (r.classified.kind === 'accesses' ? r.classified.required.flatMap((q) => q.anyOf.flat()) : []));
}
