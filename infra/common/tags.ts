import { slug } from './naming.js';

/**
 * Tags (AWS, Azure) and labels (GCP) put on every resource that takes them,
 * so a bill or an inventory can be cut by project, stack and cloud.
 */
export interface StandardTags {
  readonly project: string;
  readonly stack: string;
  readonly cloud: string;
  readonly 'managed-by': string;
  readonly [name: string]: string;
}

export function standardTags(stack: string, cloud: string): StandardTags {
  return { project: 'tessera', stack, cloud, 'managed-by': 'pulumi' };
}

/**
 * GCP labels: keys and values of at most 63 lowercase letters, digits, `_`
 * and `-` (keys start with a letter). Values are reduced to that alphabet.
 */
export function gcpLabels(tags: Readonly<Record<string, string>>): Record<string, string> {
  const out: Record<string, string> = {};
  for (const [k, v] of Object.entries(tags)) {
    const key = slug(k)
      .replace(/^[^a-z]+/, '')
      .slice(0, 63);
    if (key) out[key] = slug(v).slice(0, 63);
  }
  return out;
}
