import { createHash, randomBytes } from 'node:crypto';

/** A fresh 64-hex job id, shaped like a real job key, unique per test. */
export function freshJobId(label = ''): string {
  return createHash('sha256')
    .update(`${label}:${randomBytes(16).toString('hex')}`)
    .digest('hex');
}

/** A unique key prefix so tests can share one bucket or container. */
export function freshPrefix(label = 't'): string {
  return `${label}-${randomBytes(6).toString('hex')}/`;
}
